package shard

import (
	"math/bits"
	"time"
)

// Timer is an intrusive timer: embed it in the object it times (a connection, a
// TCP control block) and set its callback once with Init. Starting, moving and
// stopping a timer never allocates. A Timer belongs to one Wheel, hence to one
// shard, and must only be touched from that shard's goroutine.
type Timer struct {
	prev, next *Timer // linked into a slot or the expired list while armed
	when       int64  // deadline in wheel ticks since the wheel's epoch
	at         time.Time
	fire       func(now time.Time)
}

// Init sets the callback run when the timer expires. The callback runs on the
// shard's goroutine inside Wheel.Advance; it may start or stop any timer,
// including its own.
func (t *Timer) Init(fire func(now time.Time)) { t.fire = fire }

// Armed reports whether the timer is started and has not fired or been stopped.
func (t *Timer) Armed() bool { return t.prev != nil }

// When is the deadline the timer was last started with.
func (t *Timer) When() time.Time { return t.at }

func (t *Timer) unlink() {
	t.prev.next = t.next
	t.next.prev = t.prev
	t.prev, t.next = nil, nil
}

// list is a circular doubly-linked list with a sentinel node.
type list struct{ head Timer }

func (l *list) init()       { l.head.prev, l.head.next = &l.head, &l.head }
func (l *list) empty() bool { return l.head.next == &l.head }
func (l *list) push(t *Timer) {
	t.prev = l.head.prev
	t.next = &l.head
	l.head.prev.next = t
	l.head.prev = t
}

// Wheel is a hashed timing wheel: slots of one tick each, a timer hashed into the
// slot of its deadline tick and checked against its exact tick when the slot
// comes round, so timers further out than one revolution simply wait extra turns.
// Start and Stop are O(1); a bitmap of non-empty slots lets Advance skip empty
// slots 64 at a time and makes Next cheap enough to call before every sleep.
//
// The wheel never reads a clock: time is the argument of Start, Advance and Next,
// so tests drive it with a fake clock. Owned by one shard.
type Wheel struct {
	epoch   time.Time
	tick    time.Duration
	mask    int64
	cur     int64 // the last tick Advance processed
	slots   []list
	used    []uint64 // bit i set: slots[i] may be non-empty
	count   int
	expired list
}

// NewWheel makes a wheel whose tick 0 is epoch. slots is rounded up to a power
// of two; tick is the resolution (timers never fire early, and up to one tick
// late).
func NewWheel(epoch time.Time, tick time.Duration, slots int) *Wheel {
	n := 64
	for n < slots {
		n <<= 1
	}
	w := &Wheel{epoch: epoch, tick: tick, mask: int64(n - 1), slots: make([]list, n), used: make([]uint64, n/64)}
	for i := range w.slots {
		w.slots[i].init()
	}
	w.expired.init()
	return w
}

// Len is the number of armed timers.
func (w *Wheel) Len() int { return w.count }

// ticks converts a time to the first tick at or after it.
func (w *Wheel) ticks(t time.Time) int64 {
	d := t.Sub(w.epoch)
	if d <= 0 {
		return 0
	}
	return int64((d + w.tick - 1) / w.tick)
}

// Start arms t to fire at deadline at (or re-arms it if it was armed). A
// deadline in the past fires on the next Advance.
func (w *Wheel) Start(t *Timer, at time.Time) {
	if t.Armed() {
		t.unlink()
		w.count--
	}
	t.at = at
	t.when = w.ticks(at)
	slot := t.when
	if slot <= w.cur {
		slot = w.cur + 1
	}
	i := slot & w.mask
	w.slots[i].push(t)
	w.used[i>>6] |= 1 << (i & 63)
	w.count++
}

// Stop disarms t; stopping a timer that is not armed does nothing.
func (w *Wheel) Stop(t *Timer) {
	if !t.Armed() {
		return
	}
	t.unlink()
	w.count--
}

// Advance fires, in deadline-tick order, every timer whose deadline is at or
// before now, and returns how many fired.
func (w *Wheel) Advance(now time.Time) int {
	// Timers fire once their whole deadline tick has passed: a timer for tick k
	// covers (k-1, k] ticks after epoch, so the last complete tick is floor.
	end := int64(now.Sub(w.epoch) / w.tick)
	if end <= w.cur {
		return 0
	}
	if w.count == 0 {
		w.cur = end
		return 0
	}
	// Past one full revolution every slot is visited once.
	from := w.cur + 1
	if end-from > w.mask {
		from = end - w.mask
	}
	for tk := from; tk <= end; tk++ {
		i := tk & w.mask
		// Skip to the next slot with timers: a fine tick passes many
		// empty slots between two loop iterations.
		if word := w.used[i>>6] >> (i & 63); word == 0 {
			tk += 63 - i&63
			continue
		} else if z := int64(bits.TrailingZeros64(word)); z > 0 {
			tk += z - 1
			continue
		}
		s := &w.slots[i]
		for t := s.head.next; t != &s.head; {
			next := t.next
			if t.when <= end {
				t.unlink()
				w.expired.push(t)
			}
			t = next
		}
		if s.empty() {
			w.used[i>>6] &^= 1 << (i & 63)
		}
	}
	w.cur = end
	// Fire from a separate list so callbacks may start or stop any timer.
	fired := 0
	for !w.expired.empty() {
		t := w.expired.head.next
		t.unlink()
		w.count--
		fired++
		if t.fire != nil {
			t.fire(now)
		}
	}
	return fired
}

// Next returns when Advance should next be called: the tick boundary at which
// the earliest armed timer fires (exact when that deadline is within one
// revolution of the wheel; further out, the wheel asks to be woken once per
// revolution), and false when no timer is armed. A shard sleeps until then.
func (w *Wheel) Next() (time.Time, bool) {
	if w.count == 0 {
		return time.Time{}, false
	}
	n := int64(len(w.slots))
	for off := int64(1); off <= n; {
		i := (w.cur + off) & w.mask
		word := w.used[i>>6] >> (i & 63)
		if word == 0 {
			off += 64 - (i & 63)
			continue
		}
		off += int64(bits.TrailingZeros64(word)) // the next slot with timers
		if off > n {
			break
		}
		i = (w.cur + off) & w.mask
		s := &w.slots[i]
		min := int64(-1)
		for t := s.head.next; t != &s.head; t = t.next {
			if min < 0 || t.when < min {
				min = t.when
			}
		}
		tk := w.cur + off
		if min >= 0 && min <= tk {
			tk = min
		}
		if min < 0 {
			off++
			continue
		}
		return w.epoch.Add(time.Duration(tk) * w.tick), true
	}
	return w.epoch.Add(time.Duration(w.cur+n) * w.tick), true
}
