package httpd

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
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

func BenchmarkServeStatic(b *testing.B) {
	f := newFixture(&testing.T{}, Config{Docroot: makeDocroot(b)}, nil)
	f.srv = NewServer(f.site, nil)
	f.srv.Tick(f.now)
	f.c = f.srv.NewConn(testRemote, f.now)
	req := []byte("GET /style.css HTTP/1.1\r\nHost: x\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	b.ReportAllocs()
	for b.Loop() {
		serveOnce(f.c, req, f)
	}
}

func BenchmarkServeDynamic(b *testing.B) {
	f := benchFixture(func(s *Site) {
		s.Handle("/api/", func(w *ResponseWriter, r *Request) {
			w.Header("Content-Type", "text/plain")
			w.WriteString("hello ")
			w.Write(r.Query)
		})
	})
	req := []byte("GET /api/x?name=world HTTP/1.1\r\nHost: x\r\n\r\n")
	b.ReportAllocs()
	for b.Loop() {
		serveOnce(f.c, req, f)
	}
}

// BenchmarkNetHTTPHelloTwin is the net/http twin of BenchmarkServeHello: the
// standard library's request parser and response writer on the same bytes
// (no sockets, no goroutines), as the yardstick for the ratio.
func BenchmarkNetHTTPHelloTwin(b *testing.B) {
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	rd := bytes.NewReader(req)
	br := bufio.NewReader(rd)
	bw := bufio.NewWriter(io.Discard)
	body := []byte("hello")
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(req)
		br.Reset(rd)
		r, err := http.ReadRequest(br)
		if err != nil || r.URL.Path != "/" {
			b.Fatal(err)
		}
		resp := http.Response{
			StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1, Request: r,
			Header: http.Header{"Content-Type": {"text/plain"}, "Server": {"net/http"},
				"Date": {time.Now().UTC().Format(http.TimeFormat)}},
			ContentLength: int64(len(body)),
			Body:          io.NopCloser(bytes.NewReader(body)),
		}
		if err := resp.Write(bw); err != nil {
			b.Fatal(err)
		}
		bw.Flush()
	}
}
