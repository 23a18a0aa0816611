package netstack

import (
	"runtime"
	"strings"
	"testing"
)

// memTest is the fixture with a budget of limit bytes and n established
// connections with SACK, from remote ports tRPort+i.
func memTest(t *testing.T, limit, n int) (*tcpTest, *MemBudget, []*tcpConn, []*testApp) {
	cfg := tcpTestConfig()
	b := NewMemBudget(limit)
	cfg.Budget = b
	x := newTCPTest(t, cfg)
	var cs []*tcpConn
	var apps []*testApp
	for i := 0; i < n; i++ {
		x.key.rport = tRPort + uint16(i)
		c, app := x.establish()
		c.sackOK = true
		cs, apps = append(cs, c), append(apps, app)
	}
	return x, b, cs, apps
}

// sendData sends data at seq on connection i and returns the ACK it got,
// delayed or not.
func (x *tcpTest) sendData(i int, seq uint32, data string) seg {
	x.t.Helper()
	x.sendFrom(tRemote, tRPort+uint16(i), seg{TCPFields: fl(A, seq, tISS+1, 65535), data: data})
	got := x.recv()
	if len(got) == 0 {
		x.advance(x.l.cfg.DelayedAck)
		got = x.recv()
	}
	if len(got) != 1 {
		x.t.Fatalf("conn %d: %d segments in answer", i, len(got))
	}
	return got[0]
}

// Many connections each holding out-of-order data exhaust the budget: the
// first ones get buffers, then the budget's pressure holds windows back
// and, at its limit, refuses buffers. A refused segment is dropped before
// it was ever SACKed, and comes again; nothing is lost, and once every
// connection closes no buffer is lent and the budget holds just the pool.
func TestTCPMemBudgetOOO(t *testing.T) {
	full := rcvBufBytes(32768)
	x, b, cs, apps := memTest(t, 4*full, 8)
	hole := strings.Repeat("a", 1000)
	ooo := strings.Repeat("b", 1000)
	for i := range cs {
		ack := x.sendData(i, tIRS+1+1000, ooo)
		held := ack.NSACK == 1 && ack.SACK[0] == TCPSACKBlock{tIRS + 1 + 1000, tIRS + 1 + 2000}
		if held != (i < 4) || (ack.NSACK != 0) != held {
			t.Fatalf("conn %d: SACK %v: want held %v", i, ack.SACK[:ack.NSACK], i < 4)
		}
	}
	st := x.stats()
	if st.MemRcvBufRefused != 4 || st.OOODrop != 4 || !b.Pressure() || b.Used() != 4*full || b.Stats().Refused != 4 {
		t.Fatalf("budget %+v, tcp %+v", b.Stats(), st)
	}

	// Under pressure an in-order segment leaves the right edge where it
	// was advertised: the window shrinks by what arrived.
	ack := x.sendData(5, tIRS+1, hole)
	if ack.Window != 32768-1000 || x.stats().MemWindowClamped == 0 {
		t.Fatalf("window %d under pressure, want %d: %+v", ack.Window, 32768-1000, x.stats())
	}
	if apps[5].received() != hole {
		t.Fatalf("conn 5 got %q", apps[5].received())
	}

	// Filling the holes delivers what was held; the first buffer back
	// goes to the budget, which ends the pressure, the others to the pool.
	for i := 0; i < 4; i++ {
		if ack := x.sendData(i, tIRS+1, hole); ack.Ack != tIRS+1+2000 {
			t.Fatalf("conn %d: ACK %d", i, ack.Ack)
		}
	}
	if st := x.stats(); st.MemRcvBufDropped != 1 || b.Pressure() || b.Used() != 3*full {
		t.Fatalf("budget %+v, tcp %+v", b.Stats(), st)
	}
	// The refused segments come again and are taken now.
	for i := 4; i < 8; i++ {
		base := uint32(tIRS + 1)
		if i == 5 {
			base += 1000
		}
		x.sendData(i, base+1000, ooo)
		if ack := x.sendData(i, base, hole); ack.Ack != base+2000 {
			t.Fatalf("conn %d: ACK %d", i, ack.Ack)
		}
	}
	for i, a := range apps {
		want := hole + ooo
		if i == 5 {
			want = hole + hole + ooo
		}
		if a.received() != want {
			t.Fatalf("conn %d received %d bytes, want %d", i, len(a.received()), len(want))
		}
	}

	for _, c := range cs {
		x.l.closeConn(c)
	}
	st = x.stats()
	st.RcvBufsUsed = x.l.rbufsMade - len(x.l.rbufs) - len(x.l.rbufsSmall)
	if st.RcvBufsUsed != 0 || b.Used() != x.l.rbufBytes || x.l.rbufBytes != len(x.l.rbufs)*full+len(x.l.rbufsSmall)*rcvBufBytes(x.l.smallRcvBuf()) {
		t.Fatalf("after close: %d buffers lent, budget %d, pool %d bytes", st.RcvBufsUsed, b.Used(), x.l.rbufBytes)
	}
}

