package netstack

import "time"

// Segment output. Every segment of a connection goes through emit, which
// fills the ACK, window, timestamp and SACK fields from the TCB, copies the
// payload once from the app's output slices into the tx buffer and
// checksums it.

// rcvWindow returns the window field to advertise (scaled unless syn) and
// records the right edge, with receiver-side SWS avoidance (RFC 9293
// 3.8.6.2.2): the right edge moves only in steps of min(RcvBuf/2, MSS).
func (l *tcpLayer) rcvWindow(c *tcpConn, syn bool) uint16 {
	w := l.rcvSpace(c)
	edge := l.clampEdge(c, c.appSeq.add(w)) // tcp_mem.go
	step := min(w/2, uint32(l.cfg.MSS))
	if c.rcvAdv.geq(c.rcvNxt) && c.rcvAdv.leq(edge) && edge.lt(c.rcvAdv.add(step)) {
		edge = c.rcvAdv
	}
	space := uint32(0)
	if edge.gt(c.rcvNxt) {
		space = edge.diff(c.rcvNxt)
	}
	if syn {
		return uint16(min(space, 65535))
	}
	field := min(space>>c.rcvWScale, 65535)
	if e := c.rcvNxt.add(field << c.rcvWScale); e.gt(c.rcvAdv) {
		c.rcvAdv = e
	}
	return uint16(field)
}

func (l *tcpLayer) tsNow(c *tcpConn) uint32 { return uint32(l.now/1e6) + c.tsOff }

// emit sends one segment of c: f carries flags, seq and any SYN options;
// n payload bytes come from bufs at offset off. It reports whether the
// segment went out (false: no tx buffer, counted).
func (l *tcpLayer) emit(c *tcpConn, f *TCPFields, bufs [][]byte, off, n int) bool {
	f.SrcPort, f.DstPort = c.key.lport, c.key.rport
	if f.Flags&TCPFlagACK != 0 {
		f.Ack = uint32(c.rcvNxt)
	}
	f.Window = l.rcvWindow(c, f.Flags&TCPFlagSYN != 0)
	if c.tsOK {
		f.HasTimestamp, f.TSVal, f.TSEcr = true, l.tsNow(c), c.tsRecent
	}
	if c.sackOK && (len(c.ooo) > 0 || c.dsackOn) && f.Flags&TCPFlagSYN == 0 {
		l.sackBlocks(c, f)
	}
	hl := f.HeaderLen()
	for hl+n > c.maxSegment(l.cfg.MSS) && f.NSACK > 0 {
		// The segment must fit the MTU (MSS + 40), and the path's (pmtu.go): SACK blocks yield to data.
		f.NSACK--
		hl = f.HeaderLen()
	}
	b := l.sink.tcpBuf(c.key.raddr, c.key.laddr, hl+n)
	if b == nil {
		l.stats.TxNoBuf++
		l.txRetry(c)
		return false
	}
	f.Encode(b)
	copyOut(b[hl:hl+n], bufs, off)
	TCP(b[:hl+n]).SetChecksum(tcpChecksum(c.key.laddr, c.key.raddr, b[:hl+n]))
	l.sink.tcpSend(hl + n)
	l.stats.OutSegs++
	if f.Flags&TCPFlagACK != 0 {
		c.lastAck = c.rcvNxt
		c.ackNow = false
		c.ackAt = 0
		c.segsUnacked = 0
	}
	return true
}

// sackBlocks fills f's SACK option (RFC 2018 §4): the ranges most recently
// received into, newest first; then, if room is left, the other ranges
// from the highest down, so that none goes unreported for long.
func (l *tcpLayer) sackBlocks(c *tcpConn, f *TCPFields) {
	limit := 4
	if c.tsOK {
		limit = 3
	}
	if c.dsackOn {
		// RFC 2883 §4: the D-SACK block goes first, once.
		c.dsackOn = false
		l.stats.DSACKsOut++
		addSACKBlock(f, c.dsack)
	}
	for _, s := range c.sackHist[:c.nSACKHist] {
		if i := c.oooAt(s); i >= 0 && f.NSACK < limit {
			addSACKBlock(f, c.ooo[i])
		}
	}
	for i := len(c.ooo) - 1; i >= 0 && f.NSACK < limit; i-- {
		addSACKBlock(f, c.ooo[i])
	}
}

