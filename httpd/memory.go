package httpd

// Memory is a budget that a server's input buffers and output arenas are
// charged to, from when they are made until they are dropped (lent to a
// connection or pooled): the shard's, shared with its stack (the native
// stack's netstack.MemBudget has these methods). Under Pressure buffers
// given back are dropped instead of pooled; a request whose input outgrows
// its buffer when TryTake refuses the larger one is answered 503 and its
// connection closed (Stats.MemoryShed).
type Memory interface {
	Take(n int)         // charge n bytes that must be had (a connection's first buffer)
	TryTake(n int) bool // charge n bytes if they fit
	Give(n int)         // return n bytes charged before
	Pressure() bool     // most of the budget is held: hold back
}

// SetMemory charges s's buffers to m from now on; nil: none. Set it before
// the first connection.
func (s *Server) SetMemory(m Memory) { s.mem = m }

// keep reports whether a buffer given back may be pooled: not under
// pressure.
func (s *Server) keep() bool { return s.mem == nil || !s.mem.Pressure() }

// give returns n charged bytes of a buffer that is dropped.
func (s *Server) give(n int) {
	if s.mem != nil && n > 0 {
		s.mem.Give(n)
	}
}

// recharge keeps the charge of a buffer, *charged, at its capacity after
// appends may have grown it.
func (s *Server) recharge(charged *int, b []byte) {
	if d := cap(b) - *charged; d != 0 && s.mem != nil {
		if d > 0 {
			s.mem.Take(d)
		} else {
			s.mem.Give(-d)
		}
	}
	*charged = cap(b)
}
