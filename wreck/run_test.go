package wreck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testConfig is a run against addr bounded by a generous duration: tests stop
// on --reqs, the duration only guards against a hang.
func testConfig(addr string) Config {
	cfg := DefaultConfig()
	cfg.Server = addr
	cfg.Conns = 2
	cfg.Duration = 30 * time.Second
	cfg.Timeout = 10 * time.Second
	return cfg
}

func mustRun(t *testing.T, cfg Config) *Result {
	t.Helper()
	r, err := Run(cfg)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return r
}

func wantErrors(t *testing.T, r *Result, want ErrorCounts) {
	t.Helper()
	if r.Errors != want {
		t.Fatalf("errors %+v, want %+v", r.Errors, want)
	}
}

func TestRunExactRequests(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		srv := newTestServer(t, goodServer(chunked))
		cfg := testConfig(srv.addr())
		cfg.SMP, cfg.Conns, cfg.Reqs = 2, 5, 1001
		r := mustRun(t, cfg)
		if r.SendLag != nil {
			t.Fatalf("closed loop reports a send lag: %+v", r.SendLag)
		}
		if r.Requests != 1001 || srv.reqs.Load() != 1001 {
			t.Fatalf("chunked %v: wreck counted %d, server read %d, want 1001", chunked, r.Requests, srv.reqs.Load())
		}
		wantErrors(t, r, ErrorCounts{})
		if got := r.Shards[0].Requests + r.Shards[1].Requests; got != 1001 || r.Shards[0].Requests != 501 {
			t.Fatalf("shards %d+%d, want 501+500", r.Shards[0].Requests, r.Shards[1].Requests)
		}
		if r.Connects != 5 || srv.conns.Load() != 5 {
			t.Fatalf("connects %d, server accepted %d, want 5", r.Connects, srv.conns.Load())
		}
		if r.Latency.Max <= 0 || r.Latency.P50 > r.Latency.P99 || r.Latency.P99 > r.Latency.Max {
			t.Fatalf("latency %+v", r.Latency)
		}
		if r.BytesRead == 0 {
			t.Fatal("no bytes counted")
		}
	}
}

func TestRunPipelineOrder(t *testing.T) {
	srv := newTestServer(t, goodServer(false))
	cfg := testConfig(srv.addr())
	cfg.Conns, cfg.Pipeline, cfg.Reqs, cfg.CheckSeq = 3, 16, 3000, true
	r := mustRun(t, cfg)
	if r.Requests != 3000 || srv.reqs.Load() != 3000 {
		t.Fatalf("wreck counted %d, server read %d, want 3000", r.Requests, srv.reqs.Load())
	}
	wantErrors(t, r, ErrorCounts{})
}

// A server that answers each pair of pipelined requests in swapped order.
func TestRunPipelineMisorder(t *testing.T) {
	srv := newTestServer(t, func(s *testServer, c net.Conn, br *bufio.Reader) {
		a, ok1 := s.next(br)
		b, ok2 := s.next(br)
		if !ok1 || !ok2 {
			return
		}
		respond(c, 200, b.seq, "b", false, false)
		respond(c, 200, a.seq, "a", false, false)
		<-s.done
	})
	cfg := testConfig(srv.addr())
	cfg.Conns, cfg.Pipeline, cfg.Reqs, cfg.CheckSeq = 1, 2, 2, true
	cfg.Timeout = 200 * time.Millisecond
	r := mustRun(t, cfg)
	// The swapped reply fails the first request; the second goes again on a
	// new connection, where the server waits for a pair that never comes.
	wantErrors(t, r, ErrorCounts{Mismatch: 1, Timeout: 1})
	if r.Requests != 0 {
		t.Fatalf("%d responses counted, want 0", r.Requests)
	}
}