// addSACKBlock appends r to f's SACK blocks unless it is there already.
func addSACKBlock(f *TCPFields, r tcpRange) {
	b := TCPSACKBlock{uint32(r.l), uint32(r.r)}
	for _, x := range f.SACK[:f.NSACK] {
		if x == b {
			return
		}
	}
	f.SACK[f.NSACK] = b
	f.NSACK++
}

// copyOut fills dst from the concatenation of bufs starting at offset off.
func copyOut(dst []byte, bufs [][]byte, off int) {
	for _, b := range bufs {
		if len(dst) == 0 {
			return
		}
		if off >= len(b) {
			off -= len(b)
			continue
		}
		k := copy(dst, b[off:])
		dst = dst[k:]
		off = 0
	}
}

// emitRaw sends a segment that belongs to no connection (RST, cookie SYN-ACK).
func (l *tcpLayer) emitRaw(k tcpKey, f *TCPFields) {
	f.SrcPort, f.DstPort = k.lport, k.rport
	hl := f.HeaderLen()
	b := l.sink.tcpBuf(k.raddr, k.laddr, hl)
	if b == nil {
		l.stats.TxNoBuf++
		return
	}
	f.Encode(b)
	TCP(b[:hl]).SetChecksum(tcpChecksum(k.laddr, k.raddr, b[:hl]))
	l.sink.tcpSend(hl)
	l.stats.OutSegs++
}

// resetFor answers a segment that has no acceptable connection, RFC 9293
// 3.10.7.1: "If the ACK bit is off, sequence number zero is used,
// <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>. If the ACK bit is on,
// <SEQ=SEG.ACK><CTL=RST>".
func (l *tcpLayer) resetFor(k tcpKey, in *TCPFields, n int) {
	var f TCPFields
	if in.Flags&TCPFlagACK != 0 {
		f.Seq, f.Flags = in.Ack, TCPFlagRST
	} else {
		n += int(in.Flags & TCPFlagSYN >> 1)
		n += int(in.Flags & TCPFlagFIN)
		f.Ack, f.Flags = in.Seq+uint32(n), TCPFlagRST|TCPFlagACK
	}
	l.stats.ResetsOut++
	l.emitRaw(k, &f)
}

// sendReset aborts c towards the peer: <SEQ=SND.NXT><CTL=RST>.
func (l *tcpLayer) sendReset(c *tcpConn) {
	f := TCPFields{Seq: uint32(c.sndMax), Flags: TCPFlagRST}
	l.stats.ResetsOut++
	l.emitRaw(c.key, &f)
}

// sendSyn sends our SYN (active open) or SYN-ACK with the options negotiated.
func (l *tcpLayer) sendSyn(c *tcpConn, ack bool) {
	f := TCPFields{Seq: uint32(c.iss), Flags: TCPFlagSYN, MSS: l.cfg.MSS}
	if ack {
		f.Flags |= TCPFlagACK
	}
	if c.wsOK {
		f.HasWScale, f.WScale = true, c.rcvWScale
	}
	f.SACKPermitted = c.sackOK
	l.emit(c, &f, nil, 0, 0)
	c.sndNxt = c.iss.add(1)
	c.sndMax = c.sndNxt
	c.rtxAt = l.now + c.rto
	if c.retries == 0 {
		c.rttOn, c.rttSeq, c.rttTime = true, c.iss, l.now
	}
}

// sendAck sends a bare ACK: <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>.
func (l *tcpLayer) sendAck(c *tcpConn) {
	f := TCPFields{Seq: uint32(c.sndNxt), Flags: TCPFlagACK}
	l.emit(c, &f, nil, 0, 0)
}

// sendProbe sends a keep-alive or zero-window probe: an ACK one byte
// before SND.UNA, which the peer must answer with an ACK (RFC 9293 3.8.4).
func (l *tcpLayer) sendProbe(c *tcpConn) {
	f := TCPFields{Seq: uint32(c.sndUna - 1), Flags: TCPFlagACK}
	l.emit(c, &f, nil, 0, 0)
}

// challengeAck sends an RFC 5961 challenge ACK, within the connection's
// randomised budget for the current second (RFC 5961 §7, tcpChallengeLimit).
func (l *tcpLayer) challengeAck(c *tcpConn) {
	if c.challengeAt == 0 || l.now-c.challengeAt >= int64(time.Second) {
		c.challengeAt = l.now
		c.challengeLeft = uint16(tcpChallengeLimit/2 + l.random()%tcpChallengeLimit)
	}
	if c.challengeLeft == 0 {
		l.stats.ChallengeLimit++
		return
	}
	c.challengeLeft--
	l.stats.ChallengeACKs++
	l.sendAck(c)
}

