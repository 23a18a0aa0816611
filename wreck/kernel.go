package wreck

import (
	"bytes"
	"time"

	"golang.org/x/sys/unix"

	"percore/shard"
)

const readBuf = 64 << 10

// kclient is one client shard's connections over kernel sockets: their
// sockets in the shard's epoll (a Source), the writes queued by a batch of
// events (a Poller, run before the shard next waits), and the end of the run
// (a Stopper). Its account (counters, histograms, budget, schedule, timers)
// is embedded.
//
// Owned by the shard's goroutine.
type kclient struct {
	*acct
	sh     *shard.Shard
	src    shard.SourceID
	sa     unix.Sockaddr // this shard's own copy: connect(2) writes into it
	family int
	binder *sourceBinder // nil: the kernel picks the source address

	conns     []conn
	rbuf      []byte // read buffer shared by this shard's conns
	reqLen    int
	seqOff    int     // offset of the sequence digits in a request; -1 without CheckSeq
	pending   []int32 // conns to (re)connect or refill after this batch of events
	paced     []int32 // idle conns waiting for --connect-rate, oldest first from pacedHead
	pacedHead int
	// ready is the open loop's (--rate, keep-alive) open conns with room
	// for a request, each at most once (conn.inReady), least recently used
	// first: dispatch takes a conn in O(1), not a scan of every slot.
	ready  readyRing
	closed bool // every socket closed: the run is over
}

// newKClient builds a's connections to sa on shard sh and registers them
// with it; req is the prebuilt request.
func newKClient(sh *shard.Shard, a *acct, sa unix.Sockaddr, family int, req []byte, seqOff int) *kclient {
	s := &kclient{
		acct: a, sh: sh, sa: ownSockaddr(sa), family: family,
		binder: newSourceBinder(a.cfg.Sources, a.id),
		conns:  make([]conn, a.slots),
		rbuf:   make([]byte, readBuf),
		reqLen: len(req), seqOff: seqOff,
		pending: make([]int32, 0, a.slots),
		paced:   make([]int32, 0, a.slots),
	}
	if a.rate && a.cfg.KeepAlive {
		s.ready = newReadyRing(a.slots)
	}
	k := a.cfg.Pipeline
	shared := bytes.Repeat(req, k)
	for i := range s.conns {
		c := &s.conns[i]
		c.idx, c.fd = int32(i), -1
		c.start, c.sent = make([]int64, k), make([]int64, k)
		c.p.maxHead = a.cfg.headLimit()
		c.req = shared
		if seqOff >= 0 {
			c.req = append([]byte(nil), shared...)
		}
	}
	s.src = sh.AddSource(s)
	sh.AddPoller(s)
	sh.AddStopper(s)
	a.attach(sh, s.tick)
	return s
}

// Poll implements shard.Poller, once per loop iteration: the run begins at
// the first; then the conns queued by the last batch of events connect or
// write (see runPending), and under --rate the requests due go out. The
// shard then sleeps until an event or a timer.
func (s *kclient) Poll(now time.Time) bool {
	s.setNow(now)
	if !s.begun {
		s.begin()
		for i := range s.conns {
			s.fill(&s.conns[i])
		}
	}
	if s.finished {
		s.closeConns()
		return false
	}
	s.runPaced()
	s.runPending()
	if s.rate {
		s.dispatch()
		s.armSend()
	}
	return false
}

// Events implements shard.Source: the epoll events of the conns' sockets.
func (s *kclient) Events(evs []shard.Event, now time.Time) {
	s.setNow(now)
	for i := range evs {
		e := &evs[i]
		c := &s.conns[uint32(e.Token)]
		if c.gen != uint32(e.Token>>32) || c.fd < 0 {
			continue // a socket closed earlier in this batch
		}
		s.event(c, e.Events)
	}
}

// Drain implements shard.Stopper: Run stops the shard, its run ends now.
func (s *kclient) Drain(now time.Time) {
	s.setNow(now)
	s.end()
}

// Drained implements shard.Stopper: nothing to wait for.
func (s *kclient) Drained() bool { return true }

// Close implements shard.Stopper.
func (s *kclient) Close() { s.closeConns() }

// closeConns closes every socket (once, after the run).
func (s *kclient) closeConns() {
	if s.closed {
		return
	}
	s.closed = true
	for i := range s.conns {
		s.closeFd(&s.conns[i])
	}
}

// runPending connects or refills the conns queued since the last call. Conns
// answered in a batch of events write their next requests here, after the
// whole batch was read: the server then finds many connections ready at once
// (as with wrk, whose writes wait for the next loop), which cost nginx 15%
// less CPU per request than writing from inside the read handler.
func (s *kclient) runPending() {
	for len(s.pending) > 0 {
		c := &s.conns[s.pending[len(s.pending)-1]]
		s.pending = s.pending[:len(s.pending)-1]
		c.queued = false
		s.refill(c)
	}
}

// runPaced connects the conns that waited for --connect-rate, as far as it
// allows now.
func (s *kclient) runPaced() {
	for s.pacedHead < len(s.paced) && s.mayConnect() {
		c := &s.conns[s.paced[s.pacedHead]]
		s.pacedHead++
		c.paced = false
		if c.state == cIdle {
			s.dial(c)
		}
	}
	if s.pacedHead > 0 && s.pacedHead >= cap(s.paced)/2 {
		// Reclaim the taken half, so that appends stay within the
		// capacity (every slot is on the list at most once).
		n := copy(s.paced, s.paced[s.pacedHead:])
		s.paced, s.pacedHead = s.paced[:n], 0
	}
}

// event handles one epoll event for c.
func (s *kclient) event(c *conn, ev uint32) {
	gen := c.gen
	if c.state == cConnecting {
		if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		soerr, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil || soerr != 0 {
			s.connectFailed(c)
			return
		}
		s.connected(c)
		// The same edge may already carry the reply or the server's FIN.
	}
	if c.gen != gen || (c.state != cOpen && c.state != cDraining) {
		return
	}
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		s.readable(c, ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0)
	}
	if c.gen == gen && c.state == cOpen && ev&unix.EPOLLOUT != 0 && c.wpos < c.wend {
		if s.flush(c) {
			s.refill(c)
		}
	}
}

// tick enforces timeouts and back-offs, and retunes the nap.
func (s *kclient) tick() {
	timeout := int64(s.cfg.Timeout)
	from, n := s.tickSlots()
	for k := range n {
		c := &s.conns[(from+k)%len(s.conns)]
		switch c.state {
		case cOpen:
			if c.n > 0 && s.now-c.sent[c.head] > timeout {
				s.fail(c, errTimeout)
			}
		case cConnecting:
			if s.now-c.since > timeout {
				s.connectFailed(c)
			}
		case cDraining:
			if s.now-c.since > timeout {
				s.reconnect(c)
			}
		case cWait:
			if s.now >= c.wakeAt {
				c.state = cIdle
				s.queue(c)
			}
		}
	}
	s.retune()
}
