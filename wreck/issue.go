package wreck

// Requests out: the budget, the open-loop schedule, and writes.

import "golang.org/x/sys/unix"

// room reports whether the budget allows another request.
func (s *shard) room() bool { return s.budget < 0 || s.issued < s.budget }

// take returns the latency origin of the next request, if one may go now.
func (s *shard) take() (int64, bool) {
	if !s.room() {
		return 0, false
	}
	if !s.rate {
		s.issued++
		return s.now, true
	}
	var t int64
	if s.rqN > 0 {
		t = s.requeue[s.rqHead]
		s.rqHead++
		if s.rqHead == len(s.requeue) {
			s.rqHead = 0
		}
		s.rqN--
	} else {
		if t = s.t0 + int64(float64(s.next)*s.iv); t > s.now {
			return 0, false
		}
		s.next++
	}
	s.issued++
	recordNs(s.lag, s.now-t) // how late the client itself is: part of the latency
	return t, true
}

// backlog reports whether a request is due and not yet on a connection.
func (s *shard) backlog() bool {
	return s.room() && (s.rqN > 0 || s.t0+int64(float64(s.next)*s.iv) <= s.now)
}

// giveBack returns an abandoned request (latency origin t) to be taken again.
func (s *shard) giveBack(t int64) {
	s.issued--
	if s.rate {
		i := s.rqHead + s.rqN
		if i >= len(s.requeue) {
			i -= len(s.requeue)
		}
		s.requeue[i] = t
		s.rqN++
	}
}

// dispatch puts due requests (--rate) on connections with room, scanning from
// the cursor; a full scan without room marks the shard saturated until a
// connection frees a slot.
func (s *shard) dispatch() {
	if s.saturated || !s.backlog() {
		return
	}
	for range s.conns {
		c := &s.conns[s.cursor]
		s.cursor++
		if s.cursor == len(s.conns) {
			s.cursor = 0
		}
		s.fill(c)
		if !s.backlog() {
			return
		}
	}
	s.saturated = true
}

// refill issues what c can take and, under --rate, notes that c has room left.
func (s *shard) refill(c *conn) {
	s.fill(c)
	if s.rate && s.hasRoom(c) {
		s.saturated = false
	}
}

func (s *shard) hasRoom(c *conn) bool {
	if s.cfg.KeepAlive {
		return c.state == cOpen && c.n < s.cfg.Pipeline && c.wpos == c.wend
	}
	return c.state == cIdle
}

// fill connects an idle slot, or writes as many requests as c has room for.
func (s *shard) fill(c *conn) {
	if s.finished {
		return
	}
	switch c.state {
	case cIdle:
		if !s.cfg.KeepAlive {
			t, ok := s.take()
			if !ok {
				return
			}
			c.push(t, s.now)
		}
		s.connect(c)
	case cOpen:
		if !s.cfg.KeepAlive || c.wpos < c.wend {
			return
		}
		// Closed loop: the next batch of Pipeline requests goes out in one
		// write once the last is answered (as wrk's pipeline script and
		// TechEmpower's plaintext test do), so the server can batch too.
		// Topping up one request per response instead let nginx see one
		// request per read: no faster than no pipelining at all.
		if c.n > 0 && !s.rate {
			return
		}
		k := 0
		for c.n < s.cfg.Pipeline {
			t, ok := s.take()
			if !ok {
				break
			}
			c.push(t, s.now)
			k++
		}
		if k > 0 {
			s.write(c, k)
		}
	}
}

// write sends k prebuilt requests (stamped with sequence numbers if asked).
func (s *shard) write(c *conn, k int) {
	if s.seqOff >= 0 {
		for i := range k {
			stampSeq(c.req[i*s.reqLen+s.seqOff:], c.seqSent)
			c.seqSent++
		}
	}
	c.wpos, c.wend = 0, k*s.reqLen
	s.flush(c)
}

// flush writes what is pending; it reports false if the connection failed.
func (s *shard) flush(c *conn) bool {
	for c.wpos < c.wend {
		m, err := sysWrite(c.fd, c.req[c.wpos:c.wend])
		if err != nil {
			if err == unix.EAGAIN {
				s.watchOut(c, true) // EPOLLOUT resumes
				return true
			}
			if err == unix.EINTR {
				continue
			}
			s.fail(c, errReset)
			return false
		}
		c.wpos += m
	}
	c.wpos, c.wend = 0, 0
	if s.cfg.KeepAlive {
		s.watchOut(c, false)
	}
	return true
}

// Epoll interest. EPOLLOUT stays off on keep-alive connections unless a write
// is cut short: edge-triggered, it would report every ACK that frees send
// buffer space, a wake-up per request batch for nothing. A one-shot
// connection keeps it (its connect needs it, and a MOD would cost a syscall
// per request).
const (
	evRead  = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET
	evWrite = evRead | unix.EPOLLOUT
)

func (s *shard) watchOut(c *conn, on bool) {
	if c.outOn == on {
		return
	}
	c.outOn = on
	ev := unix.EpollEvent{Events: evRead, Fd: c.idx, Pad: c.gen}
	if on {
		ev.Events = evWrite
	}
	unix.EpollCtl(s.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev)
}