// sendQueue returns the app's output and where its data ends in sequence
// space, and whether a FIN follows it.
func (l *tcpLayer) sendQueue(c *tcpConn) (bufs [][]byte, end seqnum, fin bool) {
	total := 0
	if c.app != nil {
		bufs = c.app.Output()
		for _, b := range bufs {
			total += len(b)
		}
	}
	end = c.sndUna.add(uint32(total))
	if c.finSent {
		if c.sndUna.gt(c.finSeq) {
			return nil, c.sndUna, false // FIN acknowledged: nothing left
		}
		end = seqMin(end, c.finSeq)
		return bufs, end, true
	}
	fin = c.app == nil || c.app.Closing()
	return bufs, end, fin
}

// output sends what c may send now: new or retransmitted data within the
// congestion and send windows, FIN after the data when the app is closing,
// and an ACK if one is owed and nothing else carried it.
func (l *tcpLayer) output(c *tcpConn) {
	sent := false
	switch c.state {
	case tcpEstablished, tcpCloseWait, tcpFinWait1, tcpClosing, tcpLastAck:
		sent = l.sendData(c)
	}
	if c.ackNow && !sent {
		l.sendAck(c)
	}
	if c.segsUnacked > 0 && c.ackAt == 0 {
		// RFC 9293 3.8.6.3 / RFC 1122 4.2.3.2: delay an ACK at most
		// 0.5 s; ACK at least every second full-sized segment.
		c.ackAt = l.now + int64(l.cfg.DelayedAck)
	}
}

func (l *tcpLayer) sendData(c *tcpConn) bool {
	bufs, dataEnd, fin := l.sendQueue(c)
	sent := false
	for {
		seq := c.sndNxt
		if seq.lt(c.sndMax) {
			seq = l.skipSacked(c, seq)
			c.sndNxt = seq
		}
		if seq.lt(dataEnd) {
			cwnd := c.cwnd
			if !c.recovery && c.dupAcks > 0 && c.dupAcks < 3 {
				// RFC 3042 limited transmit: one new segment per
				// duplicate ACK, at most cwnd + 2*SMSS outstanding.
				cwnd += uint32(c.dupAcks) * uint32(c.mss)
			}
			wndEnd := c.sndUna.add(min(c.sndWnd, cwnd))
			if c.prrOn {
				wndEnd = seqMin(c.sndUna.add(c.sndWnd), c.prrWndEnd(seq))
			}
			if !seq.lt(wndEnd) {
				break
			}
			if c.sndMax == c.sndUna && l.holdFlight(c) {
				break // a new flight waits for receive frames (tcp_hold.go)
			}
			left := dataEnd.diff(seq)
			n := min(uint32(c.mss), left, wndEnd.diff(seq))
			// Sender SWS avoidance (RFC 9293 3.8.6.2.1): no runt the
			// window cut short while data is in flight.
			if n < uint32(c.mss) && n < left && c.sndMax != c.sndUna {
				break
			}
			if seq.lt(c.sndMax) {
				n = l.clipSacked(c, seq, n)
			}
			if !l.emitAt(c, seq, n, bufs, dataEnd, fin) {
				l.txFailed(c)
				break
			}
			sent = true
			continue
		}
		if fin && seq == dataEnd {
			// FIN alone after all data (RFC 9293 3.10.4 CLOSE).
			if !l.emitAt(c, seq, 0, bufs, dataEnd, fin) {
				l.txFailed(c)
				break
			}
			sent = true
		}
		break
	}
	if sent && c.rtxAt != 0 && !c.persist && c.sndMax != c.sndUna {
		// RFC 8985 7.2: (re)start the loss probe timer after sending;
		// keep a running RTO if no probe applies (RFC 6298 5.1).
		old := c.rtxAt
		l.rearmRTO(c)
		if !c.tlp {
			c.rtxAt = old
		}
	}
	if !sent && c.sndMax == c.sndUna && c.sndNxt.lt(dataEnd) && c.sndWnd == 0 && c.rtxAt == 0 {
		// Zero window, nothing in flight: persist timer (RFC 9293 3.8.6.1).
		c.persist, c.tlp = true, false
		c.rtxAt = l.now + c.rto
	}
	return sent
}

