package netstack

import (
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// rrApp answers every Feed that completes a request (a byte '\n') with a
// fixed response slice, without allocating: the shape of an httpd.Conn
// serving a cached response.
type rrApp struct {
	resp  []byte
	base  [4][]byte
	out   [][]byte
	fed   int
	reqs  int
	close bool
}

func newRRApp(resp []byte) *rrApp {
	a := &rrApp{resp: resp}
	a.out = a.base[:0]
	return a
}

func (a *rrApp) Feed(p []byte, now time.Time) int {
	a.fed += len(p)
	if len(p) > 0 && p[len(p)-1] == '\n' && a.resp != nil {
		a.reqs++
		a.out = append(a.out, a.resp)
	}
	return len(p)
}
func (a *rrApp) Output() [][]byte { return a.out }
func (a *rrApp) Advance(n int) {
	a.out = consume(a.out, n)
	if len(a.out) == 0 {
		a.out = a.base[:0]
	}
}
func (a *rrApp) Closing() bool            { return a.close }
func (a *rrApp) PeerClosed(now time.Time) {}

// peer crafts the other end's segments into one reusable buffer.
type peer struct {
	b   []byte
	src IPv4Addr
}

// segment writes a segment with payload p and returns it, checksummed.
func (pr *peer) segment(f *TCPFields, p []byte) []byte {
	hl := f.HeaderLen()
	b := pr.b[:hl+len(p)]
	f.Encode(b)
	copy(b[hl:], p)
	TCP(b).SetChecksum(0)
	TCP(b).SetChecksum(tcpChecksum(ip4(pr.src), ip4(tLocal), b))
	return b
}

func newAllocFixture(tb testing.TB, app TCPApp) (*tcpLayer, *tcpConn, *fakeSink) {
	x := newTCPTest(tb, tcpTestConfig())
	x.sink.keep = false
	c, _ := x.establish()
	c.app = app
	c.cwnd = 1 << 30
	return x.l, c, x.sink
}

// In-order data and its ACKs: no allocation per segment.
func TestTCPAllocsInOrderData(t *testing.T) {
	l, c, sink := newAllocFixture(t, newRRApp(nil))
	pr := &peer{b: make([]byte, 2048), src: tRemote}
	data := make([]byte, 1460)
	now := time.Unix(0, 0)
	f := TCPFields{SrcPort: tRPort, DstPort: tLPort, Flags: TCPFlagACK, Window: 65535}
	allocs := testing.AllocsPerRun(1000, func() {
		f.Seq, f.Ack = uint32(c.rcvNxt), uint32(c.sndUna)
		now = now.Add(time.Microsecond)
		l.input(now, 0, tRemote, tLocal, pr.segment(&f, data))
		l.poll(now)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per in-order segment", allocs)
	}
	if sink.count < 500 {
		t.Fatalf("only %d ACKs for 1000 segments", sink.count)
	}
}

// Request in, response out, ACK of the response with the next request: no
// allocation per exchange.
func TestTCPAllocsRequestResponse(t *testing.T) {
	resp := make([]byte, 4000) // three segments
	app := newRRApp(resp)
	l, c, sink := newAllocFixture(t, app)
	pr := &peer{b: make([]byte, 2048), src: tRemote}
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	now := time.Unix(0, 0)
	f := TCPFields{SrcPort: tRPort, DstPort: tLPort, Flags: TCPFlagACK | TCPFlagPSH, Window: 65535}
	allocs := testing.AllocsPerRun(1000, func() {
		f.Seq, f.Ack = uint32(c.rcvNxt), uint32(c.sndMax)
		now = now.Add(time.Microsecond)
		l.input(now, 0, tRemote, tLocal, pr.segment(&f, req))
		l.poll(now)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per exchange", allocs)
	}
	if app.reqs < 1000 || sink.count < 3000 {
		t.Fatalf("%d requests, %d segments", app.reqs, sink.count)
	}
}

func BenchmarkTCPSegmentsIn(b *testing.B) {
	l, c, _ := newAllocFixture(b, newRRApp(nil))
	pr := &peer{b: make([]byte, 2048), src: tRemote}
	data := make([]byte, 1460)
	now := time.Unix(0, 0)
	f := TCPFields{SrcPort: tRPort, DstPort: tLPort, Flags: TCPFlagACK, Window: 65535}
	b.ReportAllocs()
	b.SetBytes(1460)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.Seq, f.Ack = uint32(c.rcvNxt), uint32(c.sndUna)
		l.input(now, 0, tRemote, tLocal, pr.segment(&f, data))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "segments/s")
}

func BenchmarkTCPRequestResponse(b *testing.B) {
	for _, size := range []int{100, 4000} {
		b.Run(map[int]string{100: "resp100B", 4000: "resp4000B"}[size], func(b *testing.B) {
			app := newRRApp(make([]byte, size))
			l, c, _ := newAllocFixture(b, app)
			pr := &peer{b: make([]byte, 2048), src: tRemote}
			req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			now := time.Unix(0, 0)
			f := TCPFields{SrcPort: tRPort, DstPort: tLPort, Flags: TCPFlagACK | TCPFlagPSH, Window: 65535}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				f.Seq, f.Ack = uint32(c.rcvNxt), uint32(c.sndMax)
				l.input(now, 0, tRemote, tLocal, pr.segment(&f, req))
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "exchanges/s")
		})
	}
}

// BenchmarkTCPIdleConnBytes opens connections with full handshakes and
// reports the layer's memory per idle established connection: the heap
// the connections took, plus the table slots and timer-heap entry each
// needs (allocated up front for MaxConns).
func BenchmarkTCPIdleConnBytes(b *testing.B) {
	const n = 20000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cfg := tcpTestConfig()
		cfg.MaxConns, cfg.SynBacklog = n, n
		sink := &fakeSink{}
		now := time.Unix(0, 0)
		l := newTCPLayer(cfg, sink, now)
		l.listen(tLPort, &nullEP{})
		pr := &peer{b: make([]byte, 128)}
		var f TCPFields
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		b.StartTimer()
		for j := 0; j < n; j++ {
			pr.src = IPv4Addr{198, 18, byte(j >> 8), byte(j)}
			f = TCPFields{SrcPort: 40000, DstPort: tLPort, Flags: TCPFlagSYN, Seq: 100, Window: 65535,
				MSS: 1460, HasWScale: true, WScale: 7, SACKPermitted: true, HasTimestamp: true, TSVal: 1}
			l.input(now, 0, pr.src, tLocal, pr.segment(&f, nil))
			iss := l.sec.isnFor(tcpKey{raddr: ip4(pr.src), laddr: ip4(tLocal), rport: 40000, lport: tLPort}, l.now)
			f = TCPFields{SrcPort: 40000, DstPort: tLPort, Flags: TCPFlagACK, Seq: 101, Ack: uint32(iss) + 1, Window: 512,
				HasTimestamp: true, TSVal: 2}
			l.input(now, 0, pr.src, tLocal, pr.segment(&f, nil))
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&m1)
		if l.stats.Conns != n || l.stats.PassiveOpens != n {
			b.Fatalf("%d conns, %d opens", l.stats.Conns, l.stats.PassiveOpens)
		}
		heap := float64(m1.HeapAlloc-m0.HeapAlloc) / n
		fixed := float64(len(l.table.slots)*int(unsafe.Sizeof(tcpSlot{}))+cap(l.timers.h)*int(unsafe.Sizeof(tcpTimer{}))+cap(l.timers.pos)*4) / float64(cfg.MaxConns)
		b.ReportMetric(heap, "heapB/conn")
		b.ReportMetric(fixed, "tableB/conn")
		b.ReportMetric(heap+fixed, "B/conn")
		b.ReportMetric(float64(unsafe.Sizeof(tcpConn{})), "structB")
		runtime.KeepAlive(l)
		b.StartTimer()
	}
}

// nullEP accepts every connection with one shared app that takes all
// input and sends nothing.
type nullEP struct{ app rrApp }

func (e *nullEP) Accept(remote netip.AddrPort, _ TCPHandle, now time.Time) TCPApp { return &e.app }
func (e *nullEP) Release(app TCPApp, now time.Time)                               {}

// An idle connection costs its tcpConn in Go's size class: at a million
// connections every byte past a class boundary costs the next class for
// each of them. State only some connections need goes to a lent side
// structure (the receive buffer's rcvBuffer, the RACK ring).
func TestTCPConnSizeClass(t *testing.T) {
	const class = 576 // Go's size classes around it: 512, 576, 640
	if n := unsafe.Sizeof(tcpConn{}); n > class {
		t.Fatalf("tcpConn is %d bytes, past the %d-byte size class: lend new state rarely used instead of adding it", n, class)
	}
}
