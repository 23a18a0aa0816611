package netstack

// The receiver side: segment text into the app or the reassembly buffer
// (RFC 9293 3.10.7.4 step seven) and delivery under back-pressure.

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
			l.noteDSACK(c, seq, seq.add(uint32(len(p))))
			c.ackNow = true
			return
		}
		l.noteDSACK(c, seq, c.rcvNxt)
		p, seq = p[d:], c.rcvNxt
	}
	edge := c.appSeq.add(l.rcvSpace(c))
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
		if !l.rcvBuf(c, seq.add(uint32(len(p)))) || !seq.add(uint32(len(p))).leq(c.appSeq.add(uint32(len(c.rb)))) {
			l.stats.OOODrop++ // the buffer always holds it (rcvBuf); the test only keeps copyIn in bounds
			return
		}
		r := tcpRange{seq, seq.add(uint32(len(p)))}
		if i := c.oooAt(seq); i >= 0 && c.ooo[i].r.geq(r.r) {
			l.noteDSACK(c, r.l, r.r) // held already
		}
		if len(c.ooo) == cap(c.ooo) && !touchesAny(c.ooo, r) {
			// No room for another range. Never drop one already
			// held: it was SACKed, and the sender may have freed it
			// (RFC 2018 §8 calls that reneging). Refuse the new
			// segment instead; it was never SACKed and comes again.
			l.stats.OOOFull++
			l.stats.OOODrop++
			return
		}
		c.ooo = c.ooo[:addRange(c.ooo[:cap(c.ooo)], len(c.ooo), r)]
		c.noteSACK(seq)
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
			if !l.rcvBuf(c, c.rcvNxt) {
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
	if len(c.ooo) > 0 {
		// Filling a hole: ACK at once (RFC 5681 4.2).
		c.ackNow = true
		j := 0
		for _, r := range c.ooo {
			if r.l.leq(c.rcvNxt) {
				c.rcvNxt = seqMax(c.rcvNxt, r.r)
				continue
			}
			c.ooo[j] = r
			j++
		}
		c.ooo = c.ooo[:j]
	}
	if c.finPend && c.rcvNxt == c.rcvFin {
		c.finPend = false
		l.finArrived(c, c.rcvFin)
	}
	l.deliver(c, false)
}

// dropHeldFrom forgets out-of-order data held at or beyond seq, where the
// peer's FIN says its data ends: a peer that sent text past its own FIN
// is confused or hostile, and what it sent there is void. Linux's tcp_fin
// purges its out-of-order queue likewise.
func (c *tcpConn) dropHeldFrom(seq seqnum) {
	j := 0
	for _, r := range c.ooo {
		if r.l.lt(seq) {
			r.r = seqMin(r.r, seq)
			c.ooo[j] = r
			j++
		}
	}
	c.ooo = c.ooo[:j]
}

// touchesAny reports whether r overlaps or touches one of the ranges rs,
// so that adding it needs no new range.
func touchesAny(rs []tcpRange, r tcpRange) bool {
	for _, x := range rs {
		if !x.r.lt(r.l) && !r.r.lt(x.l) {
			return true
		}
	}
	return false
}

// oooAt returns the index of the held range that contains seq, or -1.
func (c *tcpConn) oooAt(seq seqnum) int {
	lo, hi := 0, len(c.ooo)
	for lo < hi {
		m := (lo + hi) / 2
		switch {
		case seq.lt(c.ooo[m].l):
			hi = m
		case !seq.lt(c.ooo[m].r):
			lo = m + 1
		default:
			return m
		}
	}
	return -1
}

// noteSACK records that data at seq just arrived out of order: its range
// goes first in the next SACK option, the ranges received into before it
// follow, newest first, as RFC 2018 §4 orders the blocks. A range that
// merged into seq's one leaves the history.
func (c *tcpConn) noteSACK(seq seqnum) {
	at := c.oooAt(seq)
	h := [tcpSACKHist]seqnum{seq}
	n := 1
	for _, s := range c.sackHist[:c.nSACKHist] {
		if i := c.oooAt(s); i >= 0 && i != at && n < len(h) {
			h[n] = s
			n++
		}
	}
	c.sackHist, c.nSACKHist = h, uint8(n)
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
	if c.appSeq == end && len(c.ooo) == 0 {
		l.freeRcvBuf(c)
	}
	if c.finRcvd && !c.peerFed && c.appSeq == c.rcvFin && c.app != nil {
		c.peerFed = true
		c.app.PeerClosed(l.nowT)
	}
	if update {
		w := l.rcvSpace(c)
		step := min(w/2, uint32(l.cfg.MSS))
		if c.rcvAdv.add(step).leq(c.appSeq.add(w)) {
			c.ackNow = true // window update
		}
	}
}
