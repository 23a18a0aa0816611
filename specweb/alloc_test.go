package specweb

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"percore/httpd"
)

// TestHandlersAllocateNothing proves the dynamic GET and the ad rotation
// allocate nothing per request once the file is in the shard's cache: the
// whole path, from the request bytes through httpd to the response bytes.
func TestHandlersAllocateNothing(t *testing.T) {
	root := t.TempDir()
	if err := Generate(root, 10, 1, 20, nil); err != nil {
		t.Fatal(err)
	}
	a, err := Load(root, Config{})
	if err != nil {
		t.Fatal(err)
	}
	site, err := httpd.NewSite(httpd.Config{Docroot: root})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	site.HandleMethod("GET", DynamicPath, a.get)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	srv := httpd.NewServer(site, nil)
	srv.Tick(now)
	c := srv.NewConn(netip.MustParseAddrPort("198.18.0.2:40000"), now)
	for _, tc := range []struct{ name, req, want string }{
		{"dynamic GET", "GET " + DynamicPath + "?/file_set/dir00003/class2_4 HTTP/1.1\r\nHost: x\r\n\r\n", "<pre>\n"},
		{"ad rotation", "GET " + DynamicPath + "?/file_set/dir00003/class1_2 HTTP/1.1\r\nHost: x\r\n" +
			"Cookie: my_cookie=user_id=10001&last_ad=5\r\n\r\n", "Set-Cookie: found_cookie=Ad_id="},
	} {
		req := []byte(tc.req)
		var out strings.Builder
		serve := func() int {
			c.Feed(req, now)
			n := 0
			for _, s := range c.Output() {
				n += len(s)
				if out.Len() == 0 {
					out.Write(s) // the first response, for the check below
				}
			}
			c.Advance(n)
			return n
		}
		serve() // the file into the cache, buffers warm
		if !strings.HasPrefix(out.String(), "HTTP/1.1 200 OK") || !strings.Contains(out.String(), tc.want) {
			t.Fatalf("%s: %.300q", tc.name, out.String())
		}
		if n := testing.AllocsPerRun(200, func() { serve() }); n != 0 {
			t.Errorf("%s: %v allocations per request", tc.name, n)
		}
	}
}
