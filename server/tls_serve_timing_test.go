package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// startTLSBench starts one posix shard on 127.0.0.1 serving dir over TLS
// with a test certificate made in dir; the benchmark's end stops it.
func startTLSBench(b *testing.B, dir string) (s *Server, certPath, keyPath string, pool *x509.CertPool) {
	certPath, keyPath, pool = testCertTB(b, dir)
	o, err := ParseFlags([]string{"--smp", "1", "--port", "0", "--address", "127.0.0.1", "--docroot", dir,
		"--tls-cert", certPath, "--tls-key", keyPath, "--tls-port", "0"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if s, err = Start(o, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Stop(); <-s.Done() })
	return s, certPath, keyPath, pool
}

// BenchmarkTLSServe measures the posix stack's TLS as it is, one shard
// serving: the process CPU time (the client's included, the same for any
// server design) per keep-alive request, per full handshake and per resumed
// one. The requests are sealed before the clock starts and the responses
// read as bytes, so the client's per-request work is two system calls. It
// reports medians over rounds; compare designs by running the benchmark of
// each build in turn.
func BenchmarkTLSServe(b *testing.B) {
	dir := b.TempDir()
	s, _, _, pool := startTLSBench(b, dir)
	addr := s.TLSAddr.String()
	conf := func() *tls.Config {
		return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
			CipherSuites: []uint16{tls.TLS_AES_128_GCM_SHA256}}
	}
	const rounds, reqs, handshakes = 5, 4000, 200
	var cpuReq, wallReq, cpuFull, cpuResumed []float64
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			cpu, wall := sealedKeepAlive(b, addr, conf(), reqs)
			cpuReq, wallReq = append(cpuReq, cpu), append(wallReq, wall)
			cpuFull = append(cpuFull, handshakeCPU(b, addr, conf(), handshakes))
			resumed := conf()
			resumed.ClientSessionCache = tls.NewLRUClientSessionCache(1)
			cpuResumed = append(cpuResumed, handshakeCPU(b, addr, resumed, handshakes))
		}
	}
	b.ReportMetric(median(wallReq), "µs/req")
	b.ReportMetric(median(cpuReq), "cpu-µs/req")
	b.ReportMetric(median(cpuFull), "cpu-µs/full-handshake")
	b.ReportMetric(median(cpuResumed), "cpu-µs/resumed-handshake")
}

// sealedKeepAlive sends n requests one at a time on one TLS connection and
// returns the CPU and wall microseconds per request.
func sealedKeepAlive(b *testing.B, addr string, conf *tls.Config, n int) (cpu, wall float64) {
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	rc := &sealConn{Conn: raw}
	c := tls.Client(rc, conf)
	if err := c.Handshake(); err != nil {
		b.Fatal(err)
	}
	rc.keep = true
	for i := 0; i <= n; i++ {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	hdr := make([]byte, 5)
	raw.Write(rc.records[0])
	if _, err := io.ReadFull(raw, hdr); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 5+(int(hdr[3])<<8|int(hdr[4])))
	if _, err := io.ReadFull(raw, buf[5:]); err != nil {
		b.Fatal(err)
	}
	t0, c0 := time.Now(), cpuTime()
	for i := 1; i <= n; i++ {
		raw.Write(rc.records[i])
		if _, err := io.ReadFull(raw, buf); err != nil {
			b.Fatal(err)
		}
	}
	return float64((cpuTime() - c0).Microseconds()) / float64(n), float64(time.Since(t0).Microseconds()) / float64(n)
}

// handshakeCPU makes n connections, each a handshake and one request, and
// returns the CPU microseconds per connection.
func handshakeCPU(b *testing.B, addr string, conf *tls.Config, n int) float64 {
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 4096)
	c0 := cpuTime()
	for i := 0; i < n; i++ {
		c, err := tls.Dial("tcp", addr, conf)
		if err != nil {
			b.Fatal(err)
		}
		c.Write(req)
		if _, err := c.Read(buf); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	return float64((cpuTime() - c0).Microseconds()) / float64(n)
}

// sealConn passes a TLS client's handshake through, then keeps each record
// it writes.
type sealConn struct {
	net.Conn
	keep    bool
	records [][]byte
}

func (c *sealConn) Write(p []byte) (int, error) {
	if !c.keep {
		return c.Conn.Write(p)
	}
	c.records = append(c.records, append([]byte(nil), p...))
	return len(p), nil
}

