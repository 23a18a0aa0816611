package shard

import "sync/atomic"

// Queue is a bounded single-producer single-consumer ring. Exactly one goroutine
// may Push and exactly one may Pop. It carries control messages only (start,
// stop, stats), never data-path traffic, so its atomics stay off the hot path.
type Queue[T any] struct {
	buf  []T
	mask uint64
	head atomic.Uint64 // next slot to pop; written by the consumer
	_    [56]byte      // keep head and tail on separate cache lines
	tail atomic.Uint64 // next slot to push; written by the producer
}

// NewQueue makes a queue holding at least size items (rounded up to a power of two).
func NewQueue[T any](size int) *Queue[T] {
	n := 1
	for n < size {
		n <<= 1
	}
	return &Queue[T]{buf: make([]T, n), mask: uint64(n - 1)}
}

// Push appends v and reports false when the queue is full. Producer only.
func (q *Queue[T]) Push(v T) bool {
	t := q.tail.Load()
	if t-q.head.Load() == uint64(len(q.buf)) {
		return false
	}
	q.buf[t&q.mask] = v
	q.tail.Store(t + 1) // publishes the slot to the consumer
	return true
}

// Pop removes the oldest item and reports false when the queue is empty.
// Consumer only.
func (q *Queue[T]) Pop() (T, bool) {
	var zero T
	h := q.head.Load()
	if h == q.tail.Load() {
		return zero, false
	}
	v := q.buf[h&q.mask]
	q.buf[h&q.mask] = zero // drop references held by the slot
	q.head.Store(h + 1)
	return v, true
}