func TestRunErrorClasses(t *testing.T) {
	const n = 3
	tests := []struct {
		name     string
		serve    func(*testServer, net.Conn, *bufio.Reader)
		timeout  time.Duration
		want     ErrorCounts
		requests uint64
	}{
		{"close mid-response", func(s *testServer, c net.Conn, br *bufio.Reader) {
			if _, ok := s.next(br); ok {
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhel"))
			}
		}, 0, ErrorCounts{Closed: n}, 0},
		{"close before response", func(s *testServer, c net.Conn, br *bufio.Reader) {
			s.next(br)
		}, 0, ErrorCounts{Closed: n}, 0},
		{"close in head", func(s *testServer, c net.Conn, br *bufio.Reader) {
			if _, ok := s.next(br); ok {
				c.Write([]byte("HTTP/1.1 200 OK\r\nConte"))
			}
		}, 0, ErrorCounts{Closed: n}, 0},
		{"reset", func(s *testServer, c net.Conn, br *bufio.Reader) {
			if _, ok := s.next(br); ok {
				c.(*net.TCPConn).SetLinger(0)
			}
		}, 0, ErrorCounts{Reset: n}, 0},
		{"malformed status line", func(s *testServer, c net.Conn, br *bufio.Reader) {
			for _, ok := s.next(br); ok; _, ok = s.next(br) {
				c.Write([]byte("HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n"))
			}
		}, 0, ErrorCounts{Malformed: n}, 0},
		{"content-length short of the body", func(s *testServer, c net.Conn, br *bufio.Reader) {
			for _, ok := s.next(br); ok; _, ok = s.next(br) {
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhello"))
			}
		}, 0, ErrorCounts{Malformed: n}, n},
		{"oversized header", func(s *testServer, c net.Conn, br *bufio.Reader) {
			for _, ok := s.next(br); ok; _, ok = s.next(br) {
				c.Write([]byte("HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 20000) + "\r\nContent-Length: 0\r\n\r\n"))
			}
		}, 0, ErrorCounts{Malformed: n, Oversized: n}, 0},
		{"stall", func(s *testServer, c net.Conn, br *bufio.Reader) {
			s.next(br)
			<-s.done
		}, 100 * time.Millisecond, ErrorCounts{Timeout: n}, 0},
		{"non-2xx", func(s *testServer, c net.Conn, br *bufio.Reader) {
			for _, ok := s.next(br); ok; _, ok = s.next(br) {
				respond(c, 503, "", "busy", false, false)
			}
		}, 0, ErrorCounts{Non2xx: n}, n},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newTestServer(t, tt.serve)
			cfg := testConfig(srv.addr())
			cfg.Conns, cfg.Reqs = 1, n
			if tt.timeout > 0 {
				cfg.Timeout = tt.timeout
			}
			r := mustRun(t, cfg)
			wantErrors(t, r, tt.want)
			if r.Requests != tt.requests {
				t.Fatalf("%d responses, want %d", r.Requests, tt.requests)
			}
			if srv.reqs.Load() != n {
				t.Fatalf("server read %d requests, want %d", srv.reqs.Load(), n)
			}
		})
	}
}

func TestRunConnectRefused(t *testing.T) {
	// A bound socket that never listens holds the port (no other process can
	// take it meanwhile) and answers SYNs with RST.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port))
	cfg.Duration = 100 * time.Millisecond
	r := mustRun(t, cfg)
	if r.Errors.Connect == 0 || r.Requests != 0 || r.Connects != 0 {
		t.Fatalf("connect errors %d, responses %d, connects %d: want >0, 0, 0", r.Errors.Connect, r.Requests, r.Connects)
	}
}

// A stalled server and a timeout longer than the run: wreck still returns at
// the end of --duration (the test's own timeout catches a hang).
func TestRunStallEndsAtDuration(t *testing.T) {
	srv := newTestServer(t, func(s *testServer, c net.Conn, br *bufio.Reader) {
		s.next(br)
		<-s.done
	})
	cfg := testConfig(srv.addr())
	cfg.Duration = 200 * time.Millisecond
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	if r.Requests != 0 || r.Seconds < 0.2 {
		t.Fatalf("%d responses in %.3fs, want 0 in at least 0.2s", r.Requests, r.Seconds)
	}
}

