package wreck

// The SPECweb99 workload over kernel sockets: each simulated user is one
// connection slot that asks, waits for the answer, checks it, and asks again
// when its bytes so far allow at 400,000 bit/s.

import (
	"crypto/tls"
	"time"

	"golang.org/x/sys/unix"

	"percore/shard"
)

// swUser is one simulated user: its socket (replaced at each new
// connection), its request, the check of its answer and its pacing.
//
// Owned by its shard.
type swUser struct {
	idx   int32
	fd    int
	gen   uint32
	state cstate
	p     parser
	chk   bodyCheck
	carry []byte
	req   []byte // the request being written, rebuilt in place each time
	wpos  int

	cur      swReq
	inFlight bool
	sentAt   int64 // latency origin: the write, or connect start on a new connection
	since    int64 // connect or drain start
	wakeAt   int64 // end of a back-off after an error
	left     int   // requests still to send on this connection, the current one included

	id, lastAd   int   // user id and the last ad the server chose for it
	t0, bytes    int64 // its start and the bytes it has read
	lineAtWarmed int64 // its line's time when the warm-up ended: see lineTime
	timer        shard.Timer

	// --tls (specweb_tls.go): the connection's TLS (nil before its
	// handshake), and the user's own configuration when it resumes.
	sw    *swclient
	tls   *shardTLS
	tconf *tls.Config
}

func (u *swUser) token() uint64 { return uint64(uint32(u.idx)) | uint64(u.gen)<<32 }

// kindCount is one request kind's counts in the measured interval.
type kindCount struct {
	Responses uint64 // well-framed answers
	Invalid   uint64 // of those, answers that failed their check
	Errors    uint64 // requests that got no answer (timeout, reset, close, connect)
}

// swclient is one client shard's users over kernel sockets. Its account
// (acct.go) holds the shard's timers, latency histogram and counters.
//
// Owned by the shard's goroutine; Run reads it after the shards have exited.
type swclient struct {
	*acct
	sh     *shard.Shard
	src    shard.SourceID
	sa     unix.Sockaddr
	family int
	host   string

	users []swUser
	rbuf  []byte
	mix   *swMix
	files *swFiles

	warmup    int64 // ns
	measuring bool
	measureT0 int64
	kinds     [numKinds]kindCount
	classes   [4]uint64 // requests by file class, measured
	closed    bool

	// --tls (specweb_tls.go): the handshakes' mailbox (nil: cleartext),
	// their configuration, and the buffer ciphertext is read into.
	box   *tlsBox
	tconf *tls.Config
	cbuf  []byte
}

// newSwClient builds a's users on sh; user i has id fileset.FirstUser +
// (first+i) % users.
func newSwClient(sh *shard.Shard, a *acct, sa unix.Sockaddr, family int, dirs, users, first int) *swclient {
	cfg := a.cfg
	s := &swclient{
		acct: a, sh: sh, sa: ownSockaddr(sa), family: family, host: cfg.Server,
		users:  make([]swUser, a.slots),
		rbuf:   make([]byte, readBuf),
		mix:    newMix(cfg.Seed, uint64(a.id), dirs, kindShares(cfg.StaticOnly)),
		files:  newSwFiles(dirs),
		warmup: int64(cfg.Warmup),
	}
	for i := range s.users {
		u := &s.users[i]
		u.idx, u.fd, u.sw = int32(i), -1, s
		u.id = firstUserID + (first+i)%users
		u.req = make([]byte, 0, 512)
		u.p.maxHead = defaultMaxHead
		u.p.check = &u.chk
		u.timer.Init(func(now time.Time) { s.setNow(now); s.next(u) })
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
	if !s.begun {
		s.begin()
		for i := range s.users {
			s.users[i].t0 = s.now
		}
		if s.warmup == 0 {
			s.startMeasuring()
		}
		for i := range s.users {
			s.next(&s.users[i])
		}
	}
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
		u := &s.users[i]
		s.closeFd(u)
		if s.sh != nil {
			s.sh.Wheel().Stop(&u.timer)
		}
	}
}

// lineTime is how far u's 400,000 bit/s line has got at now: the time its
// bytes would have taken, from its start, but never ahead of now. A user
// that keeps up is at now (less the answer in flight); one the server
// starves falls behind, at the rate it is served. Its rate over an interval
// is the line time it gained, so bytes read ahead of schedule (a large file
// early) count when the schedule reaches them, and a short run judges the
// server, not the luck of the draws.
func (u *swUser) lineTime(now int64) int64 { return min(pacedAt(u.t0, u.bytes), now) }

// kbps is u's rate in kbit/s between the end of the warm-up and stopped.
func (u *swUser) kbps(from, stopped int64) float64 {
	if stopped <= from {
		return 0
	}
	return userRate / 1e3 * float64(u.lineTime(stopped)-u.lineAtWarmed) / float64(stopped-from)
}

// startMeasuring ends the warm-up: counts start from zero, and each user's
// rate from where its line is now.
func (s *swclient) startMeasuring() {
	s.measuring, s.measureT0 = true, s.now
	s.hist.Reset()
	s.cnt, s.tls = Counters{}, tlsCounts{}
	s.conn.Reset()
	s.kinds, s.classes = [numKinds]kindCount{}, [4]uint64{}
	for i := range s.users {
		s.users[i].lineAtWarmed = s.users[i].lineTime(s.now)
	}
}

