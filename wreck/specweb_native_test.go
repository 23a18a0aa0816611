package wreck

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"percore/lab"
	"percore/netstack"
	pshard "percore/shard"
	"percore/specweb/fileset"
)

// TestSpecwebNative runs the SPECweb99 workload end to end on two native
// ends: percore's specweb application on the native stack on the server end
// of a lab, 20 users of native wreck on the client end, for 2 s after a
// warm-up: a valid run, no errors, every answer valid, the mix within
// tolerance.
func TestSpecwebNative(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: generates 190 MB and runs for seconds")
	}
	requireNative(t)
	cpus, err := pshard.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	client, server := cpus[0], cpus[len(cpus)-1]
	pair := newNativePair(t, lab.Config{Prefix: "swn", Queues: 1, ServerRoot: true})
	t.Log(pair.Lab)
	const conns = 20
	root, app := specwebFiles(t, conns)
	serveSpecweb(t, app, root, "--network-stack", "native", "--iface", pair.ServerIf,
		"--host-ipv4-addr", pair.ServerIP.String(), "--port", "80", "--cpuset", fmt.Sprint(server))
	args := append(pair.NativeClientArgs(), "--netns", pair.ClientNS.Name,
		"--server", pair.ServerIP.String()+":80", "--cpuset", fmt.Sprint(client), "--smp", "1",
		"--workload", "specweb99", "--conn", fmt.Sprint(conns), "--seed", "3")
	cfg, _, err := ParseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Warmup, cfg.Duration = 500*time.Millisecond, 2*time.Second
	cfg.Progress = tlog{t}
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkSpecweb(t, res, conns)
}

// The native users against a stand-in SPECweb99 server on in-memory links,
// on a fake clock: no root, no AF_XDP, deterministic. The server answers
// the static GETs of the static-only mix with the file set's bytes,
// keeping the connection unless the request says close.

// swFileServer holds every file of directory 0, and its listener.
type swFileServer struct {
	files [fileset.Classes][fileset.FilesPerDir][]byte
	free  []*swFileConn // released connections, reused
}

func newSwFileServer() *swFileServer {
	s := &swFileServer{}
	for c := range fileset.Classes {
		for n := range fileset.FilesPerDir {
			s.files[c][n] = fileset.AppendFile(nil, 0, c, n)
		}
	}
	return s
}

func (s *swFileServer) Accept(netip.AddrPort, netstack.TCPHandle, time.Time) netstack.TCPApp {
	if n := len(s.free); n > 0 {
		c := s.free[n-1]
		s.free = s.free[:n-1]
		return c
	}
	return &swFileConn{s: s, in: make([]byte, 0, 1024), head: make([]byte, 0, 128)}
}

func (s *swFileServer) Release(app netstack.TCPApp, _ time.Time) {
	c := app.(*swFileConn)
	c.in, c.head, c.body, c.hoff, c.off, c.closing, c.last = c.in[:0], c.head[:0], nil, 0, 0, false, false
	s.free = append(s.free, c)
}

var (
	endOfHead = []byte("\r\n\r\n")
	connClose = []byte("Connection: close")
)

// swFileConn is one server connection: the request read so far and the
// answer being sent (head, then body from off).
type swFileConn struct {
	s              *swFileServer
	in, head, body []byte
	hoff, off      int  // sent of head and body
	closing, last  bool // last: the request asked to close
	outv           [2][]byte
}

// Feed takes a request "GET /file_set/dir00000/classC_N HTTP/1.1" and
// answers it once its head is complete (one request at a time).
func (c *swFileConn) Feed(p []byte, now time.Time) int {
	c.in = append(c.in, p...)
	end := bytes.Index(c.in, endOfHead)
	if end < 0 {
		return len(p)
	}
	const at = len("GET /file_set/dir00000/class")
	class, num := int(c.in[at]-'0'), int(c.in[at+2]-'0')
	c.last = bytes.Contains(c.in[:end], connClose)
	c.body, c.off, c.hoff = c.s.files[class][num], 0, 0
	c.head = append(c.head[:0], "HTTP/1.1 200 OK\r\nContent-Length: "...)
	c.head = strconv.AppendInt(c.head, int64(len(c.body)), 10)
	if c.last {
		c.head = append(c.head, "\r\nConnection: close"...)
	}
	c.head = append(c.head, "\r\n\r\n"...)
	c.in = c.in[:0]
	c.closing = c.last // TCP sends FIN after the answer
	return len(p)
}

func (c *swFileConn) Output() [][]byte {
	v := c.outv[:0]
	if c.hoff < len(c.head) {
		v = append(v, c.head[c.hoff:])
	}
	if c.off < len(c.body) {
		v = append(v, c.body[c.off:])
	}
	return v
}

func (c *swFileConn) Advance(n int) {
	k := min(n, len(c.head)-c.hoff)
	c.hoff += k
	c.off += n - k
}

func (c *swFileConn) Closing() bool            { return c.closing }
func (c *swFileConn) PeerClosed(now time.Time) { c.closing = true }

// swPair is native users and the stand-in server on two stacks.
type swPair struct {
	cl           *nswclient
	srv          *netstack.Stack
	fs           *swFileServer
	cLink, sLink *netstack.ChanLink
	nowT         time.Time
	clock        time.Duration
}

