package server

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"percore/lab"
	"percore/netstack"
	"percore/shard"
	"percore/wreck"
)

var soakConns = flag.Int("soak-conns", 20000, "TestNativeConnsSoak: keep-alive connections held at once (at most 129024: the client's two addresses of 64512 source ports)")

// TestNativeConnsSoak holds many keep-alive connections at once: native
// wreck (2 shards, one AF_XDP queue each, from two addresses so that
// -soak-conns may pass the ports of one) opens them all together: a burst
// of 10,000 SYNs on each server queue, more than the SYN backlog of the
// default sizing (8192), so SYN cookies answer the rest. It sends requests on
// them for 6 s (closed loop; long enough for all of them to open on a loaded
// machine), then resets them and leaves. Resets that are lost (the
// client's socket closed first, or the server's fill ring was empty) leave
// connections whose peer is gone: TCP aborts those with a response in
// flight when its retransmissions go unanswered, and the server's idle
// timeout closes the others (TCP then aborts them when its FIN goes
// unanswered). The idle timeout is longer than the run, so that it closes
// only connections the client has left: on a loaded machine the server's
// fill ring runs dry, requests are dropped, and the client's
// retransmissions back off past a second, which a 1 s timeout took for
// idleness (closing live connections, which the client then opened again).
// It asserts no error, every connection accepted and served, and the
// server back to idle: no httpd or TCP connection, no receive buffer lent,
// every UMEM transmit frame back in the free list.
func TestNativeConnsSoak(t *testing.T) {
	requireNative(t)
	cpus, err := shard.AllowedCPUs()
	must(t, err)
	if len(cpus) < 2 {
		t.Skipf("needs 2 CPUs, the process may use %d", len(cpus))
	}
	cpus = cpus[:2]
	n := *soakConns
	run := 6 * time.Second
	idleTimeout := run + 4*time.Second // closes only connections the client has left
	docroot := t.TempDir()
	must(t, os.WriteFile(filepath.Join(docroot, "a.txt"), []byte("soak\n"), 0o644))
	pair, err := lab.NewNativePair(lab.Config{Prefix: "sc", Queues: 2, ServerRoot: true})
	must(t, err)
	t.Cleanup(func() {
		if err := pair.Close(); err != nil {
			t.Errorf("remove lab: %v", err)
		}
	})
	o, err := ParseFlags([]string{"--network-stack", "native", "--iface", pair.ServerIf,
		"--host-ipv4-addr", pair.ServerIP.String(), "--port", "80", "--cpuset", shard.FormatCPUs(cpus),
		"--docroot", docroot, "--stop-timeout", "2s", "--idle-timeout", idleTimeout.String(), "--max-connections", fmt.Sprint(max(16384, n/2+n/8))}, nil)
	must(t, err)
	o.Native.Logf = t.Logf
	o.Native.tcp = func(c *netstack.TCPConfig) {
		// A connection whose reset was lost ends within the idle timeout
		// and 4 RTOs of at most 5 s: the RTT measured on a loaded machine
		// can make RTOs of seconds, doubled each time.
		c.Retries, c.RTOMax = 3, 5*time.Second
	}
	srv, err := Start(o, nil)
	must(t, err)
	t.Cleanup(func() {
		srv.Stop()
		select {
		case <-srv.Done():
		case <-time.After(20 * time.Second):
			t.Errorf("server did not stop within 20s")
		}
	})
	idle := shard.Merge(srv.Stats())

	addrs, err := pair.NativeAddrs(2)
	must(t, err)
	args := append(pair.NativeClientArgs(), "--netns", pair.ClientNS.Name,
		"--host-ipv4-addr", fmt.Sprintf("%s-%s", addrs[0], addrs[1]), "--source-ports", "1024-65535",
		"--server", fmt.Sprintf("%s:80", pair.ServerIP), "--smp", "2", "--cpuset", shard.FormatCPUs(cpus),
		"--xdp-frames", "65536", "--conn", fmt.Sprint(n),
		"--path", "/a.txt", "--duration", run.String(), "--timeout", "20s")
	cfg, _, err := wreck.ParseFlags(args)
	must(t, err)
	res, err := wreck.Run(cfg)
	must(t, err)
	t.Logf("%d connections, %d requests in %.2fs, p50 %.0fus p99 %.0fus, errors %+v",
		res.Connects, res.Requests, res.Seconds, res.Latency.P50, res.Latency.P99, res.Errors)
	if res.Errors.Total() != 0 || res.Errors.Non2xx != 0 {
		t.Errorf("errors %+v, want none", res.Errors)
	}
	if res.Connects != uint64(n) || res.Requests < uint64(n) {
		t.Errorf("%d connections, %d requests: want %d connections, at least a request each", res.Connects, res.Requests, n)
	}

	var m shard.Report
	// At most the idle timeout and 20 s of RTOs (above).
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m = shard.Merge(srv.Stats())
		if m.Get("native.open") == 0 && m.Get("tcp.conns") == m.Get("tcp.time_waits") && m.Get("xsk.tx_outstanding") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not idle 60s after the run: open %d, tcp conns %d (time-wait %d), tx outstanding %d",
				m.Get("native.open"), m.Get("tcp.conns"), m.Get("tcp.time_waits"), m.Get("xsk.tx_outstanding"))
		}
	}
	if d := m.Get("native.accepted") - idle.Get("native.accepted"); d != uint64(n) {
		t.Errorf("accepted %d connections, want %d", d, n)
	}
	if d := m.Get("http.responses_2xx") - idle.Get("http.responses_2xx"); d < uint64(n) {
		t.Errorf("%d good responses, want at least %d", d, n)
	}
	if m.Get("native.released") != m.Get("native.accepted") {
		t.Errorf("released %d of %d connections", m.Get("native.released"), m.Get("native.accepted"))
	}
	if v := m.Get("tcp.rcv_bufs_used"); v != 0 {
		t.Errorf("%d receive buffers still lent", v)
	}
	if got, want := m.Get("xsk.free_frames")+m.Get("ip.held_tx"), idle.Get("xsk.free_frames")+idle.Get("ip.held_tx"); got != want {
		t.Errorf("tx frames free+held %d, %d before the run: frames leaked", got, want)
	}
	var sb strings.Builder
	for _, k := range []string{"tcp.syn_cookies_sent", "tcp.syn_cookies_ok", "tcp.syn_shed", "native.frames_short", "xsk.rx_fill_ring_empty", "tcp.retransmits", "tcp.table_full", "tcp.rto_aborts", "native.timeouts"} {
		fmt.Fprintf(&sb, " %s %d", k, m.Get(k))
	}
	t.Logf("server:%s", sb.String())
	if n/2 > 8192 && m.Get("tcp.syn_cookies_ok") == 0 {
		t.Errorf("no connection opened by a SYN cookie: the burst did not overflow the backlog")
	}
}
