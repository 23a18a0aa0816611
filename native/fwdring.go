package native

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// frameRing carries frames from one shard to another: a bounded
// single-producer single-consumer ring whose slots hold the frames' bytes
// in place. The producer copies a frame into the next free slot and
// publishes a batch with one store; the consumer reads the slot where it
// lies and gives it back, in order, when done. The indices are the only
// memory both sides write, each written by one side only, on its own cache
// line. (shard.Queue, the control ring, moves values by copy and frees a
// slot as it pops it; a frame must be written and read in place and stay
// valid until the consumer is done with it, so the two are not one type.)
//
// Slot memory is Go memory owned by the ring, not a socket's UMEM: a shard
// never touches another shard's UMEM, so shards close their sockets in any
// order.
type frameRing struct {
	buf  []byte   // size slots of slot bytes
	lens []uint32 // each slot's frame length; written by the producer before it publishes
	ats  []int64  // each slot's frame's receive time (what RxBatch reports), likewise
	slot uint32
	mask uint32

	_    [64]byte
	tail atomic.Uint32 // slots published: written by the producer
	put  uint32        // producer: slots filled, published at publish
	seen uint32        // producer: the consumer's head as last read

	_    [64]byte
	head atomic.Uint32 // slots given back: written by the consumer
	read uint32        // consumer: slots taken (take), given back at release
	got  uint32        // consumer: the producer's tail as last read
	_    [64]byte
}

// newFrameRing makes a ring of at least size slots (a power of two) of slot
// bytes each.
func newFrameRing(size, slot int) *frameRing {
	n := int(ceilPow2(size))
	return &frameRing{buf: make([]byte, n*slot), lens: make([]uint32, n), ats: make([]int64, n), slot: uint32(slot), mask: uint32(n - 1)}
}

// next returns the next free slot to write a frame of at most the slot size
// into, or nil when the ring is full. Producer only.
func (r *frameRing) next() []byte {
	if r.put-r.seen > r.mask {
		r.seen = r.head.Load()
		if r.put-r.seen > r.mask {
			return nil
		}
	}
	i := (r.put & r.mask) * r.slot
	return r.buf[i : i+r.slot : i+r.slot]
}

// push records that the slot next returned holds a frame of n bytes that
// arrived at at (a receive time as RxBatch reports it; 0: unknown). The
// consumer sees it after publish. Producer only.
func (r *frameRing) push(n int, at int64) {
	r.lens[r.put&r.mask] = uint32(n)
	r.ats[r.put&r.mask] = at
	r.put++
}

// publish makes the frames pushed so far visible to the consumer and
// reports whether there were any. Producer only.
func (r *frameRing) publish() bool {
	if r.put == r.tail.Load() {
		return false
	}
	r.tail.Store(r.put)
	return true
}

// take returns the next published frame, valid until release gives it
// back, and its receive time, or nil when there is none. Consumer only.
func (r *frameRing) take() ([]byte, int64) {
	if r.read == r.got {
		r.got = r.tail.Load()
		if r.read == r.got {
			return nil, 0
		}
	}
	s := r.read & r.mask
	i := s * r.slot
	r.read++
	return r.buf[i : i+r.lens[s] : i+r.lens[s]], r.ats[s]
}

// release gives back the n oldest frames taken. Consumer only.
func (r *frameRing) release(n int) {
	if n > 0 {
		r.head.Store(r.head.Load() + uint32(n))
	}
}

// avail is how many published frames wait to be taken. Consumer only.
func (r *frameRing) avail() int {
	r.got = r.tail.Load()
	return int(r.got - r.read)
}

// ready reports whether a published frame waits to be taken. Consumer only.
func (r *frameRing) ready() bool {
	return r.read != r.got || r.read != r.tail.Load()
}

// len is the frames published and not given back: for reports, read by the
// consumer or after both sides stopped.
func (r *frameRing) len() int { return int(r.tail.Load() - r.head.Load()) }

// waker wakes a shard that sleeps while frames wait for it in its rings.
// The shard's loop blocks in epoll when no poller has work; its eventfd is
// in that epoll. Before it may block, the consumer sets asleep and looks at
// its rings once more; a producer that published sets asleep back and
// writes the eventfd. Both are sequentially consistent, so either the
// consumer sees the frame or the producer sees asleep: a frame never waits
// for a sleeping shard. While the consumer is busy, a producer only reads
// asleep.
type waker struct {
	_      [64]byte
	asleep atomic.Bool
	fd     int // eventfd, nonblocking
	_      [64]byte
}

func newWaker() (*waker, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &waker{fd: fd}, nil
}

// wake is the producer's side, after a publish.
func (w *waker) wake() {
	if w.asleep.Load() && w.asleep.CompareAndSwap(true, false) {
		one := [8]byte{1}
		unix.Write(w.fd, one[:])
	}
}

// drowse is the consumer's side when it found nothing to do: from now on a
// producer wakes it. Look at the rings after it.
func (w *waker) drowse() {
	if !w.asleep.Load() {
		w.asleep.Store(true)
	}
}

// awake is the consumer's side when it has work: producers need not wake it.
func (w *waker) awake() {
	if w.asleep.Load() {
		w.asleep.Store(false)
	}
}

// reset reads the eventfd, so that epoll stops reporting it.
func (w *waker) reset() {
	var b [8]byte
	unix.Read(w.fd, b[:])
}

func (w *waker) close() { unix.Close(w.fd) }
