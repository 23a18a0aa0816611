package server

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"percore/httpd"
	"percore/netstack"
	"percore/shard"
)

// How a closing connection ends. A normal close (Connection: close) is never
// a timeout, however long the client takes to close its side: httpd has
// nothing left to time once its last response is out, and the stack's own
// timers end it (native: TCP's FIN-WAIT-2 timeout; posix: the linger). A
// client that stops reading the last response is cut by the idle timeout,
// and over TLS by the same timeout on the records left after httpd finished.

const (
	closeThenMore = "GET /f0.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /f1.txt HTTP/1.1\r\nHost: x\r\n\r\n"
	closeBig      = "GET /%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
)

// readToEOF reads one response and then EOF (the server's FIN or TLS
// close_notify): nothing is answered after Connection: close.
func readToEOF(t *testing.T, r io.Reader) {
	t.Helper()
	br := bufio.NewReader(r)
	if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || !resp.Close || string(body) != "file 0\n" {
		t.Fatalf("status %d, close %v, body %q", resp.StatusCode, resp.Close, body)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after the last response: %q, %v; want EOF", rest, err)
	}
}

// TestNativeClosingTimers: four clients of the native stack, cleartext and
// TLS, close normally and linger with their side open, or stop reading the
// last response. The lingering ones end by FIN-WAIT-2 timeout (1 s, after
// the 500 ms idle timeout) and count no timeout; the stalled ones are cut by
// the idle timeout (cleartext: httpd's; TLS: the records left) with a RST
// each.
func TestNativeClosingTimers(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath, pool := testCert(t, dir)
	nt := startNativeTest(t, 1, append(smallFiles, docrootFile{"k32.bin", 32 << 10}), "", func(o *Options) {
		o.TLS = TLSFiles{Cert: certPath, Key: keyPath}
		o.TLSPort = 10443
		o.IdleTimeout = 500 * time.Millisecond
		o.Native.tcp = func(c *netstack.TCPConfig) {
			c.FinWait2 = time.Second
			c.TimeWait = time.Second
		}
	})
	tlsDial := func(window int) (net.Conn, *tls.Conn) {
		raw, _ := nt.raw(nt.TLSAddr.String())
		if window > 0 {
			raw.(*net.TCPConn).SetReadBuffer(window)
		}
		c := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "localhost"})
		c.SetDeadline(time.Now().Add(10 * time.Second))
		must(t, c.Handshake())
		return raw, c
	}

	// Normal closes, a request arriving after the close among them: the
	// clients keep their side open.
	a, abr := nt.raw(nt.Addr.String())
	_, err := io.WriteString(a, closeThenMore)
	must(t, err)
	readToEOF(t, abr)
	draw, d := tlsDial(0)
	_, err = io.WriteString(d, closeThenMore)
	must(t, err)
	readToEOF(t, d)

	// Clients that stop reading the last response: 1 MiB in cleartext
	// (httpd still holds most of it), 32 KiB over TLS (all sealed, httpd
	// has finished, the records wait against a closed window).
	b, _ := nt.raw(nt.Addr.String())
	b.(*net.TCPConn).SetReadBuffer(4096)
	_, err = io.WriteString(b, fmt.Sprintf(closeBig, "m1.bin"))
	must(t, err)
	craw, c := tlsDial(4096)
	_, err = io.WriteString(c, fmt.Sprintf(closeBig, "k32.bin"))
	must(t, err)

	waitFor(t, nt, 15*time.Second, "closing connections not ended", func(m shard.Report) bool {
		return m.Get("native.open") == 0 && m.Get("tcp.fin_wait2_timeout") == 2
	})
	m := shard.Merge(nt.Stats())
	for _, w := range []struct {
		name string
		want uint64
	}{
		{"native.accepted", 4}, {"http.requests", 4},
		{"native.timeouts", 1}, {"http.timeouts", 1}, {"tls.stalled", 1}, {"tcp.app_timeouts", 2},
		{"tcp.fin_wait2_timeout", 2}, {"tcp.resets_out", 2},
	} {
		if got := m.Get(w.name); got != w.want {
			t.Errorf("%s %d, want %d", w.name, got, w.want)
		}
	}
	for _, c := range []net.Conn{a, draw, b, craw} {
		c.Close()
	}
	checkIdle(t, nt)
}

