package netstack

// The sender side of ACK processing: RTT, the congestion control hooks
// (tcp_cc.go), NewReno recovery (RFC 6582), limited transmit (RFC 3042) and the SACK
// scoreboard (RFC 2018, RFC 6675 light). Loss by time (RACK), D-SACK and
// undo are in tcp_rack.go; once RACK runs (SACK and an RTT measured) it
// starts the recoveries, and PRR (tcp_prr.go) replaces NewReno's window
// arithmetic in them.

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
	l.txPrune(c, ack)
	c.rtxUna = false // a new SND.UNA: its segment was not retransmitted yet
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
		// (1) min (ssthresh, max(FlightSize, SMSS) + SMSS)"; PRR's
		// recovery ends at ssthresh.
		c.recovery = false
		c.dupAcks = 0
		if c.prrOn {
			c.prrEnd()
		} else {
			l.ccRecovered(c, flight)
		}
	case c.recovery && c.prrOn:
		// PRR sends what this ACK allows after it (rackCheck).
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
		l.ccAck(c, ack, acked)
	}
	// RFC 6298 5.2/5.3: all acked → stop the timer; else restart it.
	c.tlpDone = false
	if c.sndUna == c.sndMax {
		c.rtxAt, c.tlp, c.rackAt = 0, false, 0
	} else {
		l.rearmRTO(c)
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
	l.frtoDupAck(c)
	mss := uint32(c.mss)
	if c.prrOn {
		return // RACK and PRR run the recovery (rackCheck)
	}
	if c.recovery {
		c.cwnd += mss
		if l.lostRetransmit(c) {
			return
		}
		l.sackHole(c)
		return
	}
	// Enter loss recovery on the third duplicate ACK (RFC 5681 3.2), or
	// earlier when SACK shows more than DupThresh-1 segments above the
	// hole (RFC 6675 IsLost), which small windows need; before that,
	// limited transmit (RFC 3042) lets new data out (see sendData). After a
	// tail loss probe, the SACK it draws is the loss signal (RFC 8985 7.4).
	// Once an RTT is measured, RACK alone tells loss, by time (RFC 8985
	// §6.2; Linux too), and enters recovery with PRR: a threshold of
	// duplicate ACKs would take every reordering deeper than three
	// segments for a loss.
	if c.rackActive() {
		return
	}
	if c.dupAcks < 3 && !(c.sackOK && (l.sackedBytes(c) > 2*mss || c.tlpDone)) {
		return
	}
	// RFC 6582 3.2 (2): enter only if the ACK covers more than recover.
	// With SACK the duplicate ACKs of a loss right at recover are told
	// apart from those of our own retransmissions (RFC 6675 5: enter
	// unless already in recovery), so ACK == recover is enough.
	if !c.sndUna.gt(c.recover) && !(c.sackOK && c.sndUna == c.recover) {
		return
	}
	l.enterRecovery(c)
}

// enterRecovery starts fast recovery (RFC 5681 3.2, RFC 6582 3.2 (2)):
// the window reduced, remembered for an undo, SND.UNA's segment resent.
func (l *tcpLayer) enterRecovery(c *tcpConn) {
	mss := uint32(c.mss)
	l.stats.FastRetransmits++
	l.saveUndo(c)
	prior := c.cwnd
	l.ccLoss(c)
	c.recover = c.sndMax
	c.recovery = true
	c.rtxHigh = c.sndUna
	if c.rackActive() {
		// RACK picks what to resend and PRR how much (rackCheck).
		c.prrStart(prior)
		return
	}
	l.retransmitAt(c, c.sndUna)
	c.rtxHigh = c.sndUna.add(mss)
	c.cwnd = c.ssthresh + 3*mss
	if c.tlp {
		// A pending tail loss probe has no place in recovery (RFC
		// 8985 7.2); the recovery probe, timed from this
		// retransmission, takes its place.
		l.rearmRTO(c)
	}
}

