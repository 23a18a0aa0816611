package afxdp

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Desc is one frame in the rx or tx ring: Addr is the offset of the frame's
// first byte in the UMEM, Len its length. It has the layout of the kernel's
// struct xdp_desc; Options stays zero (no multi-buffer frames).
type Desc struct {
	Addr    uint64
	Len     uint32
	Options uint32
}

// ring is one of the four single-producer single-consumer rings an AF_XDP
// socket shares with the kernel. The fill and tx rings are produced by us and
// consumed by the kernel; the rx and completion rings the other way round.
//
// Who touches what:
//   - producer, consumer: the shared indices in the mapping. The side that
//     produces stores producer, the other side stores consumer; each side
//     loads the other's index. Only ever accessed with atomics (the only
//     atomics on the data path); each access is an acquire load or a release
//     store, which orders the entry reads/writes around it.
//   - flags: written by the kernel (XDP_RING_NEED_WAKEUP), loaded by us.
//   - addrs or descs: the entries. A slot is written only by the producer
//     between reserve and submit, and read only by the consumer between peek
//     and release.
//   - cachedProd, cachedCons and everything else: private to the one goroutine
//     (shard) that owns the socket; no synchronisation.
//
// Indices are free-running uint32 counters; slot = index & mask, and
// differences are wrap-safe in uint32 arithmetic.
type ring struct {
	producer *atomic.Uint32
	consumer *atomic.Uint32
	flags    *atomic.Uint32

	// For a producer ring: cachedProd is our next index to fill and cachedCons
	// is the kernel's consumer plus size (the first index we may not fill).
	// For a consumer ring: cachedCons is our next index to read and cachedProd
	// the kernel's producer as last loaded.
	cachedProd uint32
	cachedCons uint32

	mask  uint32
	size  uint32
	addrs []uint64 // fill and completion rings
	descs []Desc   // rx and tx rings
}

// initRing lays a ring over mem (a mapping from the socket, or plain memory in
// tests) using the kernel's offsets. desc selects the entry type. prod says
// whether we are the producer.
func initRing(r *ring, mem []byte, off unix.XDPRingOffset, size uint32, desc, prod bool) {
	base := unsafe.Pointer(unsafe.SliceData(mem))
	r.producer = (*atomic.Uint32)(unsafe.Add(base, off.Producer))
	r.consumer = (*atomic.Uint32)(unsafe.Add(base, off.Consumer))
	r.flags = (*atomic.Uint32)(unsafe.Add(base, off.Flags))
	r.size = size
	r.mask = size - 1
	if desc {
		r.descs = unsafe.Slice((*Desc)(unsafe.Add(base, off.Desc)), size)
	} else {
		r.addrs = unsafe.Slice((*uint64)(unsafe.Add(base, off.Desc)), size)
	}
	r.cachedProd = r.producer.Load()
	r.cachedCons = r.consumer.Load()
	if prod {
		r.cachedCons += size
	}
}

// free returns how many slots the producer may fill, reloading the kernel's
// consumer index only when the cached view has fewer than n.
func (r *ring) free(n uint32) uint32 {
	if f := r.cachedCons - r.cachedProd; f >= n {
		return f
	}
	r.cachedCons = r.consumer.Load() + r.size
	return r.cachedCons - r.cachedProd
}

// reserve claims up to n slots for writing and returns the first index and
// the count. The slots are ours until submit.
func (r *ring) reserve(n uint32) (idx, got uint32) {
	got = min(n, r.free(n))
	idx = r.cachedProd
	r.cachedProd += got
	return idx, got
}

// submit publishes the n oldest reserved slots to the kernel.
func (r *ring) submit(n uint32) {
	r.producer.Store(r.producer.Load() + n)
}

// avail returns how many entries the consumer may read, reloading the
// kernel's producer index only when the cached view is empty.
func (r *ring) avail(n uint32) uint32 {
	e := r.cachedProd - r.cachedCons
	if e == 0 {
		r.cachedProd = r.producer.Load()
		e = r.cachedProd - r.cachedCons
	}
	return min(e, n)
}

// peek claims up to n filled entries for reading and returns the first index
// and the count. The entries are ours until release.
func (r *ring) peek(n uint32) (idx, got uint32) {
	got = r.avail(n)
	idx = r.cachedCons
	r.cachedCons += got
	return idx, got
}

// release gives the n oldest peeked entries back to the kernel.
func (r *ring) release(n uint32) {
	r.consumer.Store(r.consumer.Load() + n)
}

// needWakeup reports whether the kernel asked to be kicked (XDP_USE_NEED_WAKEUP).
func (r *ring) needWakeup() bool {
	return r.flags.Load()&unix.XDP_RING_NEED_WAKEUP != 0
}

// outstanding returns how many produced entries are not yet consumed, as the
// shared indices say now (either direction).
func (r *ring) outstanding() uint32 {
	return r.producer.Load() - r.consumer.Load()
}
