package httpd

import (
	"strings"
	"testing"
)

func get(f *fixture, method, target string, hdrs ...string) parsedResp {
	f.t.Helper()
	req := method + " " + target + " HTTP/1.1\r\nHost: x\r\n" + strings.Join(hdrs, "") + "\r\n"
	rs := readResponses(f.t, f.feed(req), method == "HEAD")
	if len(rs) != 1 {
		f.t.Fatalf("%s %s: %d responses", method, target, len(rs))
	}
	return rs[0]
}

func TestStaticFile(t *testing.T) {
	f := newTestFixture(t)
	r := get(f, "GET", "/style.css")
	if r.status != 200 || r.body != "body{}\n" {
		t.Fatalf("GET: %d %q", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/css; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	etag, lm := r.header.Get("ETag"), r.header.Get("Last-Modified")
	if !strings.HasPrefix(etag, `"`) || lm != "Mon, 30 Nov 2026 21:07:07 GMT" {
		t.Errorf("ETag %q Last-Modified %q", etag, lm)
	}

	h := get(f, "HEAD", "/style.css")
	if h.status != 200 || h.body != "" || h.header.Get("Content-Length") != "7" || h.header.Get("ETag") != etag {
		t.Errorf("HEAD: %d %q %v", h.status, h.body, h.header)
	}

	for _, tc := range []struct {
		hdr  string
		want int
	}{
		{"If-None-Match: " + etag + "\r\n", 304},
		{"If-None-Match: \"x\", W/" + etag + "\r\n", 304},
		{"If-None-Match: *\r\n", 304},
		{"If-None-Match: \"other\"\r\n", 200},
		{"If-Modified-Since: " + lm + "\r\n", 304},
		{"If-Modified-Since: Mon, 30 Nov 2026 23:00:00 GMT\r\n", 304},
		{"If-Modified-Since: Mon, 30 Nov 2026 21:07:06 GMT\r\n", 200},
		{"If-Modified-Since: yesterday\r\n", 200},
		// If-None-Match decides when present (RFC 9110 13.2.2).
		{"If-None-Match: \"other\"\r\nIf-Modified-Since: " + lm + "\r\n", 200},
	} {
		r := get(f, "GET", "/style.css", tc.hdr)
		if r.status != tc.want {
			t.Errorf("%q: status %d, want %d", tc.hdr, r.status, tc.want)
		}
		if tc.want == 304 && (r.body != "" || r.header.Get("ETag") != etag || r.header.Get("Content-Length") != "7") {
			t.Errorf("%q: 304 %q %v", tc.hdr, r.body, r.header)
		}
	}
	if f.c.Closing() {
		t.Fatal("closing after keep-alive requests")
	}
}

func TestStaticTypesAndDirs(t *testing.T) {
	f := newTestFixture(t)
	for _, tc := range []struct {
		target, status, ctype, body, location string
	}{
		{"/", "200", "text/html; charset=utf-8", "<h1>root</h1>\n", ""},
		{"/index.html", "200", "text/html; charset=utf-8", "<h1>root</h1>\n", ""},
		{"/sub/", "200", "text/html; charset=utf-8", "<h1>sub</h1>\n", ""},
		{"/sub", "301", "text/plain; charset=utf-8", "301 Moved Permanently\n", "/sub/"},
		{"/sub?x=1", "301", "text/plain; charset=utf-8", "301 Moved Permanently\n", "/sub/?x=1"},
		{"//sub", "301", "text/plain; charset=utf-8", "301 Moved Permanently\n", "/sub/"}, // not "//sub/": no open redirect
		{"/sp%20ace", "301", "text/plain; charset=utf-8", "301 Moved Permanently\n", "/sp%20ace/"},
		{"/hello.txt", "200", "text/plain; charset=utf-8", "hello file\n", ""},
		{"/data.bin", "200", "application/octet-stream", "\x00\x01\x02", ""},
		{"/sub/missing", "404", "text/plain; charset=utf-8", "404 Not Found\n", ""},
		{"/link", "404", "text/plain; charset=utf-8", "404 Not Found\n", ""},
		{"/.env", "404", "text/plain; charset=utf-8", "404 Not Found\n", ""},
		{"/.git/config", "404", "text/plain; charset=utf-8", "404 Not Found\n", ""},
		{"/sub/.hidden", "404", "text/plain; charset=utf-8", "404 Not Found\n", ""},
	} {
		r := get(f, "GET", tc.target)
		if got := r.header.Get("Content-Type"); itoa(r.status) != tc.status || got != tc.ctype || r.body != tc.body ||
			r.header.Get("Location") != tc.location {
			t.Errorf("%s: %d %q %q Location %q", tc.target, r.status, got, r.body, r.header.Get("Location"))
		}
	}
	r := get(f, "PUT", "/hello.txt")
	if r.status != 405 || r.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("PUT: %d Allow %q", r.status, r.header.Get("Allow"))
	}
}

func itoa(n int) string {
	return string(appendStatusLine(nil, n)[9:12])
}

func TestNewSiteErrors(t *testing.T) {
	if _, err := NewSite(Config{Docroot: "/nonexistent-percore-docroot"}); err == nil {
		t.Error("missing docroot: no error")
	}
	file := makeDocroot(t) + "/hello.txt"
	if _, err := NewSite(Config{Docroot: file}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file docroot: %v", err)
	}
}

func TestRoutes(t *testing.T) {
	f := newTestFixture(t)
	f.site.Handle("/api/v2/", func(w *ResponseWriter, r *Request) { w.WriteString("v2") })
	f.site.Handle("/style.css", func(w *ResponseWriter, r *Request) { w.WriteString("dynamic wins") })
	for _, tc := range []struct{ target, body string }{
		{"/api/x", "api:/api/x"},
		{"/api/v2/y", "v2"},
		{"/api/v2", "api:/api/v2"},
		{"/style.css", "dynamic wins"},
	} {
		if r := get(f, "GET", tc.target); r.status != 200 || r.body != tc.body {
			t.Errorf("%s: %d %q", tc.target, r.status, r.body)
		}
	}
	if r := get(f, "GET", "/api"); r.status != 404 {
		t.Errorf("/api: %d, want 404 (prefix routes do not match without the slash)", r.status)
	}
	r := get(f, "HEAD", "/api/x")
	if r.status != 200 || r.body != "" || r.header.Get("Content-Length") != "10" {
		t.Errorf("HEAD /api/x: %d %q %v", r.status, r.body, r.header)
	}
}

func TestResponseWriterHeaders(t *testing.T) {
	f := newFixture(t, Config{}, func(s *Site) {
		s.Handle("/h", func(w *ResponseWriter, r *Request) {
			w.Header("X-Ok", "yes")
			w.Header("Content-Length", "99")      // server-managed: ignored
			w.Header("X-Split", "a\r\nX-Evil: 1") // response splitting: ignored
			w.Header("Bad Name", "v")
			w.WriteHeader(99) // not a final status: ignored
			w.WriteString("ok")
			if string(r.Header("x-in")) != "v v" || r.Header("x-none") != nil {
				w.WriteString(" bad request header lookup")
			}
		})
		s.Handle("/204", func(w *ResponseWriter, r *Request) {
			w.WriteHeader(204)
			w.WriteString("dropped")
		})
	})
	r := get(f, "GET", "/h", "X-In:  v v \r\n")
	if r.status != 200 || r.body != "ok" || r.header.Get("X-Ok") != "yes" || r.header.Get("Content-Length") != "2" ||
		r.header.Get("X-Evil") != "" || r.header.Get("X-Split") != "" {
		t.Errorf("/h: %d %q %v", r.status, r.body, r.header)
	}
	out := f.feed("GET /204 HTTP/1.1\r\nHost: x\r\n\r\n")
	if !strings.HasPrefix(out, "HTTP/1.1 204 No Content\r\n") || strings.Contains(out, "Content-Length") || strings.Contains(out, "dropped") {
		t.Errorf("204: %q", out)
	}
}
