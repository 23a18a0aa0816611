package wreck

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The nap before blocking follows the latency measured so far: a 32nd of its
// median, capped, and none when that is too short to pay or under --rate.
func TestNapFollowsLatency(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate float64
		lats []time.Duration
		want time.Duration
	}{
		{"1ms", 0, []time.Duration{time.Millisecond, time.Millisecond}, time.Millisecond / napShare},
		{"median", 0, []time.Duration{400 * time.Microsecond, 640 * time.Microsecond, time.Second}, 640 * time.Microsecond / napShare},
		{"short", 0, []time.Duration{100 * time.Microsecond}, 0},
		{"capped", 0, []time.Duration{10 * time.Millisecond}, napMax},
		{"none yet", 0, nil, 0},
		{"rate", 1e3, []time.Duration{time.Millisecond}, 0},
	} {
		f := newLoopFixture(t, 1, false, tc.rate)
		f.s.hist.Reset()           // the fixture's first round is not part of the case
		f.s.nap = int64(time.Hour) // a stale value retune must replace
		for _, l := range tc.lats {
			f.s.record(int64(l))
		}
		f.s.retune()
		// The histogram keeps 3 significant digits.
		if d := f.s.nap - int64(tc.want); d < -int64(tc.want)/500 || d > int64(tc.want)/500 {
			t.Errorf("%s: nap %v, want %v", tc.name, time.Duration(f.s.nap), tc.want)
		}
	}
}

// With a nap set, a wait that finds a reply ready returns it at once, and one
// that finds nothing naps and then blocks until the tick; neither allocates,
// nor does retune.
func TestWaitNaps(t *testing.T) {
	f := newLoopFixture(t, 1, false, 0)
	ev := unix.EpollEvent{Events: evRead, Fd: f.c.idx, Pad: f.c.gen}
	if err := unix.EpollCtl(f.s.epfd, unix.EPOLL_CTL_ADD, f.c.fd, &ev); err != nil {
		t.Fatal(err)
	}
	f.s.nap = int64(20 * time.Microsecond)
	f.s.now = mono()
	f.s.nextTick, f.s.end = f.s.now+int64(time.Millisecond), f.s.now+int64(time.Hour)
	n, err := waitIntr(f.s)
	if n != 0 || err != nil {
		t.Fatalf("wait with nothing ready: %d events (%v), want 0", n, err)
	}
	if _, err := unix.Write(f.peer, f.resp); err != nil {
		t.Fatal(err)
	}
	n, err = waitIntr(f.s)
	if n != 1 || err != nil || f.s.ev[0].Fd != f.c.idx {
		t.Fatalf("wait with a reply ready: %d events (%v), want conn %d's", n, err, f.c.idx)
	}
	allocs := testing.AllocsPerRun(20, func() {
		f.s.now = mono()
		f.s.nextTick = f.s.now + int64(time.Millisecond)
		f.s.record(int64(time.Millisecond))
		f.s.retune()
		f.s.wait()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per wait, want 0", allocs)
	}
}

// waitIntr is s.wait, again after EINTR (the runtime's preemption signal), as
// the run loop does.
func waitIntr(s *shard) (int, error) {
	for {
		n, err := s.wait()
		if err != unix.EINTR {
			return n, err
		}
	}
}
