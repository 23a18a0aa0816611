package httpd

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
)

// FuzzFramingVsNetHTTP is a differential check against net/http, the
// reference for framing: for every request that percore answers, in order,
// net/http (where it accepts the same bytes) must see the same method, target
// and body. A disagreement would let the two split one stream differently,
// the root of request smuggling.
func FuzzFramingVsNetHTTP(f *testing.F) {
	for _, tc := range parserCases {
		f.Add([]byte(tc.in))
	}
	type seen struct{ method, target, body string }
	var got []seen
	site, err := NewSite(Config{MaxBody: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	site.Handle("/", func(w *ResponseWriter, r *Request) {
		got = append(got, seen{string(r.Method), string(r.Target), string(r.Body)})
	})

	f.Fuzz(func(t *testing.T, data []byte) {
		data = data[:min(len(data), fuzzInputMax)]
		srv := NewServer(site, nil) // new each time, as in FuzzParser
		srv.Tick(t0)
		got = got[:0]
		c := srv.NewConn(testRemote, t0)
		for rest := data; len(rest) > 0 && !c.Closing(); {
			n := c.Feed(rest, t0)
			rest = rest[n:]
			c.Advance(c.Pending())
		}
		srv.Release(c)

		br := bufio.NewReader(bytes.NewReader(data))
		for i, want := range got {
			req, err := http.ReadRequest(br)
			if err != nil {
				return // net/http is stricter here; nothing to compare from now on
			}
			body, err := io.ReadAll(req.Body)
			if err != nil {
				return
			}
			if req.Method != want.method || req.RequestURI != want.target || string(body) != want.body {
				t.Fatalf("request %d: percore %q %q body %q; net/http %q %q body %q",
					i, want.method, want.target, want.body, req.Method, req.RequestURI, body)
			}
		}
	})
}
