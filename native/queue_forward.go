package native

import "fmt"

// A Queue's side of software forwarding (forward.go): the stack of a shard
// without a queue, and what Poll asks of the forwarding link.

// NewForwarded is the stack of shard i when it owns no rx queue (RSSForward:
// Owned(i) is empty): it receives the frames of its flows from the shards
// that own queues and sends through its home queue's owner. Call it, as
// NewQueue, on the shard's thread.
func (d *Device) NewForwarded(i int, cfg QueueConfig) (*Queue, error) {
	if d.fwd == nil || i < d.fwd.queues || i >= d.fwd.shards {
		return nil, fmt.Errorf("native: shard %d has no forwarded stack", i)
	}
	if err := d.enter(); err != nil {
		return nil, err
	}
	q, tc := d.sizedQueue(i, cfg)
	q.fwd, q.wake = d.fwd.newFwdLink(i, nil, d.mtu, linkBatch, q.size.Frames/2, &q.stats), d.fwd.wake[i]
	q.link = q.fwd
	if err := d.newStack(q, tc); err != nil {
		return nil, fmt.Errorf("native: shard %d: %w", i, err)
	}
	return q, nil
}

// drowse runs the forwarding side of the sleep protocol (waker): a poll
// that did no work lets the other shards wake this one, then looks at the
// rings once more.
func (q *Queue) drowse(busy bool) bool {
	if busy {
		q.wake.awake()
		return true
	}
	q.wake.drowse()
	return q.fwd.ready()
}

// freeFrames is the transmit frames the stack may still take: the socket's,
// or the pool's of a shard without a queue.
func (q *Queue) freeFrames() int {
	if q.sock == nil {
		return len(q.fwd.free)
	}
	return q.sock.FreeFrames()
}

// moved is the frames forwarded either way so far (0 without forwarding).
func (q *Queue) moved() uint64 {
	if q.fwd == nil {
		return 0
	}
	return q.fwd.moved
}
