package lab

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"
)

// testFrames holds frame i at index i: a length from 60 to 1514 bytes,
// EtherType IPv4, the sequence number right after the Ethernet header, seeded
// filler elsewhere.
// Built once; tests must not modify them.
var testFrames = func() [][]byte {
	r := rand.New(rand.NewPCG(1, 99))
	fs := make([][]byte, 10_000)
	for i := range fs {
		f := make([]byte, 60+r.IntN(1514-60+1))
		for j := 0; j < len(f); j += 8 {
			var w [8]byte
			binary.LittleEndian.PutUint64(w[:], r.Uint64())
			copy(f[j:], w[:])
		}
		binary.BigEndian.PutUint16(f[12:], 0x0800) // IPv4, so corruptible
		binary.BigEndian.PutUint32(f[ethHeaderLen:], uint32(i))
		fs[i] = f
	}
	return fs
}()

func testFrame(i int) []byte { return testFrames[i] }

// impairRun feeds n frames, one every gap of fake time, through an Impairer and
// collects what comes out, polling every step. It returns the frames out, their
// release times, and the sequence number and arrival time of each.
type impairOut struct {
	frame []byte
	seq   int
	at    time.Duration // when Due first returned it
}

func impairRun(t *testing.T, im *Impairer, n int, gap, step time.Duration) []impairOut {
	return impairRunKeep(t, im, n, gap, step, true)
}

// impairRunKeep is impairRun; keep=false leaves the frames out of the result.
func impairRunKeep(t *testing.T, im *Impairer, n int, gap, step time.Duration, keep bool) []impairOut {
	t.Helper()
	var out []impairOut
	batch := make([][]byte, 16)
	now := time.Duration(0)
	collect := func() {
		for {
			k := im.Due(now, batch)
			if k == 0 {
				return
			}
			for _, f := range batch[:k] {
				o := impairOut{seq: int(binary.BigEndian.Uint32(f[ethHeaderLen:])), at: now}
				if keep {
					o.frame = bytes.Clone(f)
				}
				out = append(out, o)
			}
			im.Done(k, k)
		}
	}
	next := time.Duration(0)
	for i := 0; i < n; {
		if now >= next {
			slot, buf, ok := im.Alloc()
			if !ok {
				t.Fatalf("frame %d: no free slot with %d queued", i, im.Queued())
			}
			im.Push(now, slot, copy(buf, testFrame(i)))
			i++
			next += gap
		}
		collect()
		now += step
	}
	for range 10_000 {
		collect()
		if im.Queued() == 0 {
			break
		}
		now += step
	}
	if q := im.Queued(); q != 0 {
		t.Fatalf("%d frames still queued long after the last push", q)
	}
	s := im.Stats
	if s.Received+s.Duplicated != s.Forwarded+s.Dropped+s.SendErrors {
		t.Fatalf("counters do not add up: %+v", s)
	}
	return out
}

// binomialBand fails unless k is within 5 standard deviations of n·p: for a
// fair generator that misses about once in 1.7 million runs, and the seeds are
// fixed, so the test is deterministic; a wrong rate (say p/2 or 2p at n=10^4)
// is far outside.
func binomialBand(t *testing.T, what string, k uint64, n int, p float64) {
	t.Helper()
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	if math.Abs(float64(k)-mean) > 5*sd {
		t.Errorf("%s: %d of %d, want %.0f ± %.0f (p=%g)", what, k, n, mean, 5*sd, p)
	}
}

func TestImpairRates(t *testing.T) {
	const n = 10_000
	for _, seed := range []uint64{1, 2, 3} {
		for _, tc := range []struct {
			spec  ImpairSpec
			count func(ImpairStats) uint64
			p     float64
			name  string
		}{
			{ImpairSpec{Loss: 0.05}, func(s ImpairStats) uint64 { return s.Dropped }, 0.05, "loss"},
			{ImpairSpec{Reorder: 0.10}, func(s ImpairStats) uint64 { return s.Reordered }, 0.10, "reorder"},
			{ImpairSpec{Duplicate: 0.01}, func(s ImpairStats) uint64 { return s.Duplicated }, 0.01, "duplicate"},
			{ImpairSpec{Corrupt: 0.001}, func(s ImpairStats) uint64 { return s.Corrupted }, 0.001, "corrupt"},
			{ImpairSpec{Corrupt: 0.30}, func(s ImpairStats) uint64 { return s.Corrupted }, 0.30, "corrupt"},
		} {
			tc.spec.Seed = seed
			im := NewImpairer(tc.spec, 0, 256, 2048)
			out := impairRunKeep(t, im, n, time.Microsecond, time.Microsecond, false)
			binomialBand(t, tc.name, tc.count(im.Stats), n, tc.p)
			if got := uint64(len(out)); got != im.Stats.Forwarded || got != n-im.Stats.Dropped+im.Stats.Duplicated {
				t.Errorf("%s: %d frames out, stats %+v", tc.name, got, im.Stats)
			}
		}
	}
}

