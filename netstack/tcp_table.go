package netstack

import "math/bits"

// tcpTable maps a 4-tuple to a conn index: open addressing with linear
// probing over a power-of-two array at most half full, and backward-shift
// deletion (no tombstones). A lookup hashes the key once and allocates
// nothing. The hash is keyed by a per-layer secret, so that a peer cannot
// choose ports that collide: two rounds of a 64x64->128-bit multiply-fold
// of the key words and the secret (as wyhash, and Go's map hash without
// AES, do), a few nanoseconds where SipHash took tens on every segment.
type tcpTable struct {
	slots []tcpSlot
	mask  uint32
	n     int
	key   [2]uint64
}

type tcpSlot struct {
	key tcpKey
	idx int32 // conn index + 1; 0 is empty
}

func (t *tcpTable) init(max int, key [2]uint64) {
	size := 16
	for size < 2*max {
		size <<= 1
	}
	t.slots = make([]tcpSlot, size)
	t.mask = uint32(size - 1)
	t.key = key
}

func (t *tcpTable) hash(k tcpKey) uint32 {
	a, b := k.words()
	h := mulFold(a^t.key[0], b^t.key[1])
	return uint32(mulFold(h^t.key[1], t.key[0]^0x9e3779b97f4a7c15))
}

// mulFold is the 128-bit product of x and y, its halves xored.
func mulFold(x, y uint64) uint64 {
	hi, lo := bits.Mul64(x, y)
	return hi ^ lo
}

// lookup returns the conn index for k, or -1.
func (t *tcpTable) lookup(k tcpKey) int32 {
	for i := t.hash(k) & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.idx == 0 {
			return -1
		}
		if s.key == k {
			return s.idx - 1
		}
	}
}

// insert adds k (not present; the table has room by MaxConns).
func (t *tcpTable) insert(k tcpKey, idx int32) {
	i := t.hash(k) & t.mask
	for t.slots[i].idx != 0 {
		i = (i + 1) & t.mask
	}
	t.slots[i] = tcpSlot{key: k, idx: idx + 1}
	t.n++
}

// remove deletes k, shifting later entries of the probe run back so that
// lookups never need tombstones.
func (t *tcpTable) remove(k tcpKey) {
	i := t.hash(k) & t.mask
	for {
		if t.slots[i].idx == 0 {
			return
		}
		if t.slots[i].key == k {
			break
		}
		i = (i + 1) & t.mask
	}
	t.n--
	j := i
	for {
		t.slots[i] = tcpSlot{}
		for {
			j = (j + 1) & t.mask
			if t.slots[j].idx == 0 {
				return
			}
			h := t.hash(t.slots[j].key) & t.mask
			// Move slot j to the hole at i unless its home h lies
			// cyclically in (i, j].
			if (i <= j && (h <= i || h > j)) || (i > j && h <= i && h > j) {
				break
			}
		}
		t.slots[i] = t.slots[j]
		i = j
	}
}
