package netstack

import "net/netip"

// The TCP state machine: RFC 9293 §3.10.7 "SEGMENT ARRIVES", as one function
// per step, in the RFC's order, with the RFC's words on each arm.

// noConn handles a segment that matches no connection: states CLOSED and
// LISTEN (RFC 9293 3.10.7.1, 3.10.7.2).
func (l *tcpLayer) noConn(k tcpKey, f *TCPFields, payload []byte) {
	ls := l.listener(k.lport)
	switch {
	case ls == nil && f.Flags&TCPFlagRST != 0:
		// CLOSED: "An incoming segment containing a RST is discarded."
		l.stats.NoConnDrop++
	case ls == nil:
		// CLOSED: "An incoming segment not containing a RST causes a
		// RST to be sent in response."
		l.stats.NoPortRST++
		l.resetFor(k, f, len(payload))
	case f.Flags&TCPFlagRST != 0:
		// LISTEN, first: "An incoming RST segment could not be valid
		// since it could not have been sent in response to anything
		// sent by this incarnation of the connection. ... ignored."
		l.stats.NoConnDrop++
	case f.Flags&TCPFlagACK != 0:
		// LISTEN, second: "Any acknowledgment is bad if it arrives on a
		// connection still in the LISTEN state. An acceptable reset
		// segment should be formed". Except the ACK that returns a SYN
		// cookie (RFC 4987 §3.6).
		if f.Flags&TCPFlagSYN == 0 {
			if mss := l.sec.checkCookie(k, seqnum(f.Seq-1), seqnum(f.Ack-1), l.now); mss != 0 {
				l.cookieEstablish(ls, k, f, payload, mss)
				return
			}
		}
		l.stats.SynCookiesBad++
		l.resetFor(k, f, len(payload))
	case f.Flags&TCPFlagSYN != 0:
		// LISTEN, third: SYN.
		l.synListen(ls, k, f)
	default:
		// LISTEN, fourth: "Any other control or text-bearing segment
		// (not containing SYN) must have an ACK and thus would be
		// discarded by the ACK processing ... drop it and return."
		l.stats.NoConnDrop++
	}
}

// negotiate sets c's options from the peer's SYN or SYN-ACK f; for an
// active open c's flags hold what we offered.
func (l *tcpLayer) negotiate(c *tcpConn, f *TCPFields) {
	mss := f.MSS
	if mss == 0 {
		mss = 536 // RFC 9293 3.7.1: default send MSS
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
	}
	c.irs = seqnum(f.Seq)
	c.rcvNxt = c.irs.add(1)
	c.appSeq, c.rcvAdv = c.rcvNxt, c.rcvNxt
	// The window of a SYN is never scaled (RFC 7323 2.2).
	c.sndWnd = uint32(f.Window)
	c.maxSndWnd = c.sndWnd
	c.sndWl1 = c.irs
}

