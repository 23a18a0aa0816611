package wreck

// The SPECweb99 users over kernel sockets: swclient is their transport, a
// nonblocking socket per user on the shard's epoll.

import (
	"crypto/tls"
	"time"

	"golang.org/x/sys/unix"

	"percore/shard"
)

// swclient is one client shard's users over kernel sockets (swTransport).
//
// Owned by the shard's goroutine; Run reads it after the shards have exited.
type swclient struct {
	*swUsers
	sh     *shard.Shard
	src    shard.SourceID
	sa     unix.Sockaddr
	family int

	rbuf   []byte
	closed bool

	// --tls (specweb_tls.go): the handshakes' mailbox (nil: cleartext),
	// their configuration, and the buffer ciphertext is read into.
	box   *tlsBox
	tconf *tls.Config
	cbuf  []byte
}

// newSwClient builds a's users on sh; user i has id fileset.FirstUser +
// (first+i) % users.
func newSwClient(sh *shard.Shard, a *acct, sa unix.Sockaddr, family int, dirs, users, first int) *swclient {
	s := &swclient{sh: sh, sa: ownSockaddr(sa), family: family, rbuf: make([]byte, readBuf)}
	s.swUsers = newSwUsers(a, s, a.slots, dirs, users, first, uint64(a.id))
	for i := range s.users {
		s.users[i].sw = s
	}
	if sh != nil {
		s.src = sh.AddSource(s)
		sh.AddPoller(s)
		sh.AddStopper(s)
		a.attach(sh, s.tick)
	}
	return s
}

// Poll implements shard.Poller: every user starts at the first iteration.
func (s *swclient) Poll(now time.Time) bool {
	s.setNow(now)
	s.start()
	if s.finished {
		s.closeAll()
	}
	return false
}

// Events implements shard.Source.
func (s *swclient) Events(evs []shard.Event, now time.Time) {
	s.setNow(now)
	for i := range evs {
		e := &evs[i]
		u := &s.users[uint32(e.Token)]
		if u.gen != uint32(e.Token>>32) || u.fd < 0 {
			continue // a socket closed earlier in this batch
		}
		s.event(u, e.Events)
	}
}

// Drain implements shard.Stopper: the run ends now.
func (s *swclient) Drain(now time.Time) { s.setNow(now); s.end() }

// Drained implements shard.Stopper.
func (s *swclient) Drained() bool { return true }

// Close implements shard.Stopper.
func (s *swclient) Close() {
	s.closeAll()
	if s.box != nil {
		s.box.close() // every handshake's helper ends
	}
}

func (s *swclient) closeAll() {
	if s.closed {
		return
	}
	s.closed = true
	for i := range s.users {
		s.closeFd(&s.users[i])
	}
	s.stopTimers()
}

// dial implements swTransport: a nonblocking connect.
func (s *swclient) dial(u *swUser) { s.connect(u) }

func (s *swclient) connect(u *swUser) {
	u.inFlight = true // the drawn request waits for the connection
	fd, err := unix.Socket(s.family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		s.fail(u, errConnect)
		return
	}
	u.fd, u.since = fd, s.now
	u.gen = (u.gen + 1) & genMask
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := s.sh.AddFD(fd, evWrite, s.src, u.token()); err != nil {
		s.fail(u, errConnect)
		return
	}
	switch err := unix.Connect(fd, s.sa); err {
	case nil:
		s.connected(u)
	case unix.EINPROGRESS:
		u.state = cConnecting
	default:
		s.fail(u, errConnect)
	}
}

// connected starts a connected user's TLS handshake (--tls), or, once it
// is done or without TLS, its request.
func (s *swclient) connected(u *swUser) {
	if s.box != nil && u.tls == nil {
		s.startTLS(u)
		return
	}
	s.swUsers.connected(u)
}

// write implements swTransport.
func (s *swclient) write(u *swUser) {
	if u.tls != nil {
		s.sendTLS(u)
		return
	}
	s.flush(u)
}

// hangUp implements swTransport.
func (s *swclient) hangUp(u *swUser) { s.closeFd(u) }

// drop implements swTransport.
func (s *swclient) drop(u *swUser) { s.closeFd(u) }

func (s *swclient) flush(u *swUser) {
	m, err := writeOut(u.fd, u.req[u.wpos:])
	u.wpos += m
	if err != nil {
		s.fail(u, errReset)
	} // else all written, or EPOLLOUT resumes
}

func (s *swclient) event(u *swUser, ev uint32) {
	gen := u.gen
	if u.state == cConnecting {
		if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		soerr, err := unix.GetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil || soerr != 0 {
			s.fail(u, errConnect)
			return
		}
		s.connected(u)
	}
	if u.gen != gen || u.fd < 0 {
		return
	}
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		s.readable(u, ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0)
	}
	if u.gen == gen && u.fd >= 0 && ev&unix.EPOLLOUT != 0 && u.tls != nil {
		s.flushTLS(u)
	} else if u.gen == gen && u.fd >= 0 && u.state == cOpen && ev&unix.EPOLLOUT != 0 && u.inFlight && u.wpos < len(u.req) {
		s.flush(u)
	}
}

// readable reads and parses until the socket is drained or closed.
func (s *swclient) readable(u *swUser, hup bool) {
	if u.tls != nil {
		s.readableTLS(u, hup)
		return
	}
	gen := u.gen
	for u.gen == gen && u.fd >= 0 {
		k := copy(s.rbuf, u.carry)
		m, err := sysRead(u.fd, s.rbuf[k:])
		if err != nil {
			if err == unix.EAGAIN {
				return
			}
			if err == unix.EINTR {
				continue
			}
			s.fail(u, errReset)
			return
		}
		if m == 0 {
			s.eof(u)
			return
		}
		u.bytes += int64(m)
		s.cnt.Bytes += uint64(m)
		u.carry = u.carry[:0]
		if !s.parse(u, s.rbuf[:k+m]) {
			return
		}
		if m < len(s.rbuf)-k && !hup {
			return // drained: edge-triggered epoll reports the next arrival
		}
	}
}

func (s *swclient) closeFd(u *swUser) {
	if u.fd >= 0 {
		unix.Close(u.fd)
		u.fd = -1
	}
	u.carry = u.carry[:0]
	if u.tls != nil {
		u.tls.Release()
		u.tls = nil
	}
}
