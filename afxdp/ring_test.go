package afxdp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// testOff places the ring fields like the kernel does: indices on separate
// cache lines, entries after them.
var testOff = unix.XDPRingOffset{Producer: 0, Consumer: 64, Flags: 128, Desc: 192}

// newTestRing lays a ring of size entries over plain memory whose shared
// indices start at start (to exercise wrap-around).
func newTestRing(t testing.TB, size uint32, desc, prod bool, start uint32) (*ring, []byte) {
	t.Helper()
	ent := uint64(8)
	if desc {
		ent = 16
	}
	mem := make([]byte, testOff.Desc+uint64(size)*ent)
	r := &ring{}
	// The "kernel" side starts both indices at start.
	initRing(r, mem, testOff, size, desc, prod)
	r.producer.Store(start)
	r.consumer.Store(start)
	initRing(r, mem, testOff, size, desc, prod)
	return r, mem
}

func TestProducerRingFullAndWrap(t *testing.T) {
	for _, start := range []uint32{0, 0xfffffffa} {
		r, _ := newTestRing(t, 8, false, true, start)
		idx, got := r.reserve(10)
		if got != 8 || idx != start {
			t.Fatalf("start %x: reserve(10) = %x,%d want %x,8", start, idx, got, start)
		}
		for i := uint32(0); i < got; i++ {
			r.addrs[(idx+i)&r.mask] = uint64(i) * 4096
		}
		r.submit(got)
		if p := r.producer.Load(); p != start+8 {
			t.Fatalf("producer %x want %x", p, start+8)
		}
		if _, got := r.reserve(1); got != 0 {
			t.Fatalf("reserve on full ring got %d", got)
		}
		// Kernel consumes 3 entries; the next reserve must reload consumer.
		r.consumer.Store(start + 3)
		idx, got = r.reserve(5)
		if got != 3 || idx != start+8 {
			t.Fatalf("after consume: reserve(5) = %x,%d want %x,3", idx, got, start+8)
		}
		r.submit(got)
		if r.outstanding() != 8 {
			t.Fatalf("outstanding %d want 8", r.outstanding())
		}
		// Slots wrapped onto the first three.
		for i := uint32(0); i < 3; i++ {
			if (idx+i)&r.mask != (start+i)&r.mask {
				t.Fatalf("slot %d not wrapped", i)
			}
		}
	}
}

func TestProducerRingCachesConsumer(t *testing.T) {
	r, _ := newTestRing(t, 8, false, true, 0)
	r.reserve(2)
	r.submit(2)
	// The kernel consumes, but we still have 6 free cached: no reload.
	r.consumer.Store(2)
	if f := r.free(4); f != 6 {
		t.Fatalf("free(4) = %d, want cached 6", f)
	}
	if r.cachedCons != 8 {
		t.Fatalf("cachedCons reloaded early: %d", r.cachedCons)
	}
	// Asking for more than cached reloads.
	if f := r.free(7); f != 8 {
		t.Fatalf("free(7) = %d, want 8", f)
	}
}

func TestConsumerRingEmptyPeekRelease(t *testing.T) {
	for _, start := range []uint32{0, 0xfffffffe} {
		r, _ := newTestRing(t, 4, true, false, start)
		if _, got := r.peek(4); got != 0 {
			t.Fatalf("peek on empty ring got %d", got)
		}
		// Kernel produces 3 descriptors.
		for i := uint32(0); i < 3; i++ {
			r.descs[(start+i)&r.mask] = Desc{Addr: uint64(i) * 2048, Len: 60 + i}
		}
		r.producer.Store(start + 3)
		idx, got := r.peek(2)
		if got != 2 || idx != start {
			t.Fatalf("peek(2) = %x,%d", idx, got)
		}
		if d := r.descs[(idx+1)&r.mask]; d.Len != 61 {
			t.Fatalf("desc %v", d)
		}
		// Kernel produces one more; cached view still has one left, so no reload.
		r.descs[(start+3)&r.mask] = Desc{Addr: 3 * 2048, Len: 63}
		r.producer.Store(start + 4)
		idx, got = r.peek(4)
		if got != 1 || idx != start+2 {
			t.Fatalf("peek(4) with cached 1 = %x,%d want %x,1", idx, got, start+2)
		}
		r.release(3)
		if c := r.consumer.Load(); c != start+3 {
			t.Fatalf("consumer %x", c)
		}
		idx, got = r.peek(4)
		if got != 1 || r.descs[idx&r.mask].Len != 63 {
			t.Fatalf("peek after reload = %x,%d", idx, got)
		}
		r.release(1)
		if _, got := r.peek(1); got != 0 {
			t.Fatal("ring not empty")
		}
	}
}

func TestNeedWakeupFlag(t *testing.T) {
	r, _ := newTestRing(t, 4, true, true, 0)
	if r.needWakeup() {
		t.Fatal("flag set on fresh ring")
	}
	r.flags.Store(unix.XDP_RING_NEED_WAKEUP)
	if !r.needWakeup() {
		t.Fatal("flag not seen")
	}
}
