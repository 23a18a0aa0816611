package wreck

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"percore/shard"
)

// The open loop (--rate, keep-alive) on kernel sockets sends every request
// of its schedule, none ahead of it, over its connections (how it spreads
// them: TestDispatchReadyRing).
func TestRunRateSchedule(t *testing.T) {
	srv := newTestServer(t, goodServer(false))
	const conns, reqs, rate = 16, 480, 4000
	cfg := testConfig(srv.addr())
	cfg.Conns, cfg.Reqs, cfg.Rate = conns, reqs, rate
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	if r.Requests != reqs || r.Connects != conns {
		t.Fatalf("%d responses on %d connections, want %d on %d", r.Requests, r.Connects, reqs, conns)
	}
	// The last request is due (reqs-1)/rate after the first: a run that
	// took less sent ahead of its schedule.
	if min := float64(reqs-1) / rate; r.Seconds < min*0.999 {
		t.Fatalf("run took %.3fs, the schedule %.3fs", r.Seconds, min)
	}
}

// readyFixture is a kernel-mode client shard with slots connections, on a
// shard that does not run, under an open loop: the first open connections
// are open on socketpairs whose other ends (peers) play the server; the
// others are open and busy, their one request in flight, with no socket
// behind them.
type readyFixture struct {
	s     *kclient
	peers []int
	resp  []byte
	buf   []byte
}

func newReadyFixture(tb testing.TB, slots, open int) *readyFixture {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Server, cfg.Rate = "test:1", 1e6
	req, seqOff := buildRequest(&cfg, false)
	sh, err := shard.NewDetached(shard.Config{Tick: wheelTick})
	if err != nil {
		tb.Fatal(err)
	}
	s := newKClient(sh, newAcct(0, &cfg, slots, -1), nil, unix.AF_UNIX, req, seqOff)
	f := &readyFixture{s: s, buf: make([]byte, 1<<16), resp: []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")}
	tb.Cleanup(func() {
		s.closeConns()
		sh.Close()
		for _, p := range f.peers {
			unix.Close(p)
		}
	})
	s.now = mono()
	s.begun, s.t0 = true, s.now+1 // the first request is due after the connects
	for i := open; i < slots; i++ {
		c := &s.conns[i]
		c.state = cOpen
		c.push(s.now, s.now)
	}
	for i := range open {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			tb.Fatal(err)
		}
		s.conns[i].fd = fds[0]
		f.peers = append(f.peers, fds[1])
		s.connected(&s.conns[i]) // nothing is due yet: it waits with room
	}
	return f
}

// request makes the next request of the schedule due, dispatches it, and
// plays the server's answer; it returns the connection that carried it.
func (f *readyFixture) request(tb testing.TB) int {
	s := f.s
	s.now = s.t0 + int64(float64(s.next)*s.iv)
	s.dispatch()
	for i, p := range f.peers {
		n, err := unix.Read(p, f.buf)
		if err == unix.EAGAIN {
			continue
		}
		if err != nil || n != s.reqLen {
			tb.Fatalf("peer %d read %d (%v), want one request of %d", i, n, err, s.reqLen)
		}
		if _, err := unix.Write(p, f.resp); err != nil {
			tb.Fatal(err)
		}
		s.readable(&s.conns[i], false)
		s.runPending()
		return i
	}
	tb.Fatal("no connection carried the request")
	return -1
}

// BenchmarkDispatch is the open loop's cost per request (dispatch, write,
// read, parse) with one connection ready among many busy ones: it does not
// grow with the number of connections.
func BenchmarkDispatch(b *testing.B) {
	for _, slots := range []int{1 << 10, 1 << 14, 1 << 16} {
		b.Run(fmt.Sprintf("conns=%d", slots), func(b *testing.B) {
			f := newReadyFixture(b, slots, 1)
			b.ReportAllocs()
			for b.Loop() {
				f.request(b)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/req")
		})
	}
}

// The open loop takes a connection with room from the ready ring, whatever
// the number of busy ones, least recently used first, so that requests go
// round every ready connection in turn; the ring holds each once.
func TestDispatchReadyRing(t *testing.T) {
	const open = 4
	f := newReadyFixture(t, 1024, open)
	if f.s.ready.n != open {
		t.Fatalf("%d connections ready, want %d", f.s.ready.n, open)
	}
	for i := range 100 {
		if c := f.request(t); c != i%open {
			t.Fatalf("request %d on connection %d, want %d", i, c, i%open)
		}
	}
	if f.s.cnt.Responses != 100 || f.s.cnt.failures() != 0 || f.s.ready.n != open {
		t.Fatalf("%d responses, %d failures, %d ready", f.s.cnt.Responses, f.s.cnt.failures(), f.s.ready.n)
	}
	if a := testing.AllocsPerRun(100, func() { f.request(t) }); a != 0 {
		t.Fatalf("%v allocations per request", a)
	}
}
