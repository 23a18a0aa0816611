package wreck

import (
	"net/netip"
	"testing"
	"time"

	"percore/httpd"
	"percore/netstack"
)

// The native client against percore's own native httpd, both on userspace
// stacks joined by two in-memory links, on a fake clock: no root, no
// AF_XDP, deterministic.

var (
	ncMAC  = netstack.MAC{0x02, 0, 0, 0, 0, 0x03}
	nsMAC  = netstack.MAC{0x02, 0, 0, 0, 0, 0x01}
	ncAddr = netip.MustParseAddr("198.18.0.3")
	nsAddr = netip.MustParseAddr("198.18.0.1")
)

var nsIP, _ = netstack.IPv4AddrFrom(nsAddr) // the server's, as the native client dials it

// httpEP is the server's listener: an httpd.Conn per connection.
type httpEP struct {
	srv      *httpd.Server
	accepted int
}

func (e *httpEP) Accept(remote netip.AddrPort, _ netstack.TCPHandle, now time.Time) netstack.TCPApp {
	e.accepted++
	return e.srv.NewConn(remote, now)
}

func (e *httpEP) Release(app netstack.TCPApp, now time.Time) { e.srv.Release(app.(*httpd.Conn)) }

// ncPair is a native client shard and a native httpd on two stacks.
type ncPair struct {
	cl       *nclient
	acct     *acct
	srv      *netstack.Stack
	ep       *httpEP
	cLink    *netstack.ChanLink
	sLink    *netstack.ChanLink
	t0, nowT time.Time
	clock    time.Duration
}

// newStackPair is a client stack at ncAddr and a server stack at nsAddr,
// on one /24, with TCP enabled as given.
func newStackPair(tb testing.TB, client, server netstack.TCPConfig) (*netstack.Stack, *netstack.Stack) {
	tb.Helper()
	mask := netstack.IPv4Addr{255, 255, 255, 0}
	ca, _ := netstack.IPv4AddrFrom(ncAddr)
	sa, _ := netstack.IPv4AddrFrom(nsAddr)
	cs, err := netstack.NewStack(netstack.Config{MAC: ncMAC, Addr: ca, Netmask: mask})
	if err != nil {
		tb.Fatal(err)
	}
	cs.EnableTCP(client)
	ss, err := netstack.NewStack(netstack.Config{MAC: nsMAC, Addr: sa, Netmask: mask})
	if err != nil {
		tb.Fatal(err)
	}
	ss.EnableTCP(server)
	return cs, ss
}

