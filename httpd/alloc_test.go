package httpd

import (
	"strings"
	"testing"
)

// TestZeroAllocs proves the steady state allocates nothing per request, for
// each kind of response. The access log is on (flushed by Tick in the loop).
func TestZeroAllocs(t *testing.T) {
	f := newTestFixture(t)
	f.site.Handle("/dyn", func(w *ResponseWriter, r *Request) {
		w.Header("Content-Type", "text/plain")
		w.WriteString("dynamic ")
		w.Write(r.Query)
	})
	etag := get(f, "GET", "/style.css").header.Get("ETag")
	bigTag := get(f, "GET", "/big.txt").header.Get("ETag")
	for _, tc := range []struct{ name, req string }{
		{"hello", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"}, // the docroot's index.html
		{"static", "GET /style.css HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"head", "HEAD /sub/a.txt HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"304", "GET /style.css HTTP/1.1\r\nHost: x\r\nIf-None-Match: " + etag + "\r\n\r\n"},
		{"404", "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"206", "GET /big.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=100-199\r\nIf-Range: " + bigTag + "\r\n\r\n"},
		{"416", "GET /style.css HTTP/1.1\r\nHost: x\r\nRange: bytes=99-\r\n\r\n"},
		{"412", "GET /style.css HTTP/1.1\r\nHost: x\r\nIf-Match: \"other\"\r\n\r\n"},
		{"405", "POST /style.css HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"301", "GET /sub?q HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"dynamic", "GET /dyn?abc HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"prefix", "GET /api/a%20b HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"chunked post", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;e\r\nabc\r\n0\r\n\r\n"},
		{"http/1.0 keep-alive", "GET /hello.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"},
		{"pipelined", strings.Repeat("GET /dyn HTTP/1.1\r\nHost: x\r\n\r\nGET /style.css HTTP/1.1\r\nHost: x\r\n\r\n", 8)},
	} {
		req := []byte(tc.req)
		run := func() {
			if serveOnce(f.c, req, f) == 0 || f.c.Closing() {
				t.Fatalf("%s: no response or closing", tc.name)
			}
			f.srv.Tick(f.now)
			f.log.Reset()
		}
		run() // warm up buffers
		if n := testing.AllocsPerRun(100, run); n != 0 {
			t.Errorf("%s: %v allocs per request", tc.name, n)
		}
	}
	// Built-in hello (no docroot).
	h := newFixture(t, Config{}, nil)
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if n := testing.AllocsPerRun(100, func() { serveOnce(h.c, req, h) }); n != 0 {
		t.Errorf("built-in hello: %v allocs per request", n)
	}
}

// TestArenaNeverDrains models a userspace TCP that always holds some
// unacknowledged output while pipelined dynamic requests keep coming: the two
// arenas must alternate without allocating, and every byte must stay intact.
func TestArenaNeverDrains(t *testing.T) {
	var seq [8]byte // each response differs, so a rewrite would show
	f := newFixture(t, Config{}, func(s *Site) {
		s.Handle("/d", func(w *ResponseWriter, r *Request) {
			for i := range seq {
				if seq[i]++; seq[i] != 0 {
					break
				}
			}
			w.Write(r.Query)
			w.Write(seq[:])
		})
	})
	reqs := []byte(strings.Repeat("GET /d?"+strings.Repeat("z", 500)+" HTTP/1.1\r\nHost: x\r\n\r\n", 10))
	step := func() {
		f.c.Feed(reqs, f.now)
		f.c.Advance(f.c.Pending() - 100) // acknowledge all but the last 100 bytes
	}
	for range 300 { // warm up: both arenas reach their size
		step()
	}
	if n := testing.AllocsPerRun(200, step); n != 0 {
		t.Errorf("%v allocs per 10 requests", n)
	}
	for range 300 {
		before := make([]string, 0, 4)
		for _, s := range f.c.Output() {
			before = append(before, string(s))
		}
		kept := f.c.Output()
		keptSlices := append([][]byte(nil), kept...)
		step()
		for i, s := range keptSlices {
			if string(s) != before[i] {
				t.Fatal("bytes not yet advanced were rewritten")
			}
		}
	}
}
