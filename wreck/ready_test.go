package wreck

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"percore/shard"
)

// The open loop (--rate, keep-alive) on kernel sockets sends every request
// of its schedule, none ahead of it, and spreads them over all connections.
func TestRunRateSpread(t *testing.T) {
	var mu sync.Mutex
	perConn := map[net.Conn]int{}
	srv := newTestServer(t, func(s *testServer, c net.Conn, br *bufio.Reader) {
		for _, ok := s.next(br); ok; _, ok = s.next(br) {
			mu.Lock()
			perConn[c]++
			mu.Unlock()
			respond(c, 200, "", "ok", false, false)
		}
	})
	const conns, reqs, rate = 16, 480, 4000
	cfg := testConfig(srv.addr())
	cfg.Conns, cfg.Reqs, cfg.Rate = conns, reqs, rate
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	if r.Requests != reqs {
		t.Fatalf("%d responses, want %d", r.Requests, reqs)
	}
	// The last request is due (reqs-1)/rate after the first: a run that
	// took less sent ahead of its schedule.
	if min := float64(reqs-1) / rate; r.Seconds < min*0.999 {
		t.Fatalf("run took %.3fs, the schedule %.3fs", r.Seconds, min)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(perConn) != conns {
		t.Fatalf("requests on %d connections, want %d", len(perConn), conns)
	}
	for _, n := range perConn {
		// Each connection goes to the back of the ready ring after a
		// request: none may sit idle while others take most of the load.
		if n < reqs/conns/2 {
			t.Fatalf("requests per connection %v: uneven", perConn)
		}
	}
}

// readyFixture is a kernel-mode client shard with slots connections, on a
// shard that does not run, under an open loop: connection 0 is open on a
// socketpair whose other end (peer) plays the server; the others are open
// and busy, their one request in flight, with no socket behind them.
type readyFixture struct {
	s    *kclient
	c    *conn
	peer int
	resp []byte
	buf  []byte
}

func newReadyFixture(tb testing.TB, slots int) *readyFixture {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Server, cfg.Rate = "test:1", 1e6
	req, seqOff := buildRequest(&cfg, false)
	sh, err := shard.NewDetached(shard.Config{Tick: wheelTick})
	if err != nil {
		tb.Fatal(err)
	}
	s := newKClient(sh, newAcct(0, &cfg, slots, -1), nil, unix.AF_UNIX, req, seqOff)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	f := &readyFixture{s: s, c: &s.conns[0], peer: fds[1], buf: make([]byte, 1<<16),
		resp: []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")}
	tb.Cleanup(func() { s.closeConns(); sh.Close(); unix.Close(fds[1]) })
	s.now = mono()
	s.begun, s.t0 = true, s.now+1 // the first request is due after connected
	for i := 1; i < slots; i++ {
		c := &s.conns[i]
		c.state = cOpen
		c.push(s.now, s.now)
	}
	f.c.fd = fds[0]
	s.connected(f.c) // nothing is due yet: it waits with room
	return f
}

// request makes the next request of the schedule due, dispatches it, and
// plays the server's answer.
func (f *readyFixture) request(tb testing.TB) {
	s := f.s
	s.now = s.t0 + int64(float64(s.next)*s.iv)
	s.dispatch()
	n, err := unix.Read(f.peer, f.buf)
	if err != nil || n != s.reqLen {
		tb.Fatalf("peer read %d (%v), want one request of %d", n, err, s.reqLen)
	}
	if _, err := unix.Write(f.peer, f.resp); err != nil {
		tb.Fatal(err)
	}
	s.readable(f.c, false)
	s.runPending()
}

// BenchmarkDispatch is the open loop's cost per request (dispatch, write,
// read, parse) with one connection ready among many busy ones: it does not
// grow with the number of connections.
func BenchmarkDispatch(b *testing.B) {
	for _, slots := range []int{1 << 10, 1 << 14, 1 << 16} {
		b.Run(fmt.Sprintf("conns=%d", slots), func(b *testing.B) {
			f := newReadyFixture(b, slots)
			b.ReportAllocs()
			for b.Loop() {
				f.request(b)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/req")
		})
	}
}

// The open loop takes the one connection with room from the ready ring,
// whatever the number of busy ones, and the ring holds each connection
// once.
func TestDispatchReadyRing(t *testing.T) {
	f := newReadyFixture(t, 1024)
	if f.s.readyN != 1 || f.s.ready[f.s.readyHead] != 0 {
		t.Fatalf("ready ring %d from %d: want connection 0 alone", f.s.readyN, f.s.readyHead)
	}
	for range 100 {
		f.request(t)
	}
	if f.s.cnt.Responses != 100 || f.s.cnt.failures() != 0 || f.s.readyN != 1 {
		t.Fatalf("%d responses, %d failures, %d ready", f.s.cnt.Responses, f.s.cnt.failures(), f.s.readyN)
	}
	if a := testing.AllocsPerRun(100, func() { f.request(t) }); a != 0 {
		t.Fatalf("%v allocations per request", a)
	}
}
