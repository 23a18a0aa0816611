package shard

import (
	"math/rand"
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestWheelFiresAtDeadlineNotBefore(t *testing.T) {
	w := NewWheel(epoch, time.Millisecond, 64)
	var fired []time.Time
	var a Timer
	a.Init(func(now time.Time) { fired = append(fired, now) })
	w.Start(&a, epoch.Add(2500*time.Microsecond))
	if n := w.Advance(epoch.Add(2 * time.Millisecond)); n != 0 {
		t.Fatalf("fired %d timers before the deadline", n)
	}
	if next, ok := w.Next(); !ok || next.Before(a.When()) {
		t.Fatalf("Next = %v %v, want at or after %v", next, ok, a.When())
	}
	if n := w.Advance(epoch.Add(3 * time.Millisecond)); n != 1 || len(fired) != 1 {
		t.Fatalf("fired %d (%d callbacks) at the deadline tick, want 1", n, len(fired))
	}
	if a.Armed() || w.Len() != 0 {
		t.Fatalf("timer still armed after firing")
	}
	if _, ok := w.Next(); ok {
		t.Fatalf("Next reports a timer on an empty wheel")
	}
}

func TestWheelBeyondOneRevolution(t *testing.T) {
	w := NewWheel(epoch, time.Millisecond, 64) // 64 ms per revolution
	n := 0
	var a Timer
	a.Init(func(time.Time) { n++ })
	w.Start(&a, epoch.Add(1000*time.Millisecond))
	for now := epoch; now.Before(epoch.Add(999 * time.Millisecond)); now = now.Add(7 * time.Millisecond) {
		w.Advance(now)
		if next, ok := w.Next(); !ok || next.After(a.When()) {
			t.Fatalf("at %v Next = %v, past the deadline %v", now.Sub(epoch), next.Sub(epoch), a.When().Sub(epoch))
		}
	}
	if n != 0 {
		t.Fatalf("fired early")
	}
	w.Advance(epoch.Add(5 * time.Second)) // a long sleep jumps many revolutions
	if n != 1 {
		t.Fatalf("fired %d times, want 1", n)
	}
}

// TestWheelRandomAgainstModel drives the wheel with seeded random starts, stops,
// re-arms and clock jumps and checks every firing against a plain model.
func TestWheelRandomAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	w := NewWheel(epoch, time.Millisecond, 128)
	const n = 200
	timers := make([]Timer, n)
	deadline := make([]time.Time, n) // zero: not armed in the model
	now := epoch
	for i := range timers {
		i := i
		timers[i].Init(func(at time.Time) {
			if deadline[i].IsZero() {
				t.Fatalf("timer %d fired but the model has it stopped", i)
			}
			if at.Before(deadline[i]) {
				t.Fatalf("timer %d fired at %v before its deadline %v", i, at, deadline[i])
			}
			deadline[i] = time.Time{}
			// a callback re-arming itself or stopping another timer must be safe
			if rng.Intn(4) == 0 {
				deadline[i] = at.Add(time.Duration(rng.Intn(500)) * time.Millisecond)
				w.Start(&timers[i], deadline[i])
			}
			if j := rng.Intn(n); rng.Intn(4) == 0 {
				w.Stop(&timers[j])
				deadline[j] = time.Time{}
			}
		})
	}
	for step := 0; step < 5000; step++ {
		switch r := rng.Intn(10); {
		case r < 5:
			i := rng.Intn(n)
			deadline[i] = now.Add(time.Duration(rng.Intn(1000)) * time.Millisecond / 3)
			w.Start(&timers[i], deadline[i])
		case r < 7:
			i := rng.Intn(n)
			w.Stop(&timers[i])
			deadline[i] = time.Time{}
		default:
			if rng.Intn(50) == 0 {
				now = now.Add(time.Duration(rng.Intn(1000)) * time.Millisecond)
			} else {
				now = now.Add(time.Duration(rng.Intn(3000)) * time.Microsecond)
			}
			w.Advance(now)
			// everything due by the last whole tick must have fired
			lastTick := epoch.Add(now.Sub(epoch).Truncate(time.Millisecond))
			armed := 0
			for i := range deadline {
				if deadline[i].IsZero() {
					continue
				}
				armed++
				if !deadline[i].After(lastTick) {
					t.Fatalf("step %d: timer %d due %v not fired at %v", step, i, deadline[i], now)
				}
			}
			if armed != w.Len() {
				t.Fatalf("step %d: wheel has %d armed, model %d", step, w.Len(), armed)
			}
			if next, ok := w.Next(); ok {
				for i := range deadline {
					// Next is the tick at which the earliest timer can fire
					if !deadline[i].IsZero() && roundUp(deadline[i]).Before(next) {
						t.Fatalf("step %d: Next %v is after timer %d's deadline %v", step, next, i, deadline[i])
					}
				}
			} else if armed > 0 {
				t.Fatalf("step %d: Next reports nothing with %d armed", step, armed)
			}
		}
	}
}

func TestWheelNoAllocs(t *testing.T) {
	w := NewWheel(epoch, time.Millisecond, 256)
	var ts [16]Timer
	for i := range ts {
		ts[i].Init(func(time.Time) {})
	}
	now := epoch
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range ts {
			w.Start(&ts[i], now.Add(time.Duration(i)*time.Millisecond))
		}
		w.Stop(&ts[3])
		w.Next()
		now = now.Add(10 * time.Millisecond)
		w.Advance(now)
	})
	if allocs != 0 {
		t.Fatalf("timer start/stop/advance allocated %.1f times per run", allocs)
	}
}

func BenchmarkWheelStartStop(b *testing.B) {
	w := NewWheel(epoch, time.Millisecond, 4096)
	var tm Timer
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		w.Start(&tm, epoch.Add(time.Duration(i&1023)*time.Millisecond))
		w.Stop(&tm)
	}
}

func roundUp(t time.Time) time.Time {
	d := t.Sub(epoch)
	return epoch.Add((d + time.Millisecond - 1).Truncate(time.Millisecond))
}

// BenchmarkWheelNext: the loop asks before each sleep; here the next timer is
// 1000 ticks ahead (a 10 ms tick on a 10 us wheel).
func BenchmarkWheelNext(b *testing.B) {
	w := NewWheel(epoch, 10*time.Microsecond, 4096)
	var t Timer
	w.Start(&t, epoch.Add(10*time.Millisecond))
	b.ReportAllocs()
	for b.Loop() {
		w.Next()
	}
}
