package netstack

import "time"

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
		// cookie (RFC 4987 §3.6), and only while a cookie we sent can
		// still be valid: as Linux, no backlog overflow in that time
		// means no cookie to take, and a blind ACK has nothing to guess.
		switch {
		case f.Flags&TCPFlagSYN != 0:
			l.stats.SynCookiesBad++
		case l.synOverflowAt == 0 || l.now-l.synOverflowAt > tcpCookieLife:
			l.stats.SynCookiesNoOverflow++
		default:
			if mss := l.sec.checkCookie(k, seqnum(f.Seq-1), seqnum(f.Ack-1), l.now); mss != 0 {
				l.cookieEstablish(ls, k, f, payload, mss)
				return
			}
			l.stats.SynCookiesBad++
		}
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

// inSeg is what the steps of segment hand on: SEG.SEQ, SEG.LEN, and the
// flags and text as the steps leave them (at the edge of a zero window a
// segment loses its text and FIN but keeps its ACK). The header as received
// travels beside it, not in it: escape analysis does not tell one field's
// pointer from another's, so a *TCPFields in here would leak with the text
// and move every segment's header to the heap.
type inSeg struct {
	seq     seqnum // SEG.SEQ
	len     uint32 // SEG.LEN as received: text, SYN and FIN
	flags   uint8
	payload []byte
	stale   bool // failed PAWS but let through as a reordered pure ACK
}

// segment runs the state machine for a segment on an existing connection:
// the steps of RFC 9293 3.10.7.4 in order, one function each (a check
// returns false when it has dealt with the segment). The tests of the bits
// that select a step stay here, so that an ordinary segment calls only the
// steps it needs. The third step (security) does not apply, as the stack
// carries no IP security option, and the sixth (URG) does nothing: urgent
// data is delivered in line as ordinary text (RFC 6093).
func (l *tcpLayer) segment(c *tcpConn, f *TCPFields, payload []byte) {
	if c.state == tcpSynSent {
		l.synSent(c, f)
		return
	}
	s := inSeg{seq: seqnum(f.Seq), len: uint32(len(payload)), flags: f.Flags, payload: payload}
	if s.flags&TCPFlagSYN != 0 {
		s.len++
	}
	if s.flags&TCPFlagFIN != 0 {
		s.len++
	}
	if c.state == tcpTimeWait && !l.timeWaitSYN(c, f, &s) {
		return
	}
	if c.tsOK && f.HasTimestamp && !l.checkPAWS(c, f, &s) { // RFC 7323 §5.3 PAWS, before the sequence check
		return
	}
	if s.flags&TCPFlagSYN != 0 && s.flags&TCPFlagRST == 0 { // fourth, checked first
		l.synArrived(c, &s)
		return
	}
	if !l.checkSeq(c, &s) { // first
		return
	}
	if s.flags&TCPFlagRST != 0 { // second
		l.rstArrived(c, &s)
		return
	}
	l.updateTSRecent(c, f, &s)
	if !l.checkACK(c, f, &s) { // fifth
		return
	}
	if len(s.payload) > 0 { // seventh
		l.segmentText(c, &s)
	}
	if s.flags&TCPFlagFIN != 0 { // eighth
		l.finArrived(c, s.seq.add(uint32(len(s.payload))))
	}
	if c.state != tcpClosed {
		l.output(c)
	}
}

// timeWaitSYN lets a new SYN that cannot be an old duplicate reuse the
// 4-tuple in TIME-WAIT, as Linux does (tcp_timewait_state_process's
// TCP_TW_SYN, after RFC 6191): with timestamps on both sides, a TSval above
// TS.Recent, or equal to it and an ISN above RCV.NXT; without, an ISN above
// RCV.NXT (RFC 9293 3.6.1). A port-reusing client's ISN is random, its
// timestamps are not. The old connection ends and the SYN goes to the
// listener; any other SYN, or one for a port no longer listened on, goes on
// to PAWS and the steps, which ACK or drop it.
func (l *tcpLayer) timeWaitSYN(c *tcpConn, f *TCPFields, s *inSeg) bool {
	if s.flags&TCPFlagSYN == 0 || s.flags&(TCPFlagACK|TCPFlagRST) != 0 {
		return true
	}
	newer := s.seq.gt(c.rcvNxt)
	if c.tsOK && f.HasTimestamp && f.TSVal != c.tsRecent {
		newer = seqnum(f.TSVal).gt(seqnum(c.tsRecent))
	}
	if !newer || l.listener(c.key.lport) == nil {
		return true
	}
	l.stats.TimeWaitDone++
	l.stats.TimeWaitReopened++
	l.closeConn(c)
	l.noConn(c.key, f, s.payload)
	return false
}