func newNCPair(tb testing.TB, cfg Config, conns int, budget int64) *ncPair {
	tb.Helper()
	cfg.Server = nsAddr.String() + ":80"
	if err := cfg.validate(); err != nil {
		tb.Fatal(err)
	}
	site, err := httpd.NewSite(httpd.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	cs, ss := newStackPair(tb, netstack.TCPConfig{Seed: 1, PortLo: 40000, PortHi: 40999}, netstack.TCPConfig{Seed: 2})
	ep := &httpEP{srv: httpd.NewServer(site, nil)}
	if err := ss.ListenTCP(80, ep); err != nil {
		tb.Fatal(err)
	}
	acct := newAcct(0, &cfg, conns, budget)
	req, seqOff := buildRequest(&cfg, cfg.CheckSeq)
	p := &ncPair{
		acct: acct, srv: ss, ep: ep,
		cLink: netstack.NewChanLink(1500, 512), sLink: netstack.NewChanLink(1500, 512),
		t0: epoch, // the fake clock's origin is the account's
	}
	p.cl = newNClient(acct, acct.slots, nsIP, 80, req, seqOff)
	p.cl.use(cs, p.cLink, 0)
	p.nowT = p.t0
	acct.begun = true // at 0 on the fake clock
	ep.srv.Tick(p.nowT)
	p.cl.begin()
	return p
}

// step advances the fake clock by d and runs the client, wire, server, wire.
func (p *ncPair) step(d time.Duration) {
	p.clock += d
	p.nowT = p.t0.Add(p.clock)
	stepWire(p.nowT, p.cl, p.cl.stack, p.srv, p.cLink, p.sLink)
}

// polledClient is a native client as its queue runs it: Before, its
// stack's Poll, After.
type polledClient interface {
	Before(now time.Time)
	After(now time.Time) bool
}

// stepWire runs client cl around its stack cs's Poll, the wire to the
// server, server stack srv, and the wire back, at now.
func stepWire(now time.Time, cl polledClient, cs, srv *netstack.Stack, cLink, sLink *netstack.ChanLink) {
	cl.Before(now)
	cs.Poll(now, cLink)
	cl.After(now)
	cLink.ForwardTo(sLink)
	srv.Poll(now, sLink)
	sLink.ForwardTo(cLink)
}

// runUntil steps (10 µs each, a tick every 10 ms) until the budget is done
// or max steps passed.
func (p *ncPair) runUntil(tb testing.TB, max int) {
	tb.Helper()
	for i := 0; i < max && !p.acct.finished; i++ {
		p.step(10 * time.Microsecond)
		if i%1000 == 999 {
			p.cl.tick()
		}
	}
	if !p.acct.finished {
		tb.Fatalf("budget not done after %d steps: %d responses, counters %+v", max, p.acct.cnt.Responses, p.acct.cnt)
	}
}

func TestNativeClientKeepAlive(t *testing.T) {
	for _, pipeline := range []int{1, 16} {
		cfg := DefaultConfig()
		cfg.Pipeline = pipeline
		p := newNCPair(t, cfg, 8, 2000)
		p.runUntil(t, 200000)
		c := &p.acct.cnt
		if c.Responses != 2000 || c.failures() != 0 || c.Errors[errNon2xx] != 0 {
			t.Errorf("pipeline %d: %d responses, errors %v, want 2000 and none", pipeline, c.Responses, c.Errors)
		}
		if c.Connects != 8 || p.ep.accepted != 8 {
			t.Errorf("pipeline %d: %d connects, server accepted %d, want 8 (keep-alive)", pipeline, c.Connects, p.ep.accepted)
		}
		if p.acct.hist.TotalCount() != 2000 {
			t.Errorf("pipeline %d: %d latencies recorded, want 2000", pipeline, p.acct.hist.TotalCount())
		}
		if st := p.ep.srv.Stats(); st.Requests < 2000 {
			t.Errorf("pipeline %d: server saw %d requests, want at least 2000", pipeline, st.Requests)
		}
	}
}

// TestNativeClientOneShot: a connection per request, the client closing
// each one after its response; TIME-WAIT ports are recycled.
func TestNativeClientOneShot(t *testing.T) {
	cfg := DefaultConfig()
	cfg.KeepAlive = false
	p := newNCPair(t, cfg, 4, 300)
	p.runUntil(t, 400000)
	c := &p.acct.cnt
	if c.Responses != 300 || c.failures() != 0 {
		t.Errorf("%d responses, errors %v, want 300 and none", c.Responses, c.Errors)
	}
	if c.Connects < 300 || p.ep.accepted < 300 {
		t.Errorf("%d connects, server accepted %d, want one per request (300)", c.Connects, p.ep.accepted)
	}
}

// TestNativeClientNotFound: a 404 is a well-framed response, counted as
// non-2xx, not as a failure.
func TestNativeClientNotFound(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Path = "/missing"
	p := newNCPair(t, cfg, 2, 100)
	p.runUntil(t, 100000)
	c := &p.acct.cnt
	if c.Responses != 100 || c.Errors[errNon2xx] != 100 || c.failures() != 0 {
		t.Errorf("%d responses, errors %v, want 100, all non-2xx, no failures", c.Responses, c.Errors)
	}
}

// TestNativeClientRefused: no listener on the port: every connect is
// answered by RST, counted, and retried after the back-off; no request
// completes and nothing hangs.
func TestNativeClientRefused(t *testing.T) {
	cfg := DefaultConfig()
	p := newNCPair(t, cfg, 2, 100)
	p.cl.port = 81
	for i := 0; i < 5000; i++ { // 50 ms of fake time: several back-offs
		p.step(10 * time.Microsecond)
		if i%1000 == 999 {
			p.cl.tick()
		}
	}
	c := &p.acct.cnt
	if c.Responses != 0 || c.Errors[errConnect] < 4 {
		t.Errorf("%d responses, %d connect errors, want none and at least 4 (2 conns, retried)", c.Responses, c.Errors[errConnect])
	}
	if p.acct.issued != 0 {
		t.Errorf("%d requests issued on refused connections, want 0", p.acct.issued)
	}
}

// TestNativeClientAllocs: in steady state a keep-alive round (requests
// out, responses parsed and accounted) allocates nothing on the client.
func TestNativeClientAllocs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Pipeline = 4
	p := newNCPair(t, cfg, 4, -1)
	for range 5000 { // warm up: connections, buffers, histogram buckets
		p.step(10 * time.Microsecond)
	}
	before := p.acct.cnt.Responses
	allocs := testing.AllocsPerRun(2000, func() { p.step(10 * time.Microsecond) })
	if p.acct.cnt.Responses-before < 1000 {
		t.Fatalf("only %d responses while measuring: not steady state", p.acct.cnt.Responses-before)
	}
	if allocs != 0 {
		t.Errorf("%.2f allocations per step (client and server), want 0", allocs)
	}
}

