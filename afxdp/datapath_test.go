package afxdp

import (
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"
)

// memSocket is a Socket over plain memory (no fd): the test plays the kernel
// on the far side of each ring. frames chunks of 2048 bytes, all free.
func memSocket(t testing.TB, frames int) *Socket {
	t.Helper()
	s := &Socket{fd: -1, frameSize: 2048, frameMask: ^uint64(2047)}
	s.umem = make([]byte, frames*2048)
	s.fill = *must(newTestRing(t, uint32(frames), false, true, 0))
	s.comp = *must(newTestRing(t, uint32(frames), false, false, 0))
	s.rx = *must(newTestRing(t, uint32(frames), true, false, 0))
	s.tx = *must(newTestRing(t, uint32(frames), true, true, 0))
	s.zeroCopy = true // Kick only syscalls when the ring flag asks
	s.free = make([]uint64, 0, frames)
	for i := frames - 1; i >= 0; i-- {
		s.free = append(s.free, uint64(i)*2048)
	}
	return s
}

func must(r *ring, _ []byte) *ring { return r }

// kernelRx produces descriptors on the rx ring as the kernel would.
func kernelRx(s *Socket, ds ...Desc) {
	p := s.rx.producer.Load()
	for i, d := range ds {
		s.rx.descs[(p+uint32(i))&s.rx.mask] = d
	}
	s.rx.producer.Store(p + uint32(len(ds)))
}

// kernelTx consumes everything on the tx ring, completes it and appends the
// descriptors sent to out.
func kernelTx(s *Socket, out []Desc) []Desc {
	c, p := s.tx.consumer.Load(), s.tx.producer.Load()
	cp := s.comp.producer.Load()
	for ; c != p; c++ {
		d := s.tx.descs[c&s.tx.mask]
		out = append(out, d)
		s.comp.addrs[cp&s.comp.mask] = d.Addr
		cp++
	}
	s.tx.consumer.Store(c)
	s.comp.producer.Store(cp)
	return out
}

// reflect receives what the rx ring holds, copies each 64-byte frame into a
// tx frame, transmits those and releases the rx frames: a responder's echo.
func reflect(s *Socket, rx, tx []Desc) {
	n := s.Receive(rx)
	m := s.AllocTx(tx[:n])
	for i := 0; i < m; i++ {
		copy(s.Frame(tx[i].Addr, 64), s.Frame(rx[i].Addr, 64))
		tx[i].Len = 64
	}
	s.Transmit(tx[:m])
	s.Release(rx[:n])
}

func TestTransmitDropsBadDescriptors(t *testing.T) {
	s := memSocket(t, 8)
	d := make([]Desc, 4)
	if n := s.AllocTx(d); n != 4 || s.FreeFrames() != 4 {
		t.Fatalf("AllocTx = %d, free %d", n, s.FreeFrames())
	}
	d[0].Len = 60                        // good
	d[1].Len = 2049                      // crosses its chunk
	d[2].Len = 0                         // empty
	d[3] = Desc{Addr: 8 * 2048, Len: 60} // outside the UMEM
	copy(s.Frame(d[0].Addr, 60), "hello")
	if n := s.Transmit(d); n != 1 {
		t.Fatalf("Transmit = %d, want 1", n)
	}
	if s.st.txBadDesc != 3 || s.st.txFrames != 1 {
		t.Fatalf("txBadDesc %d txFrames %d", s.st.txBadDesc, s.st.txFrames)
	}
	// The two in-UMEM bad frames went back to the free list; the outsider did not.
	if s.FreeFrames() != 6 {
		t.Fatalf("free %d, want 6", s.FreeFrames())
	}
	sent := kernelTx(s, nil)
	if len(sent) != 1 || sent[0].Addr != d[0].Addr || sent[0].Len != 60 || string(s.umem[sent[0].Addr:][:5]) != "hello" {
		t.Fatalf("kernel saw %+v", sent)
	}
	if n := s.Complete(); n != 1 || s.FreeFrames() != 7 {
		t.Fatalf("Complete = %d, free %d", n, s.FreeFrames())
	}
}