// BenchmarkTLSStatic measures static files over TLS on the posix stack, one
// shard serving keep-alive requests one at a time: the process CPU time
// (the client's included: two system calls a request, the same for any
// server build) per request, median over rounds, for a small and two large
// files. The copies the server makes of a response show here; compare
// builds by running the benchmark of each in turn.
func BenchmarkTLSStatic(b *testing.B) {
	dir := b.TempDir()
	certPath, keyPath, pool := testCertTB(b, dir)
	sizes := []int{1 << 10, 64 << 10, 256 << 10}
	for _, n := range sizes {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.bin", n)), bytes.Repeat([]byte{'x'}, n), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	o, err := ParseFlags([]string{"--smp", "1", "--port", "0", "--address", "127.0.0.1", "--docroot", dir,
		"--tls-cert", certPath, "--tls-key", keyPath, "--tls-port", "0"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	s, err := Start(o, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { s.Stop(); <-s.Done() }()
	conf := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
		CipherSuites: []uint16{tls.TLS_AES_128_GCM_SHA256}}
	const rounds, reqs = 7, 1000
	cpu := make([][]float64, len(sizes))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for k, n := range sizes {
				cpu[k] = append(cpu[k], sealedStatic(b, s.TLSAddr.String(), conf, fmt.Sprintf("/%d.bin", n), reqs))
			}
		}
	}
	for k, n := range sizes {
		b.ReportMetric(median(cpu[k]), fmt.Sprintf("cpu-µs/req-%dKiB", n>>10))
	}
}

// sealedStatic sends n requests for path one at a time on one TLS
// connection, reading each response as ciphertext of the length the first
// one had, and returns the CPU microseconds per request.
func sealedStatic(b *testing.B, addr string, conf *tls.Config, path string, n int) float64 {
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	rc := &sealConn{Conn: raw}
	c := tls.Client(rc, conf)
	if err := c.Handshake(); err != nil {
		b.Fatal(err)
	}
	rc.keep = true
	for i := 0; i < n+2; i++ {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	}
	// The first two responses end when nothing more comes for a while:
	// the first (a file not yet cached) may differ from the rest, the
	// second sets their length.
	quiet := func() int {
		buf := make([]byte, 64<<10)
		total := 0
		for {
			raw.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			k, err := raw.Read(buf)
			total += k
			if err != nil {
				raw.SetReadDeadline(time.Time{})
				return total
			}
		}
	}
	raw.Write(rc.records[0])
	quiet()
	raw.Write(rc.records[1])
	buf := make([]byte, quiet())
	c0 := cpuTime()
	for i := 2; i <= n+1; i++ {
		raw.Write(rc.records[i])
		if _, err := io.ReadFull(raw, buf); err != nil {
			b.Fatalf("%s: request %d: %v (response %d bytes)", path, i, err, len(buf))
		}
	}
	return float64((cpuTime() - c0).Microseconds()) / float64(n)
}

// BenchmarkTLSHandshakeBridge sets the posix stack's full handshake beside
// the socketpair bridge it replaced (BenchmarkTLSIntegration's "bridge"),
// both serving the same client, in alternating rounds: the process CPU time
// per connection (a full handshake and one request), medians.
func BenchmarkTLSHandshakeBridge(b *testing.B) {
	dir := b.TempDir()
	s, certPath, keyPath, pool := startTLSBench(b, dir)
	sconf, err := LoadTLS(TLSFiles{Cert: certPath, Key: keyPath})
	if err != nil {
		b.Fatal(err)
	}
	ln := listenServe(b, func(c *net.TCPConn) { serveBridge(c, sconf) })
	defer ln.Close()
	conf := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
		CipherSuites: []uint16{tls.TLS_AES_128_GCM_SHA256}}
	const rounds, handshakes = 9, 150
	var shard, bridge []float64
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			shard = append(shard, handshakeCPU(b, s.TLSAddr.String(), conf, handshakes))
			bridge = append(bridge, handshakeCPU(b, ln.Addr().String(), conf, handshakes))
		}
	}
	b.ReportMetric(median(shard), "shard-cpu-µs/full-handshake")
	b.ReportMetric(median(bridge), "bridge-cpu-µs/full-handshake")
}
