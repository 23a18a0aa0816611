package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"percore/shard"
)

// testServer starts an in-process httpd with up to two shards on a free
// loopback port, serving a docroot of small files, and stops it at cleanup.
type testServer struct {
	*Server
	dir  string // holds www/ (the docroot) and secret (outside it)
	base string // http://127.0.0.1:port
}

const secret = "outside-the-docroot"

func startTestServer(t testing.TB, tweak func(*Options)) *testServer {
	t.Helper()
	dir := t.TempDir()
	www := filepath.Join(dir, "www")
	must(t, os.MkdirAll(filepath.Join(www, "sub"), 0o755))
	for i := 0; i < 10; i++ {
		must(t, os.WriteFile(filepath.Join(www, fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644))
	}
	must(t, os.WriteFile(filepath.Join(www, "sub", "index.html"), []byte("<p>sub</p>\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "secret"), []byte(secret), 0o644))
	o, err := ParseFlags([]string{"--smp", fmt.Sprint(testSMP(t)), "--port", "0", "--address", "127.0.0.1", "--docroot", www}, nil)
	must(t, err)
	if tweak != nil {
		tweak(&o)
	}
	s, err := Start(o, nil)
	must(t, err)
	t.Cleanup(func() {
		s.Stop()
		select {
		case <-s.Done():
		case <-time.After(15 * time.Second):
			t.Errorf("server did not stop")
		}
	})
	return &testServer{Server: s, dir: dir, base: "http://" + s.Addr.String()}
}

// testSMP is 2, as the issue asks, or 1 on a one-CPU machine.
func testSMP(t testing.TB) int {
	cpus, err := shard.AllowedCPUs()
	must(t, err)
	return min(2, len(cpus))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (ts *testServer) counter(name string) uint64 {
	m := shard.Merge(ts.Stats())
	return m.Get(name)
}

// dial opens a raw connection with a bounded deadline for everything on it.
func (ts *testServer) dial(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", ts.Addr.String(), 5*time.Second)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

func readResponse(t testing.TB, br *bufio.Reader, method string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	resp.Body.Close()
	return resp, body
}

// expectClosed reads until EOF (or a reset), failing if the connection stays
// open past its deadline.
func expectClosed(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, br)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open: %v", err)
	}
}

func TestKeepAliveHelloAndFiles(t *testing.T) {
	ts := startTestServer(t, nil)
	before := ts.counter("posix.accepted")
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	for i := 0; i < 10; i++ {
		resp, err := client.Get(ts.base + "/")
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(body) == 0 || resp.ContentLength != int64(len(body)) || resp.Header.Get("Date") == "" {
			t.Fatalf("GET /: %d, %d bytes, Content-Length %d, Date %q", resp.StatusCode, len(body), resp.ContentLength, resp.Header.Get("Date"))
		}
	}
	resp, err := client.Get(ts.base + "/f3.txt")
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "file 3\n" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /f3.txt: %d %q %q", resp.StatusCode, body, resp.Header.Get("Content-Type"))
	}
	resp, err = client.Get(ts.base + "/sub/")
	must(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "<p>sub</p>\n" {
		t.Fatalf("GET /sub/: %d %q", resp.StatusCode, body)
	}
	if n := ts.counter("posix.accepted") - before; n != 1 {
		t.Fatalf("12 keep-alive requests used %d connections, want 1", n)
	}
}

func TestPipelinedInOrder(t *testing.T) {
	ts := startTestServer(t, nil)
	c, br := ts.dial(t)
	var req bytes.Buffer
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&req, "GET /f%d.txt HTTP/1.1\r\nHost: x\r\n\r\n", i%10)
	}
	_, err := c.Write(req.Bytes())
	must(t, err)
	for i := 0; i < 100; i++ {
		resp, body := readResponse(t, br, "GET")
		if want := fmt.Sprintf("file %d\n", i%10); resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("response %d: %d %q, want 200 %q", i, resp.StatusCode, body, want)
		}
	}
}

func TestHeadNotModifiedNotFoundMethod(t *testing.T) {
	ts := startTestServer(t, nil)
	c, br := ts.dial(t)
	send := func(s string) { _, err := io.WriteString(c, s); must(t, err) }

	send("HEAD /f1.txt HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, body := readResponse(t, br, "HEAD")
	if resp.StatusCode != 200 || resp.ContentLength != int64(len("file 1\n")) || len(body) != 0 {
		t.Fatalf("HEAD: %d, Content-Length %d, %d body bytes", resp.StatusCode, resp.ContentLength, len(body))
	}
	etag, lastMod := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	if etag == "" || lastMod == "" {
		t.Fatalf("HEAD lacks ETag (%q) or Last-Modified (%q)", etag, lastMod)
	}
	send("GET /f1.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: " + etag + "\r\n\r\n")
	if resp, body = readResponse(t, br, "GET"); resp.StatusCode != 304 || len(body) != 0 {
		t.Fatalf("If-None-Match: %d with %d body bytes, want 304", resp.StatusCode, len(body))
	}
	send("GET /f1.txt HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: " + lastMod + "\r\n\r\n")
	if resp, _ = readResponse(t, br, "GET"); resp.StatusCode != 304 {
		t.Fatalf("If-Modified-Since: %d, want 304", resp.StatusCode)
	}
	send("GET /missing.txt HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ = readResponse(t, br, "GET"); resp.StatusCode != 404 {
		t.Fatalf("missing file: %d, want 404", resp.StatusCode)
	}
	send("DELETE /f1.txt HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ = readResponse(t, br, "DELETE"); resp.StatusCode != 405 || resp.Header.Get("Allow") == "" {
		t.Fatalf("DELETE on a static file: %d Allow %q, want 405 with Allow", resp.StatusCode, resp.Header.Get("Allow"))
	}
	// HTTP/1.0 without keep-alive closes after the response.
	send("GET /f2.txt HTTP/1.0\r\n\r\n")
	if resp, _ = readResponse(t, br, "GET"); resp.StatusCode != 200 {
		t.Fatalf("HTTP/1.0: %d", resp.StatusCode)
	}
	expectClosed(t, c, br)
}

// TestBadInputOverTheWire sends every bad-input case of the issue on its own
// connection and checks the status and that nothing leaks from outside the
// docroot.
func TestBadInputOverTheWire(t *testing.T) {
	ts := startTestServer(t, func(o *Options) { o.MaxBody = 1024 })
	long := strings.Repeat("a", 9000)
	cases := []struct {
		name, req string
		status    int
		closes    bool
	}{
		{"malformed request line", "GET /\r\n\r\n", 400, true},
		{"header without colon", "GET / HTTP/1.1\r\nHost x\r\n\r\n", 400, true},
		{"header section over 8 KiB", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + long + "\r\n\r\n", 431, true},
		{"URI over 8 KiB", "GET /" + long + " HTTP/1.1\r\nHost: x\r\n\r\n", 414, true},
		{"body over --max-body", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2048\r\n\r\n", 413, true},
		{"unsupported transfer-encoding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, true},
		{"smuggling CL+TE", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, true},
		{"conflicting content-lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400, true},
		{"bare CR", "GET / HTTP/1.1\r\nHost: x\rX-A: b\r\n\r\n", 400, true},
		{"NUL in header", "GET / HTTP/1.1\r\nHost: x\x00y\r\n\r\n", 400, true},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n", 400, true},
		// Input left unread when the connection ends goes through the
		// lingering close (shutdown, read and discard, then close); the 400
		// must still arrive whole. (On loopback a plain close would pass too:
		// the response is queued at the client before any RST.)
		{"bad request then 32 KiB more", "GET / HTTP/1.1\r\nHost x\r\n\r\n" + strings.Repeat("z", 32<<10), 400, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, br := ts.dial(t)
			_, err := io.WriteString(c, tc.req)
			must(t, err)
			resp, _ := readResponse(t, br, "GET")
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.closes {
				expectClosed(t, c, br)
			}
		})
	}
	for _, path := range []string{"/../secret", "/%2e%2e/secret", "/sub/..%2f..%2fsecret", "/sub%2f..%2f..%2fsecret",
		"/..%5csecret", "/f1.txt%00", "/%2E%2E/%2E%2E/secret", "/sub/../../secret"} {
		t.Run("traversal "+path, func(t *testing.T) {
			c, br := ts.dial(t)
			_, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
			must(t, err)
			resp, body := readResponse(t, br, "GET")
			if resp.StatusCode == 200 || bytes.Contains(body, []byte(secret)) {
				t.Fatalf("%s: status %d body %q: left the docroot", path, resp.StatusCode, body)
			}
			if resp.StatusCode != 400 && resp.StatusCode != 404 {
				t.Fatalf("%s: status %d, want 400 or 404", path, resp.StatusCode)
			}
		})
	}
	if ts.counter("http.bad_input") == 0 {
		t.Fatalf("bad input was not counted")
	}
}

func TestHeaderAndIdleTimeouts(t *testing.T) {
	ts := startTestServer(t, func(o *Options) {
		o.HeaderTimeout = 200 * time.Millisecond
		o.IdleTimeout = 300 * time.Millisecond
	})
	// slowloris: half a request line, then nothing
	slow, slowBR := ts.dial(t)
	_, err := io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\n")
	must(t, err)
	// idle keep-alive: one whole request, then nothing
	idle, idleBR := ts.dial(t)
	_, err = io.WriteString(idle, "GET /f0.txt HTTP/1.1\r\nHost: x\r\n\r\n")
	must(t, err)
	if resp, _ := readResponse(t, idleBR, "GET"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	expectClosed(t, slow, slowBR)
	expectClosed(t, idle, idleBR)
	if n := ts.counter("posix.timeouts"); n < 2 {
		t.Fatalf("posix.timeouts = %d, want 2", n)
	}
}

func TestStartPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	ap := netip.MustParseAddrPort(l.Addr().String())
	var stderr bytes.Buffer
	code := Main("httpd", []string{"--port", fmt.Sprint(ap.Port()), "--address", "127.0.0.1", "--smp", "1"}, &stderr, nil, nil)
	if code != 2 || !strings.Contains(stderr.String(), "in use") || strings.Count(stderr.String(), "\n") != 1 {
		t.Fatalf("exit %d, stderr %q; want 2 and one line naming the port in use", code, stderr.String())
	}
}

func TestAccessLogAndStop(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "access.log")
	ts := startTestServer(t, func(o *Options) { o.AccessLog = logPath })
	client := &http.Client{Timeout: 10 * time.Second}
	for _, p := range []string{"/", "/f1.txt", "/nope"} {
		resp, err := client.Get(ts.base + p)
		must(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	client.CloseIdleConnections()
	ts.Stop()
	select {
	case <-ts.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("server did not stop")
	}
	b, err := os.ReadFile(logPath)
	must(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || !strings.Contains(string(b), `"GET / HTTP/1.1" 200`) ||
		!strings.Contains(string(b), `"GET /nope HTTP/1.1" 404`) || !strings.HasPrefix(lines[0], "127.0.0.1 ") {
		t.Fatalf("access log:\n%s", b)
	}
}

func TestPollModeNeverSleeps(t *testing.T) {
	ts := startTestServer(t, func(o *Options) { o.PollMode = true; o.SMP = 1 })
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(ts.base + "/")
	must(t, err)
	resp.Body.Close()
	m := shard.Merge(ts.Stats())
	if m.Loop.Sleeps != 0 || m.Loop.Loops == 0 {
		t.Fatalf("--poll-mode: %d sleeps in %d loops, want none", m.Loop.Sleeps, m.Loop.Loops)
	}
}

// TestIdleServerSleeps checks an idle server blocks in epoll_wait (the loop's
// sleeps counter) rather than spinning: that is what keeps its CPU use near zero.
func TestIdleServerSleeps(t *testing.T) {
	ts := startTestServer(t, nil)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rs := ts.Stats()
		all := true
		for _, r := range rs {
			all = all && r.Loop.Sleeps > 0
		}
		if all && len(rs) == len(ts.CPUs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("shards never slept: %v", rs)
		}
	}
}

// TestConnectionsSpreadOverShards opens 100 connections, each from its own
// source port, and checks that every shard accepted some (the SO_REUSEPORT
// hash; see netstack's TestReuseportBalance for the split itself).
func TestConnectionsSpreadOverShards(t *testing.T) {
	ts := startTestServer(t, nil)
	if len(ts.CPUs) < 2 {
		t.Skip("one CPU: a single shard")
	}
	for i := 0; i < 100; i++ {
		c, br := ts.dial(t)
		_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		must(t, err)
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		c.Close()
	}
	var per []uint64
	for _, r := range ts.Stats() {
		per = append(per, r.Get("posix.accepted"))
	}
	t.Logf("connections per shard: %v", per)
	for i, n := range per {
		if n == 0 {
			t.Fatalf("shard %d accepted no connections: %v", i, per)
		}
	}
}
