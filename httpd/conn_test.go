package httpd

import (
	"strings"
	"testing"
)

func TestHello(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	out := f.feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	want := "HTTP/1.1 200 OK\r\nServer: percore\r\nDate: Mon, 30 Nov 2026 22:07:07 GMT\r\n" +
		"Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
	if out != want {
		t.Fatalf("got %q\nwant %q", out, want)
	}
	if f.c.Closing() {
		t.Fatal("HTTP/1.1 connection closing after one request")
	}
}

func TestPipelined100(t *testing.T) {
	f := newFixture(t, Config{}, func(s *Site) {
		s.Handle("/n", func(w *ResponseWriter, r *Request) { w.Write(r.Query) })
	})
	var in strings.Builder
	for i := range 100 {
		in.WriteString("GET /n?")
		in.WriteString(strings.Repeat("x", i))
		in.WriteString(" HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	rs := readResponses(t, f.feed(in.String()))
	if len(rs) != 100 {
		t.Fatalf("got %d responses, want 100", len(rs))
	}
	for i, r := range rs {
		if r.status != 200 || r.body != strings.Repeat("x", i) {
			t.Fatalf("response %d: %d %q", i, r.status, r.body)
		}
	}
}
