package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"percore/shard"
)

// TestNativeLab serves a 2-queue lab with --smp 2 and checks, from the
// client namespace's kernel TCP: curl, net/http keep-alive and fresh
// connections, 100 pipelined requests, static files up to 64 MiB by sha256,
// 404 and 304, a second port, a bounded wrk run, the Prometheus endpoint, and
// that both shards served connections.
func TestNativeLab(t *testing.T) {
	nt := startNativeTest(t, 2, append(smallFiles, docrootFile{"m64.bin", 64 << 20}), "", nil)

	t.Run("curl", func(t *testing.T) {
		if _, err := exec.LookPath("curl"); err != nil {
			t.Skip("curl not installed")
		}
		out, err := exec.Command("ip", "netns", "exec", nt.Lab.ClientNS.Name, "curl", "-sS", "--max-time", "10", nt.url+"/").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "hello") {
			t.Fatalf("curl: %v: %q", err, out)
		}
	})

	t.Run("keep-alive", func(t *testing.T) {
		before := nt.total("native.accepted")
		c := nt.httpClient(true)
		for i := 0; i < 20; i++ {
			if code, _, n := get(t, c, nt.url+"/"); code != 200 || n == 0 {
				t.Fatalf("GET /: %d, %d bytes", code, n)
			}
		}
		if n := nt.total("native.accepted") - before; n != 1 {
			t.Fatalf("20 keep-alive requests used %d connections, want 1", n)
		}
	})

	t.Run("memory budget", func(t *testing.T) {
		// The default for 16384 connections a queue, on each shard; httpd's
		// buffers are charged to it, and stay charged while pooled.
		if code, _, _ := get(t, nt.client, nt.url+"/"); code != 200 {
			t.Fatalf("GET /: %d", code)
		}
		if lim, used := nt.total("mem.limit"), nt.total("mem.used"); lim != 2*256<<20 || used == 0 || used > lim {
			t.Fatalf("mem.limit %d, mem.used %d", lim, used)
		}
	})

	t.Run("new connections", func(t *testing.T) {
		before := nt.total("native.accepted")
		c := nt.httpClient(false)
		for i := 0; i < 40; i++ {
			if code, _, _ := get(t, c, fmt.Sprintf("%s/f%d.txt", nt.url, i%10)); code != 200 {
				t.Fatalf("GET: %d", code)
			}
		}
		if n := nt.total("native.accepted") - before; n != 40 {
			t.Fatalf("40 requests without keep-alive made %d connections, want 40", n)
		}
	})

	t.Run("pipelined", func(t *testing.T) {
		c, br := nt.raw(nt.Addr.String())
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
	})

	t.Run("static", func(t *testing.T) {
		for _, f := range []string{"b1.bin", "k1.bin", "m1.bin", "m64.bin", "m1.bin"} {
			nt.checkFile(nt.client, f)
		}
	})

	t.Run("404 and 304", func(t *testing.T) {
		c, br := nt.raw(nt.Addr.String())
		io.WriteString(c, "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 404 {
			t.Fatalf("missing: %d", resp.StatusCode)
		}
		io.WriteString(c, "HEAD /k1.bin HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, _ := readResponse(t, br, "HEAD")
		etag := resp.Header.Get("ETag")
		if resp.StatusCode != 200 || etag == "" || resp.ContentLength != 1024 {
			t.Fatalf("HEAD: %d etag %q length %d", resp.StatusCode, etag, resp.ContentLength)
		}
		io.WriteString(c, "GET /k1.bin HTTP/1.1\r\nHost: x\r\nIf-None-Match: "+etag+"\r\n\r\n")
		if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 304 || len(body) != 0 {
			t.Fatalf("If-None-Match: %d, %d bytes", resp.StatusCode, len(body))
		}
	})

	t.Run("second port", func(t *testing.T) {
		c, br := nt.raw(fmt.Sprintf("%s:10001", nt.Lab.ServerIP))
		io.WriteString(c, "GET /f1.txt HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || string(body) != "file 1\n" {
			t.Fatalf("port 10001: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("wrk", func(t *testing.T) {
		if _, err := exec.LookPath("wrk"); err != nil {
			t.Skip("wrk not installed")
		}
		out, err := exec.Command("ip", "netns", "exec", nt.Lab.ClientNS.Name, "wrk", "-t1", "-c16", "-d1s", "--timeout", "5s", nt.url+"/").CombinedOutput()
		if err != nil {
			t.Fatalf("wrk: %v\n%s", err, out)
		}
		m := regexp.MustCompile(`(\d+) requests in`).FindSubmatch(out)
		if m == nil || strings.Contains(string(out), "Non-2xx") || strings.Contains(string(out), "Socket errors") {
			t.Fatalf("wrk: %s", out)
		}
		if n, _ := strconv.Atoi(string(m[1])); n < 100 {
			t.Fatalf("wrk made %d requests in 1s", n)
		}
		t.Logf("wrk -t1 -c16 -d1s: %s requests", m[1])
	})

	t.Run("prometheus", func(t *testing.T) {
		m := scrape(t, nt.Metrics.String())
		for i := 0; i < 2; i++ {
			for _, name := range []string{"percore_native_accepted_total", "percore_http_requests_total", "percore_tcp_retransmits_total",
				"percore_xsk_rx_frames_total", "percore_xsk_rx_ring_full_total", "percore_ip_ipv4_bad_checksum_total"} {
				if _, ok := m[fmt.Sprintf(`%s{shard="%d"}`, name, i)]; !ok {
					t.Errorf("metrics lack %s for shard %d", name, i)
				}
			}
			if v := m[fmt.Sprintf(`percore_native_accepted_total{shard="%d"}`, i)]; v == 0 {
				t.Errorf("shard %d accepted no connection (metrics)", i)
			}
		}
		if _, ok := m[`percore_native_open{shard="0"}`]; !ok {
			t.Errorf("metrics lack the open-connections gauge")
		}
	})

	rs := nt.counters()
	if acc := perShard(rs, "native.accepted"); len(acc) != 2 || acc[0] == 0 || acc[1] == 0 {
		t.Fatalf("connections per shard %v: both shards must serve", acc)
	}
	m := shard.Merge(rs)
	if m.Get("xsk.rx_frames") == 0 || m.Get("tcp.passive_opens") < 60 || m.Get("http.responses_2xx") < 200 {
		t.Fatalf("counters: %v", m)
	}
	t.Logf("per shard: accepted %v requests %v", perShard(rs, "native.accepted"), perShard(rs, "http.requests"))
}

// TestNativeGracefulStop stops the server while a 64 MiB response is in
// flight to a client that has not read it yet: new connections are refused
// (RST) at once, the response still arrives complete, then FIN, and the
// server exits within its stop bound.
func TestNativeGracefulStop(t *testing.T) {
	nt := startNativeTest(t, 2, []docrootFile{{"m64.bin", 64 << 20}}, "", func(o *Options) { o.StopTimeout = 60 * time.Second })
	c, br := nt.raw(nt.Addr.String())
	_, err := io.WriteString(c, "GET /m64.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	must(t, err)
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	must(t, err)
	// The client's buffers hold a few MiB: the rest waits in the server.
	nt.Stop()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if nt.total("tcp.no_port_rst") > 0 || time.Now().After(deadline) {
			break
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		conn, err := nt.dial.DialContext(ctx, "tcp", nt.Addr.String())
		cancel()
		if err == nil {
			conn.Close()
			t.Fatalf("a new connection was accepted while draining")
		}
		if !strings.Contains(err.Error(), "refused") {
			done := false
			select {
			case <-nt.Done():
				done = true
			default:
			}
			t.Fatalf("connect while draining: %v, want connection refused (RST); server exited %v, final %v", err, done, shard.Merge(nt.group.Final()))
		}
	}
	if nt.total("tcp.no_port_rst") == 0 {
		t.Fatalf("no SYN was answered with RST while draining")
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil || n != 64<<20 || hex.EncodeToString(h.Sum(nil)) != nt.sums["m64.bin"] {
		t.Fatalf("response during drain: %d bytes, %v, sha256 mismatch %v", n, err, hex.EncodeToString(h.Sum(nil)) != nt.sums["m64.bin"])
	}
	// After the body: FIN (EOF), no more bytes.
	if k, err := br.Read(make([]byte, 1)); k != 0 || err != io.EOF {
		t.Fatalf("after the response: %d bytes, %v; want EOF", k, err)
	}
	c.Close()
	select {
	case <-nt.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not exit after its last connection closed")
	}
	f := shard.Merge(nt.group.Final())
	if f.Get("native.forced") != 0 || f.Get("native.open") != 0 {
		t.Fatalf("final: forced %d open %d, want a clean drain", f.Get("native.forced"), f.Get("native.open"))
	}
}

// TestNativeSleepsAndPollMode checks that an idle native shard blocks in
// epoll_wait and that frames wake it through the AF_XDP socket's fd, and
// that --poll-mode never sleeps.
func TestNativeSleepsAndPollMode(t *testing.T) {
	for _, poll := range []bool{false, true} {
		t.Run(fmt.Sprintf("poll-mode %v", poll), func(t *testing.T) {
			nt := startNativeTest(t, 1, nil, "", func(o *Options) { o.PollMode = poll })
			for i := 0; i < 5; i++ {
				if code, _, _ := get(t, nt.client, fmt.Sprintf("%s/f%d.txt", nt.url, i)); code != 200 {
					t.Fatalf("GET: %d", code)
				}
				time.Sleep(20 * time.Millisecond) // let the shard go idle between requests
			}
			m := shard.Merge(nt.Stats())
			if poll {
				if m.Loop.Sleeps != 0 {
					t.Fatalf("--poll-mode: %d sleeps", m.Loop.Sleeps)
				}
				return
			}
			if m.Loop.Sleeps == 0 || m.Get("native.wakeups") == 0 {
				t.Fatalf("idle shard: %d sleeps, %d socket wakeups; want both > 0", m.Loop.Sleeps, m.Get("native.wakeups"))
			}
		})
	}
}

// TestNativeTimeoutsResetsAndLog covers the connection ends that do not come
// from the client's FIN: httpd's header timeout (slowloris) and idle timeout
// close connections through TCP's app timer (TCPAppTimer), a client that resets in the
// middle of a 1 MiB response does not disturb another connection, and the
// access log gets every request.
func TestNativeTimeoutsResetsAndLog(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "access.log")
	nt := startNativeTest(t, 1, smallFiles, "", func(o *Options) {
		o.HeaderTimeout = 300 * time.Millisecond
		o.IdleTimeout = 500 * time.Millisecond
		o.AccessLog = logPath
	})
	slow, slowBR := nt.raw(nt.Addr.String())
	_, err := io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\n") // never finished
	must(t, err)
	idle, idleBR := nt.raw(nt.Addr.String())
	_, err = io.WriteString(idle, "GET /f0.txt HTTP/1.1\r\nHost: x\r\n\r\n")
	must(t, err)
	if resp, _ := readResponse(t, idleBR, "GET"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// A client that resets in the middle of a response.
	rst, rstBR := nt.raw(nt.Addr.String())
	_, err = io.WriteString(rst, "GET /m1.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	must(t, err)
	rstBR.Peek(1000)
	rst.(*net.TCPConn).SetLinger(0)
	rst.Close()
	// Another connection is not disturbed.
	nt.checkFile(nt.httpClient(false), "m1.bin")
	// The lab's server address is ours alone: a closed port is refused.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	c, err := nt.dial.DialContext(ctx, "tcp4", netip.AddrPortFrom(nt.Addr.Addr(), 10002).String())
	cancel()
	if err == nil {
		c.Close()
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial a closed port: %v, want connection refused", err)
	}

	expectClosed(t, slow, slowBR)
	expectClosed(t, idle, idleBR)
	slow.Close() // the server's side waits in FIN-WAIT-2 for these FINs
	idle.Close()
	for deadline := time.Now().Add(10 * time.Second); nt.total("native.open") != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open", nt.total("native.open"))
		}
	}
	m := shard.Merge(nt.Stats())
	if m.Get("native.timeouts") < 2 || m.Get("http.timeouts") < 2 || m.Get("tcp.resets_in") < 1 {
		t.Fatalf("timeouts %d (http %d), resets in %d; want 2, 2, 1", m.Get("native.timeouts"), m.Get("http.timeouts"), m.Get("tcp.resets_in"))
	}
	nt.stop() // flushes the access log
	b, err := os.ReadFile(logPath)
	must(t, err)
	if !strings.Contains(string(b), `"GET /f0.txt HTTP/1.1" 200`) || !strings.Contains(string(b), `"GET /m1.bin HTTP/1.1" 200`) ||
		!strings.HasPrefix(string(b), nt.Lab.ClientIP.String()+" ") {
		t.Fatalf("access log:\n%s", b)
	}
}

// TestNativeStalledReaderAborted: a client that asks for 1 MiB and never
// reads leaves the response in flight against its zero window; httpd's idle
// timeout drops the output, and TCP then aborts the connection with RST
// (nothing consistent is left to send), freeing it at once.
func TestNativeStalledReaderAborted(t *testing.T) {
	nt := startNativeTest(t, 1, smallFiles, "", func(o *Options) { o.IdleTimeout = 500 * time.Millisecond })
	c, _ := nt.raw(nt.Addr.String())
	c.(*net.TCPConn).SetReadBuffer(4096) // a small window fills at once
	_, err := io.WriteString(c, "GET /m1.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	must(t, err)
	// One snapshot per check: two separate reads could see "not yet open"
	// and then "accepted" and stop before the connection ever timed out.
	var m shard.Report
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m = shard.Merge(nt.Stats())
		if m.Get("native.timeouts") > 0 && m.Get("native.open") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stalled connection not aborted: open %d, timeouts %d", m.Get("native.open"), m.Get("native.timeouts"))
		}
	}
	if m.Get("native.timeouts") != 1 || m.Get("tcp.resets_out") == 0 || m.Get("tcp.conns") != 0 {
		t.Fatalf("timeouts %d, resets out %d, tcp conns %d; want 1, >0, 0", m.Get("native.timeouts"), m.Get("tcp.resets_out"), m.Get("tcp.conns"))
	}
	_, err = io.Copy(io.Discard, c)
	if err == nil || !strings.Contains(err.Error(), "reset") {
		t.Fatalf("client read after the abort: %v, want connection reset", err)
	}
}
