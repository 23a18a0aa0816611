package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"percore/internal/shardtls"
)

// BenchmarkTLSIntegration compares ways to put crypto/tls beside a shard,
// each serving keep-alive requests from a Go TLS client over loopback:
//
//	plain:  no TLS (the floor);
//	bridge: what the posix stack does, a goroutine running crypto/tls over the
//	        socket and copying plaintext through a socketpair to the responder;
//	inline: crypto/tls's record layer driven by the responder itself over an
//	        in-memory conn it feeds (reads return a temporary error when empty,
//	        which crypto/tls tolerates), one socket read and write per batch:
//	        the record layer as it would run on the shard.
//
// The designs run interleaved, in rounds; it reports each one's median
// microseconds of wall time and of process CPU time (client included, the
// same client for all) per request, and the CPU time of a full handshake.
func BenchmarkTLSIntegration(b *testing.B) {
	dir := b.TempDir()
	certPath, keyPath, pool := testCertTB(b, dir)
	conf, err := LoadTLS(TLSFiles{Cert: certPath, Key: keyPath})
	if err != nil {
		b.Fatal(err)
	}
	client := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
		CipherSuites: []uint16{tls.TLS_AES_128_GCM_SHA256}}
	designs := []struct {
		name  string
		serve func(*net.TCPConn)
		tls   bool
	}{
		{"plain", servePlain, false},
		{"bridge", func(c *net.TCPConn) { serveBridge(c, conf) }, true},
		{"inline", func(c *net.TCPConn) { serveInline(c, conf) }, true},
	}
	const rounds, reqs, handshakes = 7, 2000, 100
	wall := make([][]float64, len(designs))
	cpu := make([][]float64, len(designs))
	hcpu := make([][]float64, len(designs))
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for d, ds := range designs {
				ln := listenServe(b, ds.serve)
				dial := func() net.Conn {
					c, err := net.Dial("tcp", ln.Addr().String())
					if err != nil {
						b.Fatal(err)
					}
					if !ds.tls {
						return c
					}
					tc := tls.Client(c, client)
					if err := tc.Handshake(); err != nil {
						b.Fatal(err)
					}
					return tc
				}
				c := dial()
				t0, c0 := time.Now(), cpuTime()
				keepAlive(b, c, reqs)
				wall[d] = append(wall[d], float64(time.Since(t0).Microseconds())/reqs)
				cpu[d] = append(cpu[d], float64((cpuTime()-c0).Microseconds())/reqs)
				c.Close()
				if ds.tls {
					c0 = cpuTime()
					for h := 0; h < handshakes; h++ {
						dial().Close()
					}
					hcpu[d] = append(hcpu[d], float64((cpuTime()-c0).Microseconds())/handshakes)
				}
				ln.Close()
			}
		}
	}
	for d, ds := range designs {
		b.ReportMetric(median(wall[d]), ds.name+"-µs/req")
		b.ReportMetric(median(cpu[d]), ds.name+"-cpu-µs/req")
		if ds.tls {
			b.ReportMetric(median(hcpu[d]), ds.name+"-cpu-µs/handshake")
		}
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func cpuTime() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var (
	benchRequest  = []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	benchResponse = []byte("HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, world!")
)

// keepAlive sends n requests one at a time on c, reading each response.
func keepAlive(b *testing.B, c net.Conn, n int) {
	buf := make([]byte, len(benchResponse))
	for i := 0; i < n; i++ {
		if _, err := c.Write(benchRequest); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// listenServe accepts loopback connections and serves each on a goroutine.
func listenServe(b *testing.B, serve func(*net.TCPConn)) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c.(*net.TCPConn))
		}
	}()
	return ln
}

// respond answers every whole request in in[:n] (as the shard's httpd does:
// one response per request, written in one call) and returns the bytes left.
func respond(in []byte, out []byte) (rest, resp []byte) {
	for {
		i := bytes.Index(in, []byte("\r\n\r\n"))
		if i < 0 {
			return in, out
		}
		in = in[i+4:]
		out = append(out, benchResponse...)
	}
}

// servePlain is the responder over the socket itself.
func servePlain(c *net.TCPConn) {
	defer c.Close()
	responder(c)
}

