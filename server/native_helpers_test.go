package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"percore/afxdp"
	"percore/internal/testutil"
	"percore/lab"
	"percore/shard"
)

// requireNative skips unless the test can build labs and open AF_XDP sockets.
func requireNative(t testing.TB) {
	t.Helper()
	testutil.SkipUnless(t, afxdp.Supported())
}

// nativeTest is an in-process httpd on the native stack over its own lab.
type nativeTest struct {
	*Server
	t      testing.TB
	dial   *nsDialer
	url    string            // http://server:port
	sums   map[string]string // docroot file -> sha256
	client *http.Client      // keep-alive client in the client namespace
}

// docrootFile is a file of the test docroot: name and size; contents are
// seeded pseudo-random bytes, so every run serves the same bytes.
type docrootFile struct {
	name string
	size int
}

var smallFiles = []docrootFile{{"b1.bin", 1}, {"k1.bin", 1 << 10}, {"m1.bin", 1 << 20}}

// makeDocroot writes files (plus f0..f9.txt) into a fresh directory and
// returns it with each file's sha256.
func makeDocroot(t testing.TB, files []docrootFile) (string, map[string]string) {
	t.Helper()
	tree := map[string][]byte{}
	sums := map[string]string{}
	rng := rand.NewChaCha8([32]byte{'p', 'e', 'r', 'c', 'o', 'r', 'e'})
	for _, f := range files {
		b := make([]byte, f.size)
		rng.Read(b)
		tree[f.name] = b
		h := sha256.Sum256(b)
		sums[f.name] = hex.EncodeToString(h[:])
	}
	for i := 0; i < 10; i++ {
		tree[fmt.Sprintf("f%d.txt", i)] = []byte(fmt.Sprintf("file %d\n", i))
	}
	return testutil.WriteTree(t, tree), sums
}

// startNativeTest starts httpd --network-stack native --lab --smp smp (with the
// impairment when spec is set) serving files, with the Prometheus endpoint
// on a free loopback port, and stops it and checks the lab is gone at cleanup.
func startNativeTest(t testing.TB, smp int, files []docrootFile, impair string, tweak func(*Options)) *nativeTest {
	t.Helper()
	requireNative(t)
	cpus, err := shard.AllowedCPUs()
	must(t, err)
	if len(cpus) < smp {
		t.Skipf("needs %d CPUs, the process may use %d", smp, len(cpus))
	}
	dir, sums := makeDocroot(t, files)
	args := []string{"--network-stack", "native", "--lab", "--smp", fmt.Sprint(smp), "--docroot", dir, "--port", "10000,10001"}
	if impair != "" {
		args = append(args, "--lab-impair", impair)
	}
	o, err := ParseFlags(args, nil)
	must(t, err)
	o.PrometheusAddr = "127.0.0.1:0"
	o.Native.LabPrefix = "pn"
	o.Native.Logf = t.Logf
	if tweak != nil {
		tweak(&o)
	}
	s, err := Start(o, nil)
	must(t, err)
	nt := &nativeTest{Server: s, t: t, sums: sums, url: "http://" + s.Addr.String()}
	t.Cleanup(func() { nt.stop() })
	t.Logf("%v", s.Lab)
	nt.dial = newNSDialer(t, s.Lab.ClientNS)
	nt.client = nt.httpClient(true)
	return nt
}

// stop stops the server (at most once) and checks it released the lab.
func (nt *nativeTest) stop() {
	t := nt.t
	nt.Stop()
	select {
	case <-nt.Done():
	case <-time.After(60 * time.Second):
		t.Errorf("server did not stop within 60s")
		return
	}
	if nt.closeErr != nil {
		t.Errorf("releasing XDP and the lab: %v", nt.closeErr)
	}
	if names, err := lab.List(nt.Lab.ClientNS.Name); err == nil && len(names) > 0 {
		t.Errorf("lab left behind: %v", names)
	}
	if _, err := net.InterfaceByName(nt.Lab.ServerIf); err == nil {
		t.Errorf("lab interface %s left behind", nt.Lab.ServerIf)
	}
}

