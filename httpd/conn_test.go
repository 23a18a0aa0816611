package httpd

import (
	"strings"
	"testing"
	"time"
)

func TestHello(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	out := f.feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	want := "HTTP/1.1 200 OK\r\nServer: percore\r\nDate: Mon, 30 Nov 2026 22:07:07 GMT\r\n" +
		"Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
	if out != want {
		t.Fatalf("got %q\nwant %q", out, want)
	}
	if f.c.Closing() {
		t.Fatal("HTTP/1.1 connection closing after one request")
	}
}

func TestPipelined100(t *testing.T) {
	f := newFixture(t, Config{}, func(s *Site) {
		s.Handle("/n", func(w *ResponseWriter, r *Request) { w.Write(r.Query) })
	})
	var in strings.Builder
	for i := range 100 {
		in.WriteString("GET /n?")
		in.WriteString(strings.Repeat("x", i))
		in.WriteString(" HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	rs := readResponses(t, f.feed(in.String()))
	if len(rs) != 100 {
		t.Fatalf("got %d responses, want 100", len(rs))
	}
	for i, r := range rs {
		if r.status != 200 || r.body != strings.Repeat("x", i) {
			t.Fatalf("response %d: %d %q", i, r.status, r.body)
		}
	}
}

func TestHelloHeadAndKeepAlive(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	out := f.feed("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
	if !strings.HasSuffix(out, "Content-Length: 5\r\n\r\n") {
		t.Errorf("HEAD: %q", out)
	}
	out = f.feed("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	rs := readResponses(t, out)
	if len(rs) != 1 || rs[0].body != "hello" || rs[0].header.Get("Connection") != "keep-alive" || f.c.Closing() {
		t.Errorf("1.0 keep-alive: %q closing=%v", out, f.c.Closing())
	}
	out = f.feed("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	rs = readResponses(t, out)
	if len(rs) != 1 || rs[0].body != "hello" || !rs[0].close || !f.c.Closing() {
		t.Errorf("close: %q closing=%v", out, f.c.Closing())
	}
	// Once closing, input is taken and discarded.
	if n := f.c.Feed([]byte("GET / HTTP/1.1\r\n"), f.now); n != 16 || len(f.c.Output()) != 0 {
		t.Errorf("input after close: took %d, output %d", n, len(f.c.Output()))
	}
}

func TestDateRefreshedByTick(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	out1 := f.feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	// Hold the first response un-advanced across a Tick: its bytes must not change.
	f.c.Feed([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), f.now)
	held := f.c.Output()[0]
	before := string(held)
	f.now = f.now.Add(1500 * time.Millisecond)
	f.srv.Tick(f.now)
	f.drain()
	out2 := f.feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if string(held) != before {
		t.Fatal("Tick modified bytes already handed out")
	}
	if !strings.Contains(out1, "Date: Mon, 30 Nov 2026 22:07:07 GMT") || !strings.Contains(out2, "Date: Mon, 30 Nov 2026 22:07:08 GMT") {
		t.Errorf("dates: %q / %q", out1, out2)
	}
}

func TestHeaderTimeout(t *testing.T) {
	f := newFixture(t, Config{HeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}, nil)
	if d := f.c.Deadline(); !d.Equal(t0.Add(time.Minute)) {
		t.Fatalf("fresh conn deadline %v, want idle timeout", d)
	}
	// A slowloris trickle: one byte a second never extends the header timeout.
	req := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	for i := 0; i < 5; i++ {
		f.feed(req[i : i+1])
		if f.c.Expire(f.now) {
			t.Fatalf("expired after %d bytes", i+1)
		}
		f.now = f.now.Add(time.Second)
	}
	if want := t0.Add(5 * time.Second); !f.c.Deadline().Equal(want) {
		t.Fatalf("deadline %v, want %v", f.c.Deadline(), want)
	}
	if f.c.Expire(f.now.Add(-time.Nanosecond)) {
		t.Fatal("expired before the deadline")
	}
	if !f.c.Expire(f.now) || !f.c.Closing() || len(f.c.Output()) != 0 {
		t.Fatal("not closed at the header timeout")
	}
	if st := f.srv.Stats(); st.Timeouts != 1 || st.Requests != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestBodyTimeout: a request body must arrive within BodyTimeout of the end
// of its header; one byte at a time extends nothing.
func TestBodyTimeout(t *testing.T) {
	for _, body := range []struct{ head, trickle string }{
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", "0123456789"},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", "64\r\n012345"},
	} {
		f := newFixture(t, Config{HeaderTimeout: 5 * time.Second, BodyTimeout: 20 * time.Second, IdleTimeout: time.Minute}, nil)
		f.now = t0.Add(time.Second)
		f.feed(body.head)
		want := t0.Add(21 * time.Second)
		for i := range body.trickle {
			if !f.c.Deadline().Equal(want) {
				t.Fatalf("deadline %v, want %v", f.c.Deadline(), want)
			}
			f.feed(body.trickle[i : i+1])
			if f.c.Expire(f.now) {
				t.Fatalf("expired after %d body bytes", i+1)
			}
			f.now = f.now.Add(2 * time.Second)
		}
		if f.c.Expire(want.Add(-time.Nanosecond)) {
			t.Fatal("expired before the body timeout")
		}
		if !f.c.Expire(want) || !f.c.Closing() {
			t.Fatal("not closed at the body timeout")
		}
		if st := f.srv.Stats(); st.Timeouts != 1 || st.Requests != 0 {
			t.Errorf("stats %+v", st)
		}
	}
}

func TestIdleTimeout(t *testing.T) {
	f := newFixture(t, Config{HeaderTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second}, nil)
	f.now = f.now.Add(10 * time.Second)
	f.feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if want := t0.Add(40 * time.Second); !f.c.Deadline().Equal(want) {
		t.Fatalf("deadline %v, want %v", f.c.Deadline(), want)
	}
	if f.c.Expire(t0.Add(39 * time.Second)) {
		t.Fatal("expired early")
	}
	if !f.c.Expire(t0.Add(40*time.Second)) || !f.c.Closing() {
		t.Fatal("idle connection not closed")
	}
}

// TestSlowReaderProgress: output being taken slowly counts as activity; output
// not taken at all does not.
func TestSlowReaderProgress(t *testing.T) {
	f := newFixture(t, Config{Docroot: makeDocroot(t), IdleTimeout: 10 * time.Second}, nil)
	f.c.Feed([]byte("GET /big.txt HTTP/1.1\r\nHost: x\r\n\r\n"), f.now)
	f.now = t0.Add(10 * time.Second)
	f.c.Advance(1000)
	if f.c.Expire(f.now) {
		t.Fatal("a reader making progress timed out")
	}
	f.now = f.now.Add(10 * time.Second)
	if !f.c.Expire(f.now) {
		t.Fatal("a stalled reader did not time out")
	}
	if f.c.Pending() != 0 || len(f.c.Output()) != 0 {
		t.Fatal("output kept after a timeout")
	}
}

// TestBackPressure: pipelined requests for a large file stop parsing while its
// output waits, and resume as Advance drains it; nothing is stranded.
func TestBackPressure(t *testing.T) {
	f := newFixture(t, Config{Docroot: makeDocroot(t)}, nil)
	req := "GET /big.txt HTTP/1.1\r\nHost: x\r\n\r\n"
	in := []byte(strings.Repeat(req, 3) + "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if n := f.c.Feed(in, f.now); n != len(in) {
		t.Fatalf("Feed took %d of %d", n, len(in))
	}
	if f.c.Pending() > 300<<10+1024 {
		t.Fatalf("%d bytes queued: parsing did not stop at back-pressure", f.c.Pending())
	}
	if len(f.c.ReadBuf()) != 0 {
		t.Fatal("ReadBuf not empty under back-pressure")
	}
	f.c.PeerClosed(f.now) // the client half-closes: buffered requests are still answered
	if f.c.Closing() {
		t.Fatal("closing with requests still buffered")
	}
	var out strings.Builder
	for len(f.c.Output()) > 0 {
		o := f.c.Output()[0]
		k := min(len(o), 64<<10) // a stack sending 64 KiB at a time
		out.Write(o[:k])
		f.c.Advance(k)
	}
	rs := readResponses(t, out.String())
	if len(rs) != 4 || len(rs[0].body) != 300<<10 || len(rs[2].body) != 300<<10 {
		t.Fatalf("got %d responses", len(rs))
	}
	if rs[3].body != "<h1>root</h1>\n" {
		t.Errorf("last response %q", rs[3].body)
	}
	if !f.c.Closing() {
		t.Error("not closing after the peer closed and all was answered")
	}
}

func TestBackPressureManySmall(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	in := []byte(strings.Repeat("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1000))
	taken := 0
	var out strings.Builder
	for taken < len(in) {
		taken += f.c.Feed(in[taken:], f.now)
		if len(f.c.Output()) > maxOutSlices {
			t.Fatalf("%d slices queued", len(f.c.Output()))
		}
		out.WriteString(f.drain())
	}
	if rs := readResponses(t, out.String()); len(rs) != 1000 {
		t.Fatalf("got %d responses, want 1000", len(rs))
	}
}

func TestPeerClosedPartial(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	out := f.feed("GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HT")
	f.c.PeerClosed(f.now)
	if rs := readResponses(t, out); len(rs) != 1 || !f.c.Closing() {
		t.Fatalf("%d responses, closing=%v", len(rs), f.c.Closing())
	}
}

func TestExpectContinue(t *testing.T) {
	f := newTestFixture(t)
	out := f.feed("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
	if out != "HTTP/1.1 100 Continue\r\n\r\n" {
		t.Fatalf("got %q", out)
	}
	rs := readResponses(t, f.feed("abc"))
	if len(rs) != 1 || rs[0].body != "abc" {
		t.Fatalf("got %v", rs)
	}
}

func TestAccessLog(t *testing.T) {
	f := newTestFixture(t)
	f.feed("GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /a\"b HTTP/1.1\r\nHost: x\r\n\r\n")
	f.feed("GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n")
	if f.log.Len() != 0 {
		t.Fatal("log written on the request path")
	}
	f.srv.Tick(f.now)
	want := `198.18.0.2 - - [30/Nov/2026:22:07:07 +0000] "GET /hello.txt HTTP/1.1" 200 11
198.18.0.2 - - [30/Nov/2026:22:07:07 +0000] "GET /a\x22b HTTP/1.1" 404 14
198.18.0.2 - - [30/Nov/2026:22:07:07 +0000] "GET /%zz HTTP/1.1" 400 16
`
	if f.log.String() != want {
		t.Errorf("log:\n%s\nwant:\n%s", f.log.String(), want)
	}
	st := f.srv.Stats()
	if st.Requests != 3 || st.Responses[2] != 1 || st.Responses[4] != 2 || st.BadInput != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestPoolReuse(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	f.feed("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	old := f.c
	f.srv.Release(f.c)
	f.srv.Release(old) // double release is ignored
	c := f.srv.NewConn(testRemote, f.now)
	if c != old {
		t.Fatal("pool did not reuse the connection")
	}
	if c.Closing() || len(c.Output()) != 0 {
		t.Fatal("reused connection not reset")
	}
	f.c = c
	if rs := readResponses(t, f.feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); len(rs) != 1 || rs[0].body != "hello" {
		t.Fatal("reused connection does not serve")
	}
	if c2 := f.srv.NewConn(testRemote, f.now); c2 == c {
		t.Fatal("pool handed out a connection in use")
	}
}

func TestOptionsAsterisk(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	rs := readResponses(t, f.feed("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"))
	if len(rs) != 1 || rs[0].status != 200 || rs[0].header.Get("Allow") != "GET, HEAD" ||
		rs[0].header.Get("Content-Length") != "0" || f.c.Closing() {
		t.Fatalf("got %+v closing=%v", rs, f.c.Closing())
	}
}

// TestClosingDeadline: once a connection is closing, only the output left
// is timed (the idle timeout, pushed out while the peer takes it); once
// Output is empty and no file job is due, the close is normal, and no
// deadline remains however long the peer takes to close its side.
func TestClosingDeadline(t *testing.T) {
	cfg := Config{Docroot: makeDocroot(t), HeaderTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second}
	noTimeout := func(t *testing.T, f *fixture) {
		t.Helper()
		if d := f.c.Deadline(); !d.IsZero() {
			t.Fatalf("deadline %v after a normal close, want none", d)
		}
		if f.c.Expire(f.now.Add(time.Hour)) || f.srv.Stats().Timeouts != 0 {
			t.Fatalf("a normal close timed out: %+v", f.srv.Stats())
		}
	}

	t.Run("close", func(t *testing.T) {
		f := newFixture(t, cfg, nil)
		f.now = t0.Add(time.Second)
		// The request after Connection: close arrives in the same segment,
		// and more of it later: discarded, and no deadline for it.
		out := f.feed("GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\n")
		if rs := readResponses(t, out); len(rs) != 1 || !rs[0].close || !f.c.Closing() {
			t.Fatalf("%d responses, closing %v", len(rs), f.c.Closing())
		}
		noTimeout(t, f)
		f.now = f.now.Add(time.Minute)
		if n := f.c.Feed([]byte("Host: x\r\n\r\n"), f.now); n != 11 || f.c.Pending() != 0 {
			t.Fatalf("fed %d, %d bytes out after the close", n, f.c.Pending())
		}
		noTimeout(t, f)
		if st := f.srv.Stats(); st.Requests != 1 {
			t.Errorf("%d requests served, want 1", st.Requests)
		}
	})

	t.Run("peer closed", func(t *testing.T) {
		f := newFixture(t, cfg, nil)
		f.feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		f.c.PeerClosed(f.now)
		if !f.c.Closing() {
			t.Fatal("not closing after the peer's FIN")
		}
		noTimeout(t, f)
	})

	t.Run("output left", func(t *testing.T) {
		// A 300 KiB response to a reader that takes some and then stops:
		// the idle timeout, from the last output taken, closes it.
		f := newFixture(t, cfg, nil)
		f.c.Feed([]byte("GET /big.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), f.now)
		if f.c.Pending() == 0 || !f.c.closing {
			t.Fatalf("pending %d, closing %v", f.c.Pending(), f.c.Closing())
		}
		if want := t0.Add(30 * time.Second); !f.c.Deadline().Equal(want) {
			t.Fatalf("deadline %v, want %v", f.c.Deadline(), want)
		}
		f.now = t0.Add(30 * time.Second)
		f.c.Advance(1000)
		if f.c.Expire(f.now) {
			t.Fatal("a reader taking the last response timed out")
		}
		if want := f.now.Add(30 * time.Second); !f.c.Deadline().Equal(want) {
			t.Fatalf("deadline %v, want %v", f.c.Deadline(), want)
		}
		f.now = f.now.Add(30 * time.Second)
		if !f.c.Expire(f.now) || f.c.Pending() != 0 || f.srv.Stats().Timeouts != 1 {
			t.Fatalf("a stalled reader did not time out: pending %d, %+v", f.c.Pending(), f.srv.Stats())
		}
		if !f.c.Deadline().IsZero() || f.c.Expire(f.now.Add(time.Hour)) || f.srv.Stats().Timeouts != 1 {
			t.Fatal("the timeout counted again")
		}
	})

	t.Run("bad request", func(t *testing.T) {
		// An error answer closes in the middle of a request: the header
		// timeout no longer applies, the output left is timed as above.
		f := newFixture(t, cfg, nil)
		f.now = t0.Add(10 * time.Second)
		f.c.Feed([]byte("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"), f.now)
		if !f.c.Closing() || f.c.Pending() == 0 {
			t.Fatalf("closing %v, pending %d", f.c.Closing(), f.c.Pending())
		}
		if want := t0.Add(40 * time.Second); !f.c.Deadline().Equal(want) {
			t.Fatalf("deadline %v, want %v", f.c.Deadline(), want)
		}
		if readResponses(t, f.drain())[0].status != 400 {
			t.Fatal("not a 400")
		}
		noTimeout(t, f)
	})

	t.Run("file job", func(t *testing.T) {
		// A streamed file: between chunks Output is empty while a job is
		// due, and the idle timeout still runs (the first job, resolving
		// the path, is within the request: the header timeout's).
		dir, _ := bigTree(t, 1, 3*chunkSize)
		f := newFixture(t, Config{Docroot: dir, CacheSize: 256 << 10, IdleTimeout: 30 * time.Second}, nil)
		q := &queueIO{}
		f.srv.SetFileIO(q)
		f.srv.nowait = nil // every chunk a job, none read from the page cache on the shard
		f.c.Feed([]byte("GET /d0/f0000.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), f.now)
		checked := 0
		for steps := 0; len(q.jobs) > 0 || f.c.Pending() > 0; steps++ {
			if steps > 100 {
				t.Fatal("stream stalled")
			}
			f.drain()
			if f.c.closing && f.c.Waiting() && !f.c.Deadline().Equal(t0.Add(30*time.Second)) {
				t.Fatalf("deadline %v with a file job due, want the idle timeout", f.c.Deadline())
			}
			if f.c.closing && f.c.Waiting() {
				checked++
			}
			q.run(f.srv, f.now, false)
		}
		if !f.c.Closing() || checked == 0 {
			t.Fatalf("closing %v after the streamed response; %d checks with a chunk due", f.c.Closing(), checked)
		}
		noTimeout(t, f)
	})
}