// TestPosixClosingTimers is the same on the posix stack, cleartext: the
// client that closes normally and lingers is closed by the linger (1 s)
// and counts no timeout; the one that stops reading a 16 MiB response (more
// than the socket buffers hold) is cut by the idle timeout.
func TestPosixClosingTimers(t *testing.T) {
	dir := t.TempDir()
	for name, size := range map[string]int{"f0.txt": 0, "f1.txt": 0, "m16.bin": 16 << 20} {
		b := []byte("file 0\n")
		if size > 0 {
			b = bytes.Repeat([]byte{'m'}, size)
		}
		must(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	g, addr := startPosix(t, httpd.Config{Docroot: dir, IdleTimeout: 300 * time.Millisecond})
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
		must(t, err)
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	a := dial()
	_, err := io.WriteString(a, closeThenMore)
	must(t, err)
	readToEOF(t, a)
	b := dial()
	b.(*net.TCPConn).SetReadBuffer(4096)
	_, err = io.WriteString(b, fmt.Sprintf(closeBig, "m16.bin"))
	must(t, err)

	for deadline := time.Now().Add(15 * time.Second); counter(g, "posix.closed") < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("closing connections not ended: %d closed", counter(g, "posix.closed"))
		}
	}
	m := shard.Merge(g.Stats())
	for _, w := range []struct {
		name string
		want uint64
	}{
		{"posix.accepted", 2}, {"http.requests", 2},
		{"posix.timeouts", 1}, {"http.timeouts", 1}, {"posix.linger_drops", 2},
	} {
		if got := m.Get(w.name); got != w.want {
			t.Errorf("%s %d, want %d", w.name, got, w.want)
		}
	}
}

// TestTLSClosingDeadline: the records left after httpd finished are timed by
// the idle timeout from the first time the stack asks, on both stacks
// (tlsConn.deadline and expire); once the peer took them, nothing is.
func TestTLSClosingDeadline(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "k32.bin"), bytes.Repeat([]byte{'k'}, 32<<10), 0o644))
	site, err := httpd.NewSite(httpd.Config{Docroot: dir, IdleTimeout: 30 * time.Second})
	must(t, err)
	srv := httpd.NewServer(site, nil)
	now := time.Now()
	srv.Tick(now)
	for _, taken := range []bool{false, true} {
		m := newMemTLS(t, tls.VersionTLS13)
		c := &nativeConn{hc: srv.NewConn(netip.MustParseAddrPort("198.18.0.2:40000"), now), tls: &nativeTLS{tlsConn: m.t}}
		in := m.seal(t, []byte(fmt.Sprintf(closeBig, "k32.bin")))
		if n := c.Feed(in, now); n != len(in) {
			t.Fatalf("fed %d of %d bytes", n, len(in))
		}
		if !c.hc.Closing() || c.hc.Pending() != 0 || !c.hc.Deadline().IsZero() || m.t.queued() < 32<<10 || !m.t.notified {
			t.Fatalf("httpd closing %v, %d bytes pending, deadline %v; %d bytes of records queued, close_notify %v",
				c.hc.Closing(), c.hc.Pending(), c.hc.Deadline(), m.t.queued(), m.t.notified)
		}
		if taken {
			if m.t.deadline(c.hc, srv, now).IsZero() {
				t.Fatal("no deadline for the records left")
			}
			m.t.Sent(m.t.queued())
			if d := m.t.deadline(c.hc, srv, now); !d.IsZero() || m.t.expire(c.hc, now.Add(time.Hour)) {
				t.Fatalf("deadline %v with every record taken, want none", d)
			}
			continue
		}
		want := now.Add(time.Second + 30*time.Second)
		for _, at := range []time.Time{now.Add(time.Second), now.Add(2 * time.Second)} {
			if d := m.t.deadline(c.hc, srv, at); !d.Equal(want) {
				t.Fatalf("deadline %v asked at %v, want %v", d, at, want)
			}
		}
		if m.t.expire(c.hc, want.Add(-time.Nanosecond)) || !m.t.expire(c.hc, want) || m.s.stats.Stalled != 1 {
			t.Fatalf("records not taken: stalled %d, want 1 at the deadline", m.s.stats.Stalled)
		}
	}
}
