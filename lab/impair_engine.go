package lab

import (
	"math/rand/v2"
	"time"
)

// ethHeaderLen is the part of a frame that corruption leaves alone, so that
// the frame still reaches its destination and the IP or TCP checksum, not the
// switch, has to catch the flipped bit.
const ethHeaderLen = 14

// checksummed reports whether checksums guard every bit of the frame beyond
// its Ethernet header: IPv4 (the header checksum, then the TCP, UDP or ICMP
// checksum). Other frames are never corrupted: ARP has no checksum, so a
// flipped bit would poison a neighbour cache instead of testing a checksum,
// and IPv6 has no header checksum (percore speaks IPv4 only anyway).
func checksummed(f []byte) bool {
	return len(f) > ethHeaderLen && f[12] == 0x08 && f[13] == 0x00
}

// impairMaxHeld bounds how many frames wait at once to be passed by a later one.
const impairMaxHeld = 4

// impairHoldMax is how long a frame held for reordering waits, beyond its delay,
// for a later frame to pass it before it is sent anyway: a frame that ends a
// burst must not wait for the next burst.
const impairHoldMax = 2 * time.Millisecond

// ImpairStats counts what one direction of the bridge did. Forwarded counts
// frames sent on, duplicates included; every frame received but not forwarded
// is in exactly one drop counter (Dropped, TooLong, SendErrors).
type ImpairStats struct {
	Received   uint64 // frames read from the ingress end
	Forwarded  uint64 // frames written to the egress end, duplicates included
	Dropped    uint64 // frames dropped on purpose (loss)
	Reordered  uint64 // frames held back and sent after a later frame
	Duplicated uint64 // extra copies sent
	Corrupted  uint64 // IPv4 frames with one bit flipped beyond the Ethernet header
	Delayed    uint64 // frames held for the configured delay
	DupNoSlot  uint64 // duplicates not made because every slot was in use
	TooLong    uint64 // frames longer than a slot, dropped (set by the forwarder)
	SendErrors uint64 // frames the egress socket refused, dropped (set by the forwarder)
	KernelDrop uint64 // frames the kernel dropped before the bridge read them (PACKET_STATISTICS)
}

// impairEntry is one queued frame: its slot, length and release time.
type impairEntry struct {
	slot int32
	n    int32
	due  time.Duration
}

// Impairer is one direction of the impairment bridge: it decides each frame's
// fate, keeps frames in a release-ordered queue and counts what it did. It is
// pure logic: time is an argument (a monotonic offset from any start), nothing
// blocks, and nothing allocates after NewImpairer. Frames live in slots owned
// by the Impairer; a caller receives into a slot from Alloc and hands it back
// with Push or Free. One Impairer belongs to one goroutine.
//
// Decisions come from a PCG generator seeded with (spec.Seed, stream), drawn
// in a fixed order per frame, so the same seed and the same frame sequence give
// the same faults.
type Impairer struct {
	spec     ImpairSpec
	pcg      *rand.PCG
	mem      []byte // len(free at start) slots of slotSize bytes
	slotSize int
	free     []int32 // stack of free slots

	// q is a ring of frames in release order. The delay is constant and held
	// frames take the release time of the frame that passes them, so release
	// times never decrease along the ring and the head is always next.
	q     []impairEntry
	qHead int
	qLen  int

	held         []impairEntry // frames (and their duplicates) waiting to be passed
	heldFrames   int           // frames in held, duplicates not counted
	heldDeadline time.Duration // when held frames go out even if nothing passed them

	// Stats counts what this direction did. The Impairer keeps all but
	// TooLong and KernelDrop, which the forwarder adds.
	Stats ImpairStats
}

// NewImpairer makes one direction with slots frame buffers of slotSize bytes.
// stream separates the directions' random sequences under one seed.
func NewImpairer(spec ImpairSpec, stream uint64, slots, slotSize int) *Impairer {
	im := &Impairer{
		spec:     spec,
		pcg:      rand.NewPCG(spec.Seed, stream),
		mem:      make([]byte, slots*slotSize),
		slotSize: slotSize,
		free:     make([]int32, slots),
		q:        make([]impairEntry, slots),
		held:     make([]impairEntry, 0, 2*impairMaxHeld),
	}
	for i := range im.free {
		im.free[i] = int32(slots - 1 - i)
	}
	return im
}

// SlotSize is the largest frame a slot holds.
func (im *Impairer) SlotSize() int { return im.slotSize }

// Alloc lends a free slot to receive one frame into; ok is false when every
// slot is in use (the caller should send queued frames first).
func (im *Impairer) Alloc() (slot int32, buf []byte, ok bool) {
	if len(im.free) == 0 {
		return -1, nil, false
	}
	slot = im.free[len(im.free)-1]
	im.free = im.free[:len(im.free)-1]
	return slot, im.slot(slot), true
}

