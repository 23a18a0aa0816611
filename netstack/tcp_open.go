package netstack

import "net/netip"

// Opening connections: option negotiation, SYN-RECEIVED from a SYN or a SYN
// cookie, ESTABLISHED, and SYN-SENT for active opens (RFC 9293 3.10.7.2-3).

// tcpMinSndMSS is the smallest peer MSS we send with, as Linux's
// tcp_min_snd_mss (CVE-2019-11479): a tiny MSS would make a transfer cost a
// segment per byte, and one below the 12 bytes of the timestamp option
// would leave no room for data at all.
const tcpMinSndMSS = 48

// negotiate sets c's options from the peer's SYN or SYN-ACK f; for an
// active open c's flags hold what we offered.
func (l *tcpLayer) negotiate(c *tcpConn, f *TCPFields) {
	mss := f.MSS
	if mss == 0 {
		mss = 536 // RFC 9293 3.7.1: default send MSS
	}
	if mss < tcpMinSndMSS {
		l.stats.MSSClamped++
		mss = tcpMinSndMSS
	}
	c.mss = min(mss, l.cfg.MSS)
	c.wsOK = f.HasWScale && !l.cfg.NoWScale
	if c.wsOK {
		c.sndWScale = min(f.WScale, 14) // RFC 7323 2.3
		for uint32(l.cfg.RcvBuf)>>c.rcvWScale > 65535 {
			c.rcvWScale++
		}
	} else {
		c.sndWScale, c.rcvWScale = 0, 0
	}
	c.sackOK = f.SACKPermitted && !l.cfg.NoSACK
	c.tsOK = f.HasTimestamp && !l.cfg.NoTimestamps
	if c.tsOK {
		c.tsRecent = f.TSVal
		c.mss -= 12 // RFC 6691: the MSS does not count options; each segment carries 12 bytes of timestamp
	}
	l.clampToPath(c)
	c.irs = seqnum(f.Seq)
	c.rcvNxt = c.irs.add(1)
	c.appSeq, c.rcvAdv, c.lastAck = c.rcvNxt, c.rcvNxt, c.rcvNxt
	// The window of a SYN is never scaled (RFC 7323 2.2).
	c.sndWnd = uint32(f.Window)
	c.maxSndWnd = c.sndWnd
	c.sndWl1 = c.irs
}

// synListen answers a SYN to a listener: a SYN-RECEIVED TCB, or a SYN cookie
// when the backlog is full.
func (l *tcpLayer) synListen(ls *tcpListener, k tcpKey, f *TCPFields) {
	if l.shedSYNs {
		l.stats.SynShed++
		return
	}
	if !l.roomForConn() {
		l.stats.TableFull++
		return
	}
	ok, cookie := l.memSYN()
	if !ok {
		return
	}
	if cookie || l.stats.SynRcvd >= l.cfg.SynBacklog {
		// Backlog full: answer statelessly (RFC 4987 §3.6). The cookie
		// holds only the MSS, so the SYN-ACK offers no other option.
		l.synOverflowAt = l.now
		peerMSS := f.MSS
		if peerMSS == 0 {
			peerMSS = 536
		}
		iss, mss := l.sec.makeCookie(k, seqnum(f.Seq), min(peerMSS, l.cfg.MSS), l.now)
		r := TCPFields{Seq: uint32(iss), Ack: f.Seq + 1, Flags: TCPFlagSYN | TCPFlagACK,
			Window: uint16(min(l.cfg.RcvBuf, 65535)), MSS: mss}
		l.stats.SynCookiesSent++
		l.emitRaw(k, &r)
		return
	}
	c := l.newConn(k)
	c.passive, c.ep = true, ls.ep
	l.setState(c, tcpSynRcvd)
	l.negotiate(c, f)
	// "Set RCV.NXT to SEG.SEQ+1, IRS is set to SEG.SEQ ... ISS should be
	// selected and a SYN segment sent of the form
	// <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK>"
	c.iss = l.sec.isnFor(k, l.now)
	c.sndUna, c.sndNxt, c.sndMax, c.recover = c.iss, c.iss, c.iss, c.iss
	c.tsOff = l.sec.tsOffFor(k)
	l.sendSyn(c, true)
	l.schedule(c)
}

