package wreck

// The SPECweb99 users, whatever carries their bytes: each simulated user is
// one connection slot that asks, waits for the answer, checks it, and asks
// again when its bytes so far allow at 400,000 bit/s. A transport opens,
// writes and closes the connections: kernel sockets (swclient) or the
// userspace stack (nswclient).

import (
	"crypto/tls"
	"time"

	"percore/internal/shardtls"
	"percore/shard"
)

// swTransport carries the users' connections. The users (swUsers) call it;
// it calls them back: connected once a connection opens, parse with the
// bytes that arrive, eof when the server closes, fail on an error. Called
// on the shard's goroutine only, once per connection or request.
type swTransport interface {
	// dial opens a new connection for u, whose request is drawn.
	dial(u *swUser)
	// write sends u.req on u's open connection.
	write(u *swUser)
	// hangUp closes u's connection cleanly: the user is done with it.
	hangUp(u *swUser)
	// drop abandons u's connection after an error.
	drop(u *swUser)
}

// swUser is one simulated user: its connection's state, its request, the
// check of its answer and its pacing. fd, gen and the TLS fields are the
// kernel transport's; the native one keeps its own per user (nswConn).
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
	wpos  int    // bytes of req written (kernel) or acknowledged (native)

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

	// The kernel transport's --tls (specweb_tls.go): the connection's TLS
	// (nil before its handshake), and the user's own configuration when it
	// resumes.
	sw    *swclient
	tls   *shardtls.Conn
	tconf *tls.Config
}

func (u *swUser) token() uint64 { return uint64(uint32(u.idx)) | uint64(u.gen)<<32 }

// kindCount is one request kind's counts in the measured interval.
type kindCount struct {
	Responses uint64 // well-framed answers
	Invalid   uint64 // of those, answers that failed their check
	Errors    uint64 // requests that got no answer (timeout, reset, close, connect)
}

// swUsers is a set of users on one shard (on the native stack, on one of
// its queues) and what they count. Its account (acct.go) holds the shard's
// timers, latency histogram and counters; several sets on one shard share
// it.
//
// Owned by the shard's goroutine; Run reads it after the shards have exited.
type swUsers struct {
	*acct
	t     swTransport
	host  string
	users []swUser
	mix   *swMix
	files *swFiles

	started   bool
	warmup    int64 // ns
	measuring bool
	measureT0 int64
	kinds     [numKinds]kindCount
	classes   [4]uint64 // requests by file class, measured
}

// newSwUsers builds n users on a's shard; user i has id fileset.FirstUser +
// (first+i) % users, and the set draws from the seed's stream.
func newSwUsers(a *acct, t swTransport, n, dirs, users, first int, stream uint64) *swUsers {
	cfg := a.cfg
	s := &swUsers{
		acct: a, t: t, host: cfg.Server,
		users:  make([]swUser, n),
		mix:    newMix(cfg.Seed, stream, dirs, kindShares(cfg.StaticOnly)),
		files:  newSwFiles(dirs),
		warmup: int64(cfg.Warmup),
	}
	for i := range s.users {
		u := &s.users[i]
		u.idx, u.fd = int32(i), -1
		u.id = firstUserID + (first+i)%users
		u.req = make([]byte, 0, 512)
		u.p.maxHead = defaultMaxHead
		u.p.check = &u.chk
		u.timer.Init(func(now time.Time) { s.setNow(now); s.next(u) })
	}
	return s
}

// maxRamp bounds the ramp-up: users start spread over half the warm-up,
// at most this long, so that thousands do not connect and ask in one burst.
const maxRamp = time.Second