func responder(c net.Conn) {
	buf, out := make([]byte, 16<<10), make([]byte, 0, 4096)
	n := 0
	for {
		k, err := c.Read(buf[n:])
		if err != nil {
			return
		}
		rest, resp := respond(buf[:n+k], out[:0])
		n = copy(buf, rest)
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

// serveBridge runs the posix stack's bridge: the responder on one end of a
// socketpair, tlsListener.bridge on the socket and the other end.
func serveBridge(c *net.TCPConn, conf *tls.Config) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.Close()
		return
	}
	shardEnd, err1 := fileConn(pair[0])
	plain, err2 := fileConn(pair[1])
	if err1 != nil || err2 != nil {
		closeConns(c, shardEnd, plain)
		return
	}
	go bridge(c, plain.(*net.UnixConn), conf)
	defer shardEnd.Close()
	responder(shardEnd)
}

// bridge is the posix stack's first TLS design: a goroutine per connection
// runs the handshake over the socket, then copies plaintext both ways
// between crypto/tls and plain, the shard's socketpair end.
func bridge(tcp *net.TCPConn, plain *net.UnixConn, conf *tls.Config) {
	defer closeConns(tcp, plain)
	tc := tls.Server(tcp, conf)
	ctx, cancel := context.WithTimeout(context.Background(), TLSHandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		return
	}
	up := make(chan struct{})
	go func() { // requests: client -> shard
		defer close(up)
		io.Copy(plain, tc)
		plain.CloseWrite()
	}()
	if _, err := io.Copy(tc, plain); err == nil {
		tc.CloseWrite()
		tcp.CloseWrite()
		tcp.SetReadDeadline(time.Now().Add(time.Second))
	} else {
		tcp.Close()
		plain.Close()
	}
	<-up
}

// fileConn makes a net.Conn of fd and closes fd, which net.FileConn has
// duplicated.
func fileConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	return net.FileConn(f)
}

func closeConns(cs ...net.Conn) {
	for _, c := range cs {
		if c != nil {
			c.Close()
		}
	}
}

// serveInline drives crypto/tls's record layer from the responder's own loop:
// the handshake blocks (as it would on a helper goroutine), then each socket
// read is fed to the tls.Conn, which is read until it has no more, and the
// records it writes go out in one socket write. Had the handshake run
// elsewhere, the shard would take over the tls.Conn and its buffered input.
func serveInline(c *net.TCPConn, conf *tls.Config) {
	defer c.Close()
	mc := &memConn{Conn: c}
	tc := tls.Server(mc, conf)
	if err := tc.Handshake(); err != nil {
		return
	}
	mc.feeding = true
	raw, plain, out := make([]byte, 16<<10), make([]byte, 16<<10), make([]byte, 0, 4096)
	n := 0
	for {
		// Drain the tls.Conn first: the handshake may have read records past
		// its own into crypto/tls's buffer, and the socket will not signal them.
		for {
			k, err := tc.Read(plain[n:])
			n += k
			if err != nil {
				if errors.Is(err, shardtls.ErrWouldBlock) {
					break
				}
				return
			}
		}
		rest, resp := respond(plain[:n], out[:0])
		n = copy(plain, rest)
		if len(resp) > 0 {
			tc.Write(resp)
		}
		if len(mc.out) > 0 {
			if _, err := c.Write(mc.out); err != nil {
				return
			}
			mc.out = mc.out[:0]
		}
		k, err := c.Read(raw)
		if err != nil {
			return
		}
		mc.in = append(mc.in[:0], raw[:k]...)
	}
}

// memConn is a net.Conn for crypto/tls that, once feeding, reads only what
// the owner put in in (a temporary error when empty) and collects writes in
// out; before that it passes through to the socket (the handshake).
type memConn struct {
	net.Conn
	feeding bool
	in, out []byte
}

func (m *memConn) Read(p []byte) (int, error) {
	if !m.feeding {
		return m.Conn.Read(p)
	}
	if len(m.in) == 0 {
		return 0, shardtls.ErrWouldBlock
	}
	n := copy(p, m.in)
	m.in = m.in[n:]
	return n, nil
}

func (m *memConn) Write(p []byte) (int, error) {
	if !m.feeding {
		return m.Conn.Write(p)
	}
	m.out = append(m.out, p...)
	return len(p), nil
}