// checkPAWS is RFC 7323 §5.3 PAWS, for a segment with a timestamp on a
// connection that uses them: a segment whose timestamp is older than
// TS.Recent is a duplicate from an old window; ACK and drop it. Except a
// pure ACK that a reordering path merely delivered late (Linux's
// tcp_disordered_ack): its SACK blocks and its place in the duplicate-ACK
// count are what loss recovery runs on, and at 10% reordering one ACK in
// ten would be lost to PAWS otherwise.
func (l *tcpLayer) checkPAWS(c *tcpConn, f *TCPFields, s *inSeg) bool {
	if s.flags&TCPFlagRST != 0 || !seqnum(f.TSVal).lt(seqnum(c.tsRecent)) {
		return true
	}
	if !l.disorderedAck(c, f, s.seq, s.len) {
		l.stats.PAWSDrop++
		if len(s.payload) > 0 && s.seq.lt(c.rcvNxt) {
			// A retransmission that reordering delivered after later
			// segments: D-SACK what we hold already, as Linux does
			// (tcp_send_dupack), or the sender never learns that its
			// retransmission was needless and cannot undo (RFC 3708).
			l.noteDSACK(c, s.seq, seqMin(s.seq.add(uint32(len(s.payload))), c.rcvNxt))
		}
		l.oowAck(c, s.len)
		return false
	}
	l.stats.DisorderedAcks++
	s.stale = true
	return true
}

// disorderedAck reports whether a segment that failed PAWS is a pure ACK
// that was only reordered, as Linux's tcp_disordered_ack has it: no text,
// SYN or FIN, in sequence (SEG.SEQ = RCV.NXT), acknowledging SND.UNA or
// less (nothing new to take on trust), and a timestamp within one RTO (in
// the peer's ticks, taken as ms, RFC 7323 §5.4's slowest sensible clock
// being 1 ms) of TS.Recent. Linux wants SND.UNA exactly; an older ACK
// moves nothing here either (checkACK takes only its SACK blocks, as it
// does of any old ACK), but its D-SACK may be the only one a needless
// retransmission draws, and without it the reduction stays (RFC 3708).
func (l *tcpLayer) disorderedAck(c *tcpConn, f *TCPFields, seq seqnum, segLen uint32) bool {
	if segLen != 0 || f.Flags&TCPFlagACK == 0 || seq != c.rcvNxt || seqnum(f.Ack).gt(c.sndUna) {
		return false
	}
	switch c.state {
	case tcpEstablished, tcpCloseWait, tcpFinWait1, tcpClosing, tcpLastAck:
	default:
		return false
	}
	return c.tsRecent-f.TSVal <= uint32(max(c.rto/1e6, 1))
}

// synArrived is the fourth step, taken first as RFC 5961 §4.2 wants it
// "irrespective of the sequence number": a SYN in a synchronized state gets
// a challenge ACK. We do the same in SYN-RECEIVED rather than go back to
// LISTEN (RFC 9293), so that a blind SYN cannot kill a handshake; only the
// peer's own SYN again gets our SYN-ACK again.
func (l *tcpLayer) synArrived(c *tcpConn, s *inSeg) {
	if c.state == tcpSynRcvd && s.seq == c.irs && s.flags&TCPFlagACK == 0 {
		l.stats.Retransmits++
		l.sendSyn(c, true)
		return
	}
	l.challengeAck(c)
}