// counters returns every shard's report.
func (nt *nativeTest) counters() []shard.Report { return nt.Stats() }

func (nt *nativeTest) total(name string) uint64 { return shard.Merge(nt.Stats()).Get(name) }

// nsDialer dials from the client namespace: one goroutine, locked to an OS
// thread inside the namespace (never unlocked, so the thread dies with it),
// creates the sockets; a socket stays in its namespace whichever thread then
// uses it, so net/http and raw clients run in ordinary goroutines.
type nsDialer struct {
	reqs chan dialReq
}

type dialReq struct {
	ctx   context.Context
	addr  string
	reply chan dialRes
}

type dialRes struct {
	c   net.Conn
	err error
}

func newNSDialer(t testing.TB, ns *lab.NS) *nsDialer {
	d := &nsDialer{reqs: make(chan dialReq)}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := ns.Enter(); err != nil {
			ready <- err
			return
		}
		ready <- nil
		var nd net.Dialer
		for r := range d.reqs {
			c, err := nd.DialContext(r.ctx, "tcp4", r.addr)
			r.reply <- dialRes{c, err}
		}
	}()
	must(t, <-ready)
	t.Cleanup(func() { close(d.reqs) })
	return d
}

func (d *nsDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	r := dialReq{ctx: ctx, addr: addr, reply: make(chan dialRes, 1)}
	select {
	case d.reqs <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res := <-r.reply
	return res.c, res.err
}

// raw opens a raw connection from the client namespace with a bounded
// deadline for everything on it.
func (nt *nativeTest) raw(addr string) (net.Conn, *bufio.Reader) {
	t := nt.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := nt.dial.DialContext(ctx, "tcp", addr)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(60 * time.Second))
	return c, bufio.NewReaderSize(c, 64<<10)
}

func (nt *nativeTest) httpClient(keepAlive bool) *http.Client {
	tr := &http.Transport{DialContext: nt.dial.DialContext, MaxIdleConnsPerHost: 4, DisableKeepAlives: !keepAlive}
	nt.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// get fetches path and returns status, body sha256 and length.
func get(t testing.TB, c *http.Client, url string) (int, string, int) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body after %d bytes: %v", url, n, err)
	}
	if resp.ContentLength != n {
		t.Fatalf("GET %s: %d body bytes, Content-Length %d", url, n, resp.ContentLength)
	}
	return resp.StatusCode, hex.EncodeToString(h.Sum(nil)), int(n)
}

// checkFile fetches a docroot file and compares its sha256.
func (nt *nativeTest) checkFile(c *http.Client, name string) {
	nt.t.Helper()
	code, sum, n := get(nt.t, c, nt.url+"/"+name)
	if code != 200 || sum != nt.sums[name] {
		nt.t.Fatalf("GET /%s: status %d, %d bytes, sha256 %s, want 200 and %s", name, code, n, sum, nt.sums[name])
	}
}

// perShard returns a counter per shard.
func perShard(rs []shard.Report, name string) []uint64 {
	v := make([]uint64, len(rs))
	for i, r := range rs {
		v[i] = r.Get(name)
	}
	return v
}

// scrape fetches the Prometheus endpoint and returns metric{shard="i"} values.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/metrics")
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("metrics: status %d", resp.StatusCode)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		m[k] = f
	}
	must(t, sc.Err())
	return m
}

// getNoFatal is get for goroutines other than the test's: errors come back
// as status 0.
func getNoFatal(c *http.Client, url string) (int, string, int) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error(), 0
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil || resp.ContentLength != n {
		return 0, fmt.Sprintf("body after %d bytes: %v", n, err), int(n)
	}
	return resp.StatusCode, hex.EncodeToString(h.Sum(nil)), int(n)
}

func newReader(c net.Conn) *bufio.Reader { return bufio.NewReaderSize(c, 4096) }