// BenchmarkNativeClient: requests through the native client and a native
// httpd on in-memory links, pipeline 4 over 4 connections; ns/op and
// allocs/op are per step (client, wire, server, wire), requests/op per step.
func BenchmarkNativeClient(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Pipeline = 4
	p := newNCPair(b, cfg, 4, -1)
	for range 5000 {
		p.step(10 * time.Microsecond)
	}
	before := p.acct.cnt.Responses
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p.step(10 * time.Microsecond)
	}
	b.ReportMetric(float64(p.acct.cnt.Responses-before)/float64(b.N), "requests/op")
}

// TestNativeClientRate: open loop at 10,000 req/s for 100 ms of fake time:
// the requests go out on their schedule (about 1,000), topped up one by one
// on connections with room, and latency is measured from each intended
// send time.
func TestNativeClientRate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Rate, cfg.Pipeline = 10000, 4
	p := newNCPair(t, cfg, 4, -1)
	p.runFor(100 * time.Millisecond)
	c := &p.acct.cnt
	if c.Responses < 990 || c.Responses > 1001 || c.failures() != 0 {
		t.Errorf("%d responses, errors %v, want 990-1001 (10,000/s for 100 ms) and none", c.Responses, c.Errors)
	}
	if p.acct.issued > 1001 {
		t.Errorf("%d requests issued, more than the schedule's 1001", p.acct.issued)
	}
}

// TestNativeClientRateSaturated: a rate far above what 2 connections
// without pipelining carry: requests wait for a slot, and their latency,
// counted from the intended send time, shows the wait (no coordinated
// omission).
func TestNativeClientRateSaturated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Rate = 1e6
	p := newNCPair(t, cfg, 2, -1)
	p.runFor(50 * time.Millisecond)
	c := &p.acct.cnt
	if c.Responses == 0 || c.failures() != 0 {
		t.Fatalf("%d responses, errors %v", c.Responses, c.Errors)
	}
	if c.Responses > 20000 {
		t.Errorf("%d responses in 50 ms on 2 connections: the rate was not limited by the connections", c.Responses)
	}
	if max := p.acct.hist.Max(); max < int64(20*time.Millisecond) {
		t.Errorf("max latency %v: the backlog's wait is not in the latency", time.Duration(max))
	}
}

// TestNativeClientCheckSeq: stamped sequence numbers, pipelined, against a
// server that echoes them in order.
func TestNativeClientCheckSeq(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CheckSeq, cfg.Pipeline = true, 8
	p := newNCPair(t, cfg, 2, -1)
	ep := &seqEP{}
	if err := p.srv.ListenTCP(8081, ep); err != nil {
		t.Fatal(err)
	}
	p.cl.port = 8081
	p.runFor(20 * time.Millisecond)
	c := &p.acct.cnt
	if c.Responses < 100 || c.failures() != 0 {
		t.Errorf("%d responses, errors %v, want a flow and no mismatch", c.Responses, c.Errors)
	}
}

// TestNativeClientMaxOut: with maxOut 3, eight keep-alive connections keep
// at most three requests in flight; the others wait their turn, and every
// connection is served.
func TestNativeClientMaxOut(t *testing.T) {
	p := newNCPair(t, DefaultConfig(), 8, 400)
	p.cl.maxOut = 3
	most, parked := 0, 0
	for i := 0; i < 200000 && !p.acct.finished; i++ {
		p.step(10 * time.Microsecond)
		most = max(most, p.cl.inFlight())
		parked = max(parked, p.cl.ready.n)
	}
	c := &p.acct.cnt
	if c.Responses != 400 || c.failures() != 0 || c.Connects != 8 {
		t.Fatalf("%d responses, %d connects, errors %v, want 400, 8 and none", c.Responses, c.Connects, c.Errors)
	}
	if most != 3 || parked == 0 {
		t.Errorf("at most %d in flight (want 3), at most %d parked (want some)", most, parked)
	}
}
