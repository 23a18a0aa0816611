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

	// Wake-up coalescing (see wait): a nap is at most napMax and at most
	// 1/napShare of the median latency so far; shorter than napMin it costs
	// more than it saves and is skipped.
	napMax   = 100 * time.Microsecond
	napMin   = 10 * time.Microsecond
	napShare = 32
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
	pending   []int32 // conns to (re)connect or refill after this batch of events

	hist *hdrhistogram.Histogram // latency, ns
	lag  *hdrhistogram.Histogram // --rate: send time minus intended send time, ns
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

	nap int64 // ns to wait before blocking in epoll_wait; 0: none (see retune)
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
		pending: make([]int32, 0, conns),
		hist:    newHist(),
		stop:    stop,
		budget:  budget,
		rate:    cfg.Rate > 0,
	}
	if s.rate {
		s.lag = newHist()
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
		if s.now >= s.end {
			break
		}
		if s.now >= s.nextTick {
			s.tick()
			s.retune()
			s.nextTick = s.now + int64(tick)
		}
		s.runPending()
		if s.rate {
			s.dispatch()
		}
		if s.finished {
			break
		}
		n, err := s.wait()
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

// runPending connects or refills the conns queued since the last call. Conns
// answered in a batch of events write their next requests here, after the
// whole batch was read: the server then finds many connections ready at once
// (as with wrk, whose writes wait for the next loop), which cost nginx 15%
// less CPU per request than writing from inside the read handler.
func (s *shard) runPending() {
	for len(s.pending) > 0 {
		c := &s.conns[s.pending[len(s.pending)-1]]
		s.pending = s.pending[:len(s.pending)-1]
		c.queued = false
		s.refill(c)
	}
}

// wait returns the next batch of epoll events. epoll_wait is a raw call,
// bounded by the tick: a blocking unix.EpollWait hands the P off, and sysmon
// then wakes every 20us to retake it, which cost a context switch every ~6
// requests and a third more CPU per request (measured against nginx: 11 vs
// 7.8 us/req).
//
// When nothing is ready, the shard naps (s.nap) before it blocks: replies
// that arrive meanwhile find no sleeper to wake, and are read together after
// the nap. Each wake-up of a thread blocked in epoll_wait costs the sending
// side a cross-CPU interrupt (tens of us on a VM) and us a context switch;
// a client that outruns its server otherwise wakes for every few replies.
// Pipelined x16 against nginx this took client+server CPU per request down
// by 13-22%, to at or below wrk's (docs/benchmarks.md). The nap delays reading a
// reply by at most the nap, which is kept below 1/napShare of the median
// latency the shard has measured, and is off under --rate, whose sends are
// timed.
func (s *shard) wait() (int, error) {
	ms := s.waitMs()
	if s.nap > 0 && ms > 0 {
		if n, err := sysEpollWait(s.epfd, s.ev, 0); n > 0 || err != nil {
			return n, err
		}
		sysNanosleep(s.nap)
	}
	return sysEpollWait(s.epfd, s.ev, ms)
}

// retune sets the nap from the median latency so far (a scan of the
// histogram, once a tick): the median, not the mean, so that a few stalls on
// a busy machine do not lengthen it.
func (s *shard) retune() {
	s.nap = 0
	if s.rate {
		return
	}
	if nap := min(s.hist.ValueAtQuantile(50)/napShare, int64(napMax)); nap >= int64(napMin) {
		s.nap = nap
	}
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

// tick enforces timeouts and back-offs, publishes progress and checks the
// stop flag.
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
				s.queue(c)
			}
		}
	}
	s.publish()
	if s.stop.Load() { // once a tick, not per request
		s.finished = true
	}
}

func (s *shard) publish() {
	s.pub.responses.Store(s.cnt.Responses)
	s.pub.failures.Store(s.cnt.failures())
	s.pub.bytes.Store(s.cnt.Bytes)
}