func TestRunOneShot(t *testing.T) {
	srv := newTestServer(t, func(s *testServer, c net.Conn, br *bufio.Reader) {
		r, ok := s.next(br)
		if !ok {
			return
		}
		if !r.close {
			s.noClose.Add(1)
		}
		respond(c, 200, "", "one", false, true)
	})
	cfg := testConfig(srv.addr())
	cfg.Conns, cfg.Reqs, cfg.KeepAlive = 4, 50, false
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	if r.Requests != 50 || r.Connects != 50 || srv.conns.Load() != 50 || srv.reqs.Load() != 50 {
		t.Fatalf("responses %d, connects %d, server accepted %d and read %d: want 50 each",
			r.Requests, r.Connects, srv.conns.Load(), srv.reqs.Load())
	}
	if srv.noClose.Load() != 0 {
		t.Fatalf("%d requests without Connection: close", srv.noClose.Load())
	}
}

// Open loop: one connection, a server that takes delay per response, and a
// rate it cannot keep up with. Latency counts from the intended send time, so
// the last request (intended at 19*10ms, answered no sooner than 20 delays after
// the first send) shows at least 20*delay - 190ms; a closed-loop measure
// would show about one delay.
func TestRunRateLatencyFromIntendedTime(t *testing.T) {
	const delay = 20 * time.Millisecond
	srv := newTestServer(t, func(s *testServer, c net.Conn, br *bufio.Reader) {
		for _, ok := s.next(br); ok; _, ok = s.next(br) {
			time.Sleep(delay)
			respond(c, 200, "", "slow", false, false)
		}
	})
	cfg := testConfig(srv.addr())
	cfg.Conns, cfg.Reqs, cfg.Rate = 1, 20, 100
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	if r.Requests != 20 {
		t.Fatalf("%d responses, want 20", r.Requests)
	}
	minUS := float64(delay.Microseconds())
	if r.Latency.P50 < minUS*0.999 {
		t.Fatalf("p50 %.0fus is below the server's delay %.0fus", r.Latency.P50, minUS)
	}
	lastUS := float64((20*delay - 190*time.Millisecond).Microseconds())
	if r.Latency.Max < lastUS*0.999 {
		t.Fatalf("max %.0fus, want at least %.0fus: latency not taken from the intended send time", r.Latency.Max, lastUS)
	}
	// The last request could leave only after 19 replies (19 delays) and was
	// intended at 190ms: the client reports itself at least that late.
	lagUS := float64((19*delay - 190*time.Millisecond).Microseconds())
	if r.SendLag == nil || r.SendLag.Max < lagUS*0.999 {
		t.Fatalf("send lag %+v, want a max of at least %.0fus", r.SendLag, lagUS)
	}
}

func TestMainJSON(t *testing.T) {
	srv := newTestServer(t, goodServer(false))
	var out, errOut bytes.Buffer
	code := Main([]string{"--server", srv.addr(), "--conn", "2", "--reqs", "100", "--duration", "30s", "--json"}, &out, &errOut, nil)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var r Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if r.Requests != 100 || r.Conns != 2 || len(r.Shards) != 1 || r.Shards[0].Requests != 100 || r.Server != srv.addr() {
		t.Fatalf("parsed %+v", r)
	}
}

func TestMainText(t *testing.T) {
	srv := newTestServer(t, goodServer(false))
	var out, errOut bytes.Buffer
	if code := Main([]string{"--server", srv.addr(), "--conn", "1", "--reqs", "10"}, &out, &errOut, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "10 requests in") || !strings.Contains(out.String(), "Requests/sec:") {
		t.Fatalf("text output:\n%s", out.String())
	}
}

func TestMainBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--server", "x:1", "--smp", "0"},
		{"--server", "x:1", "--smp", "4", "--conn", "2"},
		{"--server", "x:1", "--pipeline", "4", "--keepalive=false"},
		{"--server", "x:1", "--rate", "-1"},
		{"--server", "x:1", "--path", "nope"},
		{"--server", "x:1", "--header", "NoColon"},
		{"--server", "x:1", "--cpuset", "3-1"},
		{"--server", "x:1", "--duration", "0s"},
		{"--server", "x:1", "--bogus"},
		{"--server", "x:1", "extra"},
		{"--server", "no-port"},
		{"--server", "127.0.0.1:99999"},
		{"--server", "x:1", "--cpuset", "1023"},
		{"--server", "x:1", "--conn", "100000000"},
	} {
		var out, errOut bytes.Buffer
		code := Main(args, &out, &errOut, nil)
		lines := strings.Count(errOut.String(), "\n")
		if code != 2 || lines != 1 || !strings.HasPrefix(errOut.String(), "wreck: ") || out.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q: want exit 2 and one line", args, code, errOut.String())
		}
	}
}

