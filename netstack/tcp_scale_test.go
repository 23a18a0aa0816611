package netstack

import (
	"testing"
	"time"
)

// scaleConns is the connection count of the scale benchmarks: one queue's
// table at the closed loop's 256K connections.
const scaleConns = 256 << 10

// scaleLayer is a layer with n conns made directly (no handshakes), each
// with its key in the table.
func scaleLayer(tb testing.TB, n int) *tcpLayer {
	cfg := tcpTestConfig()
	cfg.MaxConns, cfg.SynBacklog = n, n
	l := newTCPLayer(cfg, &fakeSink{}, time.Unix(0, 0))
	for i := range n {
		l.newConn(scaleKey(i))
	}
	return l
}

func scaleKey(i int) tcpKey {
	return tcpKey{raddr: 0xc6120000 | uint32(i>>16), laddr: 0xc6130001, rport: uint16(i), lport: 80}
}

// xorshift is a fixed pseudo-random sequence (Marsaglia's xorshift64).
type xorshift uint64

func (x *xorshift) next() uint64 {
	*x ^= *x << 13
	*x ^= *x >> 7
	*x ^= *x << 17
	return uint64(*x)
}

// scaleArmed is scaleLayer with every conn's timer armed at random within
// a second, and the sequence that chose them.
func scaleArmed(tb testing.TB) (*tcpLayer, *xorshift) {
	l := scaleLayer(tb, scaleConns)
	rnd := xorshift(1)
	for _, c := range l.conns {
		c.rtxAt = 1 + int64(rnd.next()%1e9)
		l.schedule(c)
	}
	return l, &rnd
}

// BenchmarkTCPTimerSchedule moves random timers of many armed conns, as
// ACKs (re-arm later), sends (arm) and the last ACK of a burst (disarm) do.
func BenchmarkTCPTimerSchedule(b *testing.B) {
	l, rnd := scaleArmed(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := rnd.next()
		c := l.conns[r%scaleConns]
		if r>>40%8 == 0 {
			c.rtxAt = 0
		} else {
			c.rtxAt = int64(i) + 1 + int64(r>>32%1e9)
		}
		l.schedule(c)
	}
}

// BenchmarkTCPTimerFire pops the earliest timer and arms it again later,
// as poll does when timers come due.
func BenchmarkTCPTimerFire(b *testing.B) {
	l, _ := scaleArmed(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := scaleEarliest(l)
		c.rtxAt += 1e9
		l.schedule(c)
	}
}

// BenchmarkTCPTableLookup looks up random keys of a full table.
func BenchmarkTCPTableLookup(b *testing.B) {
	l := scaleLayer(b, scaleConns)
	rnd := xorshift(1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if l.table.lookup(scaleKey(int(rnd.next()%scaleConns))) < 0 {
			b.Fatal("key missing")
		}
	}
}

func scaleEarliest(l *tcpLayer) *tcpConn { return l.conns[l.timers.h[0].id] }

// TestTCPTableSpread: 256K keys as a load generator makes them (ports in
// turn, a few addresses) spread over the table: short probe runs.
func TestTCPTableSpread(t *testing.T) {
	l := scaleLayer(t, scaleConns)
	total, longest := 0, 0
	for i := range scaleConns {
		k := scaleKey(i)
		d := 0
		for j := l.table.hash(k) & l.table.mask; l.table.slots[j].key != k; j = (j + 1) & l.table.mask {
			d++
		}
		total += d
		longest = max(longest, d)
	}
	// Linear probing at load 1/2 with a random hash finds a key 0.5 slots
	// past its home on average (Knuth); a hash that clusters these keys
	// gives hundreds.
	if mean := float64(total) / scaleConns; mean > 1 || longest > 64 {
		t.Fatalf("mean probe distance %.2f, longest %d", mean, longest)
	}
	t.Logf("mean probe distance %.3f, longest %d", float64(total)/scaleConns, longest)
}
