package httpd

import (
	"testing"
)

// Method routes: each method its handler, GET also serving HEAD, the rest
// 405 with the pattern's own Allow, and Handle replacing them all.
func TestHandleMethod(t *testing.T) {
	f := newFixture(t, Config{}, func(s *Site) {
		s.HandleMethod("GET", "/item", func(w *ResponseWriter, r *Request) { w.WriteString("got") })
		s.HandleMethod("POST", "/item", func(w *ResponseWriter, r *Request) {
			w.WriteHeader(201)
			w.Write(r.Body)
		})
		s.HandleMethod("DELETE", "/api/", func(w *ResponseWriter, r *Request) { w.WriteHeader(204) })
		s.HandleMethod("GET", "/swap", func(w *ResponseWriter, r *Request) {})
		s.Handle("/swap", func(w *ResponseWriter, r *Request) { w.Write(r.Method) })
	})
	out := f.feed("GET /item HTTP/1.1\r\nHost: x\r\n\r\n" +
		"HEAD /item HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /item HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody" +
		"PUT /item HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" +
		"DELETE /api/x HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /api/x HTTP/1.1\r\nHost: x\r\n\r\n" +
		"PATCH /swap HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
	rs := readResponses(t, out, false, true)
	want := []struct {
		status int
		body   string
		allow  string
	}{
		{200, "got", ""},
		{200, "", ""},
		{201, "body", ""},
		{405, "405 Method Not Allowed\n", "GET, HEAD, POST"},
		{204, "", ""},
		{405, "405 Method Not Allowed\n", "DELETE"},
		{200, "PATCH", ""},
	}
	if len(rs) != len(want) {
		t.Fatalf("%d responses, want %d:\n%s", len(rs), len(want), out)
	}
	for i, w := range want {
		r := rs[i]
		if r.status != w.status || r.body != w.body || r.header.Get("Allow") != w.allow {
			t.Errorf("response %d: %d %q Allow %q, want %d %q Allow %q", i, r.status, r.body, r.header.Get("Allow"), w.status, w.body, w.allow)
		}
	}
	if rs[1].header.Get("Content-Length") != "3" {
		t.Errorf("HEAD Content-Length %q, want the GET's 3", rs[1].header.Get("Content-Length"))
	}
}

func TestHandleMethodAllocs(t *testing.T) {
	f := newFixture(t, Config{}, func(s *Site) {
		s.HandleMethod("GET", "/m", func(w *ResponseWriter, r *Request) { w.WriteString("m") })
		s.HandleMethod("PUT", "/m", func(w *ResponseWriter, r *Request) {})
	})
	for _, req := range []string{"GET /m HTTP/1.1\r\nHost: x\r\n\r\n", "DELETE /m HTTP/1.1\r\nHost: x\r\n\r\n"} {
		b := []byte(req)
		serveOnce(f.c, b, f)
		if n := testing.AllocsPerRun(100, func() { serveOnce(f.c, b, f) }); n != 0 {
			t.Errorf("%q: %v allocs per request", req, n)
		}
	}
}

func TestHandleMethodBad(t *testing.T) {
	s, _ := NewSite(Config{})
	for _, m := range []string{"", "GE T", "G\r\n"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("method %q: no panic", m)
				}
			}()
			s.HandleMethod(m, "/x", func(*ResponseWriter, *Request) {})
		}()
	}
}