func newSwPair(tb testing.TB, users int) *swPair {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Server, cfg.Workload, cfg.StaticOnly, cfg.Conns, cfg.Seed = nsAddr.String()+":80", WorkloadSpecweb99, true, users, 5
	cs, ss := newStackPair(tb, netstack.TCPConfig{Seed: 1, PortLo: 20000, PortHi: 60000},
		netstack.TCPConfig{Seed: 2, MaxConns: 64}) // TIME-WAITs recycled: a table that stops growing
	p := &swPair{srv: ss, fs: newSwFileServer(),
		cLink: netstack.NewChanLink(1500, 1024), sLink: netstack.NewChanLink(1500, 1024), nowT: epoch}
	if err := ss.ListenTCP(80, p.fs); err != nil {
		tb.Fatal(err)
	}
	// One directory; no shard: users ask again as soon as answered. The
	// ports last the test without reusing one the server holds in
	// TIME-WAIT (it takes a SYN there only with a newer timestamp, and
	// the fake clock's steps are under a timestamp tick).
	p.cl = newNswClient(newAcct(0, &cfg, users, -1), users, nsIP, 80, 1, users, 0, 0)
	p.cl.use(cs, p.cLink, 0)
	return p
}

// step advances the fake clock by d and runs the users, wire, server, wire.
func (p *swPair) step(d time.Duration) {
	p.clock += d
	p.nowT = epoch.Add(p.clock)
	stepWire(p.nowT, p.cl, p.cl.stack, p.srv, p.cLink, p.sLink)
}

// TestSpecwebNativeUsers: the native users' answers are all valid, on
// keep-alive and new connections alike, and in steady state a step (users,
// wire, server, wire) allocates nothing.
func TestSpecwebNativeUsers(t *testing.T) {
	p := newSwPair(t, 4)
	for range 20_000 { // warm up: connections, carries, the files' hashes, histogram buckets
		p.step(10 * time.Microsecond)
	}
	a := p.cl.acct
	before, connects := a.cnt.Responses, a.cnt.Connects
	allocs := testing.AllocsPerRun(5000, func() { p.step(10 * time.Microsecond) })
	if a.cnt.Responses-before < 100 || a.cnt.Connects-connects < 10 {
		t.Fatalf("%d responses and %d connects while measuring: not steady state", a.cnt.Responses-before, a.cnt.Connects-connects)
	}
	k := p.cl.kinds[kStatic]
	if k.Invalid != 0 || k.Errors != 0 || a.cnt.Errors != [numErrClasses]uint64{} {
		t.Errorf("%d invalid answers, %d errors (%+v)", k.Invalid, k.Errors, a.cnt.Errors)
	}
	if allocs != 0 {
		t.Errorf("%.2f allocations per step (users and server), want 0", allocs)
	}
	t.Logf("%d responses on %d connections", a.cnt.Responses, a.cnt.Connects)
}

// BenchmarkSpecwebNativeUsers: SPECweb99 users (static-only mix) over the
// native client and the stand-in server on in-memory links; ns/op and
// allocs/op are per step (users, wire, server, wire), with responses/op.
func BenchmarkSpecwebNativeUsers(b *testing.B) {
	p := newSwPair(b, 16)
	for range 20_000 {
		p.step(10 * time.Microsecond)
	}
	a := p.cl.acct
	before, bytes0 := a.cnt.Responses, a.cnt.Bytes
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p.step(10 * time.Microsecond)
	}
	b.ReportMetric(float64(a.cnt.Responses-before)/float64(b.N), "responses/op")
	b.ReportMetric(float64(a.cnt.Bytes-bytes0)/float64(b.N), "B-read/op")
}

// TestSpecwebNativeRefused: with nothing listening every connect is reset:
// each counts a connect error against its request, and the users back off
// and try again, no answer ever counted.
func TestSpecwebNativeRefused(t *testing.T) {
	p := newSwPair(t, 4)
	p.srv.UnlistenTCP(80)
	for i := range 10_000 {
		p.step(10 * time.Microsecond)
		if i%1000 == 999 { // a tick: back-offs end
			p.cl.tick()
		}
	}
	a := p.cl.acct
	if a.cnt.Errors[errConnect] < 2*4 || a.cnt.Responses != 0 || a.cnt.Connects != 0 {
		t.Fatalf("%d connect errors (want each user to retry), %d responses, %d connects", a.cnt.Errors[errConnect], a.cnt.Responses, a.cnt.Connects)
	}
	var asked uint64
	for _, k := range p.cl.kinds {
		asked += k.Errors
	}
	if asked != a.cnt.Errors[errConnect] {
		t.Errorf("%d requests failed for %d connect errors", asked, a.cnt.Errors[errConnect])
	}
	t.Logf("%d connect errors in 100 ms", a.cnt.Errors[errConnect])
}

// TestSpecwebNativeTLS: the users speak TLS on kernel sockets only; on the
// native stack the setting is refused, not ignored.
func TestSpecwebNativeTLS(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Server, cfg.Workload = "198.18.0.1:443", WorkloadSpecweb99
	cfg.Native.Enabled, cfg.TLS.Enabled = true, true
	var ce *ConfigError
	if err := cfg.validateWorkload(); !errors.As(err, &ce) || ce.Field != "TLS.Enabled" {
		t.Fatalf("native SPECweb99 over TLS: %v, want a TLS.Enabled error", err)
	}
}
