package wreck

import (
	"fmt"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"
)

const (
	tick        = 10 * time.Millisecond // timeouts, back-offs, progress and the stop flag are checked this often
	connBackoff = 10 * time.Millisecond // wait after a failed connect before the next
	readBuf     = 64 << 10
	timerIdx    = -1 // epoll data of the --rate timerfd
)

// epoch is the origin of mono.
var epoch = time.Now()

// mono is monotonic nanoseconds since epoch (the vDSO clock; no allocation).
func mono() int64 { return int64(time.Since(epoch)) }

// shard is one client shard: its connections, its epoll, its counters and its
// latency histogram. Owned by the goroutine (pinned thread) that runs it; Run
// reads cnt and hist only after that goroutine is done, and pub at any time.
type shard struct {
	id     int
	cfg    *Config       // read-only, shared by all shards
	sa     unix.Sockaddr // this shard's own copy: connect(2) writes into it
	family int

	epfd, tfd int
	ev        []unix.EpollEvent
	conns     []conn
	rbuf      []byte // read buffer shared by this shard's conns
	tbuf      [8]byte
	reqLen    int
	seqOff    int     // offset of the sequence digits in a request; -1 without CheckSeq
	retry     []int32 // conns to (re)connect or refill at the top of the next loop

	hist *hdrhistogram.Histogram
	cnt  Counters
	pub  published

	now, end int64
	stop     *atomic.Bool

	// Requests: budget is what this shard completes before it stops (<0: no
	// cap); issued counts requests taken (in flight or done); done counts those
	// answered or failed. Requests abandoned on a closed connection are given
	// back (issued--) and taken again.
	budget, issued, done int64
	finished             bool

	// Open loop (--rate): request i is intended at t0 + i*iv. requeue holds the
	// intended times of abandoned requests, taken before new ones.
	rate      bool
	t0        int64
	iv        float64
	next      int64
	requeue   []int64
	rqHead    int
	rqN       int
	saturated bool  // the last scan found no conn with room
	cursor    int   // where the next dispatch scan starts
	timerAt   int64 // deadline the timerfd is armed for (0: none)

	nextTick int64
	stopped  int64 // when the loop ended
}

// newShard builds shard id with conns connections; req is the prebuilt request.
func newShard(id int, cfg *Config, sa unix.Sockaddr, family, conns int, budget int64, req []byte, seqOff int, stop *atomic.Bool) (*shard, error) {
	s := &shard{
		id: id, cfg: cfg, sa: ownSockaddr(sa), family: family,
		epfd: -1, tfd: -1,
		ev:     make([]unix.EpollEvent, 256),
		conns:  make([]conn, conns),
		rbuf:   make([]byte, readBuf),
		reqLen: len(req), seqOff: seqOff,
		retry:  make([]int32, 0, conns),
		hist:   newHist(),
		stop:   stop,
		budget: budget,
		rate:   cfg.Rate > 0,
	}
	k := cfg.Pipeline
	shared := make([]byte, 0, k*len(req))
	for range k {
		shared = append(shared, req...)
	}
	for i := range s.conns {
		c := &s.conns[i]
		c.idx, c.fd = int32(i), -1
		c.start, c.sent = make([]int64, k), make([]int64, k)
		c.p.maxHead = cfg.MaxHead
		if c.p.maxHead == 0 {
			c.p.maxHead = defaultMaxHead
		}
		c.req = shared
		if seqOff >= 0 {
			c.req = append([]byte(nil), shared...)
		}
	}
	var err error
	if s.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("create epoll: %w", err)
	}
	if s.rate {
		s.iv = float64(time.Second) * float64(cfg.SMP) / cfg.Rate
		s.requeue = make([]int64, conns*k)
		if s.tfd, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC); err != nil {
			s.close()
			return nil, fmt.Errorf("create timerfd: %w", err)
		}
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: timerIdx}
		if err = unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, s.tfd, &ev); err != nil {
			s.close()
			return nil, fmt.Errorf("add timerfd to epoll: %w", err)
		}
	}
	return s, nil
}

// close releases every descriptor of the shard.
func (s *shard) close() {
	for i := range s.conns {
		s.closeFd(&s.conns[i])
	}
	if s.tfd >= 0 {
		unix.Close(s.tfd)
		s.tfd = -1
	}
	if s.epfd >= 0 {
		unix.Close(s.epfd)
		s.epfd = -1
	}
}

// run drives the shard from start until end, the budget is done, or stop.
func (s *shard) run(start, end int64) {
	defer s.close()
	s.now, s.t0, s.end = mono(), start, end
	s.nextTick = s.now + int64(tick)
	for i := range s.conns {
		s.fill(&s.conns[i])
	}
	for !s.finished {
		s.now = mono()
		if s.now >= s.end || s.stop.Load() {
			break
		}
		if s.now >= s.nextTick {
			s.tick()
			s.nextTick = s.now + int64(tick)
		}
		for len(s.retry) > 0 {
			c := &s.conns[s.retry[len(s.retry)-1]]
			s.retry = s.retry[:len(s.retry)-1]
			c.queued = false
			s.refill(c)
		}
		if s.rate {
			s.dispatch()
		}
		if s.finished {
			break
		}
		// A raw epoll_wait, bounded by the tick: a blocking unix.EpollWait
		// hands the P off, and sysmon then wakes every 20us to retake it,
		// which cost a context switch every ~6 requests and a third more CPU
		// per request (measured against nginx: 11 vs 7.8 us/req).
		n, err := sysEpollWait(s.epfd, s.ev, s.waitMs())
		if err != nil {
			continue // EINTR
		}
		s.now = mono()
		for i := range s.ev[:n] {
			e := &s.ev[i]
			if e.Fd == timerIdx {
				unix.Read(s.tfd, s.tbuf[:])
				s.timerAt = 0
				continue
			}
			c := &s.conns[e.Fd]
			if c.gen != e.Pad || c.fd < 0 {
				continue // a socket closed earlier in this batch
			}
			s.event(c, e.Events)
		}
	}
	s.stopped = mono()
	s.publish()
}

