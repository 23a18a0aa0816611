package wreck

// Requests out on kernel sockets: the open-loop dispatch and writes (the
// budget and the schedule are the account's, acct.go).

import "golang.org/x/sys/unix"

// dispatch puts due requests (--rate) on connections with room: keep-alive,
// the ready ring's; one-shot, idle slots found scanning from the cursor. No
// room marks the shard saturated until a connection frees room.
func (s *kclient) dispatch() {
	if s.saturated || !s.backlog() {
		return
	}
	if s.cfg.KeepAlive {
		s.dispatchReady()
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

// dispatchReady puts due requests on the ready ring's connections, each
// going back to the ring's end while it has room for more, so that the
// load spreads over all of them.
func (s *kclient) dispatchReady() {
	for s.backlog() {
		if s.ready.n == 0 {
			s.saturated = true
			return
		}
		c := &s.conns[s.ready.pop()]
		c.inReady = false
		if !s.hasRoom(c) {
			continue // closed since it was offered: offered again once open
		}
		s.fill(c)
		s.offer(c)
	}
}

// refill issues what c can take and, under --rate, offers it if it has
// room left.
func (s *kclient) refill(c *conn) {
	s.fill(c)
	if !s.rate {
		return
	}
	if s.cfg.KeepAlive {
		s.offer(c)
	} else if s.hasRoom(c) {
		s.saturated = false
	}
}

// offer puts c on the ready ring if it is open with room for a request
// (open loop, keep-alive).
func (s *kclient) offer(c *conn) {
	if c.inReady || !s.hasRoom(c) {
		return
	}
	s.ready.push(c.idx)
	c.inReady = true
	s.saturated = false
}

func (s *kclient) hasRoom(c *conn) bool {
	if s.cfg.KeepAlive {
		return c.state == cOpen && c.n < s.cfg.Pipeline && c.wpos == c.wend
	}
	return c.state == cIdle
}

// fill connects an idle slot, or writes as many requests as c has room for.
func (s *kclient) fill(c *conn) {
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
func (s *kclient) write(c *conn, k int) {
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
func (s *kclient) flush(c *conn) bool {
	m, err := writeOut(c.fd, c.req[c.wpos:c.wend])
	c.wpos += m
	if err != nil {
		s.fail(c, errReset)
		return false
	}
	if c.wpos < c.wend {
		s.watchOut(c, true) // EPOLLOUT resumes
		return true
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

func (s *kclient) watchOut(c *conn, on bool) {
	if c.outOn == on {
		return
	}
	c.outOn = on
	ev := uint32(evRead)
	if on {
		ev = evWrite
	}
	s.sh.ModifyFD(c.fd, ev, s.src, c.token())
}
