package native

import (
	"encoding/binary"
	"fmt"
	"time"

	"percore/afxdp"
	"percore/netstack"
)

// Software forwarding, for an interface with fewer rx queues than shards
// (RSSForward), as Seastar does on a NIC with too few queues: shard i < Q
// owns rx queue i; every shard runs a stack and owns the TCP flows that
// software RSS (toeplitz.go) hashes to it. The owner of a queue hashes each
// TCP segment it receives and copies the frames of another shard's flows
// into that shard's frameRing; its own it handles in place.
//
// What is not a TCP flow stays with the queue's owner, whose stack answers
// it: ICMP, ARP requests, fragments. ARP replies are copied to every shard
// besides, since each stack keeps its own neighbour cache and may have asked
// (a stack also learns a peer's address from the segments it receives).
//
// Transmit: a shard with a queue sends on it. A shard without one copies
// each frame it sends into a ring to its home queue's owner (shard
// i % Q), which copies it into a UMEM frame of its socket and sends it
// with its own. The other way to give such a shard a transmit path, an
// XDP_SHARED_UMEM socket bound to the same queue, shares the owner's fill
// and completion rings (the kernel gives a socket rings of its own only on
// another queue or device), so the frames it sent would come back to the
// owner's completion ring and travel back over a ring anyway, the UMEM
// would be written by two shards, and the owner could not close its socket
// before the other shard stops using it. With the ring, each socket and
// its UMEM stay with one shard, the owner's kick sends both shards' frames,
// and each tx frame costs one copy more (two: into the ring, into UMEM).

// Where a frame goes (forwarding.route): a shard's index, or one of these.
const (
	routeHere = -1 // the receiving shard's stack handles it
	routeAll  = -2 // every shard's stack sees it (ARP replies)
)

// retaSize is the software indirection table: entry i serves the flows
// whose hash has i in its low bits, and belongs to shard i % shards, as
// `ethtool -X IFACE equal N` deals a NIC's table.
const retaSize = 128

// forwarding is what the shards of one interface share to forward: the
// hash, the table and the rings. Built by Open, read-only after it (each
// ring is written only by its two ends); the eventfds close with the
// device.
type forwarding struct {
	shards, queues int
	hash           *flowHash
	keyNote        string // where the key came from, for the start-up line
	reta           [retaSize]uint16
	rx             [][]*frameRing // rx[o][p]: frames queue owner o hands shard p (nil where o == p)
	tx             []*frameRing   // tx[p]: frames queueless shard p hands its home owner to send (nil for owners)
	wake           []*waker       // wake[p]: shard p's, for the rings it reads
	slot           int            // bytes a ring slot holds: the largest frame
	ringSize       int
	// clock is the RxClock of every queue's link, whose receive times the
	// rings carry: the sockets' stamps all read CLOCK_MONOTONIC.
	clock time.Time
}

// forwardRing is the frames a ring holds: many polls' worth (a stack takes
// at most 4 batches of 64 a poll), so that a ring fills, and drops what
// comes next (FwdRingFull), only when its consumer stalls.
const forwardRing = 4096

func newForwarding(shards, queues, mtu int, key []byte, keyNote string) (_ *forwarding, err error) {
	f := &forwarding{shards: shards, queues: queues, hash: newFlowHash(key), keyNote: keyNote, slot: mtu + 14, ringSize: forwardRing, clock: afxdp.RxClock()}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	for i := range f.reta {
		f.reta[i] = uint16(i % shards)
	}
	f.rx = make([][]*frameRing, queues)
	for o := range queues {
		f.rx[o] = make([]*frameRing, shards)
		for p := range shards {
			if p != o {
				f.rx[o][p] = newFrameRing(f.ringSize, f.slot)
			}
		}
	}
	f.tx = make([]*frameRing, shards)
	for p := queues; p < shards; p++ {
		f.tx[p] = newFrameRing(f.ringSize, f.slot)
	}
	for range shards {
		w, err := newWaker()
		if err != nil {
			return nil, fmt.Errorf("native: forwarding: eventfd: %w", err)
		}
		f.wake = append(f.wake, w)
	}
	return f, nil
}

