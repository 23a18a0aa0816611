package shard

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Poller is polled once per loop iteration, in the order added, and reports
// whether it did any work. A poller that did work keeps the shard spinning. An
// AF_XDP queue is a poller (its rx/tx rings are read without a syscall); it also
// registers its socket fd with AddFD so that a sleeping shard wakes for it.
type Poller interface {
	Poll(now time.Time) (busy bool)
}

// Source receives the epoll events for the fds it registered with AddFD: one
// call per loop iteration with all of its events from that batch, each carrying
// the token given at registration. evs is valid only during the call.
type Source interface {
	Events(evs []Event, now time.Time)
}

// Stopper is told when the shard is asked to stop. Drain stops taking new work
// (close listeners, finish responses in flight); the shard keeps looping, asking
// every Stopper whether it is Drained each iteration, until all are or the stop
// deadline passes, then calls Close, which must release everything at once.
type Stopper interface {
	Drain(now time.Time)
	Drained() bool
	Close()
}

// Reporter adds its per-shard counters to a report; it runs on the shard's
// goroutine, so it reads its plain counter fields without synchronisation.
type Reporter interface {
	Report(r *Report)
}

// Event is one epoll event for a Source.
type Event struct {
	Token  uint64 // the token given to AddFD (56 bits)
	Events uint32 // EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP, EPOLLRDHUP ...
}

// SourceID names a Source within its shard.
type SourceID uint8

// MaxToken is the largest token AddFD accepts.
const MaxToken = 1<<56 - 1

// LoopStats are the run loop's own counters.
type LoopStats struct {
	Loops    uint64 // loop iterations
	Sleeps   uint64 // times the loop blocked in epoll_wait (idle)
	Events   uint64 // epoll events dispatched
	Fired    uint64 // timers fired
	Messages uint64 // control messages handled
	EINTR    uint64 // epoll_wait interrupted by a signal
}

// Shard is one core's event loop. It is created and run by Start and, except
// for Start's setup function and the messages Group sends, is touched only by
// its own goroutine, which is locked to an OS thread pinned to CPU.
type Shard struct {
	ID, CPU int

	cfg       Config
	epfd      int
	wheel     *Wheel
	pollers   []Poller
	sources   []Source
	stoppers  []Stopper
	reporters []Reporter

	events []unix.EpollEvent
	perSrc [][]Event

	inbox *Queue[message]
	efd   int // eventfd: the producer's wakeup, registered as source 0

	stats    LoopStats
	nap      time.Duration // see SetNap
	idle     bool          // nothing to do for idleHandoff: sleep with the scheduler's hand-off (epollWait)
	noPwait2 bool          // the kernel lacks epoll_pwait2: wait in milliseconds
	final    Report        // taken as the shard exits; read after done is closed
	started  bool
	stopping bool
	stopBy   time.Time
	done     chan struct{}
}

type msgKind uint8

const (
	msgStart msgKind = iota
	msgStop
	msgStats
)

type message struct {
	kind  msgKind
	reply chan<- Report
}

const inboxSource = 0

func newShard(id, cpu int, cfg Config, now time.Time) (*Shard, error) {
	s := &Shard{ID: id, CPU: cpu, cfg: cfg, epfd: -1, efd: -1, done: make(chan struct{})}
	var err error
	if s.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("shard %d: create epoll: %w", id, err)
	}
	if s.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		unix.Close(s.epfd)
		return nil, fmt.Errorf("shard %d: create eventfd: %w", id, err)
	}
	s.wheel = NewWheel(now, cfg.Tick, 4096)
	s.inbox = NewQueue[message](16)
	s.events = make([]unix.EpollEvent, 256)
	s.sources = []Source{nil} // slot 0 is the inbox
	s.perSrc = [][]Event{nil}
	if err := s.AddFD(s.efd, unix.EPOLLIN, inboxSource, 0); err != nil {
		s.closeFDs()
		return nil, err
	}
	return s, nil
}

// NewDetached makes a shard that no goroutine runs (ID 0, CPU -1): its
// epoll, its wheel and its registrations work, its loop never does. Tests
// build a shard's pollers and sources on one and drive them by hand, on one
// goroutine; Close releases it.
func NewDetached(cfg Config) (*Shard, error) {
	cfg.defaults()
	return newShard(0, -1, cfg, time.Now())
}

// Close releases a detached shard's descriptors.
func (s *Shard) Close() {
	s.closeFDs()
	s.epfd, s.efd = -1, -1
}

func (s *Shard) closeFDs() {
	if s.efd >= 0 {
		unix.Close(s.efd)
	}
	if s.epfd >= 0 {
		unix.Close(s.epfd)
	}
}

// Wheel is the shard's timer wheel: arm timers on it from the shard's goroutine.
// A stack whose Poll returns a next deadline arms one Timer here with it.
func (s *Shard) Wheel() *Wheel { return s.wheel }

