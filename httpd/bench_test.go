package httpd

import (
	"strings"
	"testing"
)

// serveOnce feeds req to c and advances all of its output, returning the
// number of output bytes.
func serveOnce(c *Conn, req []byte, f *fixture) int {
	c.Feed(req, f.now)
	n := 0
	for _, s := range c.Output() {
		n += len(s)
	}
	c.Advance(n)
	return n
}

// benchFixture is a fixture without an access log (see BenchmarkServeHelloLogged).
func benchFixture(setup func(*Site)) *fixture {
	f := newFixture(&testing.T{}, Config{}, setup)
	f.srv = NewServer(f.site, nil)
	f.srv.Tick(f.now)
	f.c = f.srv.NewConn(testRemote, f.now)
	return f
}

func BenchmarkServeHello(b *testing.B) {
	f := benchFixture(nil)
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	for b.Loop() {
		if serveOnce(f.c, req, f) == 0 {
			b.Fatal("no response")
		}
	}
}

func BenchmarkServeHelloPipelined16(b *testing.B) {
	f := benchFixture(nil)
	req := []byte(strings.Repeat("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 16))
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	for b.Loop() {
		if serveOnce(f.c, req, f) == 0 {
			b.Fatal("no response")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(16*b.N), "ns/req")
}

// BenchmarkServeHelloLogged includes the access-log append; Tick flushes the
// buffer every 1024 requests as a shard timer would.
func BenchmarkServeHelloLogged(b *testing.B) {
	f := newFixture(&testing.T{}, Config{}, nil)
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		serveOnce(f.c, req, f)
		if i++; i%1024 == 0 {
			f.srv.Tick(f.now)
			f.log.Reset()
		}
	}
}