func (f *forwarding) close() {
	for _, w := range f.wake {
		w.close()
	}
	f.wake = nil
}

// home is the owner whose queue sends for queueless shard p.
func (f *forwarding) home(p int) int { return p % f.queues }

// route says which shard's stack takes frame b. A TCP segment over IPv4
// (not a fragment: it has its ports) goes to its flow's shard; an ARP reply
// to every shard; anything else stays. Frames the checks below pass may
// still be bad; the stack that takes them drops them and counts why.
func (f *forwarding) route(b []byte) int {
	if len(b) < 14+20 {
		if len(b) >= 14+8 && binary.BigEndian.Uint16(b[12:]) == 0x0806 && binary.BigEndian.Uint16(b[20:]) == 2 {
			return routeAll
		}
		return routeHere
	}
	switch binary.BigEndian.Uint16(b[12:]) {
	case 0x0800:
	case 0x0806:
		if binary.BigEndian.Uint16(b[20:]) == 2 {
			return routeAll
		}
		return routeHere
	default:
		return routeHere
	}
	ip := b[14:]
	hl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ip[9] != 6 || hl < 20 || len(ip) < hl+4 || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
		return routeHere
	}
	return int(f.reta[f.hash.sum(ip[12:20], ip[hl:hl+4])%retaSize])
}

// flowShard is the shard that software forwarding gives the TCP flow whose
// segments arrive from src to dst (both IPv4).
func (f *forwarding) flowShard(src, dst [4]byte, sport, dport uint16) int {
	var a [8]byte
	var p [4]byte
	copy(a[:4], src[:])
	copy(a[4:], dst[:])
	binary.BigEndian.PutUint16(p[:], sport)
	binary.BigEndian.PutUint16(p[2:], dport)
	return int(f.reta[f.hash.sum(a[:], p[:])%retaSize])
}

// ringTag marks a received frame's ID as a ring slot; the low bits are the
// ring's index in fwdLink.in. UMEM addresses never have the top bit.
const ringTag = 1 << 63

// fwdLink is the netstack.Link of one shard when the interface's queues are
// forwarded: over its queue's AF_XDP link (xsk) where it owns one, over the
// rings alone where it does not. Owned by the shard; the frames it lends
// follow the Link contract.
type fwdLink struct {
	f    *forwarding
	self int
	mtu  int
	xsk  netstack.Link // the link of the shard's queue (an AFXDPLink; tests: a ChanLink); nil: none

	in    []*frameRing // rings this shard receives from
	freed []int        // frames of each in ring the stack gave back in one RxDone
	out   []*frameRing // owner: out[p], the ring to shard p (nil at self)
	sent  []bool       // owner: out[p] got frames in this batch
	txIn  []*frameRing // owner: rings of the queueless shards it sends for
	txOut *frameRing   // queueless: the ring to the home owner

	batch   []netstack.Frame // owner: a batch from the socket, or of tx frames
	batchAt []int64          // owner: when each frame of a received batch arrived
	done    []netstack.Frame // owner: frames forwarded, back to the socket

	// Queueless: the transmit buffers the stack writes into (TxAlloc), and
	// the frames submitted that wait for room in txOut.
	pool  []byte
	free  []uint32
	queue []txFrame

	moved uint64      // frames forwarded either way: a poll that moved some did work
	stats *QueueStats // the shard's queue's, where forwarding counts too
}

type txFrame struct{ idx, n uint32 }

// newFwdLink is shard self's link; xsk is its queue's link (nil: none),
// txFrames the transmit buffers of a queueless shard, st where it counts.
func (f *forwarding) newFwdLink(self int, xsk netstack.Link, mtu, batch, txFrames int, st *QueueStats) *fwdLink {
	l := &fwdLink{f: f, self: self, mtu: mtu, xsk: xsk, stats: st}
	for o := range f.queues {
		if r := f.rx[o][self]; r != nil {
			l.in = append(l.in, r)
		}
	}
	l.freed = make([]int, len(l.in))
	if xsk != nil {
		l.out = f.rx[self]
		l.sent = make([]bool, f.shards)
		for p := f.queues; p < f.shards; p++ {
			if f.home(p) == self {
				l.txIn = append(l.txIn, f.tx[p])
			}
		}
		l.batch = make([]netstack.Frame, batch)
		l.batchAt = make([]int64, batch)
		l.done = make([]netstack.Frame, 0, batch)
		return l
	}
	l.txOut = f.tx[self]
	l.pool = make([]byte, txFrames*f.slot)
	l.free = make([]uint32, txFrames)
	for i := range l.free {
		l.free[i] = uint32(txFrames - 1 - i)
	}
	l.queue = make([]txFrame, 0, txFrames)
	return l
}