// AddPoller adds p to the loop. Call during setup.
func (s *Shard) AddPoller(p Poller) { s.pollers = append(s.pollers, p) }

// AddStopper adds st to those drained and closed on stop. Call during setup.
func (s *Shard) AddStopper(st Stopper) { s.stoppers = append(s.stoppers, st) }

// AddReporter adds r to those asked for counters. Call during setup.
func (s *Shard) AddReporter(r Reporter) { s.reporters = append(s.reporters, r) }

// AddSource registers src for fd events and returns the id to pass to AddFD.
// Call during setup.
func (s *Shard) AddSource(src Source) SourceID {
	if len(s.sources) > 255 {
		panic("shard: more than 255 sources")
	}
	s.sources = append(s.sources, src)
	s.perSrc = append(s.perSrc, make([]Event, 0, len(s.events)))
	return SourceID(len(s.sources) - 1)
}

func epollData(ev *unix.EpollEvent, src SourceID, token uint64) {
	ev.Fd = int32(uint32(token))
	ev.Pad = int32(uint32(src)<<24 | uint32(token>>32)&0xffffff)
}

// AddFD adds fd to the shard's epoll with the given interest; its events go to
// src with token. Level-triggered unless events includes EPOLLET.
func (s *Shard) AddFD(fd int, events uint32, src SourceID, token uint64) error {
	if token > MaxToken {
		return fmt.Errorf("epoll token %#x exceeds 56 bits", token)
	}
	ev := unix.EpollEvent{Events: events}
	epollData(&ev, src, token)
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll add fd %d: %w", fd, err)
	}
	return nil
}

// ModifyFD changes fd's interest (and keeps src and token).
func (s *Shard) ModifyFD(fd int, events uint32, src SourceID, token uint64) error {
	ev := unix.EpollEvent{Events: events}
	epollData(&ev, src, token)
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_MOD, fd, &ev); err != nil {
		return fmt.Errorf("epoll modify fd %d: %w", fd, err)
	}
	return nil
}

// RemoveFD takes fd out of the shard's epoll (closing fd does that too).
func (s *Shard) RemoveFD(fd int) error {
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
		return fmt.Errorf("epoll remove fd %d: %w", fd, err)
	}
	return nil
}

// pin locks the calling goroutine to its thread and the thread to s.CPU.
func (s *Shard) pin() error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(s.CPU)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin shard %d to cpu %d: %w", s.ID, s.CPU, err)
	}
	// The loop sleeps until deadlines it computed (a timer, the end of a
	// nap): the default timer slack would stretch each by up to 50 us.
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	return nil
}

// run is the shard's loop. The order of work in one iteration:
//  1. advance the timer wheel (timeouts, the Date tick, a stack's deadline);
//  2. poll the pollers (AF_XDP rings) in the order added;
//  3. epoll_wait: with timeout 0 while there is work (or in poll mode), and,
//     once the loop has been idle for cfg.Spin, blocking until the next timer
//     (after the nap, if one is set);
//  4. dispatch the events, one Source call per source with events.
func (s *Shard) run() {
	defer close(s.done)
	defer func() { s.final = s.report() }()
	defer s.closeFDs()
	if !s.waitStart() {
		return
	}
	lastBusy := time.Now()
	for {
		now := time.Now()
		s.stats.Loops++
		busy := false
		if n := s.wheel.Advance(now); n > 0 {
			s.stats.Fired += uint64(n)
			busy = true
		}
		for _, p := range s.pollers {
			if p.Poll(now) {
				busy = true
			}
		}
		if s.stopping && s.stopped(now) {
			return
		}
		if busy {
			lastBusy = now
		}
		block := !busy && !s.cfg.PollMode && now.Sub(lastBusy) >= s.cfg.Spin
		s.idle = now.Sub(lastBusy) >= idleHandoff
		n, slept, err := s.wait(now, block)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				s.stats.EINTR++
				continue
			}
			panic(fmt.Sprintf("shard %d: epoll_wait: %v", s.ID, err))
		}
		if n > 0 {
			if slept {
				now = time.Now() // the loop's time is stale
			}
			s.dispatch(s.events[:n], now)
			lastBusy = now
		}
	}
}

// SetNap makes the loop nap for d before it blocks: if no event is ready, it
// sleeps d and looks again, and only then blocks in epoll_wait (0: never
// nap). Events that arrive during the nap find no sleeper to wake, and are
// read together after it. Each wake-up of a thread blocked in epoll_wait
// costs the sending side a cross-CPU interrupt (tens of microseconds on a
// virtual machine) and this side a context switch, so a client that
// outruns its server would otherwise wake for every few replies; a nap short
// against the latency it measures saves most of those wake-ups and delays an
// event by at most d. Call it on the shard's goroutine (in a callback).
func (s *Shard) SetNap(d time.Duration) { s.nap = d }

// Nap is the nap SetNap set.
func (s *Shard) Nap() time.Duration { return s.nap }