// emitAt sends n data bytes at seq (n may be 0 for a bare FIN), with PSH at
// the end of the data and FIN after it when fin, and advances SND.NXT.
func (l *tcpLayer) emitAt(c *tcpConn, seq seqnum, n uint32, bufs [][]byte, dataEnd seqnum, fin bool) bool {
	f := TCPFields{Seq: uint32(seq), Flags: TCPFlagACK}
	end := seq.add(n)
	if end == dataEnd {
		if n > 0 {
			f.Flags |= TCPFlagPSH
		}
		if fin {
			f.Flags |= TCPFlagFIN
		}
	}
	if !l.emit(c, &f, bufs, int(seq.diff(c.sndUna)), int(n)) {
		return false
	}
	if f.Flags&TCPFlagFIN != 0 {
		if !c.finSent {
			c.finSent, c.finSeq = true, end
			switch c.state {
			case tcpEstablished:
				l.setState(c, tcpFinWait1)
			case tcpCloseWait:
				l.setState(c, tcpLastAck)
			}
		}
		end++
	}
	if c.sackOK && end.gt(seq) {
		l.txStamp(c, seq, end, l.now, seq.lt(c.sndMax))
	}
	if c.prrOn {
		c.prrSent(end.diff(seq))
	}
	if seq.lt(c.sndMax) {
		l.stats.Retransmits++
		if c.undoOn {
			c.undoRtx++
			if !c.undoTSOn && c.tsOK {
				c.undoTSOn, c.undoTS = true, l.tsNow(c)
			}
		}
	} else if !c.rttOn {
		c.rttOn, c.rttSeq, c.rttTime = true, seq, l.now
	}
	if end.gt(c.sndNxt) || seq == c.sndNxt {
		c.sndNxt = end
	}
	c.sndMax = seqMax(c.sndMax, end)
	l.armRTO(c)
	return true
}

// retransmitAt resends one segment at seq without moving SND.NXT (fast
// retransmit, NewReno partial ACK, SACK hole).
func (l *tcpLayer) retransmitAt(c *tcpConn, seq seqnum) {
	bufs, dataEnd, fin := l.sendQueue(c)
	if !seq.lt(dataEnd) && !(fin && seq == dataEnd) {
		return
	}
	n := min(uint32(c.mss), dataEnd.diff(seq))
	n = l.clipSacked(c, seq, n)
	nxt := c.sndNxt
	if l.emitAt(c, seq, n, bufs, dataEnd, fin) && seq == c.sndUna {
		c.rtxUna, c.rtxMark = true, c.sndMax
	}
	c.sndNxt = seqMax(nxt, c.sndNxt)
	if seq.lt(nxt) {
		c.sndNxt = nxt
	}
	c.rttOn = false // Karn
}

// skipSacked moves seq past any range the peer has SACKed (RFC 6675: do
// not retransmit SACKed data).
func (l *tcpLayer) skipSacked(c *tcpConn, seq seqnum) seqnum {
	for _, r := range c.sackedRanges() {
		if seq.geq(r.l) && seq.lt(r.r) {
			l.stats.SACKSkipped += uint64(r.r.diff(seq))
			seq = r.r
		}
	}
	return seq
}

// clipSacked shortens [seq, seq+n) to end where a SACKed range begins.
func (l *tcpLayer) clipSacked(c *tcpConn, seq seqnum, n uint32) uint32 {
	for _, r := range c.sackedRanges() {
		if r.l.gt(seq) && r.l.lt(seq.add(n)) {
			n = r.l.diff(seq)
		}
	}
	return n
}

// txRetry queues c to run its output again at the next poll, after a
// segment found no tx frame: the link frees frames as the NIC completes
// sends, long before an RTO.
func (l *tcpLayer) txRetry(c *tcpConn) {
	if !c.woken {
		l.stats.TxRetries++
		l.wake(TCPHandle{id: c.id, gen: c.gen})
	}
}

// txFailed keeps a timer behind txRetry for a segment that found no tx
// frame: the RTO timer, which retries without backoff when nothing is in
// flight.
func (l *tcpLayer) txFailed(c *tcpConn) {
	if c.rtxAt == 0 || c.persist {
		c.persist = false
		c.rtxAt = l.now + c.rto
	}
}
