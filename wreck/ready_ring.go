package wreck

// readyRing is a FIFO of connection slots, oldest first, in an array with
// room for every slot: the caller marks a slot while it is on the ring
// (inReady) and pushes it at most once, so a push never overflows.
type readyRing struct {
	slots   []int32
	head, n int
}

func newReadyRing(slots int) readyRing { return readyRing{slots: make([]int32, slots)} }

// push puts slot at the back.
func (r *readyRing) push(slot int32) {
	i := r.head + r.n
	if i >= len(r.slots) {
		i -= len(r.slots)
	}
	r.slots[i] = slot
	r.n++
}

// pop takes the slot at the front; the ring must not be empty.
func (r *readyRing) pop() int32 {
	slot := r.slots[r.head]
	if r.head++; r.head == len(r.slots) {
		r.head = 0
	}
	r.n--
	return slot
}