// checkSeq is the first step: check the sequence number (the four cases of
// RFC 9293 3.10.7.4).
func (l *tcpLayer) checkSeq(c *tcpConn, s *inSeg) bool {
	wnd := uint32(0)
	if edge := c.appSeq.add(l.rcvSpace(c)); edge.gt(c.rcvNxt) {
		wnd = edge.diff(c.rcvNxt)
	}
	if tcpAcceptable(s.seq, s.len, c.rcvNxt, wnd) {
		// "If a segment's contents straddle the boundary between old
		// and new, only the new parts are processed": text beyond the
		// window is trimmed later, and a FIN beyond it is not taken.
		if s.flags&TCPFlagFIN != 0 && !s.seq.add(uint32(len(s.payload))).lt(c.rcvNxt.add(wnd)) {
			l.stats.FinBeyondWindow++
			s.flags &^= TCPFlagFIN
		}
		return true
	}
	switch {
	case wnd == 0 && s.seq == c.rcvNxt:
		// "If the RCV.WND is zero, no segments will be acceptable, but
		// special allowance should be made to accept valid ACKs, URGs,
		// and RSTs." The text is dropped and ACKed.
		if len(s.payload) > 0 || s.flags&TCPFlagFIN != 0 {
			l.stats.OutOfWindow++
			c.ackNow = true
		}
		s.payload = nil
		s.flags &^= TCPFlagFIN
		return true
	case s.flags&TCPFlagRST != 0:
		// "If an incoming segment is not acceptable ... (unless the RST
		// bit is set, if so drop the segment and return)"
		l.stats.OutOfWindow++
		return false
	}
	// "an acknowledgment should be sent in reply
	// <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>"
	if c.state == tcpTimeWait && s.flags&TCPFlagFIN != 0 {
		// TIME-WAIT: "Acknowledge it, and restart the 2 MSL timeout."
		c.rtxAt = l.now + int64(l.cfg.TimeWait)
	}
	if s.len > 0 && s.seq.add(s.len).leq(c.rcvNxt) {
		l.stats.DupSegs++
		l.noteDSACK(c, s.seq, s.seq.add(uint32(len(s.payload))))
	} else {
		l.stats.OutOfWindow++
	}
	l.oowAck(c, s.len)
	return false
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

// rstArrived is the second step, as RFC 5961 §3.2 has it: "If the RST bit
// is set and the sequence number exactly matches the next expected sequence
// number (RCV.NXT), then TCP MUST reset the connection"; in the window but
// not exact: "TCP MUST send an ACK (challenge ACK)".
//
// In TIME-WAIT a RST is ignored (RFC 1337): it would end the quiet time
// that keeps old duplicates away from a new incarnation.
func (l *tcpLayer) rstArrived(c *tcpConn, s *inSeg) {
	if c.state == tcpTimeWait {
		l.stats.TimeWaitRST++
		return
	}
	if s.seq == c.rcvNxt {
		l.stats.ResetsIn++
		l.closeConn(c)
		return
	}
	l.challengeAck(c)
}

// updateTSRecent is RFC 7323 §4.3 (2): "If SEG.TSval >= TS.Recent and
// SEG.SEQ =< Last.ACK.sent, then SEG.TSval is copied to TS.Recent". With
// Last.ACK.sent rather than RCV.NXT a delayed ACK echoes the timestamp of
// the earliest segment it acknowledges, which is what the peer's RTT
// measurement needs.
func (l *tcpLayer) updateTSRecent(c *tcpConn, f *TCPFields, s *inSeg) {
	if c.tsOK && f.HasTimestamp && s.seq.leq(c.lastAck) && seqnum(f.TSVal).geq(seqnum(c.tsRecent)) {
		c.tsRecent = f.TSVal
	}
}

// checkACK is the fifth step, check the ACK field: "if the ACK bit is off,
// drop the segment and return"; in SYN-RECEIVED an acceptable ACK first
// establishes the connection (synRcvdAck). It reports false when the
// segment was dropped or the connection is gone. A stale ACK (a disordered
// one PAWS let through) does not update the send window: a later ACK has
// already said more.
func (l *tcpLayer) checkACK(c *tcpConn, f *TCPFields, s *inSeg) bool {
	if s.flags&TCPFlagACK == 0 {
		l.stats.NoAckDrop++
		return false
	}
	seq, ack := s.seq, seqnum(f.Ack)
	if c.state == tcpSynRcvd && !l.synRcvdAck(c, f, s) {
		return false
	}
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
	if wnd == 0 && ack == c.sndUna {
		c.retries = 0 // a zero-window peer answering our probes is alive
	}
	newSack := false
	advanced := ack.gt(c.sndUna)
	una, sacked := c.sndUna, l.sackedBytes(c)
	if c.sackOK {
		l.rackAck(c, f, ack)
	}
	if c.sackOK && f.NSACK > 0 {
		newSack = l.updateSacked(c, f) // blocks at or below the new SND.UNA are pruned by newAck
	}
	switch {
	case ack.gt(c.sndUna):
		// "If SND.UNA < SEG.ACK =< SND.NXT, then set SND.UNA <- SEG.ACK."
		inRecovery, afterRTO, nxt := c.recovery, c.retries > 0, c.sndNxt
		l.newAck(c, ack)
		if c.state == tcpClosed {
			return false
		}
		l.ackUndo(c, f, inRecovery, afterRTO, nxt)
		if afterRTO && c.tsOK && f.HasTimestamp && f.TSEcr != 0 && c.srtt > 0 {
			// The echoed timestamp tells which transmission the ACK
			// answers (RFC 7323 §4), so Karn's ambiguity is gone and
			// the backoff ends, as Linux's icsk_backoff does on such
			// a sample: go-back-N takes no RTT sample of its own, and
			// a second loss in it cost twice the first timeout.
			l.setRTO(c)
		}
	case ack == c.sndUna && len(s.payload) == 0 && f.Flags&TCPFlagFIN == 0 && c.sndMax != c.sndUna && (wnd == c.sndWnd || newSack):
		// RFC 5681 §2 duplicate ACK; with SACK, an ACK that brings new
		// SACK information counts whatever its window (RFC 6675 §2 and
		// 5: the scoreboard, not the window, tells a duplicate). Linux
		// grows its advertised window while it queues out-of-order
		// data, so the window test alone would miss most of its
		// duplicate ACKs and leave loss to the TLP and the RTO.
		l.dupAck(c)
	}
	if advanced || newSack {
		l.rackLater(c, una, sacked)
	}
	// "If SND.UNA =< SEG.ACK =< SND.NXT, the send window should be
	// updated. If (SND.WL1 < SEG.SEQ or (SND.WL1 = SEG.SEQ and
	// SND.WL2 =< SEG.ACK)), set SND.WND <- SEG.WND, set SND.WL1 <-
	// SEG.SEQ, and set SND.WL2 <- SEG.ACK."
	if !s.stale && ack.geq(c.sndUna) && (c.sndWl1.lt(seq) || (c.sndWl1 == seq && c.sndWl2.leq(ack))) {
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

// synRcvdAck is step five in SYN-RECEIVED: "If SND.UNA < SEG.ACK =< SND.NXT,
// then enter ESTABLISHED state and continue processing"; "If the segment
// acknowledgment is not acceptable, form a reset segment
// <SEQ=SEG.ACK><CTL=RST>". It reports false when the segment was answered
// or the connection is gone.
func (l *tcpLayer) synRcvdAck(c *tcpConn, f *TCPFields, s *inSeg) bool {
	ack := seqnum(f.Ack)
	if !(c.sndUna.lt(ack) && ack.leq(c.sndMax)) {
		l.resetFor(c.key, f, len(s.payload))
		return false
	}
	if c.rttOn && c.retries == 0 {
		l.rttSample(c, l.now-c.rttTime)
	}
	c.rttOn = false
	c.sndUna, c.rtxAt = ack, 0
	c.sndWnd = uint32(f.Window) << c.sndWScale
	c.maxSndWnd = max(c.maxSndWnd, c.sndWnd)
	c.sndWl1, c.sndWl2 = s.seq, ack
	return l.establish(c)
}

func (l *tcpLayer) enterTimeWait(c *tcpConn) {
	l.setState(c, tcpTimeWait)
	c.rtxAt = l.now + int64(l.cfg.TimeWait)
	c.ackAt, c.kaAt, c.persist = 0, 0, false
}

// segmentText is the seventh step: process the segment text in ESTABLISHED,
// FIN-WAIT-1 and FIN-WAIT-2. In CLOSE-WAIT, CLOSING, LAST-ACK and
// TIME-WAIT: "This should not occur since a FIN has been received from the
// remote side. Ignore the segment text."
func (l *tcpLayer) segmentText(c *tcpConn, s *inSeg) {
	switch c.state {
	case tcpEstablished, tcpFinWait1, tcpFinWait2:
		if !c.finPend || s.seq.lt(c.rcvFin) {
			l.receive(c, s.seq, s.payload)
		} else {
			l.stats.AfterFinDrop++
		}
	default:
		l.stats.AfterFinDrop++
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
		c.dropHeldFrom(fin)
		c.ackNow = true
		return
	case fin.lt(c.rcvNxt):
		return // trimmed: the window ended before it
	}
	// "advance RCV.NXT over the FIN, and send an acknowledgment for the FIN."
	c.finRcvd, c.finPend, c.rcvFin = true, false, fin
	c.dropHeldFrom(fin)
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

// oowAck answers an unacceptable segment with an ACK, except that ACKs for
// segments without data are sent at most every 500 ms per connection: two
// ends that disagree on the window would otherwise ACK each other forever
// (Linux's tcp_invalid_ratelimit, RFC 5961 §7 in spirit).
func (l *tcpLayer) oowAck(c *tcpConn, segLen uint32) {
	if segLen == 0 && c.oowAckAt != 0 && l.now-c.oowAckAt < tcpOOWAckInterval {
		l.stats.OOWAckLimit++
		return
	}
	if segLen == 0 {
		c.oowAckAt = l.now
	}
	l.sendAck(c)
}

const tcpOOWAckInterval = int64(500 * time.Millisecond)