// waitMs is how long epoll_wait may block: until the next tick or the end,
// with the timerfd armed for the next intended send under --rate.
func (s *shard) waitMs() int {
	d := min(s.nextTick, s.end) - s.now
	if s.rate && !s.saturated && s.room() && s.rqN == 0 {
		at := s.t0 + int64(float64(s.next)*s.iv)
		if at-s.now < d && at != s.timerAt {
			rel := max(at-s.now, 1)
			its := unix.ItimerSpec{Value: unix.NsecToTimespec(rel)}
			if unix.TimerfdSettime(s.tfd, 0, &its, nil) == nil {
				s.timerAt = at
			}
		}
	}
	if d <= 0 {
		return 0
	}
	return int((d + int64(time.Millisecond) - 1) / int64(time.Millisecond))
}

// event handles one epoll event for c.
func (s *shard) event(c *conn, ev uint32) {
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
	if s.rqN > 0 {
		t := s.requeue[s.rqHead]
		s.rqHead++
		if s.rqHead == len(s.requeue) {
			s.rqHead = 0
		}
		s.rqN--
		s.issued++
		return t, true
	}
	t := s.t0 + int64(float64(s.next)*s.iv)
	if t > s.now {
		return 0, false
	}
	s.next++
	s.issued++
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

// connect opens a non-blocking socket for c and starts connecting.
func (s *shard) connect(c *conn) {
	fd, err := unix.Socket(s.family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		s.connectFailed(c)
		return
	}
	c.fd, c.since = fd, s.now
	c.gen++
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	c.outOn = true
	ev := unix.EpollEvent{Events: evWrite, Fd: c.idx, Pad: c.gen}
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
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
func (s *shard) connectFailed(c *conn) {
	s.cnt.Errors[errConnect]++
	s.drop(c)
	c.state, c.wakeAt = cWait, s.now+int64(connBackoff)
}

// connected starts the request flow on a fresh connection.
func (s *shard) connected(c *conn) {
	c.state = cOpen
	s.cnt.Connects++
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

// readable reads and parses until the socket is drained (or closed).
func (s *shard) readable(c *conn, hup bool) {
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
		s.refill(c)
	}
}

// parse runs the parser over data; it reports false if c was closed.
func (s *shard) parse(c *conn, data []byte) bool {
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
func (s *shard) complete(c *conn) bool {
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
	case !s.cfg.KeepAlive:
		c.state, c.since = cDraining, s.now // wait for the server's FIN, so TIME_WAIT stays on its side
	case c.p.close:
		s.reconnect(c)
		return false
	}
	return true
}

func (s *shard) record(lat int64) {
	if lat < histMin {
		lat = histMin
	} else if lat > histMax {
		lat = histMax
	}
	s.hist.RecordValue(lat)
}

// finish counts a request as done and ends the shard when its budget is.
func (s *shard) finish() {
	s.done++
	if s.budget >= 0 && s.done >= s.budget {
		s.finished = true
	}
}

// eof handles the server closing c.
func (s *shard) eof(c *conn) {
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
func (s *shard) fail(c *conn, cls errClass) {
	s.cnt.Errors[cls]++
	if c.n > 0 {
		c.pop()
		s.finish()
	}
	s.reconnect(c)
}

// reconnect closes c and queues it to connect again at the top of the loop.
func (s *shard) reconnect(c *conn) {
	s.drop(c)
	s.queueRetry(c)
}

func (s *shard) queueRetry(c *conn) {
	if !c.queued {
		c.queued = true
		s.retry = append(s.retry, c.idx)
	}
}

// drop closes c's socket and gives back its requests in flight.
func (s *shard) drop(c *conn) {
	for c.n > 0 {
		s.giveBack(c.pop())
	}
	s.closeFd(c)
	c.state = cIdle
	c.head, c.wpos, c.wend = 0, 0, 0
	c.carry = c.carry[:0]
}

func (s *shard) closeFd(c *conn) {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// tick enforces timeouts and back-offs and publishes progress.
func (s *shard) tick() {
	timeout := int64(s.cfg.Timeout)
	for i := range s.conns {
		c := &s.conns[i]
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
				s.queueRetry(c)
			}
		}
	}
	s.publish()
}

func (s *shard) publish() {
	s.pub.responses.Store(s.cnt.Responses)
	s.pub.failures.Store(s.cnt.failures())
	s.pub.bytes.Store(s.cnt.Bytes)
}
