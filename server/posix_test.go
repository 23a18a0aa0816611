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
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"percore/httpd"
	"percore/internal/testutil"
	"percore/shard"
)

// startPosix runs one shard with the posix stack on a free loopback port.
func startPosix(t *testing.T, cfg httpd.Config) (*shard.Group, netip.AddrPort) {
	t.Helper()
	site, err := httpd.NewSite(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fds, addr, err := ListenPosix(netip.MustParseAddrPort("127.0.0.1:0"), 1)
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := shard.ChooseCPUs(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := shard.Start(shard.Config{CPUs: cpus}, func(sh *shard.Shard) error {
		_, err := NewPosix(sh, fds[0], PosixConfig{Site: site}, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Stop(); g.Wait() })
	return g, addr
}

func counter(g *shard.Group, name string) uint64 { return shard.Merge(g.Stats()).Get(name) }

// TestPosixServeNoAllocs proves the steady-state serve loop (epoll wakeup,
// read, parse, respond, writev) allocates nothing: AllocsPerRun counts the
// whole process's allocations, the shard's included, around keep-alive round
// trips.
func TestPosixServeNoAllocs(t *testing.T) {
	g, addr := startPosix(t, httpd.Config{})
	allocs, first := testutil.ServeAllocs(t, addr, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	if !bytes.HasPrefix(first, []byte("HTTP/1.1 200")) {
		t.Fatalf("first response: %q", first)
	}
	if allocs != 0 {
		t.Fatalf("%.2f allocations per request", allocs)
	}
	if n := counter(g, "http.requests"); n < 701 {
		t.Fatalf("served %d requests, want 701", n)
	}
}

// TestPosixBackpressure pipelines far more response bytes than the socket
// buffers hold without reading, checks reading stopped (the counter), then
// reads every response, in order and whole.
func TestPosixBackpressure(t *testing.T) {
	dir := t.TempDir()
	const files, size, reqs = 4, 64 << 10, 600 // ~38 MiB of responses
	var bodies [files][]byte
	for i := range bodies {
		bodies[i] = bytes.Repeat([]byte{byte('a' + i)}, size)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.bin", i)), bodies[i], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g, addr := startPosix(t, httpd.Config{Docroot: dir})
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var all bytes.Buffer
	for i := 0; i < reqs; i++ {
		fmt.Fprintf(&all, "GET /%d.bin HTTP/1.1\r\nHost: x\r\n\r\n", i%files)
	}
	wrote := make(chan error, 1)
	go func() { _, err := c.Write(all.Bytes()); wrote <- err }()
	for deadline := time.Now().Add(10 * time.Second); counter(g, "posix.backpressure") == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("reading never stopped for back-pressure")
		}
	}
	br := bufio.NewReaderSize(c, 64<<10)
	for i := 0; i < reqs; i++ {
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(body, bodies[i%files]) {
			t.Fatalf("response %d: %d bytes, err %v, equal %v", i, len(body), err, bytes.Equal(body, bodies[i%files]))
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// TestPosixDrainClosesIdle checks Drain closes idle connections (the peer
// reads EOF) and the shard exits with nothing open.
func TestPosixDrainClosesIdle(t *testing.T) {
	g, addr := startPosix(t, httpd.Config{})
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); counter(g, "posix.accepted") == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("connection not accepted")
		}
	}
	g.Stop()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read %d, %v; want EOF", n, err)
	}
	c.Close()
	g.Wait()
	f := shard.Merge(g.Final())
	if f.Get("posix.open") != 0 || f.Get("posix.forced") != 0 || f.Get("posix.closed") != 1 {
		t.Fatalf("final counters: %v", f)
	}
}

// BenchmarkPosixRoundTrip is one keep-alive GET / round trip over loopback
// through a posix shard, client on raw syscalls; allocs/op is the whole
// process's, the shard's included.
func BenchmarkPosixRoundTrip(b *testing.B) {
	site, err := httpd.NewSite(httpd.Config{})
	if err != nil {
		b.Fatal(err)
	}
	fds, addr, err := ListenPosix(netip.MustParseAddrPort("127.0.0.1:0"), 1)
	if err != nil {
		b.Fatal(err)
	}
	cpus, err := shard.ChooseCPUs(1, nil)
	if err != nil {
		b.Fatal(err)
	}
	g, err := shard.Start(shard.Config{CPUs: cpus}, func(sh *shard.Shard) error {
		_, err := NewPosix(sh, fds[0], PosixConfig{Site: site}, time.Now())
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { g.Stop(); g.Wait() }()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}); err != nil {
		b.Fatal(err)
	}
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 4096)
	unix.Write(fd, req)
	respLen, err := unix.Read(fd, buf)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		unix.Write(fd, req)
		for got := 0; got < respLen; {
			n, err := unix.Read(fd, buf[got:])
			if err != nil || n == 0 {
				b.Fatalf("read: %d %v", n, err)
			}
			got += n
		}
	}
}

// TestPosixPeerResetMidResponse: a client that resets its connection while a
// large response is still queued must leave the shard with nothing open and
// the drop counted, not an fd reported by epoll forever.
func TestPosixPeerResetMidResponse(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), bytes.Repeat([]byte("r"), 16<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	g, addr := startPosix(t, httpd.Config{Docroot: dir})
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).SetLinger(0) // Close sends RST
	c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		m := shard.Merge(g.Stats())
		if m.Get("posix.open") == 0 && m.Get("posix.closed") == 1 {
			if m.Get("posix.write_errors")+m.Get("posix.read_errors") != 1 {
				t.Fatalf("the reset was not counted: %v", m)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection still open after the peer's reset: %v", m)
		}
	}
}