// lostRetransmit resends SND.UNA's segment when the SACK scoreboard shows
// that a segment sent after its retransmission (above rtxMark, the SND.MAX
// of then) has arrived while the retransmission has not: it was lost too.
// RFC 6675 leaves a lost retransmission to the RTO; RFC 8985 (RACK) detects
// it by send order, which for us is sequence order above rtxMark, the same
// test Linux made before RACK (tcp_mark_lost_retrans). At 5% loss one
// recovery in twenty loses its retransmission, and an RTO costs 200 ms
// against an RTT of a few.
func (l *tcpLayer) lostRetransmit(c *tcpConn) bool {
	sacked := c.sackedRanges()
	if !c.rtxUna || len(sacked) == 0 || !sacked[len(sacked)-1].r.gt(c.rtxMark) {
		return false
	}
	if sacked[0].l == c.sndUna {
		return false // SND.UNA's segment itself was SACKed: not lost
	}
	l.stats.LostRetransmits++
	l.retransmitAt(c, c.sndUna)
	c.rtxHigh = seqMax(c.rtxHigh, c.sndUna.add(uint32(c.mss)))
	return true
}

// sackedBytes counts the bytes the peer has SACKed above SND.UNA.
func (l *tcpLayer) sackedBytes(c *tcpConn) uint32 {
	n := uint32(0)
	for _, r := range c.sackedRanges() {
		n += r.r.diff(r.l)
	}
	return n
}

// sackHole retransmits the next hole below the highest SACKed byte that
// this recovery has not retransmitted yet (RFC 6675 light).
func (l *tcpLayer) sackHole(c *tcpConn) {
	sacked := c.sackedRanges()
	if len(sacked) == 0 {
		return
	}
	high := sacked[len(sacked)-1].r
	seq := l.skipSacked(c, seqMax(c.rtxHigh, c.sndUna))
	if !seq.lt(high) || !seq.lt(c.sndMax) {
		return
	}
	l.retransmitAt(c, seq)
	c.rtxHigh = seq.add(uint32(c.mss))
}

// updateSacked merges the peer's SACK blocks (RFC 2018) that lie in
// (SND.UNA, SND.MAX] into the scoreboard.
// It reports whether the scoreboard learned bytes it did not hold.
func (l *tcpLayer) updateSacked(c *tcpConn, f *TCPFields) bool {
	before := l.sackedBytes(c)
	for i := 0; i < f.NSACK; i++ {
		r := tcpRange{seqnum(f.SACK[i].Left), seqnum(f.SACK[i].Right)}
		if i == 0 && r.l.lt(r.r) && r.r.leq(c.sndMax) && !r.l.lt(c.sndUna-seqnum(c.maxSndWnd)) && isDSACK(f, r) {
			l.dsackArrived(c, r)
			continue
		}
		if !r.l.lt(r.r) || !r.l.gt(c.sndUna) || r.r.gt(c.sndMax) {
			continue // D-SACK, stale or bogus block
		}
		if c.tx == nil {
			l.txRing(c) // not sent by emitAt (a test's conn): lend one
		}
		n := addRange(c.tx.sacked[:], int(c.nsacked), r)
		if n < 0 {
			n = -1 - n // scoreboard full and r above every range: not remembered
		}
		c.nsacked = uint8(n)
	}
	return l.sackedBytes(c) > before
}

func (l *tcpLayer) pruneSacked(c *tcpConn) {
	j := 0
	for _, r := range c.sackedRanges() {
		if r.r.leq(c.sndUna) {
			continue
		}
		if r.l.lt(c.sndUna) {
			r.l = c.sndUna
		}
		c.tx.sacked[j] = r
		j++
	}
	c.nsacked = uint8(j)
}

// addRange merges r into the sorted, disjoint ranges rs[:n] and returns the
// new count. When all slots are taken and r merges with none, the highest
// range is dropped to make room (the lowest ranges matter most for
// retransmission). It returns -1-n when r could not be added at all (r is
// above every range and the table is full). The receiver's table makes
// room before it calls, and never loses a range.
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
