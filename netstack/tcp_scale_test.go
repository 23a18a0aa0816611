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

// BenchmarkTCPTimerSchedule moves random timers of many armed conns, as
// ACKs (re-arm later), sends (arm) and the last ACK of a burst (disarm) do.
func BenchmarkTCPTimerSchedule(b *testing.B) {
	l := scaleLayer(b, scaleConns)
	rnd := uint64(1)
	next := func() uint64 { rnd ^= rnd << 13; rnd ^= rnd >> 7; rnd ^= rnd << 17; return rnd }
	for _, c := range l.conns {
		c.rtxAt = 1 + int64(next()%1e9)
		l.schedule(c)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := next()
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
	l := scaleLayer(b, scaleConns)
	rnd := uint64(1)
	next := func() uint64 { rnd ^= rnd << 13; rnd ^= rnd >> 7; rnd ^= rnd << 17; return rnd }
	for _, c := range l.conns {
		c.rtxAt = 1 + int64(next()%1e9)
		l.schedule(c)
	}
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
	rnd := uint64(1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rnd ^= rnd << 13
		rnd ^= rnd >> 7
		rnd ^= rnd << 17
		if l.table.lookup(scaleKey(int(rnd%scaleConns))) < 0 {
			b.Fatal("key missing")
		}
	}
}

func scaleEarliest(l *tcpLayer) *tcpConn { return l.conns[l.timers.h[0].id] }
