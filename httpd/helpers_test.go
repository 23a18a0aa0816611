package httpd

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"percore/internal/testutil"
)

// t0 is the fake clock's start: tests never read the real clock.
var t0 = time.Date(2026, 11, 30, 22, 7, 7, 0, time.UTC)

var testRemote = netip.MustParseAddrPort("198.18.0.2:40000")

// fixture is a Server with one connection, driven by a fake clock.
type fixture struct {
	t    *testing.T
	site *Site
	srv  *Server
	c    *Conn
	now  time.Time
	log  bytes.Buffer
}

func newFixture(t *testing.T, cfg Config, setup func(*Site)) *fixture {
	t.Helper()
	site, err := NewSite(cfg)
	if err != nil {
		t.Fatalf("NewSite: %v", err)
	}
	if setup != nil {
		setup(site)
	}
	f := &fixture{t: t, site: site, now: t0}
	f.srv = NewServer(site, &f.log)
	f.srv.Tick(f.now)
	f.c = f.srv.NewConn(testRemote, f.now)
	return f
}

// feed gives the connection all of p (draining output as needed) and returns
// the output produced, advancing it.
func (f *fixture) feed(p string) string {
	f.t.Helper()
	var out bytes.Buffer
	b := []byte(p)
	for {
		n := f.c.Feed(b, f.now)
		b = b[n:]
		got := f.drain()
		out.WriteString(got)
		if len(b) == 0 || f.c.Closing() {
			break
		}
		if n == 0 && got == "" {
			f.t.Fatalf("Feed stalled with %d bytes left", len(b))
		}
	}
	return out.String()
}

// drain returns and advances all pending output.
func (f *fixture) drain() string {
	var out bytes.Buffer
	for {
		o := f.c.Output()
		if len(o) == 0 {
			return out.String()
		}
		n := 0
		for _, s := range o {
			out.Write(s)
			n += len(s)
		}
		f.c.Advance(n)
	}
}

// parsedResp is one response read back with net/http.
type parsedResp struct {
	status int
	close  bool // Connection: close (net/http removes it from header)
	header http.Header
	body   string
}

// readResponses parses a response stream; heads lists which requests were HEAD.
func readResponses(t *testing.T, stream string, heads ...bool) []parsedResp {
	t.Helper()
	br := bufio.NewReader(strings.NewReader(stream))
	var rs []parsedResp
	for i := 0; ; i++ {
		if _, err := br.Peek(1); err == io.EOF {
			return rs
		}
		method := "GET"
		if i < len(heads) && heads[i] {
			method = "HEAD"
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("response %d: %v\nstream: %q", i, err, stream)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("response %d body: %v", i, err)
		}
		rs = append(rs, parsedResp{resp.StatusCode, resp.Close, resp.Header, string(body)})
	}
}

// makeDocroot writes a small docroot and returns its path.
func makeDocroot(t testing.TB) string {
	t.Helper()
	files := map[string]string{
		"index.html":        "<h1>root</h1>\n",
		"style.css":         "body{}\n",
		"hello.txt":         "hello file\n",
		"data.bin":          "\x00\x01\x02",
		"sub/index.html":    "<h1>sub</h1>\n",
		"sub/a.txt":         "a\n",
		"sp ace/index.html": "space\n",
		"big.txt":           strings.Repeat("0123456789abcdef", 300<<10/16), // 300 KiB
		".env":              "SECRET=1\n",
		".git/config":       "[core]\n",
		"sub/.hidden":       "hidden\n",
	}
	tree := map[string][]byte{}
	for name, body := range files {
		tree[name] = []byte(body)
	}
	dir := testutil.WriteTree(t, tree)
	for name := range files {
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(name)), t0.Add(-time.Hour), t0.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	// A link to a file outside the docroot must never be served.
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// testSite has the docroot above plus dynamic routes: /echo returns the
// request body, /api/ (prefix) returns the path, /panic panics.
func testSetup(s *Site) {
	s.Handle("/echo", func(w *ResponseWriter, r *Request) {
		w.Header("Content-Type", "application/octet-stream")
		w.Write(r.Body)
	})
	s.Handle("/api/", func(w *ResponseWriter, r *Request) {
		w.WriteString("api:")
		w.Write(r.Path)
	})
	s.Handle("/status", func(w *ResponseWriter, r *Request) {
		w.WriteHeader(201)
		w.Header("X-Method", string(r.Method)) // allocates; tests only
		w.WriteString("created")
	})
	s.Handle("/panic", func(w *ResponseWriter, r *Request) { panic("handler bug") })
}

func newTestFixture(t *testing.T) *fixture {
	return newFixture(t, Config{Docroot: makeDocroot(t), MaxBody: 1000}, testSetup)
}
