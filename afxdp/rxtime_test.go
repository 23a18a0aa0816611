package afxdp

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// RxClock turns a CLOCK_MONOTONIC reading into the time.Now of the same
// instant: one taken between two time.Now calls converts to a time
// between them, give or take the pairing's uncertainty (half the
// tightest of its tries, well under a millisecond: the slack only keeps a
// preempted pairing from failing the test; a wrong clock or sign is off by
// far more).
func TestRxClock(t *testing.T) {
	const slack = time.Millisecond
	for range 100 {
		before := time.Now()
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		after := time.Now()
		if at := RxClock().Add(time.Duration(ts.Nano())); at.Before(before.Add(-slack)) || at.After(after.Add(slack)) {
			t.Fatalf("CLOCK_MONOTONIC %d reads %v, outside [%v, %v]", ts.Nano(), at, before, after)
		}
	}
	if !RxClock().Equal(RxClock()) {
		t.Fatal("RxClock moved")
	}
}
