package netstack

import (
	"math/rand/v2"
	"time"
)

// Faults are per-frame probabilities (0 to 1) of each impairment.
type Faults struct {
	Loss    float64 // the frame vanishes
	Dup     float64 // the frame arrives twice (tx side only)
	Reorder float64 // the frame is held back and arrives after later frames
	Corrupt float64 // one random bit of the frame flips
}

// FaultLinkStats count the impairments a FaultLink applied.
type FaultLinkStats struct {
	RxLost, RxReordered, RxCorrupted               uint64
	TxLost, TxDuplicated, TxReordered, TxCorrupted uint64
	TxDupNoFrame                                   uint64 // duplicates skipped: no tx frame free
}

// FaultLink wraps a Link and impairs the frames passing through it, driven by
// a seeded PRNG so that a failing run repeats exactly.
//
// Received frames (what the stack reads) can be lost, corrupted or held back
// for a few RxBatch calls; transmitted frames (what the stack sends) can be
// lost, corrupted, duplicated or held back until a later Flush. With two
// stacks joined by ChanLink.ForwardTo, tx faults on each side give every fault
// in both directions.
//
// Held frames are released in at most reorderHold calls, so nothing is kept
// forever while the stack keeps polling. Not safe for concurrent use. It
// allocates only in NewFaultLink (and when a batch is larger than any before).
type FaultLink struct {
	inner  Link
	rx, tx Faults
	rng    *rand.Rand

	rxHeld  []heldFrame // rx frames lent by inner, delivered later
	txHeld  []heldFrame // tx frames to submit at a later Flush
	scratch []Frame     // frames to give back or submit in one batch
	out     []Frame
	one     [1]Frame // TxAlloc argument for a duplicate (a field: no escape per call)

	Stats FaultLinkStats
}

type heldFrame struct {
	f     Frame
	calls int // RxBatch or Flush calls left before release
}

// reorderHold is how many calls a reordered frame is held for.
const reorderHold = 2

// maxHeld bounds the frames held back in each direction.
const maxHeld = 16

// NewFaultLink wraps inner with rx and tx faults, seeded by seed.
func NewFaultLink(inner Link, rx, tx Faults, seed uint64) *FaultLink {
	return &FaultLink{
		inner: inner, rx: rx, tx: tx,
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		rxHeld:  make([]heldFrame, 0, maxHeld),
		txHeld:  make([]heldFrame, 0, maxHeld),
		scratch: make([]Frame, 0, 256),
		out:     make([]Frame, 0, 256),
	}
}

func (l *FaultLink) hit(p float64) bool { return p > 0 && l.rng.Float64() < p }

func (l *FaultLink) corrupt(b []byte) {
	if len(b) > 0 {
		i := l.rng.IntN(len(b))
		b[i] ^= 1 << l.rng.IntN(8)
	}
}

// RxClock implements Link: inner's.
func (l *FaultLink) RxClock() time.Time { return l.inner.RxClock() }

// MTU implements Link.
func (l *FaultLink) MTU() int { return l.inner.MTU() }

// RxBatch implements Link: held frames that are due come first, then new
// frames from inner, minus the lost and newly held ones. A held frame
// arrives when it is let go: it has no time.
func (l *FaultLink) RxBatch(fs []Frame, at []int64) int {
	n := 0
	j := 0
	for _, h := range l.rxHeld {
		h.calls--
		if h.calls <= 0 && n < len(fs) {
			fs[n] = h.f
			if at != nil {
				at[n] = 0
			}
			n++
			continue
		}
		l.rxHeld[j] = h
		j++
	}
	clear(l.rxHeld[j:])
	l.rxHeld = l.rxHeld[:j]

	var innerAt []int64
	if at != nil {
		innerAt = at[n:]
	}
	got := l.inner.RxBatch(fs[n:], innerAt)
	l.scratch = l.scratch[:0]
	for k, f := range fs[n : n+got] {
		switch {
		case l.hit(l.rx.Loss):
			l.Stats.RxLost++
			l.scratch = append(l.scratch, f)
			continue
		case len(l.rxHeld) < maxHeld && l.hit(l.rx.Reorder):
			l.Stats.RxReordered++
			l.rxHeld = append(l.rxHeld, heldFrame{f: f, calls: reorderHold})
			continue
		case l.hit(l.rx.Corrupt):
			l.Stats.RxCorrupted++
			l.corrupt(f.Buf)
		}
		if at != nil {
			at[n] = innerAt[k] // at n+k of the batch: not yet overwritten
		}
		fs[n] = f
		n++
	}
	if len(l.scratch) > 0 {
		l.inner.RxDone(l.scratch)
	}
	return n
}

// RxDone implements Link.
func (l *FaultLink) RxDone(fs []Frame) { l.inner.RxDone(fs) }

// TxAlloc implements Link.
func (l *FaultLink) TxAlloc(fs []Frame) int { return l.inner.TxAlloc(fs) }

// TxFree implements Link.
func (l *FaultLink) TxFree(fs []Frame) { l.inner.TxFree(fs) }

// TxSubmit implements Link.
func (l *FaultLink) TxSubmit(fs []Frame) {
	l.out = l.out[:0]
	l.scratch = l.scratch[:0]
	for _, f := range fs {
		if l.hit(l.tx.Loss) {
			l.Stats.TxLost++
			l.scratch = append(l.scratch, f)
			continue
		}
		if l.hit(l.tx.Dup) {
			d := l.one[:]
			d[0] = Frame{}
			if l.inner.TxAlloc(d) == 1 && len(d[0].Buf) >= len(f.Buf) {
				d[0].Buf = d[0].Buf[:copy(d[0].Buf, f.Buf)]
				l.out = append(l.out, d[0])
				l.Stats.TxDuplicated++
			} else {
				if len(d[0].Buf) > 0 {
					l.scratch = append(l.scratch, d[0])
				}
				l.Stats.TxDupNoFrame++
			}
		}
		if l.hit(l.tx.Corrupt) {
			l.Stats.TxCorrupted++
			l.corrupt(f.Buf)
		}
		if len(l.txHeld) < maxHeld && l.hit(l.tx.Reorder) {
			l.Stats.TxReordered++
			l.txHeld = append(l.txHeld, heldFrame{f: f, calls: reorderHold})
			continue
		}
		l.out = append(l.out, f)
	}
	if len(l.scratch) > 0 {
		l.inner.TxFree(l.scratch)
	}
	if len(l.out) > 0 {
		l.inner.TxSubmit(l.out)
	}
}

// Flush implements Link: held tx frames that are due go out after this
// Flush's frames, then inner is flushed.
func (l *FaultLink) Flush() {
	l.inner.Flush()
	l.out = l.out[:0]
	j := 0
	for _, h := range l.txHeld {
		h.calls--
		if h.calls <= 0 {
			l.out = append(l.out, h.f)
			continue
		}
		l.txHeld[j] = h
		j++
	}
	clear(l.txHeld[j:])
	l.txHeld = l.txHeld[:j]
	if len(l.out) > 0 {
		l.inner.TxSubmit(l.out)
		l.inner.Flush()
	}
}

// Held returns how many frames are held back (rx, tx).
func (l *FaultLink) Held() (rx, tx int) { return len(l.rxHeld), len(l.txHeld) }
