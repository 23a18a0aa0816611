package netstack

import "time"

// ChanLink is an in-memory Link for tests and benchmarks: a fixed pool of rx
// frames that tests fill with Inject, and a fixed pool of tx frames whose
// flushed contents tests read with Take (or move to another ChanLink with
// ForwardTo). It allocates only in NewChanLink.
//
// It checks the Link contract as it goes: a frame given back twice, or a frame
// the link did not lend, panics, since that is a bug in the stack under test.
// Frames submitted but not yet flushed are not visible to Take, as on a NIC
// that is not kicked.
//
// Not safe for concurrent use; owned by the test (or the shard) that made it.
type ChanLink struct {
	mtu    int
	size   int    // bytes per frame: MTU + Ethernet header
	nframe int    // frames per pool; rx IDs are [0,n), tx IDs [n,2n)
	mem    []byte // all frames
	state  []uint8
	rxAt   []int64 // each rx frame's arrival, set by InjectAt: Unix ns, 0 if none

	rxFree []uint64 // free rx frame IDs (stack)
	rxQ    ring     // injected, waiting for RxBatch
	txFree []uint64 // free tx frame IDs (stack)
	txQ    ring     // submitted, waiting for Flush
	outQ   ring     // flushed, waiting for Take

	Stats ChanLinkStats
}

// ChanLinkStats count what passed through a ChanLink.
type ChanLinkStats struct {
	Injected     uint64 // frames queued by Inject
	InjectDrops  uint64 // Inject calls refused: no free rx frame, or too long
	RxDelivered  uint64 // frames handed out by RxBatch
	TxAllocated  uint64 // frames lent by TxAlloc
	TxAllocShort uint64 // TxAlloc calls that could not fill the request
	TxSubmitted  uint64 // frames submitted
	TxFreed      uint64 // frames given back unsent
	Flushes      uint64 // Flush calls
	Taken        uint64 // frames read by Take or ForwardTo
}

// Frame states, for contract checks.
const (
	clFree      = iota
	clRxQueued  // injected
	clRxLent    // handed out by RxBatch
	clTxLent    // handed out by TxAlloc
	clTxQueued  // submitted
	clTxFlushed // waiting for Take
)

// ring is a fixed-capacity FIFO of frame IDs and lengths.
type ring struct {
	id   []uint64
	n    []int
	head int
	len  int
}

func newRing(c int) ring { return ring{id: make([]uint64, c), n: make([]int, c)} }

// push and pop wrap with a compare, not %: a division per frame showed up
// as a tenth of the stack benchmarks' time.
func (r *ring) push(id uint64, n int) {
	i := r.head + r.len
	if i >= len(r.id) {
		i -= len(r.id)
	}
	r.id[i], r.n[i] = id, n
	r.len++
}

func (r *ring) pop() (uint64, int) {
	id, n := r.id[r.head], r.n[r.head]
	if r.head++; r.head == len(r.id) {
		r.head = 0
	}
	r.len--
	return id, n
}

// NewChanLink makes a link that carries IP packets of up to mtu bytes, with
// frames rx frames and frames tx frames.
func NewChanLink(mtu, frames int) *ChanLink {
	if mtu < 68 || frames < 1 {
		panic("netstack: NewChanLink needs mtu >= 68 and frames >= 1")
	}
	l := &ChanLink{
		mtu: mtu, size: mtu + EthernetHeaderLen, nframe: frames,
		mem:    make([]byte, 2*frames*(mtu+EthernetHeaderLen)),
		state:  make([]uint8, 2*frames),
		rxAt:   make([]int64, frames),
		rxFree: make([]uint64, 0, frames),
		txFree: make([]uint64, 0, frames),
		rxQ:    newRing(frames), txQ: newRing(frames), outQ: newRing(frames),
	}
	for i := frames - 1; i >= 0; i-- {
		l.rxFree = append(l.rxFree, uint64(i))
		l.txFree = append(l.txFree, uint64(frames+i))
	}
	return l
}

func (l *ChanLink) buf(id uint64) []byte {
	o := int(id) * l.size
	return l.mem[o : o+l.size : o+l.size]
}

func (l *ChanLink) check(id uint64, want uint8, op string) {
	if id >= uint64(len(l.state)) || l.state[id] != want {
		panic("netstack: ChanLink." + op + ": frame not lent for this (double free or foreign frame)")
	}
}

// MTU implements Link.
func (l *ChanLink) MTU() int { return l.mtu }

// Inject queues a copy of frame for the stack to receive, with no receive
// time. It returns false (counted in InjectDrops) when every rx frame is in
// use or frame is longer than MTU+14 bytes.
func (l *ChanLink) Inject(frame []byte) bool { return l.InjectAt(frame, time.Time{}) }

