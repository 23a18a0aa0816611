package netstack

import (
	"math/rand/v2"
	"testing"
)

// The open-addressing table against a map, through random inserts and
// removes at high load (backward-shift deletion is the subtle part).
func TestTCPTableAgainstMap(t *testing.T) {
	var tb tcpTable
	tb.init(64, [2]uint64{1, 2}) // 128 slots
	ref := map[tcpKey]int32{}
	rng := rand.New(rand.NewPCG(3, 4))
	key := func() tcpKey {
		return tcpKey{raddr: 0xC6120000 | uint32(rng.IntN(8)), laddr: 0xC6120001, rport: uint16(rng.IntN(16)), lport: 80}
	}
	for i := 0; i < 200000; i++ {
		k := key()
		_, in := ref[k]
		switch {
		case !in && len(ref) < 64:
			tb.insert(k, int32(i))
			ref[k] = int32(i)
		case in:
			tb.remove(k)
			delete(ref, k)
		}
		if i%97 == 0 {
			for k, v := range ref {
				if got := tb.lookup(k); got != v {
					t.Fatalf("step %d: lookup %v = %d, want %d", i, k, got, v)
				}
			}
			if tb.n != len(ref) {
				t.Fatalf("n %d, map %d", tb.n, len(ref))
			}
		}
		if _, ok := ref[k]; (tb.lookup(k) >= 0) != ok {
			t.Fatalf("step %d: lookup %v after the op: present %v", i, k, !ok)
		}
	}
}

// A SYN flood from many ports: the backlog holds SynBacklog half-open
// connections, the rest get cookies, memory does not grow.
func TestTCPSynFlood(t *testing.T) {
	cfg := tcpTestConfig()
	cfg.MaxConns, cfg.SynBacklog = 64, 16
	x := newTCPTest(t, cfg)
	x.sink.keep = false
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 10000; i++ {
		src := IPv4Addr{198, 18, byte(rng.IntN(256)), byte(rng.IntN(256))}
		x.sendFrom(src, uint16(rng.Uint32()), seg{TCPFields: fl(S, rng.Uint32(), 0, 8192)})
	}
	st := x.stats()
	if st.SynRcvd != 16 || st.Conns != 16 || st.SynCookiesSent != 10000-16 || len(x.l.conns) != 16 {
		t.Fatalf("stats %+v, %d conns made", st, len(x.l.conns))
	}
	// The half-open ones time out; nothing is left.
	for i := 0; i < 10; i++ {
		x.advance(30 * 1e9)
	}
	if st := x.stats(); st.Conns != 0 || st.SynRcvdTimeout != 16 {
		t.Fatalf("stats %+v", st)
	}
}
