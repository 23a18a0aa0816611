package server

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"percore/lab"
	"percore/shard"
)

// TestNativeQueueCounts serves on a lab whose interface has 4, 2 and 1 rx
// queues with 2 shards (veth has no RSS table: --rss auto takes the queues
// strategy, each shard owning two queues of the four; with one queue it
// forwards in software, shard 0 handing shard 1 its flows), and with 4, 2
// and 1 queues through the impairment bridge. In each case 200 fresh connections from
// the kernel's spread source ports are all served (a queue no shard owned
// would pass its flows to the kernel, which refuses them), every shard
// serves some, keep-alive and pipelined requests complete, and after the
// stop every connection was closed cleanly and every frame came back.
func TestNativeQueueCounts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queues int
		impair string
		layout string
	}{
		{"4 queues", 4, "", "4 rx queues, 2 shards: queues strategy (auto: the driver has no RSS table to program), shard 0: 0,2; shard 1: 1,3"},
		{"2 queues", 2, "", "2 rx queues, 2 shards: one queue each, shard 0: 0; shard 1: 1"},
		{"2 queues impaired", 2, "loss=1%,reorder=5%,duplicate=1%,corrupt=0.1%,delay=1ms,seed=3", "2 rx queues, 2 shards: one queue each"},
		{"4 queues impaired", 4, "loss=1%,reorder=5%,duplicate=1%,corrupt=0.1%,delay=1ms,seed=3", "4 rx queues, 2 shards: queues strategy"},
		{"1 queue", 1, "", "1 rx queues, 2 shards: forward strategy (fewer queues than shards: queue owners hash each TCP flow to its shard with a fixed Toeplitz key: the driver shows none), shard 0: 0 (forwards); shard 1: none (forwarded, sends through shard 0)"},
		{"1 queue impaired", 1, "loss=1%,reorder=5%,duplicate=1%,corrupt=0.1%,delay=1ms,seed=3", "1 rx queues, 2 shards: forward strategy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var lines []string
			nt := startNativeTest(t, 2, nil, tc.impair, func(o *Options) {
				o.Native.LabQueues = tc.queues
				o.Native.Logf = func(f string, a ...any) {
					t.Logf(f, a...)
					mu.Lock()
					lines = append(lines, fmt.Sprintf(f, a...))
					mu.Unlock()
				}
			})
			mu.Lock()
			log := strings.Join(lines, "\n")
			mu.Unlock()
			if !strings.Contains(log, tc.layout) {
				t.Errorf("start-up lines %q lack %q", log, tc.layout)
			}
			for q := range tc.queues {
				if !strings.Contains(log, fmt.Sprintf("queue %d bound in", q)) {
					t.Errorf("no bind-mode line for queue %d in %q", q, log)
				}
			}
			idle := shard.Merge(nt.Stats())
			start := time.Now()
			nt.freshConns(200)
			t.Logf("200 fresh connections in %v", time.Since(start))
			if got := perShard(nt.Stats(), "http.requests"); got[0] == 0 || got[1] == 0 {
				t.Errorf("requests per shard %v: every shard should serve some", got)
			}
			before := nt.total("native.accepted")
			for i := 0; i < 20; i++ {
				if code, _, n := get(t, nt.client, fmt.Sprintf("%s/f%d.txt", nt.url, i%10)); code != 200 || n != 7 {
					t.Fatalf("keep-alive GET %d: %d, %d bytes", i, code, n)
				}
			}
			if n := nt.total("native.accepted") - before; n != 1 {
				t.Errorf("20 keep-alive requests used %d connections, want 1", n)
			}
			nt.pipelined(50)
			start = time.Now()
			nt.stop()
			t.Logf("stopped in %v", time.Since(start))
			f := shard.Merge(nt.group.Final())
			if f.Get("native.open") != 0 || f.Get("native.forced") != 0 || f.Get("native.released") != f.Get("native.accepted") {
				t.Errorf("final: open %d, forced %d, released %d of %d", f.Get("native.open"), f.Get("native.forced"),
					f.Get("native.released"), f.Get("native.accepted"))
			}
			if n := f.Get("tcp.rcv_bufs_used"); n != 0 {
				t.Errorf("%d receive buffers still lent", n)
			}
			// A shard without a queue sends from its own pool of buffers.
			frames := func(r shard.Report) uint64 {
				return r.Get("xsk.free_frames") + r.Get("native.fwd_tx_pool") + r.Get("ip.held_tx")
			}
			if got, want := frames(f), frames(idle); got != want || f.Get("xsk.tx_outstanding") != 0 {
				t.Errorf("tx frames free+held %d (outstanding %d), %d before: frames leaked", got, f.Get("xsk.tx_outstanding"), want)
			}
			if tc.queues == 1 {
				t.Logf("forwarded %d frames to shard 1, %d of its frames sent; dropped: %d ring full; %d left in rings at stop",
					f.Get("native.fwd_out"), f.Get("native.fwd_tx_sent"), f.Get("native.fwd_ring_full"), f.Get("native.fwd_rings_left"))
				if f.Get("native.fwd_out") == 0 || f.Get("native.fwd_tx_sent") != f.Get("native.fwd_tx_out") {
					t.Errorf("forwarded %d; shard 1 handed over %d frames to send, shard 0 sent %d",
						f.Get("native.fwd_out"), f.Get("native.fwd_tx_out"), f.Get("native.fwd_tx_sent"))
				}
			}
		})
	}
}