// InjectAt is Inject for a frame that arrived at at (the zero Time: not
// known). RxBatch reports it as Unix nanoseconds (RxClock is the Unix
// epoch), so a time at the Unix epoch itself reads as not known.
func (l *ChanLink) InjectAt(frame []byte, at time.Time) bool {
	if len(l.rxFree) == 0 || len(frame) > l.size {
		l.Stats.InjectDrops++
		return false
	}
	id := l.rxFree[len(l.rxFree)-1]
	l.rxFree = l.rxFree[:len(l.rxFree)-1]
	copy(l.buf(id), frame)
	l.rxAt[id] = 0
	if !at.IsZero() {
		l.rxAt[id] = at.UnixNano()
	}
	l.state[id] = clRxQueued
	l.rxQ.push(id, len(frame))
	l.Stats.Injected++
	return true
}

// RxBatch implements Link.
func (l *ChanLink) RxBatch(fs []Frame, at []int64) int {
	n := 0
	for n < len(fs) && l.rxQ.len > 0 {
		id, ln := l.rxQ.pop()
		l.state[id] = clRxLent
		fs[n] = Frame{Buf: l.buf(id)[:ln], ID: id}
		if at != nil {
			at[n] = l.rxAt[id]
		}
		n++
	}
	l.Stats.RxDelivered += uint64(n)
	return n
}

// RxClock implements Link: InjectAt's times are Unix nanoseconds.
func (l *ChanLink) RxClock() time.Time { return time.Unix(0, 0) }

// RxDone implements Link.
func (l *ChanLink) RxDone(fs []Frame) {
	for _, f := range fs {
		l.check(f.ID, clRxLent, "RxDone")
		l.state[f.ID] = clFree
		l.rxFree = append(l.rxFree, f.ID)
	}
}

// TxAlloc implements Link.
func (l *ChanLink) TxAlloc(fs []Frame) int {
	n := 0
	for n < len(fs) && len(l.txFree) > 0 {
		id := l.txFree[len(l.txFree)-1]
		l.txFree = l.txFree[:len(l.txFree)-1]
		l.state[id] = clTxLent
		fs[n] = Frame{Buf: l.buf(id), ID: id}
		n++
	}
	if n < len(fs) {
		l.Stats.TxAllocShort++
	}
	l.Stats.TxAllocated += uint64(n)
	return n
}

// TxSubmit implements Link.
func (l *ChanLink) TxSubmit(fs []Frame) {
	for _, f := range fs {
		l.check(f.ID, clTxLent, "TxSubmit")
		if len(f.Buf) > l.size {
			panic("netstack: ChanLink.TxSubmit: frame longer than MTU+14")
		}
		l.state[f.ID] = clTxQueued
		l.txQ.push(f.ID, len(f.Buf))
	}
	l.Stats.TxSubmitted += uint64(len(fs))
}

// TxFree implements Link.
func (l *ChanLink) TxFree(fs []Frame) {
	for _, f := range fs {
		l.check(f.ID, clTxLent, "TxFree")
		l.state[f.ID] = clFree
		l.txFree = append(l.txFree, f.ID)
	}
	l.Stats.TxFreed += uint64(len(fs))
}

// Flush implements Link: submitted frames become visible to Take.
func (l *ChanLink) Flush() {
	l.Stats.Flushes++
	for l.txQ.len > 0 {
		id, n := l.txQ.pop()
		l.state[id] = clTxFlushed
		l.outQ.push(id, n)
	}
}

// Sent returns how many flushed frames wait for Take.
func (l *ChanLink) Sent() int { return l.outQ.len }

// Take returns the oldest flushed frame and recycles it. The slice aliases
// the link's memory: it is valid until the next TxAlloc (the next call into
// the stack); copy it to keep it.
func (l *ChanLink) Take() ([]byte, bool) {
	if l.outQ.len == 0 {
		return nil, false
	}
	id, n := l.outQ.pop()
	l.state[id] = clFree
	l.txFree = append(l.txFree, id)
	l.Stats.Taken++
	return l.buf(id)[:n], true
}

// Discard recycles every flushed frame unread and returns how many there were.
func (l *ChanLink) Discard() int {
	n := 0
	for ; l.outQ.len > 0; n++ {
		l.Take()
	}
	return n
}

// ForwardTo moves every flushed frame into dst's rx queue (as Inject does)
// and returns how many arrived; frames dst cannot take are dropped and
// counted in dst's InjectDrops. Two stacks on two ChanLinks talk through it.
func (l *ChanLink) ForwardTo(dst *ChanLink) int {
	n := 0
	for l.outQ.len > 0 {
		b, _ := l.Take()
		if dst.Inject(b) {
			n++
		}
	}
	return n
}

// Lent returns how many rx frames are lent out by RxBatch and how many tx
// frames are lent out by TxAlloc (neither submitted nor freed): after Poll,
// rx is 0 and tx is the stack's Pending count.
func (l *ChanLink) Lent() (rx, tx int) {
	for _, st := range l.state {
		switch st {
		case clRxLent:
			rx++
		case clTxLent:
			tx++
		}
	}
	return rx, tx
}
