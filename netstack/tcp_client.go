package netstack

import "time"

// Calls a client (a load generator) makes on connections it opened with
// ConnectTCP, from outside a segment batch, by handle. A handle of a
// connection that is gone is ignored.

// TCPEstablished reports whether h's connection has completed its
// handshake (it is in a synchronized state: ESTABLISHED or a closing state
// after it). False in SYN-SENT and once the connection is gone.
func (s *Stack) TCPEstablished(h TCPHandle) bool {
	c := s.tcpConnOf(h)
	return c != nil && c.state >= tcpEstablished
}

// AbortTCP resets h's connection: RST to the peer, the TCB deleted, and the
// app released (TCPEndpoint.Release runs before AbortTCP returns). The RST
// is submitted on link; the next Poll flushes it. For a client that gives
// up on a connection (a malformed response, a timeout).
func (s *Stack) AbortTCP(now time.Time, link Link, h TCPHandle) {
	if s.tcpConnOf(h) == nil {
		return
	}
	s.withTx(now, link, func(l *tcpLayer) {
		c := l.conns[h.id]
		if c.state != tcpSynSent {
			l.sendReset(c)
		}
		l.closeConn(c)
	})
}

// tcpConnOf returns h's live TCB, or nil.
func (s *Stack) tcpConnOf(h TCPHandle) *tcpConn {
	l := s.tcp
	if l == nil || h.gen == 0 || int(h.id) >= len(l.conns) {
		return nil
	}
	c := l.conns[h.id]
	if c == nil || c.gen != h.gen || c.state == tcpClosed {
		return nil
	}
	return c
}
