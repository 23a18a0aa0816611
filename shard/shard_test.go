package shard

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// eventSource owns an eventfd registered with the shard and records its events.
type eventSource struct {
	fd    int
	token uint64
	got   chan uint64 // tokens seen, read by the test
}

func (e *eventSource) Events(evs []Event, now time.Time) {
	var b [8]byte
	unix.Read(e.fd, b[:])
	for _, ev := range evs {
		e.got <- ev.Token
	}
}

func testCPUs(t *testing.T, n int) []int {
	cpus, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) > n {
		cpus = cpus[:n]
	}
	return cpus
}

// waitStats polls the group's stats until ok accepts them, bounded in time.
func waitStats(t *testing.T, g *Group, what string, ok func([]Report) bool) []Report {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if rs := g.Stats(); ok(rs) {
			return rs
		}
	}
	t.Fatalf("timed out waiting for %s; last stats %v", what, g.Stats())
	return nil
}

func TestShardPinsDispatchesAndSleeps(t *testing.T) {
	cpus := testCPUs(t, 2)
	srcs := make([]*eventSource, len(cpus))
	fired := make(chan int, len(cpus))
	g, err := Start(Config{CPUs: cpus}, func(s *Shard) error {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return err
		}
		if set.Count() != 1 || !set.IsSet(s.CPU) {
			return errors.New("shard thread not pinned to its cpu")
		}
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			return err
		}
		e := &eventSource{fd: fd, token: MaxToken - uint64(s.ID), got: make(chan uint64, 16)}
		srcs[s.ID] = e
		if err := s.AddFD(fd, unix.EPOLLIN, s.AddSource(e), e.token); err != nil {
			return err
		}
		var tm Timer
		id := s.ID
		tm.Init(func(time.Time) { fired <- id })
		s.Wheel().Start(&tm, time.Now().Add(20*time.Millisecond))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { g.Stop(); g.Wait() }()
	for range cpus {
		select {
		case <-fired:
		case <-time.After(10 * time.Second):
			t.Fatal("shard timer did not fire")
		}
	}
	for _, e := range srcs {
		one := [8]byte{1}
		unix.Write(e.fd, one[:])
		select {
		case tok := <-e.got:
			if tok != e.token {
				t.Fatalf("event token %#x, want %#x", tok, e.token)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("fd event not dispatched")
		}
	}
	// An idle shard must reach the blocking epoll_wait: that is what makes an
	// idle server use no CPU.
	waitStats(t, g, "every shard to sleep", func(rs []Report) bool {
		for _, r := range rs {
			if r.Loop.Sleeps == 0 {
				return false
			}
		}
		return len(rs) == len(cpus)
	})
}

// busyPoller reports work on every call: the shard must never sleep.
type busyPoller struct{ polls uint64 }

func (p *busyPoller) Poll(time.Time) bool { p.polls++; return false }
func (p *busyPoller) Report(r *Report)    { r.Add("test.polls", p.polls) }

func TestPollModeNeverSleeps(t *testing.T) {
	g, err := Start(Config{CPUs: testCPUs(t, 1), PollMode: true}, func(s *Shard) error {
		p := &busyPoller{}
		s.AddPoller(p)
		s.AddReporter(p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { g.Stop(); g.Wait() }()
	rs := waitStats(t, g, "10000 polls", func(rs []Report) bool { return rs[0].Get("test.polls") >= 10000 })
	if rs[0].Loop.Sleeps != 0 {
		t.Fatalf("poll mode slept %d times", rs[0].Loop.Sleeps)
	}
}

// drainer drains after a given number of polls, or never.
type drainer struct {
	left     int
	drain    bool
	never    bool
	closedCh chan bool
}

func (d *drainer) Poll(time.Time) bool {
	if d.drain && d.left > 0 {
		d.left--
		return true
	}
	return false
}
func (d *drainer) Drain(time.Time) { d.drain = true }
func (d *drainer) Drained() bool   { return !d.never && d.drain && d.left == 0 }
func (d *drainer) Close()          { d.closedCh <- d.Drained() }

func TestStopDrainsThenForceCloses(t *testing.T) {
	for _, never := range []bool{false, true} {
		closed := make(chan bool, 1)
		g, err := Start(Config{CPUs: testCPUs(t, 1), StopTimeout: 100 * time.Millisecond}, func(s *Shard) error {
			d := &drainer{left: 100, never: never, closedCh: closed}
			s.AddPoller(d)
			s.AddStopper(d)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		g.Stop()
		select {
		case <-g.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("shard did not exit after Stop")
		}
		if drained := <-closed; drained == never {
			t.Fatalf("never=%v: closed with drained=%v", never, drained)
		}
	}
}

func TestSetupErrorStopsAll(t *testing.T) {
	cpus := testCPUs(t, 2)
	closed := make(chan bool, len(cpus))
	_, err := Start(Config{CPUs: cpus}, func(s *Shard) error {
		s.AddStopper(&drainer{closedCh: closed})
		if s.ID == len(cpus)-1 {
			return errors.New("boom")
		}
		return nil
	})
	if err == nil || err.Error() != "boom" {
		t.Fatalf("Start error = %v, want boom", err)
	}
	for range cpus {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("a shard's stopper was not closed after a failed setup")
		}
	}
}

func TestStartRejectsBadCPU(t *testing.T) {
	if _, err := Start(Config{CPUs: []int{1 << 15}}, func(*Shard) error { return nil }); err == nil {
		t.Fatal("Start pinned a shard to a CPU that does not exist")
	}
}

// Start keeps a P for the control plane beside every running shard.
func TestStartRaisesGOMAXPROCS(t *testing.T) {
	cpus := testCPUs(t, 2)
	g, err := Start(Config{CPUs: cpus}, func(*Shard) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { g.Stop(); g.Wait() }()
	if p := runtime.GOMAXPROCS(0); p < len(cpus)+1 {
		t.Fatalf("GOMAXPROCS %d with %d shards running, want at least %d", p, len(cpus), len(cpus)+1)
	}
}

// With a fine tick the loop sleeps to the timer, not to the millisecond.
func TestSleepForFineTick(t *testing.T) {
	s, err := NewDetached(Config{Tick: 10 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d := s.sleepFor(time.Now()); d != -1 {
		t.Fatalf("sleep %v with no timer, want -1 (until an event)", d)
	}
	var tm Timer
	now := time.Now()
	s.Wheel().Start(&tm, now.Add(300*time.Microsecond))
	if d := s.sleepFor(now); d < 300*time.Microsecond || d > 310*time.Microsecond {
		t.Fatalf("sleep %v for a timer 300us ahead on a 10us wheel", d)
	}
}

// With a nap set, a wait that finds an event ready returns it at once, and
// one that finds nothing naps and then blocks until the next timer; neither
// allocates.
func TestWaitNaps(t *testing.T) {
	s, err := NewDetached(Config{Tick: 10 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	e := &eventSource{fd: fd, token: 7, got: make(chan uint64, 1)}
	if err := s.AddFD(fd, unix.EPOLLIN, s.AddSource(e), e.token); err != nil {
		t.Fatal(err)
	}
	var tm Timer
	s.SetNap(20 * time.Microsecond)
	s.Wheel().Start(&tm, time.Now().Add(time.Millisecond))
	n, slept, err := waitIntr(s)
	if n != 0 || err != nil || !slept || s.stats.Sleeps != 1 {
		t.Fatalf("wait with nothing ready: %d events (%v), slept %v, %d sleeps; want 0, a sleep", n, err, slept, s.stats.Sleeps)
	}
	one := [8]byte{1}
	unix.Write(fd, one[:])
	s.Wheel().Start(&tm, time.Now().Add(time.Hour))
	n, slept, err = waitIntr(s)
	if n != 1 || err != nil || slept || s.stats.Sleeps != 1 {
		t.Fatalf("wait with an event ready: %d events (%v), slept %v, %d sleeps; want 1 and no sleep", n, err, slept, s.stats.Sleeps)
	}
	s.dispatch(s.events[:n], time.Now())
	if tok := <-e.got; tok != e.token {
		t.Fatalf("token %d, want %d", tok, e.token)
	}
	allocs := testing.AllocsPerRun(20, func() {
		s.Wheel().Start(&tm, time.Now().Add(100*time.Microsecond))
		s.wait(time.Now(), true)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per wait, want 0", allocs)
	}
}

// waitIntr is a blocking s.wait, again after EINTR (the runtime's
// preemption signal), as the loop does.
func waitIntr(s *Shard) (int, bool, error) {
	for {
		n, slept, err := s.wait(time.Now(), true)
		if err != unix.EINTR {
			return n, slept, err
		}
	}
}

// waiter is drained only once its peer has been asked whether it is: a
// stopper that waits on another, as the native shards of one interface do.
type waiter struct {
	peer   *asked
	closed chan int
}

type asked struct{ n int }

func (w *waiter) Drain(time.Time) {}
func (w *waiter) Drained() bool   { return w.peer.n > 0 }
func (w *waiter) Close()          { w.closed <- w.peer.n }

func (a *asked) Drain(time.Time) {}
func (a *asked) Drained() bool   { a.n++; return true }
func (a *asked) Close()          {}

// Every stopper is asked each iteration, so one that waits on a later one
// still drains (before, the loop stopped at the first undrained stopper and
// the later one was never asked until the stop deadline).
func TestStopAsksEveryStopper(t *testing.T) {
	closed := make(chan int, 1)
	g, err := Start(Config{CPUs: testCPUs(t, 1), StopTimeout: time.Hour}, func(s *Shard) error {
		a := &asked{}
		s.AddStopper(&waiter{peer: a, closed: closed})
		s.AddStopper(a)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	g.Stop()
	select {
	case n := <-closed:
		if n == 0 {
			t.Fatal("closed with the later stopper never asked")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the shard did not finish draining: the later stopper was never asked")
	}
	g.Wait()
}
