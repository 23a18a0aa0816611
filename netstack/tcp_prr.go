package netstack

// Proportional Rate Reduction (RFC 6937) over the RFC 6675 pipe, for
// connections whose losses RACK tells (SACK and an RTT measured). Through
// a recovery the sender goes on sending as ACKs report deliveries, at
// ssthresh/RecoverFS of what was delivered while the pipe is above
// ssthresh and up to ssthresh below it (slow start reduction bound), and
// the recovery ends with cwnd at ssthresh. NewReno's window inflation,
// which the other connections keep, sends nothing for the first half of a
// recovery, then a burst, and leaves cwnd at what happened to be in flight
// at the end (often far below ssthresh). What a recovery sends goes to the
// segments RACK deems lost first (RFC 6675 NextSeg rule 1), then to new
// data.

// pipe is the RFC 6675 §4 estimate of the bytes in the network: those in
// [SND.UNA, SND.MAX) neither SACKed nor deemed lost by RACK. A
// retransmitted segment carries its retransmission's time, so it counts as
// in flight until RACK deems the retransmission lost too.
func (l *tcpLayer) pipe(c *tcpConn) uint32 {
	reo := l.reoWnd(c)
	n := uint32(0)
	for _, e := range c.txRecs() {
		lo := seqMax(e.l, c.sndUna)
		if !lo.lt(e.r) {
			continue
		}
		if c.rackOn && e.at <= c.rackXmit && e.at+c.rackRTT+reo <= l.now {
			// Sent before RACK's segment and waited long enough: the
			// part below it is lost (at RACK's instant, below its end).
			lostEnd := e.r
			if e.at == c.rackXmit {
				lostEnd = seqMax(lo, seqMin(e.r, c.rackEnd))
			}
			lo = lostEnd
		}
		if lo.lt(e.r) {
			n += c.unsacked(lo, e.r)
		}
	}
	return n
}

// unsacked returns how many bytes of [lo, hi) the peer has not SACKed.
func (c *tcpConn) unsacked(lo, hi seqnum) uint32 {
	n := hi.diff(lo)
	for _, r := range c.sackedRanges() {
		a, b := seqMax(r.l, lo), seqMin(r.r, hi)
		if a.lt(b) {
			n -= b.diff(a)
		}
	}
	return n
}

// prrStart begins a reduction (RFC 6937 §3, "at the beginning of
// recovery"); ssthresh is set. RecoverFS is the window before the
// reduction, as Linux takes it (prior_cwnd): what the sender would have
// kept in flight.
func (c *tcpConn) prrStart(prior uint32) {
	c.prrOn = true
	c.recoverFS = max(prior, uint32(c.mss))
	c.prrDelivered, c.prrOut, c.prrLeft = 0, 0, 0
}

// prrAck is RFC 6937 §3 "on every ACK during recovery", for delivered
// bytes newly acknowledged or SACKed: it sets sndcnt (prrLeft, in bytes),
// and cwnd to pipe + sndcnt, then sends the segments RACK deems lost
// within it; output sends new data with what is left.
func (l *tcpLayer) prrAck(c *tcpConn, delivered uint32) {
	c.prrDelivered += delivered
	pipe := l.pipe(c)
	mss := int64(c.mss)
	var sndcnt int64
	if pipe > c.ssthresh {
		// Proportional rate reduction: CEIL(prr_delivered * ssthresh /
		// RecoverFS) - prr_out.
		fs := int64(c.recoverFS)
		sndcnt = (int64(c.prrDelivered)*int64(c.ssthresh)+fs-1)/fs - int64(c.prrOut)
	} else {
		// Slow start reduction bound: back up to ssthresh, at most one
		// segment more than delivered.
		limit := max(int64(c.prrDelivered)-int64(c.prrOut), int64(delivered)) + mss
		sndcnt = min(int64(c.ssthresh)-int64(pipe), limit)
	}
	if c.prrOut == 0 {
		sndcnt = max(sndcnt, mss) // the fast retransmit itself goes out
	}
	c.prrLeft = int32(min(max(sndcnt, 0), 1<<30))
	c.cwnd = pipe + uint32(c.prrLeft)
	rtxUna := c.rtxUna
	for c.prrLeft > 0 && !c.rackHold {
		seq, lost := l.rackLost(c)
		if !lost {
			break
		}
		l.stats.RACKLost++
		if c.txRtx(seq) {
			l.stats.LostRetransmits++
		}
		l.retransmitAt(c, seq)
	}
	if c.rtxUna && !rtxUna {
		// SND.UNA's segment went again: the recovery probe, timed
		// from it, replaces a pending tail loss probe or the RTO
		// (rearmRTO).
		l.rearmRTO(c)
	}
	l.rackLost(c) // the reorder timer for what is not lost yet
}

// txRtx reports whether the byte at seq was last sent as a retransmission.
func (c *tcpConn) txRtx(seq seqnum) bool {
	for _, e := range c.txRecs() {
		if seq.geq(e.l) && seq.lt(e.r) {
			return e.rtx
		}
	}
	return false
}

// prrSent counts n bytes sent in a reduction (prr_out).
func (c *tcpConn) prrSent(n uint32) {
	c.prrOut += n
	c.prrLeft = int32(max(int64(c.prrLeft)-int64(n), 0))
}

// prrWndEnd is where new data must stop in a reduction: as Linux counts
// in whole segments, any sndcnt left lets a full segment go.
func (c *tcpConn) prrWndEnd(seq seqnum) seqnum {
	if c.prrLeft <= 0 {
		return seq
	}
	return seq.add(max(uint32(c.prrLeft), uint32(c.mss)))
}

// prrEnd ends a reduction: "cwnd = ssthresh" (RFC 6937 §3).
func (c *tcpConn) prrEnd() {
	c.prrOn = false
	c.cwnd = c.ssthresh
}