// Free returns a slot from Alloc that holds no frame.
func (im *Impairer) Free(slot int32) { im.free = append(im.free, slot) }

func (im *Impairer) slot(s int32) []byte {
	off := int(s) * im.slotSize
	return im.mem[off : off+im.slotSize : off+im.slotSize]
}

// chance draws one decision with probability p. A zero rate draws nothing.
func (im *Impairer) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	return float64(im.pcg.Uint64()>>11)*(1.0/(1<<53)) < p
}

// intn draws an integer in [0, n) for small n (bias below 2^-32 · n).
func (im *Impairer) intn(n int) int {
	return int((im.pcg.Uint64() >> 32) * uint64(n) >> 32)
}

// Push takes the frame of length n (at most SlotSize) that arrived in slot at
// now and decides its fate: loss, corruption, reordering, duplication, delay,
// in that order (so a duplicate of a corrupted frame carries the same flipped
// bit). Only IPv4 frames are corrupted (see checksummed); the
// decision is drawn for every frame all the same, so the sequence of decisions
// does not depend on the frames' types. The slot belongs to the Impairer from here on.
func (im *Impairer) Push(now time.Duration, slot int32, n int) {
	im.Stats.Received++
	if im.chance(im.spec.Loss) {
		im.Stats.Dropped++
		im.Free(slot)
		return
	}
	if im.chance(im.spec.Corrupt) && checksummed(im.slot(slot)[:n]) {
		bit := im.intn((n - ethHeaderLen) * 8)
		im.slot(slot)[ethHeaderLen+bit/8] ^= 1 << (bit % 8)
		im.Stats.Corrupted++
	}
	hold := im.chance(im.spec.Reorder) && im.heldFrames < impairMaxHeld
	dup := im.chance(im.spec.Duplicate)
	due := now + im.spec.Delay
	if im.spec.Delay > 0 {
		im.Stats.Delayed++
	}
	e := impairEntry{slot: slot, n: int32(n), due: due}
	var d impairEntry
	if dup {
		if s, buf, ok := im.Alloc(); ok {
			copy(buf, im.slot(slot)[:n])
			d = impairEntry{slot: s, n: int32(n), due: due}
			im.Stats.Duplicated++
		} else {
			dup = false
			im.Stats.DupNoSlot++
		}
	}
	if hold {
		if im.heldFrames == 0 {
			im.heldDeadline = due + impairHoldMax
		}
		im.held = append(im.held, e)
		if dup {
			im.held = append(im.held, d)
		}
		im.heldFrames++
		return
	}
	im.enqueue(e)
	if dup {
		im.enqueue(d)
	}
	// This frame has passed every held frame: they follow it, at its release
	// time, which is no earlier than their own.
	for _, h := range im.held {
		h.due = due
		im.enqueue(h)
	}
	im.Stats.Reordered += uint64(im.heldFrames)
	im.held = im.held[:0]
	im.heldFrames = 0
}

func (im *Impairer) enqueue(e impairEntry) {
	// Cannot overflow: every entry owns a distinct slot and q has one entry per slot.
	im.q[(im.qHead+im.qLen)%len(im.q)] = e
	im.qLen++
}

// expire sends held frames on, in arrival order, once nothing has passed them
// for impairHoldMax past their delay. They are not counted as reordered.
func (im *Impairer) expire(now time.Duration) {
	if im.heldFrames == 0 || now < im.heldDeadline {
		return
	}
	for _, h := range im.held {
		im.enqueue(h) // their due times are at least those already queued
	}
	im.held = im.held[:0]
	im.heldFrames = 0
}

// Due fills out with frames whose release time has come, oldest first, and
// returns how many. The slices stay valid until Done; Due does not remove them.
func (im *Impairer) Due(now time.Duration, out [][]byte) int {
	im.expire(now)
	k := 0
	for k < len(out) && k < im.qLen {
		e := im.q[(im.qHead+k)%len(im.q)]
		if e.due > now {
			break
		}
		out[k] = im.slot(e.slot)[:e.n]
		k++
	}
	return k
}

// Done removes the first k frames returned by Due, of which sent went out;
// the rest count as SendErrors.
func (im *Impairer) Done(k, sent int) {
	for range k {
		im.Free(im.q[im.qHead].slot)
		im.qHead = (im.qHead + 1) % len(im.q)
		im.qLen--
	}
	im.Stats.Forwarded += uint64(sent)
	im.Stats.SendErrors += uint64(k - sent)
}

// Next says when a frame next becomes due; ok is false when nothing waits.
func (im *Impairer) Next() (at time.Duration, ok bool) {
	if im.qLen > 0 {
		return im.q[im.qHead].due, true
	}
	if im.heldFrames > 0 {
		return im.heldDeadline, true
	}
	return 0, false
}

// Queued is how many frames wait in the Impairer, held ones included.
func (im *Impairer) Queued() int { return im.qLen + len(im.held) }