// synListen answers a SYN to a listener: a SYN-RECEIVED TCB, or a SYN cookie
// when the backlog is full.
func (l *tcpLayer) synListen(ls *tcpListener, k tcpKey, f *TCPFields) {
	if l.table.n >= l.cfg.MaxConns {
		l.stats.TableFull++
		return
	}
	if l.stats.SynRcvd >= l.cfg.SynBacklog {
		// Backlog full: answer statelessly (RFC 4987 §3.6). The cookie
		// holds only the MSS, so the SYN-ACK offers no other option.
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
	c.tsOff = uint32(c.iss) * 2654435761
	l.sendSyn(c, true)
	l.schedule(c)
}

// cookieEstablish creates an ESTABLISHED connection from a valid cookie ACK
// and processes the rest of the segment on it.
func (l *tcpLayer) cookieEstablish(ls *tcpListener, k tcpKey, f *TCPFields, payload []byte, mss uint16) {
	if l.table.n >= l.cfg.MaxConns {
		l.stats.TableFull++
		return
	}
	l.stats.SynCookiesOK++
	c := l.newConn(k)
	c.passive, c.cookie, c.ep = true, true, ls.ep
	c.iss = seqnum(f.Ack - 1)
	c.sndUna, c.sndNxt, c.sndMax, c.recover = seqnum(f.Ack), seqnum(f.Ack), seqnum(f.Ack), c.iss
	c.irs = seqnum(f.Seq - 1)
	c.rcvNxt, c.appSeq, c.rcvAdv = seqnum(f.Seq), seqnum(f.Seq), seqnum(f.Seq)
	c.mss = min(mss, l.cfg.MSS)
	c.sndWnd, c.maxSndWnd = uint32(f.Window), uint32(f.Window)
	c.sndWl1, c.sndWl2 = seqnum(f.Seq), seqnum(f.Ack)
	if !l.establish(c) {
		return
	}
	l.segment(c, f, payload)
	if c.state != tcpClosed {
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
		c.app = c.ep.Accept(remote, l.nowT)
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
	c.tsOK = c.tsOK && tsOffered
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

// segment runs the state machine for a segment on an existing connection.
func (l *tcpLayer) segment(c *tcpConn, f *TCPFields, payload []byte) {
	if c.state == tcpSynSent {
		l.synSent(c, f)
		return
	}
	seq := seqnum(f.Seq)
	flags := f.Flags
	segLen := uint32(len(payload))
	if flags&TCPFlagSYN != 0 {
		segLen++
	}
	if flags&TCPFlagFIN != 0 {
		segLen++
	}

	if c.state == tcpTimeWait && flags&TCPFlagSYN != 0 && flags&(TCPFlagACK|TCPFlagRST) == 0 && seq.gt(c.rcvNxt) {
		// A new SYN above the old connection's sequence space may reuse
		// the 4-tuple in TIME-WAIT (RFC 9293 3.6.1, RFC 6191).
		l.stats.TimeWaitDone++
		l.closeConn(c)
		l.noConn(c.key, f, payload)
		return
	}

	// RFC 7323 §5.3 PAWS: a segment whose timestamp is older than
	// TS.Recent is a duplicate from an old window; ACK and drop it.
	if c.tsOK && f.HasTimestamp && flags&TCPFlagRST == 0 && seqnum(f.TSVal).lt(seqnum(c.tsRecent)) {
		l.stats.PAWSDrop++
		l.sendAck(c)
		return
	}

	// fourth (checked first, as RFC 5961 §4.2 wants it "irrespective of the
	// sequence number"): a SYN in a synchronized state gets a challenge
	// ACK. We do the same in SYN-RECEIVED rather than go back to LISTEN
	// (RFC 9293), so that a blind SYN cannot kill a handshake; only the
	// peer's own SYN again gets our SYN-ACK again.
	if flags&TCPFlagSYN != 0 && flags&TCPFlagRST == 0 {
		if c.state == tcpSynRcvd && seq == c.irs && flags&TCPFlagACK == 0 {
			l.stats.Retransmits++
			l.sendSyn(c, true)
			return
		}
		l.challengeAck(c)
		return
	}

	// first: check sequence number (the four cases of RFC 9293 3.10.7.4).
	wnd := uint32(0)
	if edge := c.appSeq.add(uint32(l.cfg.RcvBuf)); edge.gt(c.rcvNxt) {
		wnd = edge.diff(c.rcvNxt)
	}
	if !tcpAcceptable(seq, segLen, c.rcvNxt, wnd) {
		switch {
		case wnd == 0 && seq == c.rcvNxt:
			// "If the RCV.WND is zero, no segments will be
			// acceptable, but special allowance should be made to
			// accept valid ACKs, URGs, and RSTs." The text is
			// dropped and ACKed.
			if len(payload) > 0 || flags&TCPFlagFIN != 0 {
				l.stats.OutOfWindow++
				c.ackNow = true
			}
			payload = nil
			flags &^= TCPFlagFIN
		case flags&TCPFlagRST != 0:
			// "If an incoming segment is not acceptable ... (unless
			// the RST bit is set, if so drop the segment and return)"
			l.stats.OutOfWindow++
			return
		default:
			// "an acknowledgment should be sent in reply
			// <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>"
			if c.state == tcpTimeWait && flags&TCPFlagFIN != 0 {
				// TIME-WAIT: "Acknowledge it, and restart the 2 MSL timeout."
				c.rtxAt = l.now + int64(l.cfg.TimeWait)
			}
			if segLen > 0 && seq.add(segLen).leq(c.rcvNxt) {
				l.stats.DupSegs++
			} else {
				l.stats.OutOfWindow++
			}
			l.sendAck(c)
			return
		}
	}

	// second: RST, RFC 5961 §3.2: "If the RST bit is set and the sequence
	// number exactly matches the next expected sequence number (RCV.NXT),
	// then TCP MUST reset the connection"; in the window but not exact:
	// "TCP MUST send an ACK (challenge ACK)".
	if flags&TCPFlagRST != 0 {
		if seq == c.rcvNxt {
			l.stats.ResetsIn++
			l.closeConn(c)
			return
		}
		l.challengeAck(c)
		return
	}

	// RFC 7323 §4.3: TS.Recent follows the segment that covers RCV.NXT.
	if c.tsOK && f.HasTimestamp && seq.leq(c.rcvNxt) && seqnum(f.TSVal).geq(seqnum(c.tsRecent)) {
		c.tsRecent = f.TSVal
	}

	// fifth: ACK. "if the ACK bit is off, drop the segment and return"
	if flags&TCPFlagACK == 0 {
		l.stats.NoAckDrop++
		return
	}
	ack := seqnum(f.Ack)
	if c.state == tcpSynRcvd {
		// "If SND.UNA < SEG.ACK =< SND.NXT, then enter ESTABLISHED state
		// and continue processing"; "If the segment acknowledgment is
		// not acceptable, form a reset segment <SEQ=SEG.ACK><CTL=RST>".
		if !(c.sndUna.lt(ack) && ack.leq(c.sndMax)) {
			l.resetFor(c.key, f, len(payload))
			return
		}
		if c.rttOn && c.retries == 0 {
			l.rttSample(c, l.now-c.rttTime)
		}
		c.rttOn = false
		c.sndUna, c.rtxAt = ack, 0
		c.sndWnd = uint32(f.Window) << c.sndWScale
		c.maxSndWnd = max(c.maxSndWnd, c.sndWnd)
		c.sndWl1, c.sndWl2 = seq, ack
		if !l.establish(c) {
			return
		}
	}
	if !l.ackArrived(c, f, seq, ack, len(payload)) {
		return
	}

	// seventh: segment text, in ESTABLISHED, FIN-WAIT-1 and FIN-WAIT-2.
	// In CLOSE-WAIT, CLOSING, LAST-ACK and TIME-WAIT: "This should not
	// occur since a FIN has been received from the remote side. Ignore."
	if len(payload) > 0 {
		switch c.state {
		case tcpEstablished, tcpFinWait1, tcpFinWait2:
			if !c.finPend || seq.lt(c.rcvFin) {
				l.receive(c, seq, payload)
			}
		}
	}

	// eighth: FIN.
	if flags&TCPFlagFIN != 0 {
		l.finArrived(c, seq.add(uint32(len(payload))))
	}
	if c.state != tcpClosed {
		l.output(c)
	}
}

// tcpAcceptable is the segment acceptability test of RFC 9293 3.10.7.4:
//
//	Segment Length  Receive Window  Test
//	0               0               SEG.SEQ = RCV.NXT
//	0               >0              RCV.NXT =< SEG.SEQ < RCV.NXT+RCV.WND
//	>0              0               not acceptable
//	>0              >0              RCV.NXT =< SEG.SEQ < RCV.NXT+RCV.WND
//	                                or RCV.NXT =< SEG.SEQ+SEG.LEN-1 < RCV.NXT+RCV.WND
func tcpAcceptable(seq seqnum, segLen uint32, rcvNxt seqnum, wnd uint32) bool {
	switch {
	case segLen == 0 && wnd == 0:
		return seq == rcvNxt
	case segLen == 0:
		return seq.inWindow(rcvNxt, wnd)
	case wnd == 0:
		return false
	default:
		return seq.inWindow(rcvNxt, wnd) || seq.add(segLen-1).inWindow(rcvNxt, wnd)
	}
}

// ackArrived is step five for synchronized states. It reports false when
// the segment was dropped or the connection is gone.
func (l *tcpLayer) ackArrived(c *tcpConn, f *TCPFields, seq, ack seqnum, n int) bool {
	// RFC 5961 §5.2: acceptable if (SND.UNA - MAX.SND.WND) =< SEG.ACK =< SND.NXT.
	if ack.gt(c.sndMax) {
		// RFC 9293: "If the ACK acks something not yet sent (SEG.ACK >
		// SND.NXT), then send an ACK, drop the segment, and return."
		l.stats.AckTooNew++
		l.sendAck(c)
		return false
	}
	if ack.lt(c.sndUna - seqnum(c.maxSndWnd)) {
		// RFC 5961 §5.2: "the ACK value is ... outside the range,
		// drop it and send an ACK (challenge ACK)".
		l.stats.AckTooOld++
		l.challengeAck(c)
		return false
	}
	if c.state == tcpTimeWait {
		return true // "The only thing that can arrive in this state is a retransmission of the remote FIN."
	}
	c.keepProbes = 0
	if l.cfg.KeepIdle > 0 {
		c.kaAt = l.now + int64(l.cfg.KeepIdle)
	}
	wnd := uint32(f.Window) << c.sndWScale
	switch {
	case ack.gt(c.sndUna):
		// "If SND.UNA < SEG.ACK =< SND.NXT, then set SND.UNA <- SEG.ACK."
		l.newAck(c, ack)
		if c.state == tcpClosed {
			return false
		}
	case ack == c.sndUna && n == 0 && f.Flags&TCPFlagFIN == 0 && wnd == c.sndWnd && c.sndMax != c.sndUna:
		// RFC 5681 §2 duplicate ACK.
		if c.sackOK && f.NSACK > 0 {
			l.updateSacked(c, f)
		}
		l.dupAck(c)
	}
	if c.sackOK && f.NSACK > 0 {
		l.updateSacked(c, f)
	}
	// "If SND.UNA =< SEG.ACK =< SND.NXT, the send window should be
	// updated. If (SND.WL1 < SEG.SEQ or (SND.WL1 = SEG.SEQ and
	// SND.WL2 =< SEG.ACK)), set SND.WND <- SEG.WND, set SND.WL1 <-
	// SEG.SEQ, and set SND.WL2 <- SEG.ACK."
	if ack.geq(c.sndUna) && (c.sndWl1.lt(seq) || (c.sndWl1 == seq && c.sndWl2.leq(ack))) {
		c.sndWnd, c.sndWl1, c.sndWl2 = wnd, seq, ack
		c.maxSndWnd = max(c.maxSndWnd, wnd)
		if wnd > 0 && c.persist {
			c.persist, c.rtxAt = false, 0
		}
	}
	if c.finSent && ack.gt(c.finSeq) {
		switch c.state {
		case tcpFinWait1:
			// "if the FIN segment is now acknowledged, then enter FIN-WAIT-2"
			l.setState(c, tcpFinWait2)
			c.rtxAt = l.now + int64(l.cfg.FinWait2)
		case tcpClosing:
			// "if the ACK acknowledges our FIN, then enter the TIME-WAIT state"
			l.enterTimeWait(c)
		case tcpLastAck:
			// "If our FIN is now acknowledged, delete the TCB, enter the CLOSED state"
			l.closeConn(c)
			return false
		}
	}
	return true
}

func (l *tcpLayer) enterTimeWait(c *tcpConn) {
	l.setState(c, tcpTimeWait)
	c.rtxAt = l.now + int64(l.cfg.TimeWait)
	c.ackAt, c.kaAt, c.persist = 0, 0, false
}

// newAck handles an ACK that advances SND.UNA: RTT, congestion control
// (RFC 5681, NewReno RFC 6582), the app's output and the RTO timer.
func (l *tcpLayer) newAck(c *tcpConn, ack seqnum) {
	acked := ack.diff(c.sndUna)
	data := acked
	if c.finSent && ack.gt(c.finSeq) && !c.sndUna.gt(c.finSeq) {
		data-- // the FIN's sequence number is not app data
	}
	if c.rttOn && ack.gt(c.rttSeq) {
		// RFC 6298 / Karn: only segments sent once are timed.
		l.rttSample(c, l.now-c.rttTime)
		c.rttOn = false
	}
	c.retries = 0
	c.sndUna = ack
	if c.sndNxt.lt(ack) {
		c.sndNxt = ack
	}
	l.pruneSacked(c)
	if data > 0 && c.app != nil {
		c.app.Advance(int(data))
	}
	mss := uint32(c.mss)
	flight := c.sndMax.diff(ack)
	switch {
	case c.recovery && !ack.lt(c.recover):
		// RFC 6582 3.2 (3) full acknowledgment: "Set cwnd to either
		// (1) min (ssthresh, max(FlightSize, SMSS) + SMSS)".
		c.recovery = false
		c.dupAcks = 0
		c.cwnd = min(c.ssthresh, max(flight, mss)+mss)
	case c.recovery:
		// RFC 6582 3.2 (3) partial acknowledgment: "retransmit the first
		// unacknowledged segment ... deflate the congestion window by the
		// amount of new data acknowledged ... add back SMSS".
		l.retransmitAt(c, ack)
		if c.cwnd > acked {
			c.cwnd -= acked
		} else {
			c.cwnd = 0
		}
		c.cwnd += mss
		l.sackHole(c)
	default:
		c.dupAcks = 0
		if c.cwnd < c.ssthresh {
			c.cwnd += min(acked, mss) // slow start, RFC 5681 (2)
		} else {
			c.cwnd += max(mss*mss/c.cwnd, 1) // congestion avoidance (3)
		}
		c.cwnd = min(c.cwnd, 1<<30)
	}
	// RFC 6298 5.2/5.3: all acked → stop the timer; else restart it.
	if c.sndUna == c.sndMax {
		c.rtxAt = 0
	} else {
		c.rtxAt = l.now + c.rto
	}
	c.persist = false
	if c.appSeq != c.rcvDataEnd() {
		// The app's output drained: it may take held input now.
		l.deliver(c, true)
	}
}

// dupAck counts a duplicate ACK: fast retransmit on the third (RFC 5681
// 3.2), window inflation after (RFC 6582 3.2 (4)).
func (l *tcpLayer) dupAck(c *tcpConn) {
	c.dupAcks++
	mss := uint32(c.mss)
	if c.recovery {
		c.cwnd += mss
		l.sackHole(c)
		return
	}
	// RFC 6582 3.2 (2): enter only if the ACK covers more than recover.
	if c.dupAcks < 3 || !c.sndUna.gt(c.recover) {
		return
	}
	l.stats.FastRetransmits++
	flight := c.sndMax.diff(c.sndUna)
	c.ssthresh = max(flight/2, 2*mss)
	c.recover = c.sndMax
	c.recovery = true
	c.rtxHigh = c.sndUna
	l.retransmitAt(c, c.sndUna)
	c.rtxHigh = c.sndUna.add(mss)
	c.cwnd = c.ssthresh + 3*mss
}

// sackHole retransmits the next hole below the highest SACKed byte that
// this recovery has not retransmitted yet (RFC 6675 light).
func (l *tcpLayer) sackHole(c *tcpConn) {
	if c.nsacked == 0 {
		return
	}
	high := c.sacked[c.nsacked-1].r
	seq := l.skipSacked(c, seqMax(c.rtxHigh, c.sndUna))
	if !seq.lt(high) || !seq.lt(c.sndMax) {
		return
	}
	l.retransmitAt(c, seq)
	c.rtxHigh = seq.add(uint32(c.mss))
}

// updateSacked merges the peer's SACK blocks (RFC 2018) that lie in
// (SND.UNA, SND.MAX] into the scoreboard.
func (l *tcpLayer) updateSacked(c *tcpConn, f *TCPFields) {
	for i := 0; i < f.NSACK; i++ {
		r := tcpRange{seqnum(f.SACK[i].Left), seqnum(f.SACK[i].Right)}
		if !r.l.lt(r.r) || !r.l.gt(c.sndUna) || r.r.gt(c.sndMax) {
			continue // D-SACK, stale or bogus block
		}
		n := addRange(c.sacked[:], int(c.nsacked), r)
		if n < 0 {
			n = -1 - n // scoreboard full and r above every range: not remembered
		}
		c.nsacked = uint8(n)
	}
}

func (l *tcpLayer) pruneSacked(c *tcpConn) {
	j := 0
	for i := 0; i < int(c.nsacked); i++ {
		r := c.sacked[i]
		if r.r.leq(c.sndUna) {
			continue
		}
		if r.l.lt(c.sndUna) {
			r.l = c.sndUna
		}
		c.sacked[j] = r
		j++
	}
	c.nsacked = uint8(j)
}

// addRange merges r into the sorted, disjoint ranges rs[:n] and returns the
// new count. When all slots are taken and r merges with none, the highest
// range is dropped to make room (the lowest ranges matter most for
// retransmission and for filling the next hole). It returns -1-n when r
// could not be added at all (r is above every range and the table is full).
func addRange(rs []tcpRange, n int, r tcpRange) int {
	// Merge every range that overlaps or touches r.
	j := 0
	for i := 0; i < n; i++ {
		x := rs[i]
		if x.r.lt(r.l) || r.r.lt(x.l) {
			rs[j] = x
			j++
			continue
		}
		r.l, r.r = seqMin(r.l, x.l), seqMax(r.r, x.r)
	}
	n = j
	// Insert sorted.
	pos := n
	for i := 0; i < n; i++ {
		if r.l.lt(rs[i].l) {
			pos = i
			break
		}
	}
	if n == len(rs) {
		if pos == n {
			return -1 - n
		}
		n-- // drop the highest
	}
	copy(rs[pos+1:n+1], rs[pos:n])
	rs[pos] = r
	return n + 1
}

// rcvDataEnd is where the peer's data ends: RCV.NXT, or the FIN's sequence
// number once the FIN is in.
func (c *tcpConn) rcvDataEnd() seqnum {
	if c.finRcvd {
		return c.rcvFin
	}
	return c.rcvNxt
}

// receive takes acceptable segment text at seq (step seven): trimmed to the
// window, fed to the app straight from the frame when it is in order and
// nothing is held, otherwise placed in the reassembly buffer.
func (l *tcpLayer) receive(c *tcpConn, seq seqnum, p []byte) {
	if seq.lt(c.rcvNxt) {
		d := c.rcvNxt.diff(seq)
		if d >= uint32(len(p)) {
			l.stats.DupSegs++
			c.ackNow = true
			return
		}
		p, seq = p[d:], c.rcvNxt
	}
	w := uint32(l.cfg.RcvBuf)
	edge := c.appSeq.add(w)
	if !seq.lt(edge) {
		c.ackNow = true
		return
	}
	if end := seq.add(uint32(len(p))); end.gt(edge) {
		p = p[:edge.diff(seq)]
	}
	if c.finPend && seq.add(uint32(len(p))).gt(c.rcvFin) {
		p = p[:c.rcvFin.diff(seq)] // nothing after the FIN
	}
	if seq != c.rcvNxt {
		// Out of order: hold it and ACK at once (RFC 5681 4.2: "an
		// immediate ACK SHOULD be generated when an out-of-order segment
		// arrives"), with SACK blocks.
		c.ackNow = true
		if !l.rcvBuf(c) {
			l.stats.OOODrop++
			return
		}
		n := addRange(c.ooo[:], int(c.nooo), tcpRange{seq, seq.add(uint32(len(p)))})
		if n < 0 {
			l.stats.OOODrop++
			return
		}
		c.nooo = uint8(n)
		for i := 0; i < n; i++ {
			if c.ooo[i].l.leq(seq) && seq.lt(c.ooo[i].r) {
				c.lastOOO = uint8(i)
			}
		}
		l.copyIn(c, seq, p)
		l.stats.OOOSegs++
		return
	}
	c.segsUnacked++
	if c.segsUnacked >= 2 {
		c.ackNow = true // RFC 5681 4.2: at least every second full-sized segment
	}
	if c.rb == nil {
		// Fast path: nothing held, feed straight from the frame.
		n := len(p)
		if c.app != nil {
			n = c.app.Feed(p, l.nowT)
		}
		c.rcvNxt = c.rcvNxt.add(uint32(len(p)))
		c.appSeq = c.appSeq.add(uint32(n))
		if n < len(p) {
			rest := p[n:]
			if !l.rcvBuf(c) {
				// No buffer: take back what the app did not take,
				// the peer will send it again.
				l.stats.RcvBufEmpty += uint64(len(rest))
				c.rcvNxt = c.appSeq
				c.ackNow = true
				return
			}
			copy(c.rb, rest)
		}
		return
	}
	l.copyIn(c, seq, p)
	c.rcvNxt = c.rcvNxt.add(uint32(len(p)))
	if c.nooo > 0 {
		// Filling a hole: ACK at once (RFC 5681 4.2).
		c.ackNow = true
		j := 0
		for i := 0; i < int(c.nooo); i++ {
			if r := c.ooo[i]; r.l.leq(c.rcvNxt) {
				c.rcvNxt = seqMax(c.rcvNxt, r.r)
				continue
			}
			c.ooo[j] = c.ooo[i]
			j++
		}
		c.nooo = uint8(j)
		c.lastOOO = 0
	}
	if c.finPend && c.rcvNxt == c.rcvFin {
		c.finPend = false
		l.finArrived(c, c.rcvFin)
	}
	l.deliver(c, false)
}

// copyIn writes p, which starts at seq, into the receive ring.
func (l *tcpLayer) copyIn(c *tcpConn, seq seqnum, p []byte) {
	w := len(c.rb)
	pos := (c.rbHead + int(seq.diff(c.appSeq))) % w
	k := copy(c.rb[pos:], p)
	copy(c.rb, p[k:])
}

// deliver feeds held in-order bytes to the app until it pushes back, and
// returns the buffer to the pool when nothing is held. After the app's
// output drained (update), it ACKs if the window opened by a useful step.
func (l *tcpLayer) deliver(c *tcpConn, update bool) {
	end := c.rcvDataEnd()
	for c.appSeq != end && c.app != nil && c.rb != nil {
		held := int(end.diff(c.appSeq))
		chunk := c.rb[c.rbHead:min(c.rbHead+held, len(c.rb))]
		n := c.app.Feed(chunk, l.nowT)
		c.appSeq = c.appSeq.add(uint32(n))
		c.rbHead = (c.rbHead + n) % len(c.rb)
		if n < len(chunk) {
			break
		}
	}
	if c.appSeq == end && c.nooo == 0 {
		l.freeRcvBuf(c)
	}
	if c.finRcvd && !c.peerFed && c.appSeq == c.rcvFin && c.app != nil {
		c.peerFed = true
		c.app.PeerClosed(l.nowT)
	}
	if update {
		step := min(uint32(l.cfg.RcvBuf)/2, uint32(l.cfg.MSS))
		if c.rcvAdv.add(step).leq(c.appSeq.add(uint32(l.cfg.RcvBuf))) {
			c.ackNow = true // window update
		}
	}
}

// finArrived is step eight for a FIN at sequence number fin.
func (l *tcpLayer) finArrived(c *tcpConn, fin seqnum) {
	switch {
	case c.finRcvd:
		c.ackNow = true // a retransmitted FIN
		if c.state == tcpTimeWait {
			c.rtxAt = l.now + int64(l.cfg.TimeWait)
		}
		return
	case fin.gt(c.rcvNxt):
		// Beyond a hole: remember it; processed when the hole fills.
		c.finPend, c.rcvFin = true, fin
		c.ackNow = true
		return
	case fin.lt(c.rcvNxt):
		return // trimmed: the window ended before it
	}
	// "advance RCV.NXT over the FIN, and send an acknowledgment for the FIN."
	c.finRcvd, c.finPend, c.rcvFin = true, false, fin
	c.rcvNxt = fin.add(1)
	c.ackNow = true
	l.deliver(c, false)
	switch c.state {
	case tcpSynRcvd, tcpEstablished:
		// "Enter the CLOSE-WAIT state."
		l.setState(c, tcpCloseWait)
	case tcpFinWait1:
		// "If our FIN has been ACKed ... enter TIME-WAIT ... otherwise,
		// enter the CLOSING state." (ACKed already moved us to FIN-WAIT-2.)
		l.setState(c, tcpClosing)
	case tcpFinWait2:
		// "Enter the TIME-WAIT state. Start the time-wait timer, turn
		// off the other timers."
		l.enterTimeWait(c)
	}
}