// RxBatch implements netstack.Link: the owner's queue first, its frames for
// other shards copied into their rings, with their arrival times, and
// given back to the socket at once, then the frames other owners forwarded
// to this shard.
func (l *fwdLink) RxBatch(fs []netstack.Frame, at []int64) int {
	k := 0
	if l.xsk != nil {
		// A batch that held only other shards' frames leaves room: take
		// another, a few times at most, so the stack's batch fills.
		for try := 0; try < 4 && k < len(fs); try++ {
			want := min(len(fs)-k, len(l.batch))
			n := l.xsk.RxBatch(l.batch[:want], l.batchAt[:want])
			for i, fr := range l.batch[:n] {
				switch to := l.f.route(fr.Buf); to {
				case routeHere, l.self:
					keep(fs, at, k, fr, l.batchAt[i])
					k++
				case routeAll:
					for p := range l.out {
						l.forward(p, fr.Buf, l.batchAt[i])
					}
					keep(fs, at, k, fr, l.batchAt[i])
					k++
				default:
					l.forward(to, fr.Buf, l.batchAt[i])
					l.done = append(l.done, fr)
				}
			}
			clear(l.batch[:n])
			l.giveBack()
			l.publish()
			if n < want {
				break
			}
		}
	}
	for r, ring := range l.in {
		for k < len(fs) {
			b, t := ring.take()
			if b == nil {
				break
			}
			keep(fs, at, k, netstack.Frame{Buf: b, ID: ringTag | uint64(r)}, t)
			k++
			l.stats.FwdIn++
			l.moved++
		}
	}
	return k
}

// keep puts frame fr, which arrived at t, at k of the batch RxBatch fills.
func keep(fs []netstack.Frame, at []int64, k int, fr netstack.Frame, t int64) {
	fs[k] = fr
	if at != nil {
		at[k] = t
	}
}

// forward copies frame b, which arrived at t, into the ring to shard p
// (none to ourselves).
func (l *fwdLink) forward(p int, b []byte, t int64) {
	r := l.out[p]
	if r == nil {
		return
	}
	s := r.next()
	if s == nil {
		l.stats.FwdRingFull++
		return
	}
	r.push(copy(s, b), t)
	l.sent[p] = true
	l.stats.FwdOut++
	l.moved++
}

// publish makes what forward copied visible, one store a ring, and wakes
// the shards that got frames.
func (l *fwdLink) publish() {
	for p, s := range l.sent {
		if s {
			l.sent[p] = false
			l.out[p].publish()
			l.f.wake[p].wake()
		}
	}
}

// giveBack returns the forwarded frames to the socket's fill ring.
func (l *fwdLink) giveBack() {
	if len(l.done) > 0 {
		l.xsk.RxDone(l.done)
		clear(l.done)
		l.done = l.done[:0]
	}
}

// RxDone implements netstack.Link: ring frames go back to their rings (in
// order: the stack gives back what it took, as it took it), the queue's to
// its socket.
func (l *fwdLink) RxDone(fs []netstack.Frame) {
	for _, fr := range fs {
		if fr.ID&ringTag != 0 {
			l.freed[fr.ID&^ringTag]++
			continue
		}
		l.done = append(l.done, fr)
		if len(l.done) == cap(l.done) {
			l.giveBack()
		}
	}
	l.giveBack()
	for r, n := range l.freed {
		if n > 0 {
			l.in[r].release(n)
			l.freed[r] = 0
		}
	}
}