func TestRunBadServer(t *testing.T) {
	cfg := testConfig("no-port")
	if _, err := Run(cfg); err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Fatalf("err %v, want a host:port error", err)
	}
	cfg = testConfig("bad..host:80") // not a domain name: fails without asking DNS
	if _, err := Run(cfg); err == nil || !strings.Contains(err.Error(), "resolve") {
		t.Fatalf("err %v, want a resolve error", err)
	}
}

// A server that ends each connection after three responses, announcing it
// with Connection: close (as nginx does at keepalive_requests): no errors,
// and wreck reconnects.
func TestRunServerCloses(t *testing.T) {
	srv := newTestServer(t, func(s *testServer, c net.Conn, br *bufio.Reader) {
		for i := 1; i <= 3; i++ {
			r, ok := s.next(br)
			if !ok {
				return
			}
			respond(c, 200, r.seq, "x", false, i == 3)
		}
	})
	cfg := testConfig(srv.addr())
	cfg.Conns, cfg.Reqs, cfg.CheckSeq = 1, 30, true
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	if r.Requests != 30 || srv.reqs.Load() != 30 || r.Connects != 10 {
		t.Fatalf("responses %d, server read %d, connects %d: want 30, 30, 10", r.Requests, srv.reqs.Load(), r.Connects)
	}
}

// Responses framed by the server closing the connection (no Content-Length).
func TestRunUntilClose(t *testing.T) {
	srv := newTestServer(t, func(s *testServer, c net.Conn, br *bufio.Reader) {
		if _, ok := s.next(br); ok {
			c.Write([]byte("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nthe body runs to the end"))
		}
	})
	cfg := testConfig(srv.addr())
	cfg.Conns, cfg.Reqs = 1, 5
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	if r.Requests != 5 || srv.conns.Load() != 5 {
		t.Fatalf("responses %d on %d connections, want 5 on 5", r.Requests, srv.conns.Load())
	}
}

// Bodies much larger than the read buffer, both framings: skipped, not copied,
// and their bytes counted.
func TestRunLargeBodies(t *testing.T) {
	body := strings.Repeat("0123456789abcdef", 20000) // 320 KB
	for _, chunked := range []bool{false, true} {
		srv := newTestServer(t, func(s *testServer, c net.Conn, br *bufio.Reader) {
			bw := bufio.NewWriter(c)
			for r, ok := s.next(br); ok; r, ok = s.next(br) {
				respond(bw, 200, r.seq, body, chunked, false)
				bw.Flush()
			}
		})
		cfg := testConfig(srv.addr())
		cfg.Conns, cfg.Reqs, cfg.Pipeline, cfg.CheckSeq = 2, 20, 2, true
		r := mustRun(t, cfg)
		wantErrors(t, r, ErrorCounts{})
		if r.Requests != 20 || r.BytesRead < 20*uint64(len(body)) {
			t.Fatalf("chunked %v: %d responses, %d bytes; want 20 and at least %d", chunked, r.Requests, r.BytesRead, 20*len(body))
		}
	}
}

// Open loop with one connection per request.
func TestRunRateOneShot(t *testing.T) {
	srv := newTestServer(t, goodServer(false))
	cfg := testConfig(srv.addr())
	cfg.Conns, cfg.Reqs, cfg.Rate, cfg.KeepAlive = 2, 20, 400, false
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	if r.Requests != 20 || r.Connects != 20 || srv.conns.Load() != 20 {
		t.Fatalf("responses %d, connects %d, server accepted %d: want 20 each", r.Requests, r.Connects, srv.conns.Load())
	}
}

// Batches far larger than the socket buffers: writes are cut short (EAGAIN)
// and resume on EPOLLOUT; every request still arrives once, in order.
func TestRunPartialWrites(t *testing.T) {
	srv := newTestServer(t, goodServer(false))
	cfg := testConfig(srv.addr())
	cfg.Conns, cfg.Pipeline, cfg.Reqs, cfg.CheckSeq = 1, 1024, 2048, true
	cfg.Headers = []string{"X-Pad: " + strings.Repeat("p", 8000)} // 8 MB per batch
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	if r.Requests != 2048 || srv.reqs.Load() != 2048 || srv.badReqs.Load() != 0 {
		t.Fatalf("responses %d, server read %d (%d bad), want 2048", r.Requests, srv.reqs.Load(), srv.badReqs.Load())
	}
}