func TestImpairDeterministic(t *testing.T) {
	spec := ImpairSpec{Loss: 0.05, Reorder: 0.1, Duplicate: 0.01, Corrupt: 0.01, Delay: 3 * time.Microsecond, Seed: 7}
	a := impairRun(t, NewImpairer(spec, 0, 256, 2048), 2000, time.Microsecond, time.Microsecond)
	b := impairRun(t, NewImpairer(spec, 0, 256, 2048), 2000, time.Microsecond, time.Microsecond)
	spec.Seed = 8
	c := impairRun(t, NewImpairer(spec, 0, 256, 2048), 2000, time.Microsecond, time.Microsecond)
	same := func(x, y []impairOut) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !bytes.Equal(x[i].frame, y[i].frame) || x[i].at != y[i].at {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Error("same seed, same frames: different output")
	}
	if same(a, c) {
		t.Error("different seeds: same output")
	}
}

func TestImpairDelay(t *testing.T) {
	const delay = 1 * time.Millisecond
	// Frames every 7µs, polled every 3µs: the clock never lands exactly on a
	// release time, so an early release would show.
	im := NewImpairer(ImpairSpec{Delay: delay, Seed: 1}, 0, 1024, 2048)
	gap := 7 * time.Microsecond
	out := impairRun(t, im, 1000, gap, 3*time.Microsecond)
	if len(out) != 1000 || im.Stats.Delayed != 1000 {
		t.Fatalf("%d frames out, stats %+v", len(out), im.Stats)
	}
	for i, o := range out {
		if o.seq != i {
			t.Fatalf("frame %d out as %d: delay alone must keep order", o.seq, i)
		}
		// Frame i was pushed at the first 3µs tick at or after i·gap.
		arrived := (time.Duration(i)*gap + 3*time.Microsecond - 1) / (3 * time.Microsecond) * (3 * time.Microsecond)
		if o.at < arrived+delay {
			t.Fatalf("frame %d arrived %v, out at %v: earlier than %v delay", i, arrived, o.at, delay)
		}
		if o.at >= arrived+delay+3*time.Microsecond {
			t.Fatalf("frame %d arrived %v, out at %v: later than the first poll after its delay", i, arrived, o.at)
		}
	}
	if at, ok := im.Next(); ok {
		t.Fatalf("Next = %v with nothing queued", at)
	}
}

func TestImpairReorder(t *testing.T) {
	im := NewImpairer(ImpairSpec{Reorder: 0.3, Delay: 10 * time.Microsecond, Seed: 5}, 0, 256, 2048)
	out := impairRun(t, im, 3000, time.Microsecond, time.Microsecond)
	if len(out) != 3000 {
		t.Fatalf("%d frames out, want 3000", len(out))
	}
	seen := make([]bool, 3000)
	inversions := 0
	for i, o := range out {
		if seen[o.seq] {
			t.Fatalf("frame %d out twice", o.seq)
		}
		seen[o.seq] = true
		for _, p := range out[:i] {
			if p.seq > o.seq {
				inversions++
			}
		}
		if !bytes.Equal(o.frame, testFrame(o.seq)) {
			t.Fatalf("frame %d changed", o.seq)
		}
	}
	// Each reordered frame is passed by exactly one later frame, nothing else moves.
	if inversions == 0 || uint64(inversions) != im.Stats.Reordered {
		t.Fatalf("%d inversions, %d reordered", inversions, im.Stats.Reordered)
	}
}

func TestImpairReorderHoldExpires(t *testing.T) {
	const delay = 50 * time.Microsecond
	im := NewImpairer(ImpairSpec{Reorder: 1, Delay: delay, Seed: 1}, 0, 8, 2048)
	slot, buf, _ := im.Alloc()
	im.Push(0, slot, copy(buf, testFrame(0)))
	out := make([][]byte, 4)
	if k := im.Due(delay+impairHoldMax-1, out); k != 0 {
		t.Fatalf("held frame out before its hold expired")
	}
	if at, ok := im.Next(); !ok || at != delay+impairHoldMax {
		t.Fatalf("Next = %v, %v; want %v", at, ok, delay+impairHoldMax)
	}
	if k := im.Due(delay+impairHoldMax, out); k != 1 {
		t.Fatalf("held frame not out when its hold expired")
	}
	im.Done(1, 1)
	if im.Stats.Reordered != 0 {
		t.Fatalf("a frame nothing passed counted as reordered")
	}
}

