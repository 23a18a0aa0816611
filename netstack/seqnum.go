package netstack

// seqnum is a TCP sequence number. Arithmetic wraps modulo 2^32 and
// comparisons are valid while the two values are less than 2^31 apart
// (RFC 9293 §3.4: "It is essential to remember that the actual sequence number
// space is finite ... all arithmetic dealing with sequence numbers must be
// performed modulo 2**32").
type seqnum uint32

// lt reports v < w in sequence space.
func (v seqnum) lt(w seqnum) bool { return int32(v-w) < 0 }

// leq reports v <= w in sequence space.
func (v seqnum) leq(w seqnum) bool { return int32(v-w) <= 0 }

// gt reports v > w in sequence space.
func (v seqnum) gt(w seqnum) bool { return int32(v-w) > 0 }

// geq reports v >= w in sequence space.
func (v seqnum) geq(w seqnum) bool { return int32(v-w) >= 0 }

// add returns v + n.
func (v seqnum) add(n uint32) seqnum { return v + seqnum(n) }

// diff returns the distance v - w; meaningful when w <= v.
func (v seqnum) diff(w seqnum) uint32 { return uint32(v - w) }

// inWindow reports first <= v < first+size.
func (v seqnum) inWindow(first seqnum, size uint32) bool {
	return uint32(v-first) < size
}

// seqMax returns the later of v and w.
func seqMax(v, w seqnum) seqnum {
	if v.lt(w) {
		return w
	}
	return v
}

// seqMin returns the earlier of v and w.
func seqMin(v, w seqnum) seqnum {
	if v.lt(w) {
		return v
	}
	return w
}