// One-shot requests to a server that ignores Connection: close and keeps the
// connection open: wreck closes it itself rather than wait out --timeout.
func TestRunOneShotServerKeepsOpen(t *testing.T) {
	srv := newTestServer(t, func(s *testServer, c net.Conn, br *bufio.Reader) {
		for _, ok := s.next(br); ok; _, ok = s.next(br) {
			respond(c, 200, "", "still here", false, false)
		}
	})
	cfg := testConfig(srv.addr())
	cfg.Conns, cfg.Reqs, cfg.KeepAlive = 1, 5, false
	cfg.Timeout, cfg.Duration = 10*time.Second, 15*time.Second // waiting would finish 2 at most
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	if r.Requests != 5 || srv.conns.Load() != 5 {
		t.Fatalf("responses %d on %d connections, want 5 on 5", r.Requests, srv.conns.Load())
	}
}

// Chaos: every connection gets a behaviour drawn from a seeded source (good,
// chunked, closes mid-response, resets, malformed, oversized, stalls, short
// Content-Length, swapped order, trickled bytes). wreck must finish its budget
// without a panic or a hang, counting each request as a response or an error.
func TestRunChaos(t *testing.T) {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(6, 6))
	srv := newTestServer(t, func(s *testServer, c net.Conn, br *bufio.Reader) {
		mu.Lock()
		mode := rng.IntN(10)
		mu.Unlock()
		for r, ok := s.next(br); ok; r, ok = s.next(br) {
			switch mode {
			case 0:
				respond(c, 200, r.seq, "good", false, false)
			case 1:
				respond(c, 200, r.seq, "chunked body", true, false)
			case 2:
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhel"))
				return
			case 3:
				c.(*net.TCPConn).SetLinger(0)
				return
			case 4:
				c.Write([]byte("HTTP/1.1 OK 200\r\n\r\n"))
			case 5:
				c.Write([]byte("HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", 20000) + "\r\n\r\n"))
			case 6:
				<-s.done
				return
			case 7:
				c.Write([]byte("HTTP/1.1 200 OK\r\nX-Wreck-Seq: " + r.seq + "\r\nContent-Length: 1\r\n\r\nabc"))
			case 8:
				r2, ok := s.next(br)
				if !ok {
					return
				}
				respond(c, 200, r2.seq, "2", false, false)
				respond(c, 200, r.seq, "1", false, false)
			case 9:
				var b bytes.Buffer
				respond(&b, 200, r.seq, "trickle", false, false)
				for _, x := range b.Bytes() {
					c.Write([]byte{x})
				}
			}
		}
	})
	cfg := testConfig(srv.addr())
	cfg.SMP, cfg.Conns, cfg.Pipeline, cfg.Reqs, cfg.CheckSeq = 2, 6, 4, 300, true
	cfg.Timeout = 100 * time.Millisecond
	r := mustRun(t, cfg)
	e := r.Errors
	accounted := r.Requests + e.Malformed + e.Timeout + e.Reset + e.Closed + e.Mismatch
	if accounted < 300 || r.Requests == 0 || e.Total() == 0 {
		t.Fatalf("%d responses and errors %+v account for %d of 300 requests", r.Requests, e, accounted)
	}
	t.Logf("responses %d, errors %+v, connects %d", r.Requests, e, r.Connects)
}

// Closing Stop (SIGINT in the command) ends the run early with what it has.
func TestRunStop(t *testing.T) {
	srv := newTestServer(t, goodServer(false))
	cfg := testConfig(srv.addr())
	stop := make(chan struct{})
	close(stop)
	cfg.Stop = stop
	r := mustRun(t, cfg)
	wantErrors(t, r, ErrorCounts{})
	if r.Seconds >= cfg.Duration.Seconds() {
		t.Fatalf("ran %.1fs: Stop did not end the run before --duration", r.Seconds)
	}
}