// start begins the users, once, at the run's first iteration: user i of n
// at i/n of the ramp-up, its pacing counted from there.
func (s *swUsers) start() {
	if s.started {
		return
	}
	s.started = true
	if !s.begun {
		s.begin()
	}
	ramp := min(s.warmup/2, int64(maxRamp))
	if s.sh == nil {
		ramp = 0 // no wheel to wait on (tests drive the users by hand)
	}
	for i := range s.users {
		s.users[i].t0 = s.now + ramp*int64(i)/int64(len(s.users))
	}
	if s.warmup == 0 {
		s.startMeasuring()
	}
	for i := range s.users {
		s.schedule(&s.users[i])
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
func (s *swUsers) startMeasuring() {
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
func (s *swUsers) next(u *swUser) {
	if s.finished || u.inFlight {
		return
	}
	u.cur = s.mix.draw()
	u.sentAt = s.now
	if u.state == cOpen {
		s.send(u)
		return
	}
	u.left = 1
	if s.mix.keepAlive() {
		u.left = keepAliveRun
	}
	u.inFlight = true // the drawn request waits for the connection
	u.state, u.since = cConnecting, s.now
	s.t.dial(u)
}

// schedule sends u's next request when its pacing allows.
func (s *swUsers) schedule(u *swUser) {
	if due := pacedAt(u.t0, u.bytes); due > s.now && s.sh != nil {
		s.sh.Wheel().Start(&u.timer, at(due))
		return
	}
	s.next(u)
}

// connected starts u's request on its new connection.
func (s *swUsers) connected(u *swUser) {
	u.state = cOpen
	s.cnt.Connects++
	u.p.reset()
	u.carry = u.carry[:0]
	s.send(u)
}

// send writes u's current request.
func (s *swUsers) send(u *swUser) {
	u.inFlight = true
	u.chk.reset()
	u.req = appendSwRequest(u.req[:0], &u.cur, s.host, u.id, u.lastAd, s.id, u.left == 1)
	u.wpos = 0
	s.t.write(u)
}

// received counts n bytes read on u's connection.
func (s *swUsers) received(u *swUser, n int) {
	u.bytes += int64(n)
	s.cnt.Bytes += uint64(n)
}

// parse feeds data to u's parser; an incomplete head stays in u.carry. It
// reports false if u's connection was closed.
func (s *swUsers) parse(u *swUser, data []byte) bool {
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

// complete checks and accounts u's answer; it reports false if u's
// connection was closed.
func (s *swUsers) complete(u *swUser) bool {
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
		s.hangUp(u)
		s.schedule(u)
		return false
	}
	s.schedule(u)
	return true
}

// eof handles the server closing u's connection.
func (s *swUsers) eof(u *swUser) {
	switch {
	case u.inFlight && u.state == cOpen && u.p.st == psUntilClose:
		u.p.st, u.p.close = psHead, true
		if s.complete(u) {
			s.eof(u)
		}
	case u.inFlight:
		s.fail(u, errClosed)
	default: // drained after a last request, or an idle keep-alive connection closed
		s.hangUp(u)
		if !u.timer.Armed() {
			s.schedule(u)
		}
	}
}

// hangUp closes u's connection cleanly; u is idle.
func (s *swUsers) hangUp(u *swUser) {
	s.t.hangUp(u)
	u.carry = u.carry[:0]
	u.state = cIdle
}

// fail counts an error against the request in flight, drops u's connection
// and backs off before u asks again.
func (s *swUsers) fail(u *swUser, cls errClass) {
	s.cnt.Errors[cls]++
	if u.inFlight {
		s.kinds[u.cur.kind].Errors++
	}
	u.inFlight = false
	u.state, u.wakeAt = cWait, s.now+int64(connBackoff)
	s.t.drop(u)
	u.carry = u.carry[:0]
	if s.sh != nil {
		s.sh.Wheel().Stop(&u.timer)
	}
}

// tick ends the warm-up, enforces timeouts and back-offs, and retunes the
// nap: answers take milliseconds, so waking for each frame burst costs more
// than a nap of a fraction of that delays them.
func (s *swUsers) tick() {
	if !s.measuring && s.now-s.t0 >= s.warmup {
		s.startMeasuring()
	}
	s.retune()
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
			if s.now-u.since > timeout { // the server never closed: nothing to count
				s.t.drop(u)
				u.carry = u.carry[:0]
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

// stopTimers stops every user's pacing timer: the run is over.
func (s *swUsers) stopTimers() {
	if s.sh == nil {
		return
	}
	for i := range s.users {
		s.sh.Wheel().Stop(&s.users[i].timer)
	}
}