// cookieEstablish creates an ESTABLISHED connection from a valid cookie ACK
// and processes the rest of the segment on it.
func (l *tcpLayer) cookieEstablish(ls *tcpListener, k tcpKey, f *TCPFields, payload []byte, mss uint16) {
	if !l.roomForConn() {
		l.stats.TableFull++
		return
	}
	l.stats.SynCookiesOK++
	c := l.newConn(k)
	c.passive, c.cookie, c.ep = true, true, ls.ep
	c.iss = seqnum(f.Ack - 1)
	c.sndUna, c.sndNxt, c.sndMax, c.recover = seqnum(f.Ack), seqnum(f.Ack), seqnum(f.Ack), c.iss
	c.irs = seqnum(f.Seq - 1)
	c.rcvNxt, c.appSeq, c.rcvAdv, c.lastAck = seqnum(f.Seq), seqnum(f.Seq), seqnum(f.Seq), seqnum(f.Seq)
	c.mss = min(mss, l.cfg.MSS)
	l.clampToPath(c)
	c.sndWnd, c.maxSndWnd = uint32(f.Window), uint32(f.Window)
	c.sndWl1, c.sndWl2 = seqnum(f.Seq), seqnum(f.Ack)
	if !l.establish(c) {
		return
	}
	l.segment(c, f, payload)
	if c.state != tcpClosed {
		// The app's timer from the start, as after a normal handshake: a
		// cookie connection that never sends a byte must still time out.
		l.appDeadline(c)
		l.schedule(c)
	}
}

// establish enters ESTABLISHED; a passive open gets its app from the
// listener here (not at SYN time, so a SYN flood costs no app state).
// It reports false when the app refused and c is gone.
func (l *tcpLayer) establish(c *tcpConn) bool {
	l.setState(c, tcpEstablished)
	c.retries = 0
	// RFC 6928 initial window: min(10*MSS, max(2*MSS, 14600)).
	c.cwnd = min(10*uint32(c.mss), max(2*uint32(c.mss), 14600))
	if l.cfg.KeepIdle > 0 {
		c.kaAt = l.now + int64(l.cfg.KeepIdle)
	}
	if c.passive {
		l.stats.PassiveOpens++
		remote := netip.AddrPortFrom(IPv4AddrFromUint32(c.key.raddr).AsNetip(), c.key.rport)
		c.app = c.ep.Accept(remote, TCPHandle{id: c.id, gen: c.gen}, l.nowT)
		c.appTimer, _ = c.app.(TCPAppTimer)
		if c.app == nil {
			l.stats.AcceptRefused++
			l.sendReset(c)
			l.closeConn(c)
			return false
		}
	}
	return true
}

// synSent handles a segment in SYN-SENT, RFC 9293 3.10.7.3.
func (l *tcpLayer) synSent(c *tcpConn, f *TCPFields) {
	ack := seqnum(f.Ack)
	hasAck := f.Flags&TCPFlagACK != 0
	// first: "If SEG.ACK =< ISS or SEG.ACK > SND.NXT, send a reset
	// (unless the RST bit is set, if so drop the segment and return)".
	if hasAck && (ack.leq(c.iss) || ack.gt(c.sndMax)) {
		if f.Flags&TCPFlagRST == 0 {
			l.resetFor(c.key, f, 0)
		} else {
			l.stats.NoConnDrop++
		}
		return
	}
	// second: RST. "If the ACK was acceptable, then signal to the user
	// 'error: connection reset', drop the segment, enter CLOSED state";
	// "Otherwise (no ACK), drop the segment and return."
	if f.Flags&TCPFlagRST != 0 {
		if hasAck {
			l.stats.ResetsIn++
			l.closeConn(c)
		} else {
			l.stats.NoConnDrop++
		}
		return
	}
	// fourth: SYN.
	if f.Flags&TCPFlagSYN == 0 {
		l.stats.NoConnDrop++
		return
	}
	wsOffered, sackOffered, tsOffered := c.wsOK, c.sackOK, c.tsOK
	l.negotiate(c, f)
	c.wsOK = c.wsOK && wsOffered
	if !c.wsOK {
		c.sndWScale, c.rcvWScale = 0, 0
	}
	c.sackOK = c.sackOK && sackOffered
	if c.tsOK && !tsOffered {
		c.tsOK = false
		c.mss += 12
	}
	if !hasAck {
		// "Otherwise, enter SYN-RECEIVED, form a SYN,ACK segment" (simultaneous open).
		l.setState(c, tcpSynRcvd)
		l.sendSyn(c, true)
		return
	}
	// "If SND.UNA > ISS (our SYN has been ACKed), change the connection
	// state to ESTABLISHED, form an ACK segment <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>".
	if c.rttOn && c.retries == 0 {
		l.rttSample(c, l.now-c.rttTime)
	}
	c.rttOn = false
	c.sndUna = ack
	c.sndWl2 = ack
	c.rtxAt = 0
	if !l.establish(c) {
		return
	}
	c.ackNow = true
	l.output(c)
}