func TestReceiveDropsBadDescriptors(t *testing.T) {
	s := memSocket(t, 8)
	kernelRx(s,
		Desc{Addr: 0*2048 + 256, Len: 100},  // good (copy mode puts data after 256 bytes of headroom)
		Desc{Addr: 1*2048 + 256, Len: 1800}, // crosses its chunk
		Desc{Addr: 9 * 2048, Len: 64},       // outside the UMEM
		Desc{Addr: 2 * 2048, Len: 2048},     // good, whole chunk
	)
	s.free = s.free[:0] // all frames "in the fill ring"
	got := make([]Desc, 8)
	n := s.Receive(got)
	if n != 2 || got[0].Addr != 256 || got[1].Addr != 2*2048 || s.st.rxBadDesc != 2 {
		t.Fatalf("Receive = %d %+v bad %d", n, got[:n], s.st.rxBadDesc)
	}
	if f := s.Frame(got[0].Addr, int(got[0].Len)); len(f) != 100 {
		t.Fatalf("Frame len %d", len(f))
	}
	if s.Frame(got[0].Addr, 1793) != nil || s.Frame(16*2048, 1) != nil || s.Frame(0, -1) != nil || s.Frame(0, 1<<32+1) != nil {
		t.Fatal("Frame returned bytes outside one chunk")
	}
	if s.rx.consumer.Load() != 4 {
		t.Fatalf("rx consumer %d, want all 4 released", s.rx.consumer.Load())
	}
	// Release puts chunk bases on the fill ring.
	s.Release(got[:n])
	p := s.fill.producer.Load()
	if p != 2 || s.fill.addrs[0] != 0 || s.fill.addrs[1] != 2*2048 {
		t.Fatalf("fill producer %d addrs %v", p, s.fill.addrs[:2])
	}
}

func TestFreeListGuards(t *testing.T) {
	s := memSocket(t, 4)
	d := make([]Desc, 1)
	s.AllocTx(d)
	s.FreeTx(d)
	s.FreeTx(d) // twice: the list is full, counted and dropped
	s.FreeTx([]Desc{{Addr: 1 << 40}})
	if s.FreeFrames() != 4 || s.st.freeBad != 2 {
		t.Fatalf("free %d freeBad %d", s.FreeFrames(), s.st.freeBad)
	}
	s.Release([]Desc{{Addr: 1 << 40}})
	if s.st.fillBadAddr != 1 || s.fill.producer.Load() != 0 || s.fill.cachedProd != 0 {
		t.Fatalf("bad release: fillBadAddr %d producer %d", s.st.fillBadAddr, s.fill.producer.Load())
	}
	if n := s.Fill(3); n != 3 || s.fill.producer.Load() != 3 || s.FreeFrames() != 1 {
		t.Fatalf("Fill = %d", n)
	}
}

func TestTxRingFullDropsAndCounts(t *testing.T) {
	s := memSocket(t, 8)
	s.tx = *must(newTestRing(t, 2, true, true, 0))
	d := make([]Desc, 3)
	s.AllocTx(d)
	for i := range d {
		d[i].Len = 64
	}
	if n := s.Transmit(d); n != 2 || s.st.txRingFull != 1 || s.FreeFrames() != 6 {
		t.Fatalf("Transmit = %d ringFull %d free %d", n, s.st.txRingFull, s.FreeFrames())
	}
}

