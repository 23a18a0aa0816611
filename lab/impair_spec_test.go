package lab

import (
	"strings"
	"testing"
	"time"
)

func TestParseImpair(t *testing.T) {
	sp, err := ParseImpair("loss=5%,reorder=10%,duplicate=1%,corrupt=0.1%,delay=1ms,seed=42")
	if err != nil {
		t.Fatal(err)
	}
	want := ImpairSpec{Loss: 0.05, Reorder: 0.10, Duplicate: 0.01, Corrupt: 0.001, Delay: time.Millisecond, Seed: 42}
	if sp != want {
		t.Fatalf("got %+v, want %+v", sp, want)
	}
	back, err := ParseImpair(sp.String())
	if err != nil || back != sp {
		t.Fatalf("round trip of %q: got %+v, %v", sp.String(), back, err)
	}
	sp, err = ParseImpair(" delay=250us , loss=100% ")
	if err != nil || sp != (ImpairSpec{Loss: 1, Delay: 250 * time.Microsecond}) {
		t.Fatalf("got %+v, %v", sp, err)
	}
}

func TestParseImpairErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty spec"},
		{"loss", "not key=value"},
		{"loss=", "not key=value"},
		{"=5%", "not key=value"},
		{"loss=5", "needs a percent sign"},
		{"loss=x%", "not a percentage"},
		{"loss=NaN%", "not a percentage"},
		{"loss=101%", "out of range"},
		{"loss=-1%", "out of range"},
		{"loss=1%,loss=2%", "given twice"},
		{"jitter=1ms", `unknown key "jitter"`},
		{"delay=fast", "not a duration"},
		{"delay=-1ms", "out of range"},
		{"delay=2s", "out of range"},
		{"seed=-1", "not an unsigned integer"},
		{"loss=1%,,delay=1ms", "not key=value"},
	} {
		_, err := ParseImpair(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseImpair(%q) = %v, want error containing %q", tc.in, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseImpair(%q): error spans lines: %q", tc.in, err)
		}
	}
}

// FuzzParseImpair: any input gives a spec that round-trips or a one-line error.
func FuzzParseImpair(f *testing.F) {
	for _, s := range []string{"loss=5%,reorder=10%,duplicate=1%,corrupt=0.1%,delay=1ms,seed=7", "loss=1e-3%", "delay=1h", "seed=0x10", "=,="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := ParseImpair(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		for _, p := range []float64{sp.Loss, sp.Reorder, sp.Duplicate, sp.Corrupt} {
			if !(p >= 0 && p <= 1) {
				t.Fatalf("%q: rate %v out of [0, 1]", s, p)
			}
		}
		back, err := ParseImpair(sp.String())
		if err != nil || back != sp {
			t.Fatalf("%q: round trip of %q gave %+v, %v", s, sp.String(), back, err)
		}
	})
}