// next sends u's next request, on its connection or a new one.
func (s *swclient) next(u *swUser) {
	if s.finished || u.inFlight {
		return
	}
	u.cur = s.mix.draw()
	u.sentAt = s.now
	if u.fd >= 0 && u.state == cOpen {
		s.send(u)
		return
	}
	u.left = 1
	if s.mix.keepAlive() {
		u.left = keepAliveRun
	}
	s.connect(u)
}

// schedule sends u's next request when its pacing allows.
func (s *swclient) schedule(u *swUser) {
	if due := pacedAt(u.t0, u.bytes); due > s.now && s.sh != nil {
		s.sh.Wheel().Start(&u.timer, at(due))
		return
	}
	s.next(u)
}

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

func (s *swclient) connected(u *swUser) {
	if s.box != nil && u.tls == nil {
		s.startTLS(u)
		return
	}
	u.state = cOpen
	s.cnt.Connects++
	u.p.reset()
	u.carry = u.carry[:0]
	s.send(u)
}

// send writes u's current request.
func (s *swclient) send(u *swUser) {
	u.inFlight = true
	u.chk.reset()
	u.req = appendSwRequest(u.req[:0], &u.cur, s.host, u.id, u.lastAd, s.id, u.left == 1)
	u.wpos = 0
	if u.tls != nil {
		s.sendTLS(u)
		return
	}
	s.flush(u)
}

func (s *swclient) flush(u *swUser) {
	for u.wpos < len(u.req) {
		m, err := sysWrite(u.fd, u.req[u.wpos:])
		switch err {
		case nil:
			u.wpos += m
		case unix.EINTR:
		case unix.EAGAIN:
			return // EPOLLOUT resumes
		default:
			s.fail(u, errReset)
			return
		}
	}
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

// parse feeds data to u's parser; it reports false if u's socket was closed.
func (s *swclient) parse(u *swUser, data []byte) bool {
	for off := 0; off < len(data); {
		if !u.inFlight || u.state != cOpen {
			s.fail(u, errMalformed) // bytes nobody asked for
			return false
		}
		m, r := u.p.feed(data[off:])
		off += m
		switch r {
		case pMore:
			u.carry = append(u.carry[:0], data[off:]...)
			return true
		case pDone:
			if !s.complete(u) {
				return false
			}
		case pOversized:
			s.cnt.Oversized++
			s.fail(u, errMalformed)
			return false
		default:
			s.fail(u, errMalformed)
			return false
		}
	}
	return true
}

// complete checks and accounts u's answer; it reports false if u's socket
// was closed.
func (s *swclient) complete(u *swUser) bool {
	s.record(s.now - u.sentAt)
	s.cnt.Responses++
	k := &s.kinds[u.cur.kind]
	k.Responses++
	s.classes[u.cur.class]++
	ok, ad := s.files.check(&u.cur, u.p.status, &u.chk)
	if !ok {
		k.Invalid++
	}
	if u.p.status < 200 || u.p.status > 299 {
		s.cnt.Errors[errNon2xx]++
	}
	if ad >= 0 {
		u.lastAd = ad
	}
	u.inFlight = false
	u.left--
	switch {
	case u.p.close:
		u.state, u.since = cDraining, s.now // wait for the server's FIN: TIME_WAIT stays on its side
		return true
	case u.left <= 0: // asked to close, and the server would not
		s.closeFd(u)
		u.state = cIdle
		s.schedule(u)
		return false
	}
	s.schedule(u)
	return true
}

// eof handles the server closing u's connection.
func (s *swclient) eof(u *swUser) {
	switch {
	case u.inFlight && u.p.st == psUntilClose:
		u.p.st, u.p.close = psHead, true
		if s.complete(u) {
			s.eof(u)
		}
	case u.inFlight:
		s.fail(u, errClosed)
	default: // drained after a last request, or an idle keep-alive connection closed
		s.closeFd(u)
		u.state = cIdle
		if !u.timer.Armed() {
			s.schedule(u)
		}
	}
}

// fail counts an error against the request in flight, closes u's socket and
// backs off before u asks again.
func (s *swclient) fail(u *swUser, cls errClass) {
	s.cnt.Errors[cls]++
	if u.inFlight {
		s.kinds[u.cur.kind].Errors++
	}
	u.inFlight = false
	s.closeFd(u)
	if s.sh != nil {
		s.sh.Wheel().Stop(&u.timer)
	}
	u.state, u.wakeAt = cWait, s.now+int64(connBackoff)
}

func (s *swclient) closeFd(u *swUser) {
	if u.fd >= 0 {
		unix.Close(u.fd)
		u.fd = -1
	}
	u.carry = u.carry[:0]
	if u.tls != nil {
		u.tls.release()
		u.tls = nil
	}
}

// tick ends the warm-up and enforces timeouts and back-offs.
func (s *swclient) tick() {
	if !s.measuring && s.now-s.t0 >= s.warmup {
		s.startMeasuring()
	}
	timeout := int64(s.cfg.Timeout)
	for i := range s.users {
		u := &s.users[i]
		switch u.state {
		case cOpen:
			if u.inFlight && s.now-u.sentAt > timeout {
				s.fail(u, errTimeout)
			}
		case cConnecting, cHandshake:
			if s.now-u.since > timeout {
				if u.state == cHandshake {
					s.tls.failed++
				}
				s.fail(u, errConnect)
			}
		case cDraining:
			if s.now-u.since > timeout {
				s.closeFd(u)
				u.state = cIdle
				s.schedule(u)
			}
		case cWait:
			if s.now >= u.wakeAt {
				u.state = cIdle
				s.schedule(u)
			}
		}
	}
}
