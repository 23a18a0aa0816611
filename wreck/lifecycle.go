package wreck

// A connection slot's sockets: connect, connected, close and reconnect.

import "golang.org/x/sys/unix"

// connect starts connecting c now, or once --connect-rate allows (in the
// order asked).
func (s *kclient) connect(c *conn) {
	if c.paced {
		return
	}
	if s.pacedHead < len(s.paced) || !s.mayConnect() {
		c.paced = true
		s.paced = append(s.paced, c.idx)
		return
	}
	s.dial(c)
}

// dial opens a non-blocking socket for c and starts connecting.
func (s *kclient) dial(c *conn) {
	fd, err := unix.Socket(s.family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		s.connectFailed(c)
		return
	}
	c.fd, c.since = fd, s.now
	if s.binder != nil && s.binder.bind(fd) != nil {
		s.connectFailed(c)
		return
	}
	c.gen = (c.gen + 1) & genMask
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	c.outOn = true
	if err := s.sh.AddFD(fd, evWrite, s.src, c.token()); err != nil {
		s.connectFailed(c)
		return
	}
	switch err := unix.Connect(fd, s.sa); err {
	case nil:
		s.connected(c)
	case unix.EINPROGRESS:
		c.state = cConnecting
	default:
		s.connectFailed(c)
	}
}

// connectFailed counts a failed connect and backs off; a one-shot request
// waiting for the connection is given back.
func (s *kclient) connectFailed(c *conn) {
	s.cnt.Errors[errConnect]++
	s.drop(c)
	c.state, c.wakeAt = cWait, s.now+int64(connBackoff)
}

// connected starts the request flow on a fresh connection.
func (s *kclient) connected(c *conn) {
	c.state = cOpen
	s.recordConnect(c.since)
	c.p.reset()
	c.carry = c.carry[:0]
	c.seqWant = c.seqSent
	if s.cfg.KeepAlive {
		s.watchOut(c, false)
		s.refill(c)
		return
	}
	c.sent[c.head] = s.now
	s.write(c, 1)
}

// reconnect closes c and queues it to connect again after this batch of events.
func (s *kclient) reconnect(c *conn) {
	s.drop(c)
	s.queue(c)
}

// queue puts c on the pending list (once).
func (s *kclient) queue(c *conn) {
	if !c.queued {
		c.queued = true
		s.pending = append(s.pending, c.idx)
	}
}

// drop closes c's socket and gives back its requests in flight.
func (s *kclient) drop(c *conn) {
	for c.n > 0 {
		s.giveBack(c.pop())
	}
	s.closeFd(c)
	c.state = cIdle
	c.head, c.wpos, c.wend = 0, 0, 0
	c.carry = c.carry[:0]
}

func (s *kclient) closeFd(c *conn) {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}
