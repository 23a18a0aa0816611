package wreck

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"percore/afxdp"
	"percore/lab"
	"percore/server"
	pshard "percore/shard"
)

// End to end on two native ends: percore's native httpd (server.Native on
// shards, one AF_XDP queue each) on the server end of a 2-queue lab, native
// wreck with --smp 2 in the client namespace.

// requireNative skips unless the test can build labs and open AF_XDP sockets.
func requireNative(t *testing.T) {
	t.Helper()
	if err := afxdp.Supported(); err != nil {
		t.Skip(err)
	}
}

// twoCPUs returns the first two CPUs the process may use, for a client and
// a server of two shards each; it skips t when there are fewer.
func twoCPUs(t *testing.T) []int {
	t.Helper()
	cpus, err := pshard.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		t.Skipf("needs 2 CPUs, the process may use %d", len(cpus))
	}
	return cpus[:2]
}

// nativeServer is a native httpd on pair's server end (root namespace).
type nativeServer struct {
	g    *server.Server
	addr netip.AddrPort
}

func startNativeServer(t *testing.T, pair *lab.Lab, cpus []int) *nativeServer {
	t.Helper()
	o, err := server.ParseFlags([]string{"--network-stack", "native", "--iface", pair.ServerIf,
		"--host-ipv4-addr", pair.ServerIP.String(), "--port", "80", "--cpuset", pshard.FormatCPUs(cpus),
		"--stop-timeout", "2s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.Native.Logf = t.Logf
	srv, err := server.Start(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &nativeServer{g: srv, addr: netip.AddrPortFrom(pair.ServerIP, 80)}
	t.Cleanup(func() {
		srv.Stop()
		select {
		case <-srv.Done():
		case <-time.After(20 * time.Second):
			t.Errorf("native server did not stop within 20s")
		}
	})
	return s
}

// newNativeLab builds a 2-queue native pair and a native server on it; it
// skips without root, AF_XDP or 2 CPUs.
func newNativeLab(t *testing.T) (*lab.NativePair, *nativeServer, []int) {
	t.Helper()
	requireNative(t)
	cpus := twoCPUs(t)
	pair := newNativePair(t, lab.Config{Prefix: "wn", Queues: 2, ServerRoot: true})
	t.Log(pair.Lab)
	return pair, startNativeServer(t, pair.Lab, cpus), cpus
}

// newNativePair builds a lab for cfg, removed when t ends.
func newNativePair(t *testing.T, cfg lab.Config) *lab.NativePair {
	t.Helper()
	pair, err := lab.NewNativePair(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pair.Close(); err != nil {
			t.Errorf("remove lab: %v", err)
		}
	})
	return pair
}

// nativeRun runs native wreck on pair's client end with extra flags.
func nativeRun(t *testing.T, pair *lab.NativePair, srv *nativeServer, cpus []int, extra ...string) *Result {
	t.Helper()
	return nativeRunTo(t, pair, srv, cpus, tlog{t}, extra...)
}

// nativeRunTo is nativeRun writing its progress and summary to progress.
func nativeRunTo(t *testing.T, pair *lab.NativePair, srv *nativeServer, cpus []int, progress io.Writer, extra ...string) *Result {
	t.Helper()
	args := append(pair.NativeClientArgs(), "--netns", pair.ClientNS.Name,
		"--server", srv.addr.String(), "--smp", "2", "--cpuset", fmt.Sprintf("%d,%d", cpus[0], cpus[1]),
		"--conn", "16", "--reqs", "20000", "--duration", "20s", "--timeout", "5s")
	cfg, _, err := ParseFlags(append(args, extra...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Progress = progress
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests in %.2fs, %.0f req/s, p50 %.0fus p99 %.0fus, %d connects, errors %+v",
		res.Requests, res.Seconds, res.ReqPerSec, res.Latency.P50, res.Latency.P99, res.Connects, res.Errors)
	return res
}

// checkRun asserts a bounded run completed every request, valid, on both
// client shards, and that the server accepted connections on both shards.
func checkRun(t *testing.T, res *Result, want uint64, srv *nativeServer, acceptedBefore []uint64) {
	t.Helper()
	if res.Requests != want {
		t.Errorf("%d requests completed, want %d", res.Requests, want)
	}
	if res.Errors.Total() != 0 || res.Errors.Non2xx != 0 {
		t.Errorf("errors %+v, want none", res.Errors)
	}
	for i, s := range res.Shards {
		if s.Requests == 0 {
			t.Errorf("client shard %d completed no requests", i)
		}
	}
	for i, r := range srv.g.Stats() {
		if got := r.Get("native.accepted") - acceptedBefore[i]; got == 0 {
			t.Errorf("server shard %d accepted no connection: the replies did not stay on their queues", i)
		}
		if got := r.Get("http.requests"); got == 0 {
			t.Errorf("server shard %d served no request", i)
		}
	}
}

func accepted(srv *nativeServer) []uint64 {
	var a []uint64
	for _, r := range srv.g.Stats() {
		a = append(a, r.Get("native.accepted"))
	}
	return a
}

func TestNativeE2E(t *testing.T) {
	pair, srv, cpus := newNativeLab(t)
	t.Run("keepalive", func(t *testing.T) {
		before := accepted(srv)
		checkRun(t, nativeRun(t, pair, srv, cpus), 20000, srv, before)
	})
	t.Run("pipeline16", func(t *testing.T) {
		before := accepted(srv)
		checkRun(t, nativeRun(t, pair, srv, cpus, "--pipeline", "16"), 20000, srv, before)
	})
	t.Run("rate", func(t *testing.T) {
		before := accepted(srv)
		res := nativeRun(t, pair, srv, cpus, "--rate", "20000", "--pipeline", "4", "--reqs", "4000", "--busy-poll", "64")
		checkRun(t, res, 4000, srv, before)
	})
	t.Run("rss key, no table", func(t *testing.T) {
		// veth has no indirection table whose size --rss-table could default to.
		args := append(pair.NativeClientArgs(), "--netns", pair.ClientNS.Name, "--server", srv.addr.String(),
			"--reqs", "1", "--rss-key", "6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0")
		cfg, _, err := ParseFlags(args)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Run(cfg); err == nil || !strings.Contains(err.Error(), "has no RSS indirection table to read the size of: give Native.RSSTable") {
			t.Errorf("Run: %v", err)
		}
	})
	t.Run("oneshot", func(t *testing.T) {
		before := accepted(srv)
		res := nativeRun(t, pair, srv, cpus, "--keepalive=false", "--reqs", "2000")
		checkRun(t, res, 2000, srv, before)
		if res.Connects != 2000 {
			t.Errorf("%d connects, want one per request (2000)", res.Connects)
		}
	})
}

// TestNativeAliases: native wreck with two addresses and two source ports
// a shard holds four connections a shard: two on each address.
func TestNativeAliases(t *testing.T) {
	pair, srv, cpus := newNativeLab(t)
	addrs, err := pair.NativeAddrs(2)
	if err != nil {
		t.Fatal(err)
	}
	before := accepted(srv)
	res := nativeRun(t, pair, srv, cpus, "--host-ipv4-addr", fmt.Sprintf("%s-%s", addrs[0], addrs[1]),
		"--source-ports", "40000-40003", "--conn", "8", "--reqs", "4000")
	checkRun(t, res, 4000, srv, before)
	if res.Connects != 8 {
		t.Errorf("%d connects, want 8 (keep-alive)", res.Connects)
	}
}

// tlog writes the progress and summary lines into the test log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// TestNativeImpaired: one native shard on each end through the lab's
// impairment bridge (loss, reordering, duplication, seeded): the client's
// TCP repairs the stream and every response is still valid.
func TestNativeImpaired(t *testing.T) {
	requireNative(t)
	cpus, err := pshard.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := lab.ParseImpair("loss=2%,reorder=5%,duplicate=1%,seed=7")
	if err != nil {
		t.Fatal(err)
	}
	im, err := lab.NewImpaired(lab.Config{Prefix: "wi", Queues: 1, ServerRoot: true}, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := im.Close(); err != nil {
			t.Errorf("remove lab: %v", err)
		}
	})
	t.Log(im.Lab)
	srv := startNativeServer(t, im.Lab, cpus[:1])
	args := []string{"--network-stack", "native", "--iface", im.ClientIf, "--netns", im.ClientNS.Name,
		"--host-ipv4-addr", lab.Host(im.Subnet, 3).String(), "--server", srv.addr.String(),
		"--smp", "1", "--cpuset", fmt.Sprint(cpus[0]), "--conn", "8", "--reqs", "1500", "--duration", "20s", "--timeout", "10s"}
	cfg, _, err := ParseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Progress = tlog{t}
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests in %.2fs, errors %+v; bridge %+v", res.Requests, res.Seconds, res.Errors, im.Bridge.Stats())
	if res.Requests != 1500 || res.Errors.Total() != 0 || res.Errors.Non2xx != 0 {
		t.Errorf("%d requests, errors %+v, want 1500 and none", res.Requests, res.Errors)
	}
}

// TestNativeKernelAddr: the kernel's own address is refused as the native
// client's, with the fix in the message, before anything is attached.
func TestNativeKernelAddr(t *testing.T) {
	requireNative(t)
	pair := newNativePair(t, lab.Config{Prefix: "wk"})
	cfg, _, err := ParseFlags([]string{"--network-stack", "native", "--iface", pair.ClientIf, "--netns", pair.ClientNS.Name,
		"--host-ipv4-addr", pair.ClientIP.String(), "--server", netip.AddrPortFrom(pair.ServerIP, 80).String(), "--duration", "1s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(cfg); err == nil || !strings.Contains(err.Error(), "is the kernel's address") {
		t.Fatalf("Run with the kernel's address: %v, want a refusal", err)
	}
	if _, err := Run(func() Config { c := cfg; c.Native.Iface = "nosuch0"; return c }()); err == nil || !strings.Contains(err.Error(), "no such interface") {
		t.Fatalf("Run on a missing interface: %v", err)
	}
}
