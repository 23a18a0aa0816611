package afxdp

import (
	"encoding/binary"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Receive timestamps. The XDP program writes bpf_ktime_get_ns, the
// kernel's CLOCK_MONOTONIC in ns, into the 8 bytes of XDP metadata in
// front of each frame it redirects. The kernel puts a received frame's
// data rxHeadroom bytes into its chunk (XDP_PACKET_HEADROOM, with no UMEM
// headroom), in copy and zero-copy mode alike, so the stamp lies at a fixed
// place in the chunk. The slot reads zero unless it holds the stamp of the
// frame in the chunk: fresh UMEM is zero, RxStamp clears the stamp it
// reads, and Fill clears the slot of a chunk that comes from the free
// list (a frame sent from it wrote there). So a frame that arrives without
// a stamp (a driver without metadata support) reads zero, never an older
// frame's stamp, as long as each received frame's stamp is read once.
// Clearing in RxStamp touches a cache line RxStamp just read; clearing in
// Release, after the shard handled the batch, cost 5-6 ns more a frame
// (BenchmarkRxCycle).
const (
	rxHeadroom = 256 // XDP_PACKET_HEADROOM
	rxStampLen = 8
)

// RxStamp returns when the frame received at addr (a Desc's Addr from
// Receive, while the caller owns the frame) arrived, as the XDP program
// took it: CLOCK_MONOTONIC nanoseconds, which RxClock turns into a
// time.Time, or 0 when the frame carries none. It consumes the stamp: call
// it once per received frame, before the frame goes back. The stamp stays
// raw so that a shard converts one offset per batch, not each frame.
func (s *Socket) RxStamp(addr uint64) int64 {
	if addr&^s.frameMask != rxHeadroom || addr >= uint64(len(s.umem)) {
		return 0
	}
	slot := s.umem[addr-rxStampLen : addr]
	ns := int64(binary.NativeEndian.Uint64(slot))
	if ns != 0 {
		binary.NativeEndian.PutUint64(slot, 0)
	}
	return ns
}

// clearStamp zeroes the stamp slot of chunk (a chunk's first address).
func (s *Socket) clearStamp(chunk uint64) {
	binary.NativeEndian.PutUint64(s.umem[chunk+rxHeadroom-rxStampLen:], 0)
}

// RxClock returns the instant CLOCK_MONOTONIC read zero (the boot), as a
// time.Time on Go's monotonic clock: RxClock().Add(time.Duration(stamp))
// is a stamp's time, comparable with time.Now. Every socket's stamps read
// the same clock, and RxClock returns the same instant for the life of
// the process.
func RxClock() time.Time { return monoZero() }

// monoZero pairs time.Now with the midpoint of the two clock_gettime calls
// around it, keeping the tightest of a few tries: Go's monotonic clock on
// Linux reads the same CLOCK_MONOTONIC, so one pair converts every stamp.
var monoZero = sync.OnceValue(func() time.Time {
	var zero time.Time
	best := int64(-1)
	for range 4 {
		var a, b unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &a)
		t := time.Now()
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &b)
		if w := b.Nano() - a.Nano(); best < 0 || w < best {
			best, zero = w, t.Add(-time.Duration(a.Nano()+w/2))
		}
	}
	return zero
})