func TestImpairDuplicate(t *testing.T) {
	im := NewImpairer(ImpairSpec{Duplicate: 1, Seed: 1}, 0, 64, 2048)
	out := impairRun(t, im, 500, time.Microsecond, time.Microsecond)
	if len(out) != 1000 || im.Stats.Duplicated != 500 {
		t.Fatalf("%d frames out, stats %+v", len(out), im.Stats)
	}
	for i := 0; i < len(out); i += 2 {
		want := testFrame(i / 2)
		if !bytes.Equal(out[i].frame, want) || !bytes.Equal(out[i+1].frame, want) {
			t.Fatalf("frame %d: want two exact copies in a row", i/2)
		}
	}
}

func TestImpairCorrupt(t *testing.T) {
	im := NewImpairer(ImpairSpec{Corrupt: 1, Seed: 1}, 0, 64, 2048)
	out := impairRun(t, im, 2000, time.Microsecond, time.Microsecond)
	if len(out) != 2000 || im.Stats.Corrupted != 2000 {
		t.Fatalf("%d frames out, stats %+v", len(out), im.Stats)
	}
	// Where in the payload the flip landed, in eighths: uniform if the bit is
	// drawn over the whole payload.
	var where [8]int
	for i, o := range out {
		want := testFrame(i)
		if len(o.frame) != len(want) {
			t.Fatalf("frame %d: length changed", i)
		}
		flipped := 0
		for j := range want {
			d := bits.OnesCount8(want[j] ^ o.frame[j])
			if d == 0 {
				continue
			}
			if j < ethHeaderLen {
				t.Fatalf("frame %d: Ethernet header byte %d changed", i, j)
			}
			where[(j-ethHeaderLen)*8/(len(want)-ethHeaderLen)]++
			flipped += d
		}
		if flipped != 1 {
			t.Fatalf("frame %d: %d bits flipped, want 1", i, flipped)
		}
	}
	for k, c := range where {
		binomialBand(t, fmt.Sprintf("flips in eighth %d of the payload", k), uint64(c), len(out), 1.0/8)
	}
}

func TestImpairCorruptOnlyIPv4(t *testing.T) {
	for _, tc := range []struct {
		etype   uint16
		corrupt bool
	}{{0x0800, true}, {0x86dd, false}, {0x0806, false}, {0x88b5, false}} {
		im := NewImpairer(ImpairSpec{Corrupt: 1, Seed: 1}, 0, 4, 2048)
		f := bytes.Clone(testFrame(3))
		binary.BigEndian.PutUint16(f[12:], tc.etype)
		s, buf, _ := im.Alloc()
		im.Push(0, s, copy(buf, f))
		out := make([][]byte, 1)
		if im.Due(0, out) != 1 {
			t.Fatalf("EtherType %#04x: frame not out", tc.etype)
		}
		if changed := !bytes.Equal(out[0], f); changed != tc.corrupt || (im.Stats.Corrupted == 1) != tc.corrupt {
			t.Errorf("EtherType %#04x: changed %v, counted %d; want corrupted %v", tc.etype, changed, im.Stats.Corrupted, tc.corrupt)
		}
	}
}

func TestImpairSlots(t *testing.T) {
	im := NewImpairer(ImpairSpec{Duplicate: 1, Delay: time.Millisecond, Seed: 1}, 0, 3, 2048)
	s, buf, _ := im.Alloc()
	im.Push(0, s, copy(buf, testFrame(0))) // takes two slots
	s, buf, _ = im.Alloc()
	im.Push(0, s, copy(buf, testFrame(1))) // no slot left for its copy
	if _, _, ok := im.Alloc(); ok {
		t.Fatal("Alloc succeeded with every slot in use")
	}
	if im.Stats.Duplicated != 1 || im.Stats.DupNoSlot != 1 || im.Queued() != 3 {
		t.Fatalf("stats %+v, %d queued", im.Stats, im.Queued())
	}
}

func TestImpairNoAllocs(t *testing.T) {
	im := NewImpairer(ImpairSpec{Loss: 0.05, Reorder: 0.1, Duplicate: 0.01, Corrupt: 0.01, Delay: 2 * time.Microsecond, Seed: 3}, 0, 256, 2048)
	f := testFrame(1)
	out := make([][]byte, 32)
	now := time.Duration(0)
	allocs := testing.AllocsPerRun(2000, func() {
		now += time.Microsecond
		if s, buf, ok := im.Alloc(); ok {
			im.Push(now, s, copy(buf, f))
		}
		k := im.Due(now, out)
		im.Done(k, k)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per frame, want 0", allocs)
	}
}