// TxAlloc implements netstack.Link: the queue's frames, or the pool's.
func (l *fwdLink) TxAlloc(fs []netstack.Frame) int {
	if l.xsk != nil {
		return l.xsk.TxAlloc(fs)
	}
	n := min(len(fs), len(l.free))
	for i := range n {
		idx := l.free[len(l.free)-1]
		l.free = l.free[:len(l.free)-1]
		at := int(idx) * l.f.slot
		fs[i] = netstack.Frame{Buf: l.pool[at : at+l.mtu+14 : at+l.mtu+14], ID: uint64(idx)}
	}
	return n
}

// TxSubmit implements netstack.Link: on the queue, or queued for the ring
// to the home owner (Flush moves them).
func (l *fwdLink) TxSubmit(fs []netstack.Frame) {
	if l.xsk != nil {
		l.xsk.TxSubmit(fs)
		return
	}
	for _, fr := range fs {
		l.queue = append(l.queue, txFrame{idx: uint32(fr.ID), n: uint32(len(fr.Buf))})
	}
}

// TxFree implements netstack.Link.
func (l *fwdLink) TxFree(fs []netstack.Frame) {
	if l.xsk != nil {
		l.xsk.TxFree(fs)
		return
	}
	for _, fr := range fs {
		l.free = append(l.free, uint32(fr.ID))
	}
}

// Flush implements netstack.Link. An owner sends the frames its queueless
// shards handed it, then kicks its socket; a queueless shard copies what it
// submitted into the ring to its home owner and wakes it.
func (l *fwdLink) Flush() {
	if l.xsk != nil {
		l.sendForwarded()
		l.xsk.Flush()
		return
	}
	sent := 0
	for _, t := range l.queue {
		s := l.txOut.next()
		if s == nil {
			break // full: the rest waits for the owner
		}
		at := int(t.idx) * l.f.slot
		l.txOut.push(copy(s, l.pool[at:at+int(t.n)]), 0)
		l.free = append(l.free, t.idx)
		sent++
	}
	if sent > 0 {
		l.queue = l.queue[:copy(l.queue, l.queue[sent:])]
		l.txOut.publish()
		l.f.wake[l.f.home(l.self)].wake()
		l.stats.FwdTxOut += uint64(sent)
		l.moved += uint64(sent)
	}
}

// sendForwarded copies the frames queueless shards handed this owner into
// its socket's transmit frames and queues them; what finds no free frame
// waits in its ring for the next poll.
func (l *fwdLink) sendForwarded() {
	for _, r := range l.txIn {
		for {
			n := min(r.avail(), len(l.batch))
			if n == 0 {
				break
			}
			n = l.xsk.TxAlloc(l.batch[:n])
			for i := range n {
				b, _ := r.take()
				l.batch[i].Buf = l.batch[i].Buf[:copy(l.batch[i].Buf, b)]
			}
			l.xsk.TxSubmit(l.batch[:n])
			clear(l.batch[:n])
			r.release(n)
			l.stats.FwdTxSent += uint64(n)
			l.moved += uint64(n)
			if n < len(l.batch) {
				break // the ring is empty or the socket out of frames
			}
		}
	}
}

// MTU implements netstack.Link.
func (l *fwdLink) MTU() int { return l.mtu }

// RxClock implements netstack.Link: the forwarding's, which the times of
// the frames from every queue read.
func (l *fwdLink) RxClock() time.Time { return l.f.clock }

// ready reports whether frames wait in the rings this shard reads, or in
// its own queue for room in the ring to its owner.
func (l *fwdLink) ready() bool {
	for _, r := range l.in {
		if r.ready() {
			return true
		}
	}
	for _, r := range l.txIn {
		if r.ready() {
			return true
		}
	}
	return len(l.queue) > 0
}

// close counts the frames left in the rings this shard reads (dropped with
// it) and gives the queueless shard's queued frames back to its pool.
func (l *fwdLink) close() {
	left := 0
	for _, r := range l.in {
		left += r.len()
	}
	for _, r := range l.txIn {
		left += r.len()
	}
	l.stats.FwdRingsLeft = left
	for _, t := range l.queue {
		l.free = append(l.free, t.idx)
	}
	l.queue = l.queue[:0]
}

var _ netstack.Link = (*fwdLink)(nil)