// Under pressure a connection whose window fits a small buffer is lent
// one, and a frame shortage holds windows back as the budget does.
func TestTCPMemSmallBuffer(t *testing.T) {
	x, b, cs, _ := memTest(t, 1<<20, 1)
	x.l.framesShort = true
	// In-order data under pressure pulls the right edge in to a small
	// buffer's worth past RCV.NXT, once the old edge is reached.
	small := x.l.smallRcvBuf()
	seq := uint32(tIRS + 1)
	for i := 0; i < 40; i++ {
		x.sendData(0, seq, strings.Repeat("c", 1000))
		seq += 1000
	}
	ack := x.sendData(0, seq, "d")
	seq++
	if int(ack.Window) > small || ack.Window == 0 {
		t.Fatalf("window %d with frames short, want at most %d", ack.Window, small)
	}
	x.l.framesShort = false
	b.Take(b.Limit()*3/4 + 1) // pressure from the budget now, with room left
	used := b.Used()
	x.sendData(0, seq+100, "e") // out of order
	if c := cs[0]; len(c.rb) != small || b.Used() != used+rcvBufBytes(small) {
		t.Fatalf("lent %d bytes, budget %d", len(c.rb), b.Used()-used)
	}
}

// Under pressure a SYN gets a cookie and no state; with the budget spent
// it is shed.
func TestTCPMemSYN(t *testing.T) {
	x, b, _, _ := memTest(t, 1<<20, 0)
	b.Take(b.Limit() - 1)
	x.send(seg{TCPFields: fl(S, tIRS, 0, 8192)})
	if got := x.recv(); len(got) != 1 || got[0].Flags != S|A || x.conn() != nil || x.stats().MemSynCookies != 1 {
		t.Fatalf("SYN under pressure: %v, %+v", got, x.stats())
	}
	b.Take(1)
	x.send(seg{TCPFields: fl(S, tIRS, 0, 8192)})
	x.expectNothing()
	if x.stats().MemSynShed != 1 {
		t.Fatalf("%+v", x.stats())
	}
}

// BenchmarkTCPOOOFlood measures a shard's receive-buffer memory when each
// of 16384 connections (the default --max-connections) sends one byte
// beyond a hole, the cheapest way to make a receiver lend a buffer: with no
// budget, and with the 256 MiB that native.SizeFor gives that many
// connections. It reports the buffers' bytes and the heap they took.
//
//	go test -run '^$' -bench TCPOOOFlood -benchtime 1x ./netstack
func BenchmarkTCPOOOFlood(b *testing.B) {
	const conns = 16384
	for _, budget := range []int{0, 256 << 20} {
		name := "budget=none"
		if budget > 0 {
			name = "budget=256MiB"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				cfg := tcpTestConfig()
				cfg.RcvBuf, cfg.MaxConns = 64<<10, conns
				if budget > 0 {
					cfg.Budget = NewMemBudget(budget)
				}
				x := newTCPTest(b, cfg)
				x.sink.keep = false
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := 0; i < conns; i++ {
					x.key.rport = tRPort + uint16(i)
					c, _ := x.establish()
					c.sackOK = true
					x.sendFrom(tRemote, x.key.rport, seg{TCPFields: fl(A, tIRS+2, tISS+1, 65535), data: "x"})
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				st := x.stats()
				b.ReportMetric(float64(x.l.rbufBytes)/(1<<20), "bufMiB")
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "heapMiB")
				b.ReportMetric(float64(st.OOOSegs), "held")
				b.ReportMetric(float64(st.OOODrop), "refused")
			}
		})
	}
}

// Holding windows back costs no allocation: request/response exchanges
// through two stacks while both are short of frames allocate nothing.
func TestStackTCPPressureAllocs(t *testing.T) {
	p := newStackPair(t, 1000)
	p.a.FramesShort(true)
	p.b.FramesShort(true)
	allocs := testing.AllocsPerRun(100, func() {
		for d := p.cl.done; p.cl.done == d; {
			p.step()
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per exchange under pressure", allocs)
	}
	if st := p.a.TCPStats(); st.MemWindowClamped == 0 {
		t.Fatalf("no window held back: %+v", st)
	}
}
