package native

import (
	"sync/atomic"
	"time"

	"percore/netstack"
	"percore/shard"
)

// fragRouter carries ICMP "fragmentation needed" messages between the
// stacks of one device's queues. The NIC steers an ICMP message by its
// outer header (router to us), not by the TCP flow it quotes, so it may
// land on a queue whose stack does not hold that flow; the stack hands it
// to its queue's post, which copies it to every other queue's mailbox, and
// each queue drains its mailbox before it polls its stack. Only the stack
// that holds the flow acts on it; the others count it (tcp.pmtu_no_conn).
//
// Nothing is written to shared memory on the data path: a mailbox is one
// single-producer single-consumer ring per sending queue, written only when
// an ICMP error arrives, and its doorbell is a counter the consumer reads
// once per poll and that changes only then.
type fragRouter struct {
	boxes []fragBox // by rx queue id (forwarding: by shard, each shard one stack); boxes of queues no shard owns stay empty
}

// fragBox is one queue's mailbox.
type fragBox struct {
	bell atomic.Uint64                       // rings added by senders after a push
	from []*shard.Queue[netstack.FragNeeded] // by sending queue id; nil for itself and unowned queues
	seen uint64                              // bell when the owner last drained; owner only
	_    [64]byte                            // a box to a cache line: senders ring one owner only
}

// fragMailbox is the messages a mailbox holds from one sender: ICMP errors
// are rare, and a flood of them is dropped (counted) rather than queued.
const fragMailbox = 16

// newFragRouter makes the mailboxes of the queues in owned (rx queue ids,
// below rxq), one ring for each pair.
func newFragRouter(rxq int, owned [][]int) *fragRouter {
	r := &fragRouter{boxes: make([]fragBox, rxq)}
	var ids []int
	for _, qs := range owned {
		ids = append(ids, qs...)
	}
	for _, to := range ids {
		b := &r.boxes[to]
		b.from = make([]*shard.Queue[netstack.FragNeeded], rxq)
		for _, from := range ids {
			if from != to {
				b.from[from] = shard.NewQueue[netstack.FragNeeded](fragMailbox)
			}
		}
	}
	return r
}

// post copies e from queue id's stack to every other queue's mailbox and
// reports how many mailboxes were full. It runs on queue id's shard.
func (r *fragRouter) post(id int, e netstack.FragNeeded) (full int) {
	for to := range r.boxes {
		b := &r.boxes[to]
		if b.from == nil || b.from[id] == nil {
			continue
		}
		if !b.from[id].Push(e) {
			full++
			continue
		}
		b.bell.Add(1)
	}
	return full
}

// drain hands queue id's stack the messages its mailbox holds; it runs on
// queue id's shard, before the stack's Poll, and reports how many it took.
func (r *fragRouter) drain(id int, now time.Time, st *netstack.Stack, link netstack.Link) int {
	b := &r.boxes[id]
	bell := b.bell.Load()
	if bell == b.seen {
		return 0
	}
	b.seen = bell // a push after this load rings again: the next poll drains it
	n := 0
	for _, q := range b.from {
		if q == nil {
			continue
		}
		for e, ok := q.Pop(); ok; e, ok = q.Pop() {
			st.HandleFragNeeded(now, link, e)
			n++
		}
	}
	return n
}