// wait returns the next batch of epoll events: at once, or, when the loop
// may block, after the nap (if one is set) and blocking until the next timer
// (slept: it may have).
func (s *Shard) wait(now time.Time, block bool) (n int, slept bool, err error) {
	if !block {
		n, err = s.epollWait(0)
		return n, false, err
	}
	if s.nap > 0 {
		if n, err = s.epollWait(0); n > 0 || err != nil {
			return n, false, err
		}
		nanosleep(s.nap)
	}
	timeout := s.sleepFor(now) // after the first look: events ready need no timer
	if timeout != 0 {
		s.stats.Sleeps++
	}
	n, err = s.epollWait(timeout)
	return n, s.nap > 0 || timeout != 0, err
}

// idleHandoff is how long a shard finds nothing to do before it sleeps with
// the scheduler's hand-off (see epollWait): sysmon preempts a goroutine that
// has run for 10 ms.
const idleHandoff = 10 * time.Millisecond

func (s *Shard) epollWait(timeout time.Duration) (int, error) {
	handoff := s.idle && timeout != 0
	if !s.noPwait2 {
		n, err := epollWait(s.epfd, s.events, timeout, handoff)
		if err != unix.ENOSYS {
			return n, err
		}
		s.noPwait2 = true
	}
	return epollWaitMs(s.epfd, s.events, timeout, handoff)
}

// waitStart blocks on the inbox alone until the start message (true) or a
// stop message (false: everything is closed at once, nothing was served).
func (s *Shard) waitStart() bool {
	fds := []unix.PollFd{{Fd: int32(s.efd), Events: unix.POLLIN}}
	for !s.started {
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			panic(fmt.Sprintf("shard %d: poll eventfd: %v", s.ID, err))
		}
		s.readInbox(time.Now())
		if s.stopping && !s.started {
			for _, st := range s.stoppers {
				st.Close()
			}
			return false
		}
	}
	return true
}

// sleepFor is how long the loop may block: until the next timer, or the
// stop deadline while stopping (-1: no timer, until an event).
func (s *Shard) sleepFor(now time.Time) time.Duration {
	next, ok := s.wheel.Next()
	if s.stopping && (!ok || s.stopBy.Before(next)) {
		next, ok = s.stopBy, true
	}
	if !ok {
		return -1
	}
	return max(next.Sub(now), 0)
}

func (s *Shard) dispatch(evs []unix.EpollEvent, now time.Time) {
	s.stats.Events += uint64(len(evs))
	for i := range evs {
		ev := &evs[i]
		src := uint32(ev.Pad) >> 24
		if src == inboxSource {
			s.readInbox(now)
			continue
		}
		token := uint64(uint32(ev.Pad)&0xffffff)<<32 | uint64(uint32(ev.Fd))
		s.perSrc[src] = append(s.perSrc[src], Event{Token: token, Events: ev.Events})
	}
	for i := 1; i < len(s.perSrc); i++ {
		if evs := s.perSrc[i]; len(evs) > 0 {
			s.sources[i].Events(evs, now)
			s.perSrc[i] = evs[:0]
		}
	}
}

func (s *Shard) readInbox(now time.Time) {
	var b [8]byte
	unix.Read(s.efd, b[:]) // reset the eventfd; EAGAIN is fine
	for {
		m, ok := s.inbox.Pop()
		if !ok {
			return
		}
		s.stats.Messages++
		switch m.kind {
		case msgStart:
			s.started = true
		case msgStop:
			if !s.stopping {
				s.stopping = true
				s.stopBy = now.Add(s.cfg.StopTimeout)
				for _, st := range s.stoppers {
					st.Drain(now)
				}
			}
		case msgStats:
			m.reply <- s.report()
		}
	}
}

// stopped reports whether the shard may exit: every Stopper has drained, or the
// stop deadline passed (then everything is force-closed).
func (s *Shard) stopped(now time.Time) bool {
	// Every stopper is asked, not only up to the first that is not drained:
	// a stopper may wait on the others (the native shards of one interface
	// finish their drain together), which it learns only when they are asked.
	drained := true
	for _, st := range s.stoppers {
		if !st.Drained() {
			drained = false
		}
	}
	if !drained && now.Before(s.stopBy) {
		return false
	}
	for _, st := range s.stoppers {
		st.Close()
	}
	return true
}

func (s *Shard) report() Report {
	r := Report{Shard: s.ID, CPU: s.CPU, Loop: s.stats}
	for _, rep := range s.reporters {
		rep.Report(&r)
	}
	return r
}

// send queues m for the shard and wakes it. Only Group calls it, under its lock.
func (s *Shard) send(m message) {
	for !s.inbox.Push(m) {
		select {
		case <-s.done:
			return // exited: nobody will read it
		case <-time.After(100 * time.Microsecond): // a full control queue: let the shard catch up
		}
	}
	var one = [8]byte{1}
	unix.Write(s.efd, one[:])
}