// TestDataPathAllocs: a full rx -> tx -> complete -> fill cycle allocates
// nothing, with the need-wakeup flags set so that the wakeups run too.
func TestDataPathAllocs(t *testing.T) {
	s := memSocket(t, 64)
	s.fill.flags.Store(unix.XDP_RING_NEED_WAKEUP)
	s.tx.flags.Store(unix.XDP_RING_NEED_WAKEUP)
	rx := make([]Desc, 16)
	tx := make([]Desc, 16)
	in := make([]Desc, 16)
	sent := make([]Desc, 0, 16)
	allocs := testing.AllocsPerRun(100, func() {
		// The "kernel" delivers 16 frames into chunks 48..63 (the fill ring's).
		for i := range in {
			in[i] = Desc{Addr: uint64(48+i)*2048 + 256, Len: 64}
		}
		kernelRx(s, in...)
		reflect(s, rx, tx)
		s.Kick()
		// Kernel side: send, complete and consume the fill ring.
		sent = kernelTx(s, sent[:0])
		s.fill.consumer.Store(s.fill.producer.Load())
		s.Complete()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per cycle", allocs)
	}
	if s.st.rxFrames == 0 || s.st.txFrames != s.st.rxFrames || s.FreeFrames() != 64 {
		t.Fatalf("rx %d tx %d free %d", s.st.rxFrames, s.st.txFrames, s.FreeFrames())
	}
	if s.st.kicks == 0 || s.st.rxWakeups == 0 {
		t.Fatalf("%d kicks, %d rx wakeups: the wakeups did not run", s.st.kicks, s.st.rxWakeups)
	}
}

// BenchmarkRingCycle is the socket's own cost per frame with the kernel
// played by the test over plain memory: receive, copy into a tx frame,
// transmit, complete and refill, in batches of 64. No privileges needed.
func BenchmarkRingCycle(b *testing.B) {
	s := memSocket(b, 256)
	rx := make([]Desc, 64)
	tx := make([]Desc, 64)
	in := make([]Desc, 64)
	sent := make([]Desc, 0, 64)
	for i := range in {
		in[i] = Desc{Addr: uint64(128+i)*2048 + 256, Len: 64}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += 64 {
		kernelRx(s, in...)
		reflect(s, rx, tx)
		sent = kernelTx(s, sent[:0])
		s.fill.consumer.Store(s.fill.producer.Load())
		s.Complete()
	}
}

// TestRandomDescriptorsNeverPanic throws seeded random descriptors at every
// entry point: nothing panics, and every descriptor is either accepted (and
// inside one chunk) or counted.
func TestRandomDescriptorsNeverPanic(t *testing.T) {
	s := memSocket(t, 16)
	rng := rand.New(rand.NewPCG(1, 2))
	ds := make([]Desc, 8)
	rx := make([]Desc, 8)
	for round := 0; round < 2000; round++ {
		for i := range ds {
			ds[i] = Desc{Addr: rng.Uint64N(3 * 16 * 2048), Len: uint32(rng.IntN(5000))}
		}
		switch round % 4 {
		case 0:
			before := s.st.txBadDesc + s.st.txRingFull
			n := s.Transmit(ds)
			if uint64(n)+s.st.txBadDesc+s.st.txRingFull-before != uint64(len(ds)) {
				t.Fatalf("round %d: %d queued, counters moved %d", round, n, s.st.txBadDesc+s.st.txRingFull-before)
			}
			for _, d := range kernelTx(s, nil) {
				if !s.valid(d.Addr, d.Len) || d.Len == 0 {
					t.Fatalf("invalid descriptor reached the tx ring: %+v", d)
				}
			}
			s.Complete()
		case 1:
			kernelRx(s, ds...)
			n := s.Receive(rx)
			for _, d := range rx[:n] {
				if s.Frame(d.Addr, int(d.Len)) == nil {
					t.Fatalf("received descriptor without a frame: %+v", d)
				}
			}
			s.Release(rx[:n])
			s.fill.consumer.Store(s.fill.producer.Load())
		case 2:
			s.FreeTx(ds)
			s.Release(ds)
			s.fill.consumer.Store(s.fill.producer.Load())
		case 3:
			for _, d := range ds {
				s.Frame(d.Addr, int(d.Len)-100)
			}
			s.AllocTx(ds)
			s.Fill(rng.IntN(8))
			s.fill.consumer.Store(s.fill.producer.Load())
		}
		if s.FreeFrames() > 16 {
			t.Fatalf("free list grew past the UMEM: %d", s.FreeFrames())
		}
	}
}

// TestReleaseDefersWhileFillLooksFull: the kernel publishes its fill-ring
// consumer index after the rx ring, so a frame can come back while the fill
// ring still looks full. Release keeps it for the next call instead of
// moving it to the transmit free list.
func TestReleaseDefersWhileFillLooksFull(t *testing.T) {
	s := memSocket(t, 4)
	s.free = s.free[:0] // every frame is on the rx side
	for i := range 4 {
		s.fill.addrs[i] = uint64(i) * 2048
	}
	s.fill.producer.Store(4)
	s.fill.cachedProd = 4
	// The kernel took frame 2 from the fill ring and received into it, but
	// has not published its consumer index yet.
	kernelRx(s, Desc{Addr: 2*2048 + 256, Len: 60})
	rx := make([]Desc, 4)
	n := s.Receive(rx)
	s.Release(rx[:n])
	if s.FreeFrames() != 0 || s.fill.producer.Load() != 4 || len(s.unfilled) != 1 || s.st.fillDeferred != 1 {
		t.Fatalf("free %d, fill producer %d, unfilled %v, deferred %d",
			s.FreeFrames(), s.fill.producer.Load(), s.unfilled, s.st.fillDeferred)
	}
	// Once the kernel has published, the next Release puts it on first.
	s.fill.consumer.Store(1)
	s.Release(nil)
	if p := s.fill.producer.Load(); p != 5 || s.fill.addrs[4&s.fill.mask] != 2*2048 || len(s.unfilled) != 0 || s.FreeFrames() != 0 {
		t.Fatalf("fill producer %d addr %#x, unfilled %v, free %d", p, s.fill.addrs[4&s.fill.mask], s.unfilled, s.FreeFrames())
	}
}
