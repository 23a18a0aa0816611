package netstack

import (
	"net/netip"
	"testing"
	"time"
)

// relCount counts Release calls.
type relCount struct{ n int }

func (r *relCount) Accept(remote netip.AddrPort, _ TCPHandle, now time.Time) TCPApp { return nil }
func (r *relCount) Release(TCPApp, time.Time)                                       { r.n++ }

// TestTCPEstablishedAndAbort: a handle is not established in SYN-SENT, is
// once the SYN-ACK is in, and AbortTCP resets the connection: the client
// app is released at once, the server gets the RST and drops its side.
func TestTCPEstablishedAndAbort(t *testing.T) {
	p := &stackPair{now: time.Unix(1_000_000, 0)}
	var err error
	if p.a, err = NewStack(Config{MAC: macA, Addr: ipA, Netmask: mask}); err != nil {
		t.Fatal(err)
	}
	if p.b, err = NewStack(Config{MAC: macB, Addr: ipB, Netmask: mask}); err != nil {
		t.Fatal(err)
	}
	p.a.EnableTCP(TCPConfig{MaxConns: 16, Seed: 1})
	p.b.EnableTCP(TCPConfig{MaxConns: 16, Seed: 2})
	p.la, p.lb = NewChanLink(1500, 256), NewChanLink(1500, 256)
	if err := p.a.ListenTCP(80, &rrServerEP{resp: make([]byte, 10)}); err != nil {
		t.Fatal(err)
	}
	cl := &rrClient{respLen: 10}
	rel := &relCount{}
	h, err := p.b.ConnectTCP(p.now, ipA, 80, cl, rel)
	if err != nil {
		t.Fatal(err)
	}
	if p.b.TCPEstablished(h) {
		t.Fatal("established before the SYN went out")
	}
	for i := 0; i < 20 && !p.b.TCPEstablished(h); i++ {
		p.step()
	}
	if !p.b.TCPEstablished(h) {
		t.Fatalf("not established after 20 steps: %+v", p.b.TCPStats())
	}
	if p.a.TCPStats().Conns != 1 {
		t.Fatalf("server holds %d connections, want 1", p.a.TCPStats().Conns)
	}
	p.b.AbortTCP(p.now, p.lb, h)
	if rel.n != 1 {
		t.Fatalf("Release called %d times by AbortTCP, want 1", rel.n)
	}
	if p.b.TCPEstablished(h) || p.b.TCPStats().Conns != 0 {
		t.Fatalf("after AbortTCP: established %v, %d client connections", p.b.TCPEstablished(h), p.b.TCPStats().Conns)
	}
	p.b.AbortTCP(p.now, p.lb, h) // a stale handle does nothing
	if rel.n != 1 || p.b.TCPStats().ResetsOut != 1 {
		t.Fatalf("stale abort: %d releases, %d resets out, want 1 and 1", rel.n, p.b.TCPStats().ResetsOut)
	}
	for range 5 {
		p.step()
	}
	if st := p.a.TCPStats(); st.ResetsIn != 1 || st.Conns != 0 {
		t.Fatalf("server: %d resets in, %d connections, want 1 and 0", st.ResetsIn, st.Conns)
	}
}
