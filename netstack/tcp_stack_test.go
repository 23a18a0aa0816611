package netstack

import (
	"net/netip"
	"testing"
	"time"
)

// rrClient sends a request, waits for respLen bytes, sends the next.
type rrClient struct {
	req     []byte
	respLen int
	got     int
	done    int
	base    [2][]byte
	out     [][]byte
}

func (c *rrClient) Feed(p []byte, now time.Time) int {
	c.got += len(p)
	if c.got >= c.respLen {
		c.got -= c.respLen
		c.done++
		c.out = append(c.out, c.req)
	}
	return len(p)
}
func (c *rrClient) Output() [][]byte { return c.out }
func (c *rrClient) Advance(n int) {
	c.out = consume(c.out, n)
	if len(c.out) == 0 {
		c.out = c.base[:0]
	}
}
func (c *rrClient) Closing() bool            { return false }
func (c *rrClient) PeerClosed(now time.Time) {}

type rrServerEP struct{ resp []byte }

func (e *rrServerEP) Accept(netip.AddrPort, TCPHandle, time.Time) TCPApp { return newRRApp(e.resp) }
func (e *rrServerEP) Release(TCPApp, time.Time)                          {}

// stackPair is a client stack B and a server stack A on two ChanLinks with
// one keep-alive connection between them, after its first exchange.
type stackPair struct {
	a, b   *Stack
	la, lb *ChanLink
	cl     *rrClient
	now    time.Time
}

func newStackPair(tb testing.TB, respLen int) *stackPair {
	p := &stackPair{now: time.Unix(1_000_000, 0)}
	var err error
	if p.a, err = NewStack(Config{MAC: macA, Addr: ipA, Netmask: mask}); err != nil {
		tb.Fatal(err)
	}
	if p.b, err = NewStack(Config{MAC: macB, Addr: ipB, Netmask: mask}); err != nil {
		tb.Fatal(err)
	}
	p.a.EnableTCP(TCPConfig{MaxConns: 16, Seed: 1})
	p.b.EnableTCP(TCPConfig{MaxConns: 16, Seed: 2})
	p.la, p.lb = NewChanLink(1500, 256), NewChanLink(1500, 256)
	if err := p.a.ListenTCP(80, &rrServerEP{resp: make([]byte, respLen)}); err != nil {
		tb.Fatal(err)
	}
	p.cl = &rrClient{req: []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n\n"), respLen: respLen}
	p.cl.out = append(p.cl.base[:0], p.cl.req)
	if _, err := p.b.ConnectTCP(p.now, ipA, 80, p.cl, &rrServerEP{}); err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < 100 && p.cl.done < 2; i++ {
		p.step()
	}
	if p.cl.done < 2 {
		tb.Fatalf("no exchange: A %+v B %+v", p.a.TCPStats(), p.b.TCPStats())
	}
	return p
}

// step polls both stacks once and moves the frames between them.
func (p *stackPair) step() {
	p.now = p.now.Add(10 * time.Microsecond)
	p.b.Poll(p.now, p.lb)
	p.lb.ForwardTo(p.la)
	p.a.Poll(p.now, p.la)
	p.la.ForwardTo(p.lb)
}

// A whole request/response exchange through two stacks (Ethernet, ARP,
// IPv4, TCP, ChanLink) allocates nothing.
func TestStackTCPAllocs(t *testing.T) {
	p := newStackPair(t, 1000)
	done := p.cl.done
	allocs := testing.AllocsPerRun(200, func() {
		for d := p.cl.done; p.cl.done == d; {
			p.step()
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per exchange", allocs)
	}
	if p.cl.done < done+200 {
		t.Fatalf("%d exchanges", p.cl.done-done)
	}
}

// BenchmarkStackTCPRequestResponse: exchanges per second through two
// full stacks on ChanLinks; both stacks' work is in each op.
func BenchmarkStackTCPRequestResponse(b *testing.B) {
	for _, size := range []int{100, 4000} {
		name := map[int]string{100: "resp100B", 4000: "resp4000B"}[size]
		b.Run(name, func(b *testing.B) {
			p := newStackPair(b, size)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for d := p.cl.done; p.cl.done == d; {
					p.step()
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "exchanges/s")
			st := p.a.TCPStats()
			b.ReportMetric(float64(st.InSegs+st.OutSegs)/float64(b.N), "srvsegs/op")
		})
	}
}

// The MSS follows a small link MTU; TCPStats merge.
func TestStackTCPMSSAndStats(t *testing.T) {
	s, err := NewStack(Config{MAC: macA, Addr: ipA, Netmask: mask})
	if err != nil {
		t.Fatal(err)
	}
	s.EnableTCP(TCPConfig{})
	link := NewChanLink(1000, 16)
	s.Poll(time.Unix(1, 0), link)
	if s.tcp.cfg.MSS != 960 {
		t.Fatalf("MSS %d on a 1000-byte MTU, want 960", s.tcp.cfg.MSS)
	}
	a := TCPStats{InSegs: 2, Conns: 1, SynCookiesBad: 3}
	a.Add(&TCPStats{InSegs: 5, Conns: 2, SynCookiesBad: 1})
	if a.InSegs != 7 || a.Conns != 3 || a.SynCookiesBad != 4 {
		t.Fatalf("merged %+v", a)
	}
}
