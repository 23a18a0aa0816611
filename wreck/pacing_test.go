package wreck

import (
	"bufio"
	"net"
	"sync"
	"testing"
	"time"

	"percore/native"
)

// TestNativeClientConnectRate: 50 connections at 1,000 connects a second
// open one a millisecond on the fake clock, each then serving requests; the
// connect times are recorded once each.
func TestNativeClientConnectRate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ConnectRate = 1000
	p := newNCPair(t, cfg, 50, -1)
	p.runFor(20*time.Millisecond + 5*time.Microsecond)
	if c := p.acct.cnt.Connects; c < 19 || c > 21 {
		t.Errorf("%d connects after 20 ms at 1,000/s, want 20 (+-1 for the handshake in flight)", c)
	}
	p.runFor(50 * time.Millisecond)
	c := &p.acct.cnt
	if c.Connects != 50 || p.ep.accepted != 50 || c.failures() != 0 {
		t.Errorf("%d connects, server accepted %d, errors %v: want 50 and none", c.Connects, p.ep.accepted, c.Errors)
	}
	if c.Responses == 0 {
		t.Error("no responses: paced connections must carry requests")
	}
	if n := p.acct.conn.TotalCount(); n != 50 {
		t.Errorf("%d connect times recorded, want 50", n)
	}
}

// TestRunConnectRate: the kernel client paces its connects too (the budget
// may be done before the last slot's turn), and reports their times.
func TestRunConnectRate(t *testing.T) {
	srv := newTestServer(t, goodServer(false))
	cfg := testConfig(srv.addr())
	cfg.Conns, cfg.Reqs, cfg.ConnectRate = 5, 500, 200
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	if r.Connects < 1 || r.Connects > 5 || r.Requests != 500 {
		t.Fatalf("%d connects, %d requests, want 1-5 and 500", r.Connects, r.Requests)
	}
	if r.Connect.P50 <= 0 || r.Connect.Max < r.Connect.P50 || r.ConnectRate != 200 {
		t.Errorf("connect times %+v, rate %v: want them reported", r.Connect, r.ConnectRate)
	}
}

func TestMayConnect(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SMP, cfg.ConnectRate = 2, 1000 // 500 a second on each shard: one every 2 ms
	a := newAcct(0, &cfg, 10, -1)
	a.begun = true
	took := 0
	for ms := range 10 {
		a.now = int64(ms) * int64(time.Millisecond)
		for a.mayConnect() {
			took++
		}
	}
	if took != 5 {
		t.Errorf("%d connects in 9 ms at one per 2 ms, want 5 (at 0, 2, 4, 6, 8 ms)", took)
	}
	cfg.ConnectRate = 0
	b := newAcct(0, &cfg, 10, -1)
	for range 100 {
		if !b.mayConnect() {
			t.Fatal("unpaced: a connect was held back")
		}
	}
}

func TestTickSlots(t *testing.T) {
	small := &acct{slots: sweepAll}
	if from, n := small.tickSlots(); from != 0 || n != sweepAll {
		t.Errorf("small shard: %d+%d, want every slot each tick", from, n)
	}
	big := &acct{slots: 100001}
	seen := make([]int, big.slots)
	ticks := (big.slots + sweepMax - 1) / sweepMax
	for range ticks {
		from, n := big.tickSlots()
		for k := range n {
			seen[(from+k)%big.slots]++
		}
	}
	for i, v := range seen {
		if v == 0 {
			t.Fatalf("slot %d not checked in %d ticks", i, ticks)
		}
	}
}

func TestParseConnectRate(t *testing.T) {
	cfg, _, err := ParseFlags([]string{"--server", "127.0.0.1:80", "--connect-rate", "5000"})
	if err != nil || cfg.ConnectRate != 5000 {
		t.Fatalf("--connect-rate 5000: %v, %v", cfg.ConnectRate, err)
	}
	if _, _, err := ParseFlags([]string{"--server", "127.0.0.1:80", "--connect-rate", "10", "--keepalive=false"}); err == nil {
		t.Error("--connect-rate with one-shot connections: want an error")
	}
}

// TestRunSources: the kernel client binds its connections to the
// --host-ipv4-addr addresses in turn (two loopback addresses here).
func TestRunSources(t *testing.T) {
	var mu sync.Mutex
	from := map[string]int{}
	srv := newTestServer(t, func(s *testServer, c net.Conn, br *bufio.Reader) {
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		mu.Lock()
		from[host]++
		mu.Unlock()
		goodServer(false)(s, c, br)
	})
	cfg := testConfig(srv.addr())
	cfg.Conns, cfg.Reqs = 4, 100
	var err error
	if cfg.Sources, err = ParseAddrs("127.0.0.2-127.0.0.3"); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	srv.stop()
	mu.Lock()
	defer mu.Unlock()
	if from["127.0.0.2"] != 2 || from["127.0.0.3"] != 2 {
		t.Errorf("connections from %v, want 2 from each of 127.0.0.2 and 127.0.0.3", from)
	}
}

// TestRunWarmup: responses during the warm-up are served but not counted;
// the run reports its warm-up.
func TestRunWarmup(t *testing.T) {
	srv := newTestServer(t, goodServer(false))
	cfg := testConfig(srv.addr())
	cfg.Warmup, cfg.Duration = 300*time.Millisecond, 200*time.Millisecond
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	srv.stop()
	if r.Warmup != 0.3 || r.Requests == 0 || r.Connects != 2 {
		t.Fatalf("warm-up %v s, %d requests, %d connects: want 0.3, some, 2", r.Warmup, r.Requests, r.Connects)
	}
	if served := uint64(srv.reqs.Load()); served <= r.Requests {
		t.Errorf("server answered %d, wreck counted %d: the warm-up's responses were counted", served, r.Requests)
	}
	if _, _, err := ParseFlags([]string{"--server", "127.0.0.1:80", "--warmup", "1s", "--reqs", "10"}); err == nil {
		t.Error("--warmup with --reqs: want an error")
	}
}

// TestClientSizing: the native client's table follows --conn (four TCBs a
// slot, at least 4096), and the queue's UMEM follows the table.
func TestClientSizing(t *testing.T) {
	for _, c := range []struct{ slots, table, frames int }{
		{64, 4096, 8192},
		{8192, 32768, 65536},
		{1 << 20, 1 << 22, 65536},
	} {
		if got := clientTableSize(c.slots); got != c.table {
			t.Errorf("clientTableSize(%d) = %d, want %d", c.slots, got, c.table)
		}
		if got := native.SizeFor(clientTableSize(c.slots), 0).Frames; got != c.frames {
			t.Errorf("%d slots: %d UMEM frames, want %d", c.slots, got, c.frames)
		}
	}
}
