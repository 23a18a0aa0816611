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
