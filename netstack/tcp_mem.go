package netstack

// Receive buffers and memory pressure. A connection holds a receive buffer
// only while it holds bytes: out-of-order data, or in-order data its app
// has not taken yet. Buffers come from the layer's pools, in two sizes:
// RcvBuf, and a small one (RcvBuf/8, at least 4 MSS) lent under pressure
// to a connection whose advertised window fits in it. Made buffers are
// charged to the shard's MemBudget (TCPConfig.Budget) until dropped.
//
// Under pressure (the budget above 3/4 of its limit, or the link short of
// frames: FramesShort) the layer holds back as Linux does under
// tcp_memory_pressure: no window opens beyond a small buffer's worth (the
// right edge already advertised never moves back), new SYNs get cookies,
// and buffers given back are dropped rather than pooled. At the limit an
// out-of-order segment that needs a buffer is dropped: it was never
// SACKed, so the sender still holds it and sends it again.

// rcvBuffer is a receive buffer of the pool with what only a connection
// that holds bytes needs: its table of out-of-order ranges and the order
// they were received in, lent together.
type rcvBuffer struct {
	rb        []byte              // a ring; appSeq is at rbHead
	rbHead    int                 // index in rb of appSeq
	ooo       []tcpRange          // out-of-order data held in rb, sorted; its capacity comes with rb
	sackHist  [tcpSACKHist]seqnum // a byte of each range most recently received into, newest first (RFC 2018 §4)
	nSACKHist uint8
}

// rcvBufBytes is what a buffer of n bytes costs with its range table.
func rcvBufBytes(n int) int { return n + oooRanges(n)*8 }

// smallRcvBuf is the size of the small buffers and of the window a
// connection opens under pressure.
func (l *tcpLayer) smallRcvBuf() int {
	return min(max(l.cfg.RcvBuf/8, 4*int(l.cfg.MSS)), l.cfg.RcvBuf)
}

// pressure reports whether the layer should hold back memory.
func (l *tcpLayer) pressure() bool {
	return l.framesShort || (l.cfg.Budget != nil && l.cfg.Budget.Pressure())
}

// rcvSpace is the most bytes c may hold from appSeq on: its buffer's size
// while it holds one, RcvBuf otherwise.
func (l *tcpLayer) rcvSpace(c *tcpConn) uint32 {
	if c.rb != nil {
		return uint32(len(c.rb))
	}
	return uint32(l.cfg.RcvBuf)
}

// clampEdge keeps the right edge of c's window within a small buffer of
// RCV.NXT under pressure, never behind the edge already advertised.
func (l *tcpLayer) clampEdge(c *tcpConn, edge seqnum) seqnum {
	if !l.pressure() {
		return edge
	}
	lim := seqMax(c.rcvAdv, c.rcvNxt.add(uint32(l.smallRcvBuf())))
	if edge.gt(lim) {
		l.stats.MemWindowClamped++
		return lim
	}
	return edge
}

// rcvBuf lends c a receive buffer that holds everything up to end and up
// to the window's edge already advertised; false when none can be had
// (the pool is empty, or the budget is spent: counted).
func (l *tcpLayer) rcvBuf(c *tcpConn, end seqnum) bool {
	if c.rb != nil {
		return true
	}
	size := l.cfg.RcvBuf
	if l.pressure() {
		need := seqMax(c.appSeq, seqMax(c.rcvAdv, end)).diff(c.appSeq)
		if small := l.smallRcvBuf(); int(need) <= small {
			size = small
		}
	}
	pool := &l.rbufs
	if size != l.cfg.RcvBuf {
		pool = &l.rbufsSmall
	}
	if len(*pool) == 0 && size != l.cfg.RcvBuf {
		pool = &l.rbufs // a full one pooled costs nothing more
	}
	if n := len(*pool); n > 0 {
		c.rcvBuffer = (*pool)[n-1]
		(*pool)[n-1] = nil
		*pool = (*pool)[:n-1]
	} else if l.rbufsMade < l.cfg.RcvBufs {
		if b := l.cfg.Budget; b != nil && !b.TryTake(rcvBufBytes(size)) {
			l.stats.MemRcvBufRefused++
			return false
		}
		c.rcvBuffer = &rcvBuffer{rb: make([]byte, size), ooo: make([]tcpRange, 0, oooRanges(size))}
		l.rbufsMade++
		l.rbufBytes += rcvBufBytes(size)
	} else {
		return false
	}
	return true
}

// freeRcvBuf takes c's buffer back: into its pool, or dropped (and given
// back to the budget) under pressure.
func (l *tcpLayer) freeRcvBuf(c *tcpConn) {
	b := c.rcvBuffer
	if b.rb == nil {
		return
	}
	c.rcvBuffer = &l.noRcvBuf
	*b = rcvBuffer{rb: b.rb, ooo: b.ooo[:0]}
	switch {
	case l.cfg.Budget != nil && l.cfg.Budget.Pressure():
		n := rcvBufBytes(len(b.rb))
		l.cfg.Budget.Give(n)
		l.rbufBytes -= n
		l.rbufsMade--
		l.stats.MemRcvBufDropped++
	case len(b.rb) == l.cfg.RcvBuf:
		l.rbufs = append(l.rbufs, b)
	default:
		l.rbufsSmall = append(l.rbufsSmall, b)
	}
}

// memSYN reports whether a SYN may take SYN-RECEIVED state: under pressure
// it gets a cookie instead (true, cookie set), and with the budget spent
// it is shed (false, counted).
func (l *tcpLayer) memSYN() (ok, cookie bool) {
	if b := l.cfg.Budget; b != nil && b.limit > 0 && b.used >= b.limit {
		l.stats.MemSynShed++
		return false, false
	}
	if l.pressure() {
		l.stats.MemSynCookies++
		return true, true
	}
	return true, false
}
