package server

import (
	"bytes"
	"crypto/sha256"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"percore/httpd"
	"percore/netstack"
)

// httpd.Conn is a netstack.TCPApp with its own timeouts.
var (
	_ netstack.TCPApp      = (*httpd.Conn)(nil)
	_ netstack.TCPAppTimer = (*httpd.Conn)(nil)
)

// httpdEndpoint is the shard glue between a TCP listener and one shard's
// httpd.Server: a connection from the server's pool per accepted TCP
// connection, back to the pool when TCP is done with it.
type httpdEndpoint struct{ srv *httpd.Server }

func (e httpdEndpoint) Accept(remote netip.AddrPort, _ netstack.TCPHandle, now time.Time) netstack.TCPApp {
	return e.srv.NewConn(remote, now)
}
func (e httpdEndpoint) Release(app netstack.TCPApp, now time.Time) { e.srv.Release(app.(*httpd.Conn)) }

// httpClient sends requests and splits the responses by Content-Length.
type httpClient struct {
	out    [][]byte
	in     []byte
	bodies [][]byte
	status []int
	fin    bool
}

func (c *httpClient) Feed(p []byte, now time.Time) int {
	c.in = append(c.in, p...)
	for {
		i := bytes.Index(c.in, []byte("\r\n\r\n"))
		if i < 0 {
			return len(p)
		}
		head := string(c.in[:i])
		n := 0
		if j := bytes.Index([]byte(head), []byte("Content-Length: ")); j >= 0 {
			rest := head[j+16:]
			if k := bytes.IndexByte([]byte(rest), '\r'); k >= 0 {
				rest = rest[:k]
			}
			n, _ = strconv.Atoi(rest)
		}
		if len(c.in) < i+4+n {
			return len(p)
		}
		st, _ := strconv.Atoi(head[9:12])
		c.status = append(c.status, st)
		c.bodies = append(c.bodies, append([]byte(nil), c.in[i+4:i+4+n]...))
		c.in = c.in[i+4+n:]
	}
}
func (c *httpClient) Output() [][]byte { return c.out }
func (c *httpClient) Advance(n int) {
	for n > 0 && len(c.out) > 0 {
		k := min(n, len(c.out[0]))
		c.out[0] = c.out[0][k:]
		n -= k
		if len(c.out[0]) == 0 {
			c.out = c.out[1:]
		}
	}
}
func (c *httpClient) Closing() bool            { return c.fin }
func (c *httpClient) PeerClosed(now time.Time) { c.fin = true }

// The native path end to end: httpd on stack A serves a client on stack B
// through impaired links: pipelined keep-alive requests, a 1 MiB static
// file, and the server's close.
func TestTCPHTTPD(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 31)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	site, err := httpd.NewSite(httpd.Config{Docroot: dir, MaxBody: 1 << 20, HeaderTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 2; seed++ {
		faults := netstack.Faults{}
		if seed == 2 {
			faults = netstack.Faults{Loss: 0.05, Reorder: 0.1, Dup: 0.01, Corrupt: 0.001}
		}
		n := newE2E(t, faults, seed, netstack.TCPConfig{MaxConns: 16, RcvBuf: 256 << 10})
		srv := httpd.NewServer(site, nil)
		srv.Tick(n.now)
		if err := n.a.ListenTCP(80, httpdEndpoint{srv}); err != nil {
			t.Fatal(err)
		}
		cl := &httpClient{}
		cl.out = [][]byte{
			[]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n"),
			[]byte("GET /nope HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
		}
		if _, err := n.b.ConnectTCP(n.now, ipA, 80, cl, nopEP{}); err != nil {
			t.Fatal(err)
		}
		n.run(func() bool { return cl.fin && len(cl.status) == 4 }, 200000)
		if cl.status[0] != 200 || cl.status[1] != 200 || cl.status[2] != 404 || cl.status[3] != 200 {
			t.Fatalf("statuses %v", cl.status)
		}
		if sha256.Sum256(cl.bodies[1]) != sha256.Sum256(big) {
			t.Fatalf("big.bin: %d bytes, corrupt", len(cl.bodies[1]))
		}
		n.run(func() bool { return n.a.TCPStats().Conns == 0 && n.b.TCPStats().Conns == 0 }, 100000)
		if st := srv.Stats(); st.Requests != 4 {
			t.Fatalf("httpd stats %+v", st)
		}
		t.Logf("seed %d: server tcp retrans %d, client ooo %d", seed, n.a.TCPStats().Retransmits, n.b.TCPStats().OOOSegs)
	}
}

// nopEP is the client's endpoint: nothing to make or release.
type nopEP struct{}

func (nopEP) Accept(netip.AddrPort, netstack.TCPHandle, time.Time) netstack.TCPApp { return nil }
func (nopEP) Release(netstack.TCPApp, time.Time)                                   {}

var (
	macA = netstack.MAC{2, 0, 0, 0, 0, 1}
	macB = netstack.MAC{2, 0, 0, 0, 0, 2}
	ipA  = netstack.IPv4Addr{198, 18, 0, 1}
	ipB  = netstack.IPv4Addr{198, 18, 0, 2}
)

// e2eNet is two userspace stacks joined by ChanLinks with faults, on a fake
// clock.
type e2eNet struct {
	t      *testing.T
	now    time.Time
	a, b   *netstack.Stack
	la, lb *netstack.ChanLink
	fa, fb *netstack.FaultLink
}

func newE2E(t *testing.T, faults netstack.Faults, seed uint64, tcfg netstack.TCPConfig) *e2eNet {
	n := &e2eNet{t: t, now: time.Unix(1_000_000, 0)}
	mask := netstack.IPv4Addr{255, 255, 255, 0}
	var err error
	if n.a, err = netstack.NewStack(netstack.Config{MAC: macA, Addr: ipA, Netmask: mask}); err != nil {
		t.Fatal(err)
	}
	if n.b, err = netstack.NewStack(netstack.Config{MAC: macB, Addr: ipB, Netmask: mask}); err != nil {
		t.Fatal(err)
	}
	tcfg.Seed = seed
	n.a.EnableTCP(tcfg)
	tcfg.Seed = seed + 1
	n.b.EnableTCP(tcfg)
	n.la, n.lb = netstack.NewChanLink(1500, 1024), netstack.NewChanLink(1500, 1024)
	n.fa = netstack.NewFaultLink(n.la, netstack.Faults{}, faults, seed)
	n.fb = netstack.NewFaultLink(n.lb, netstack.Faults{}, faults, seed+7)
	return n
}

// run polls both stacks until done() or the step bound; the clock moves
// 1 ms per busy step and jumps to the next deadline when the net is idle.
func (n *e2eNet) run(done func() bool, steps int) {
	n.t.Helper()
	for i := 0; i < steps; i++ {
		da := n.a.Poll(n.now, n.fa)
		db := n.b.Poll(n.now, n.fb)
		moved := n.la.ForwardTo(n.lb) + n.lb.ForwardTo(n.la)
		if done() {
			return
		}
		_, ha := n.fa.Held()
		_, hb := n.fb.Held()
		next := da
		if next.IsZero() || (!db.IsZero() && db.Before(next)) {
			next = db
		}
		switch {
		case moved > 0 || ha+hb > 0:
			n.now = n.now.Add(time.Millisecond)
		case next.IsZero():
			n.t.Fatalf("idle with no timer and not done after %d steps", i)
		case next.After(n.now):
			n.now = next
		default:
			n.now = n.now.Add(time.Millisecond)
		}
	}
	n.t.Fatalf("not done after %d steps", steps)
}
