package wreck

// Responses in: read, parse, validate, account, and the errors on the way.

import "golang.org/x/sys/unix"

// readable reads and parses until the socket is drained (or closed).
func (s *kclient) readable(c *conn, hup bool) {
	for {
		k := copy(s.rbuf, c.carry)
		m, err := sysRead(c.fd, s.rbuf[k:])
		if err != nil {
			if err == unix.EAGAIN {
				break
			}
			if err == unix.EINTR {
				continue
			}
			s.fail(c, errReset)
			return
		}
		if m == 0 {
			s.eof(c)
			return
		}
		s.cnt.Bytes += uint64(m)
		c.carry = c.carry[:0]
		if !s.parse(c, s.rbuf[:k+m]) {
			return
		}
		if m < len(s.rbuf)-k && !hup {
			break // drained: edge-triggered epoll reports the next arrival
		}
	}
	if c.state == cOpen {
		s.queue(c) // the next requests go after the whole batch is read: see runPending
	}
}

// parse runs the parser over data; it reports false if c was closed.
func (s *kclient) parse(c *conn, data []byte) bool {
	for off := 0; off < len(data); {
		if c.n == 0 {
			s.fail(c, errMalformed) // bytes nobody asked for
			return false
		}
		m, r := c.p.feed(data[off:])
		off += m
		switch r {
		case pMore:
			c.carry = append(c.carry[:0], data[off:]...)
			return true
		case pDone:
			if !s.complete(c) {
				return false
			}
		case pOversized:
			s.cnt.Oversized++
			s.fail(c, errMalformed)
			return false
		default:
			s.fail(c, errMalformed)
			return false
		}
	}
	return true
}

// complete accounts one response on c; it reports false if c was closed.
func (s *kclient) complete(c *conn) bool {
	if s.seqOff >= 0 {
		if !c.p.hasSeq || c.p.seq != c.seqWant {
			s.fail(c, errMismatch)
			return false
		}
		c.seqWant++
	}
	lat := s.now - c.pop()
	s.record(lat)
	s.cnt.Responses++
	if c.p.status < 200 || c.p.status > 299 {
		s.cnt.Errors[errNon2xx]++
	}
	s.finish()
	switch {
	case !s.cfg.KeepAlive && c.p.close:
		c.state, c.since = cDraining, s.now // wait for the server's FIN, so TIME_WAIT stays on its side
	case !s.cfg.KeepAlive, c.p.close: // one-shot with a server that would keep the connection: close it ourselves
		s.reconnect(c)
		return false
	}
	return true
}

// eof handles the server closing c.
func (s *kclient) eof(c *conn) {
	switch {
	case c.state == cDraining:
		s.reconnect(c)
	case c.p.st == psUntilClose && c.n > 0:
		c.p.st = psHead
		c.p.close = true
		if s.complete(c) { // one-shot: now draining
			s.reconnect(c)
		}
	case c.n > 0 || c.p.midResponse(len(c.carry)):
		s.fail(c, errClosed)
	default:
		s.reconnect(c) // an idle keep-alive connection closed by the server
	}
}

// fail counts an error of class cls; the oldest request in flight (if any) is
// the one that failed, the others are given back. c is closed and reconnects.
func (s *kclient) fail(c *conn, cls errClass) {
	s.cnt.Errors[cls]++
	if c.n > 0 {
		c.pop()
		s.finish()
	}
	s.reconnect(c)
}
