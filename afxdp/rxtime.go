package afxdp

import (
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"
)

// Receive timestamps. The XDP program writes bpf_ktime_get_ns, the
// kernel's CLOCK_MONOTONIC in ns, into the 8 bytes of XDP metadata in
// front of each frame it redirects. The kernel puts a received frame's
// data rxHeadroom bytes into its chunk (XDP_PACKET_HEADROOM, with no UMEM
// headroom), in copy and zero-copy mode alike, so the stamp lies at a fixed
// place in the chunk. The slot reads zero unless it holds the stamp of the
// frame in the chunk: fresh UMEM is zero, RxTime clears the stamp it
// reads, and Fill clears the slot of a chunk that comes from the free
// list (a frame sent from it wrote there). So a frame that arrives without
// a stamp (a driver without metadata support) reads zero, never an older
// frame's stamp, as long as each received frame's stamp is read once.
// Clearing in RxTime touches a cache line RxTime just read; clearing in
// Release, after the shard handled the batch, cost 5-6 ns more a frame
// (BenchmarkRxCycle).
const (
	rxHeadroom = 256 // XDP_PACKET_HEADROOM
	rxStampLen = 8
)

// monoClock converts CLOCK_MONOTONIC nanoseconds to a time.Time on Go's
// monotonic clock, which on Linux reads the same CLOCK_MONOTONIC: one pair
// (time.Now, clock_gettime) taken at Open converts every stamp.
type monoClock struct {
	base time.Time
	mono int64 // CLOCK_MONOTONIC ns at base
}

// newMonoClock pairs time.Now with the midpoint of the two clock_gettime
// calls around it, keeping the tightest of a few tries.
func newMonoClock() monoClock {
	var c monoClock
	best := int64(-1)
	for range 4 {
		var a, b unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &a)
		t := time.Now()
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &b)
		if w := b.Nano() - a.Nano(); best < 0 || w < best {
			best, c = w, monoClock{base: t, mono: a.Nano() + w/2}
		}
	}
	return c
}

// at returns CLOCK_MONOTONIC time ns as a time.Time.
func (c monoClock) at(ns int64) time.Time { return c.base.Add(time.Duration(ns - c.mono)) }

// RxTime returns when the frame received at addr (a Desc's Addr from
// Receive, while the caller owns the frame) arrived: the receive time the
// XDP program took, on Go's monotonic clock (comparable with time.Now), or
// the zero Time when the frame carries none. It consumes the stamp: call
// it once per received frame, before the frame goes back.
func (s *Socket) RxTime(addr uint64) time.Time {
	if addr&^s.frameMask != rxHeadroom || addr >= uint64(len(s.umem)) {
		return time.Time{}
	}
	slot := s.umem[addr-rxStampLen : addr]
	ns := int64(binary.NativeEndian.Uint64(slot))
	if ns == 0 {
		return time.Time{}
	}
	binary.NativeEndian.PutUint64(slot, 0)
	return s.clock.at(ns)
}

// clearStamp zeroes the stamp slot of chunk (a chunk's first address).
func (s *Socket) clearStamp(chunk uint64) {
	binary.NativeEndian.PutUint64(s.umem[chunk+rxHeadroom-rxStampLen:], 0)
}
