package httpd

import (
	"strings"
	"testing"
)

var long = strings.Repeat("a", MaxTarget)

// parserCases are whole input streams and the statuses they must get, in order,
// and whether the connection must then be closing.
var parserCases = []struct {
	name   string
	in     string
	want   []int
	close  bool
	bodies []string // when set, the response bodies
}{
	// Valid requests.
	{name: "root index", in: "GET / HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{200}, bodies: []string{"<h1>root</h1>\n"}},
	{name: "http/1.0 closes", in: "GET / HTTP/1.0\r\n\r\n", want: []int{200}, close: true},
	{name: "http/1.0 keep-alive", in: "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", want: []int{200}},
	{name: "connection close", in: "GET / HTTP/1.1\r\nHost: x\r\nConnection: foo, close\r\n\r\n", want: []int{200}, close: true},
	{name: "leading empty lines", in: "\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{200}},
	{name: "absolute form", in: "GET http://x/api/q?y HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{200}, bodies: []string{"api:/api/q"}},
	{name: "absolute form no path", in: "GET HTTP://x HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{200}},
	{name: "query", in: "GET /?a=b HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{200}},
	{name: "dot segments", in: "GET /sub/./a.txt HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{200}, bodies: []string{"a\n"}},
	{name: "double slash", in: "GET //sub//a.txt HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{200}, bodies: []string{"a\n"}},
	{name: "percent decoded", in: "GET /%68ello%2Etxt HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{200}, bodies: []string{"hello file\n"}},
	{name: "content-length body", in: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", want: []int{200}, bodies: []string{"hello"}},
	{name: "content-length list", in: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc", want: []int{200}, bodies: []string{"abc"}},
	{name: "chunked", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n" +
		"5;ext=1;q=\"a b\"\r\nhello\r\nA\r\n, world!!!\r\n0\r\nTrailer: t\r\n\r\n", want: []int{200}, bodies: []string{"hello, world!!!"}},
	{name: "chunked empty", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", want: []int{200}, bodies: []string{""}},
	{name: "get with body", in: "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nxyGET / HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{200, 200}},
	{name: "obs-text value", in: "GET / HTTP/1.1\r\nHost: x\r\nX-A: caf\xc3\xa9\t \r\n\r\n", want: []int{200}},
	{name: "empty value", in: "GET / HTTP/1.1\r\nHost: x\r\nX-A:\r\n\r\n", want: []int{200}},
	{name: "not found", in: "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{404}},
	{name: "405 on hello", in: "DELETE / HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{405}},
	{name: "405 on file", in: "POST /style.css HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", want: []int{405}},
	{name: "dir redirect", in: "GET /sub HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{301}},
	{name: "dynamic status", in: "PUT /status HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{201}, bodies: []string{"created"}},
	{name: "symlink not served", in: "GET /link HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{404}},
	{name: "handler panic", in: "GET /panic HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{500}, close: true},

	// Malformed request line.
	{name: "no host", in: "GET / HTTP/1.1\r\n\r\n", want: []int{400}, close: true},
	{name: "host with port", in: "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", want: []int{200}},
	{name: "empty host", in: "GET / HTTP/1.1\r\nHost:\r\n\r\n", want: []int{200}},
	{name: "bad host", in: "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", want: []int{400}, close: true},
	{name: "host with slash", in: "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", want: []int{400}, close: true},
	{name: "two hosts", in: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", want: []int{400}, close: true},
	{name: "double space", in: "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "trailing space", in: "GET / HTTP/1.1 \r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "http/0.9", in: "GET /\r\n\r\n", want: []int{400}, close: true},
	{name: "bad method", in: "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "long method", in: strings.Repeat("G", 40) + " / HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "lower-case version", in: "GET / http/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "garbage version", in: "GET / HTTP/1.x\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "http/1.2", in: "GET / HTTP/1.2\r\nHost: x\r\n\r\n", want: []int{505}, close: true},
	{name: "http/2 preface", in: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", want: []int{505}, close: true},
	{name: "nul in target", in: "GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "options asterisk", in: "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{200}, bodies: []string{""}},
	{name: "asterisk", in: "GET * HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "authority form", in: "CONNECT x:443 HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "fragment", in: "GET /#f HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "uri too long", in: "GET /" + long + " HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{414}, close: true},
	{name: "unfinished line too long", in: "GET /" + long + long, want: []int{414}, close: true},

	// Malformed header fields.
	{name: "bare lf", in: "GET / HTTP/1.1\nHost: x\n\n", want: []int{400}, close: true},
	{name: "bare lf in fields", in: "GET / HTTP/1.1\r\nHost: x\n\r\n", want: []int{400}, close: true},
	{name: "bare cr", in: "GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", want: []int{400}, close: true},
	{name: "nul in value", in: "GET / HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n", want: []int{400}, close: true},
	{name: "del in value", in: "GET / HTTP/1.1\r\nHost: x\r\nX: a\x7fb\r\n\r\n", want: []int{400}, close: true},
	{name: "obs-fold", in: "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", want: []int{400}, close: true},
	{name: "space before colon", in: "GET / HTTP/1.1\r\nHost : x\r\n\r\n", want: []int{400}, close: true},
	{name: "empty name", in: "GET / HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n", want: []int{400}, close: true},
	{name: "no colon", in: "GET / HTTP/1.1\r\nHost: x\r\nnocolon\r\n\r\n", want: []int{400}, close: true},
	{name: "headers too large", in: "GET / HTTP/1.1\r\nHost: x\r\nX: " + long + "\r\n\r\n", want: []int{431}, close: true},
	{name: "unfinished headers too large", in: "GET / HTTP/1.1\r\nHost: x\r\nX: " + long, want: []int{431}, close: true},

	// Body framing.
	{name: "body too large", in: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n", want: []int{413}, close: true},
	{name: "chunked too large", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n" + strings.Repeat("x", 1000) + "\r\n1\r\n", want: []int{413}, close: true},
	{name: "body at max", in: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + strings.Repeat("b", 1000), want: []int{200}},
	{name: "chunked at max", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n" + strings.Repeat("x", 1000) + "\r\n0\r\n\r\n", want: []int{200}},
	{name: "max body and trailers", in: "POST /echo HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("h", MaxHeaderBytes-60) + "\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n" + strings.Repeat("x", 1000) + "\r\n0\r\nT: " + strings.Repeat("t", MaxHeaderBytes-10) + "\r\n\r\n", want: []int{200}},
	{name: "chunk line too long", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;" + strings.Repeat("e", maxChunkLine) + "\r\n", want: []int{400}, close: true},
	{name: "trailers too large", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: " + long + "\r\n\r\n", want: []int{431}, close: true},
	{name: "gzip", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", want: []int{501}, close: true},
	{name: "gzip, chunked", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", want: []int{501}, close: true},
	{name: "cl then te", in: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", want: []int{400}, close: true},
	{name: "te then cl", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", want: []int{400}, close: true},
	{name: "two te", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", want: []int{400}, close: true},
	{name: "te in http/1.0", in: "POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", want: []int{400}, close: true},
	{name: "conflicting cl", in: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", want: []int{400}, close: true},
	{name: "conflicting cl list", in: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 4\r\n\r\n", want: []int{400}, close: true},
	{name: "negative cl", in: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", want: []int{400}, close: true},
	{name: "plus cl", in: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\n", want: []int{400}, close: true},
	{name: "empty cl", in: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", want: []int{400}, close: true},
	{name: "huge cl", in: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n", want: []int{400}, close: true},
	{name: "bad chunk size", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", want: []int{400}, close: true},
	{name: "chunk size overflow", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", want: []int{400}, close: true},
	{name: "chunk missing crlf", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n", want: []int{400}, close: true},
	{name: "chunk bare lf", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\na\r\n", want: []int{400}, close: true},
	{name: "chunk ext ctl", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;a\x00\r\na\r\n", want: []int{400}, close: true},
	{name: "chunk ext no semicolon", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1 x\r\na\r\n", want: []int{400}, close: true},
	{name: "bad trailer", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n folded\r\n\r\n", want: []int{400}, close: true},

	// Path traversal never leaves the docroot.
	{name: "dotdot", in: "GET /../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "dotdot inside", in: "GET /sub/../style.css HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "encoded dotdot", in: "GET /%2e%2e/etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "mixed encoded dotdot", in: "GET /sub/.%2E/style.css HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "encoded slash", in: "GET /sub%2fa.txt HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "encoded backslash", in: "GET /sub%5ca.txt HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "backslash", in: "GET /sub\\..\\style.css HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "encoded nul", in: "GET /hello.txt%00.html HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "bad escape", in: "GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "short escape", in: "GET /%4 HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},
	{name: "absolute dotdot", in: "GET http://x/../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{400}, close: true},

	// An error ends the connection: the rest of the pipeline is not answered.
	{name: "error stops pipeline", in: "GET / HTTP/1.1\r\nHost: x\r\n\r\nBAD\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{200, 400}, close: true},
	{name: "close stops pipeline", in: "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", want: []int{200}, close: true},
}

func TestParserTable(t *testing.T) {
	docroot := makeDocroot(t)
	for _, tc := range parserCases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{Docroot: docroot, MaxBody: 1000}, testSetup)
			out := f.feed(tc.in)
			rs := readResponses(t, out)
			if len(rs) != len(tc.want) {
				t.Fatalf("got %d responses, want %d: %q", len(rs), len(tc.want), out)
			}
			for i, r := range rs {
				if r.status != tc.want[i] {
					t.Errorf("response %d: status %d, want %d", i, r.status, tc.want[i])
				}
				if r.header.Get("Content-Length") == "" {
					t.Errorf("response %d: no Content-Length", i)
				}
				if r.header.Get("Date") == "" || r.header.Get("Server") != "percore" {
					t.Errorf("response %d: Date %q Server %q", i, r.header.Get("Date"), r.header.Get("Server"))
				}
				if tc.bodies != nil && r.body != tc.bodies[i] {
					t.Errorf("response %d: body %q, want %q", i, r.body, tc.bodies[i])
				}
			}
			if f.c.Closing() != tc.close {
				t.Errorf("Closing() = %v, want %v", f.c.Closing(), tc.close)
			}
			if tc.close && len(rs) > 0 && !rs[len(rs)-1].close {
				t.Errorf("closing without Connection: close")
			}
			st := f.srv.Stats()
			if st.Requests != uint64(len(rs)) {
				t.Errorf("Stats.Requests = %d, want %d", st.Requests, len(rs))
			}
			bad := 0
			for i, r := range rs {
				if r.status >= 400 && tc.close && i == len(rs)-1 && r.status != 500 {
					bad++
				}
			}
			if tc.name == "handler panic" {
				bad = 0
				if st.Panics != 1 {
					t.Errorf("Stats.Panics = %d, want 1", st.Panics)
				}
			}
			if st.BadInput != uint64(bad) {
				t.Errorf("Stats.BadInput = %d, want %d", st.BadInput, bad)
			}
		})
	}
}

// TestSplitEverywhere feeds valid streams one byte at a time and split in two
// at every offset: the output must equal the one-shot output.
func TestSplitEverywhere(t *testing.T) {
	docroot := makeDocroot(t)
	streams := []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"\r\nGET /sub/a.txt?q HTTP/1.0\r\nConnection: keep-alive\r\n\r\nHEAD /style.css HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world",
		"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: v\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", // 400 at the fold
	}
	for si, s := range streams {
		want, _ := splitRun(t, docroot, s, nil)
		if want == "" {
			t.Fatalf("stream %d: no output", si)
		}
		// One byte at a time.
		cuts := make([]int, 0, len(s))
		for i := 1; i < len(s); i++ {
			cuts = append(cuts, i)
		}
		if got, _ := splitRun(t, docroot, s, cuts); got != want {
			t.Fatalf("stream %d byte by byte:\ngot  %q\nwant %q", si, got, want)
		}
		for i := 1; i < len(s); i++ {
			if got, _ := splitRun(t, docroot, s, []int{i}); got != want {
				t.Fatalf("stream %d split at %d:\ngot  %q\nwant %q", si, i, got, want)
			}
		}
	}
}

// splitRun feeds s in pieces cut at the given offsets.
func splitRun(t *testing.T, docroot, s string, cuts []int) (string, bool) {
	f := newFixture(t, Config{Docroot: docroot, MaxBody: 1000}, testSetup)
	var out strings.Builder
	prev := 0
	for _, c := range append(cuts, len(s)) {
		out.WriteString(f.feed(s[prev:c]))
		prev = c
	}
	return out.String(), f.c.Closing()
}
