package wreck

import (
	"testing"
	"time"
)

// The nap before blocking follows the latency measured so far: a 32nd of its
// median, capped, and none when that is too short to pay or under --rate; the
// shard is told, and retuning allocates nothing.
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
		f.s.hist.Reset()    // the fixture's first round is not part of the case
		f.s.nap = time.Hour // a stale value retune must replace
		for _, l := range tc.lats {
			f.s.record(int64(l))
		}
		f.s.retune()
		// The histogram keeps 3 significant digits.
		if d := f.s.nap - tc.want; d < -tc.want/500 || d > tc.want/500 {
			t.Errorf("%s: nap %v, want %v", tc.name, f.s.nap, tc.want)
		}
		if got := f.s.sh.Nap(); got != f.s.nap {
			t.Errorf("%s: the shard naps %v, want %v", tc.name, got, f.s.nap)
		}
	}
	f := newLoopFixture(t, 1, false, 0)
	allocs := testing.AllocsPerRun(20, func() {
		f.s.record(int64(time.Millisecond))
		f.s.retune()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per retune, want 0", allocs)
	}
}
