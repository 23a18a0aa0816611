package netstack

// MemBudget is one shard's memory budget for the buffers its connections
// hold: TCP receive and reassembly buffers (the shard's stacks), and what
// the application above charges to it (httpd's input buffers and output
// arenas). It counts the bytes of buffers made and not yet dropped, lent or
// pooled, against a limit:
//
//   - below 3/4 of the limit, nothing changes;
//   - above it (Pressure), TCP opens no connection's window beyond a small
//     buffer's worth, lends small buffers, sends SYN cookies instead of
//     keeping SYN-RECEIVED state, and buffers given back are dropped rather
//     than pooled;
//   - at the limit, what would grow past it is refused (TryTake): an
//     out-of-order segment that needs a buffer is dropped (it was never
//     SACKed; the sender sends it again), a SYN is shed, and httpd answers
//     a request whose input outgrows its buffer with 503.
//
// Owned by one shard and shared by its stacks and apps on that goroutine;
// not safe for concurrent use. The zero limit means no limit.
type MemBudget struct {
	limit, high int
	used, peak  int
	stats       MemStats
}

// MemStats are a budget's counters. Each field's stat tag says what it
// counts for reports.
type MemStats struct {
	Refused   uint64 `stat:"drop"`  // TryTake calls refused at the limit
	Pressured uint64 `stat:"count"` // times the budget went above 3/4 of its limit
	Used      int    `stat:"gauge"` // bytes now held
	Peak      int    `stat:"gauge"` // the most bytes held at once
	Limit     int    `stat:"gauge"` // the limit (0: none)
}

// NewMemBudget makes a budget of limit bytes; 0 or less: no limit.
func NewMemBudget(limit int) *MemBudget {
	limit = max(limit, 0)
	return &MemBudget{limit: limit, high: limit - limit/4}
}

// Limit returns the budget's limit in bytes (0: none).
func (b *MemBudget) Limit() int { return b.limit }

// Used returns the bytes now held.
func (b *MemBudget) Used() int { return b.used }

// Pressure reports whether more than 3/4 of the limit is held: time to
// hold back before the limit refuses.
func (b *MemBudget) Pressure() bool { return b.limit > 0 && b.used > b.high }

// Take charges n bytes that must be had (a connection's first input
// buffer), even past the limit.
func (b *MemBudget) Take(n int) {
	was := b.Pressure()
	b.used += n
	b.peak = max(b.peak, b.used)
	if !was && b.Pressure() {
		b.stats.Pressured++
	}
}

// TryTake charges n bytes if they fit under the limit, and reports whether
// they did (refusals are counted).
func (b *MemBudget) TryTake(n int) bool {
	if b.limit > 0 && b.used+n > b.limit {
		b.stats.Refused++
		return false
	}
	b.Take(n)
	return true
}

// Give returns n bytes taken before.
func (b *MemBudget) Give(n int) { b.used -= n }

// Stats returns the budget's counters and gauges.
func (b *MemBudget) Stats() MemStats {
	st := b.stats
	st.Used, st.Peak, st.Limit = b.used, b.peak, b.limit
	return st
}