// freshConns makes n requests, each on its own connection, 8 at a time.
func (nt *nativeTest) freshConns(n int) {
	t := nt.t
	t.Helper()
	c := nt.httpClient(false)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				name := fmt.Sprintf("f%d.txt", i%10)
				if code, sum, _ := getNoFatal(c, nt.url+"/"+name); code != 200 {
					errs <- fmt.Errorf("connection %d: GET /%s: %d %s", i, name, code, sum)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// pipelined sends n requests in one write on one connection and reads the
// n responses.
func (nt *nativeTest) pipelined(n int) {
	t := nt.t
	t.Helper()
	c, br := nt.raw(nt.Addr.String())
	var req bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&req, "GET /f%d.txt HTTP/1.1\r\nHost: x\r\n\r\n", i%10)
	}
	_, err := c.Write(req.Bytes())
	must(t, err)
	for i := 0; i < n; i++ {
		resp, body := readResponse(t, br, "GET")
		if want := fmt.Sprintf("file %d\n", i%10); resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("pipelined response %d: %d %q, want 200 %q", i, resp.StatusCode, body, want)
		}
	}
	c.Close()
}

// TestNativeQueueErrors: one queue for two shards with --rss queues (auto
// would forward), and --rss indir on veth (no indirection table), each end
// in one line and exit status 2.
func TestNativeQueueErrors(t *testing.T) {
	requireNative(t)
	cpus, err := shard.AllowedCPUs()
	must(t, err)
	if len(cpus) < 2 {
		t.Skip("needs 2 CPUs for --smp 2")
	}
	for _, tc := range []struct {
		name   string
		queues int
		args   []string
		want   []string
	}{
		{"one queue", 1, []string{"--rss", "queues"}, []string{"has 1, 2 shards need 2", "ethtool -L", "--rss auto"}},
		{"indir on veth", 4, []string{"--rss", "indir"}, []string{"no RSS indirection table", "--rss queues"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := lab.New(lab.Config{Prefix: "pq", Queues: tc.queues, ServerRoot: true})
			must(t, err)
			t.Cleanup(func() { l.Close() })
			args := append([]string{"--network-stack", "native", "--iface", l.ServerIf, "--host-ipv4-addr", l.ServerIP.String(),
				"--stats-interval", "0", "--smp", "2"}, tc.args...)
			var stderr bytes.Buffer
			code := Main("httpd", args, &stderr, nil, nil)
			if code != 2 || strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want 2 and one line", code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q lacks %q", stderr.String(), w)
				}
			}
		})
	}
}

// NativeShard asks every queue's Native, even after a busy one: those after
// it must count themselves in the DrainGroup, or the stop waits for its
// timeout.
func TestNativeShardAsksEveryNative(t *testing.T) {
	now := time.Now()
	w := shard.NewWheel(now, time.Millisecond, 64)
	g := NewDrainGroup(3)
	mk := func(open int) *Native {
		n := &Native{wheel: w, group: g, open: open, now: now}
		n.recheck.Init(func(time.Time) {})
		return n
	}
	busy, idle := mk(1), mk(0)
	ns := &NativeShard{natives: []*Native{busy, idle}}
	if ns.Drained() {
		t.Fatal("drained with a connection open")
	}
	if !idle.counted || g.left.Load() != 2 {
		t.Fatalf("the idle Native after the busy one: counted %v, group waits for %d, want true and 2", idle.counted, g.left.Load())
	}
	busy.open = 0
	other := mk(0) // the other shard's
	other.Drained()
	if !ns.Drained() {
		t.Fatalf("not drained with every Native idle (group waits for %d)", g.left.Load())
	}
}
