package specweb

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"percore/httpd"
	"percore/specweb/cgiprog"
	"percore/specweb/fileset"
)

// TestMain lets the test binary be the CGI program: run with the argument
// "cgi" it serves one request from its environment.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "cgi" {
		if err := cgiprog.Serve(os.Getenv, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cgiServer serves root's application on one httpd.Server without a FileIO,
// so the CGI program runs inline, and returns a function that answers one
// request.
func cgiServer(t *testing.T, root string, program []string) func(target string) (int, string) {
	t.Helper()
	a, err := Load(root, Config{CGI: program})
	if err != nil {
		t.Fatal(err)
	}
	site, err := httpd.NewSite(httpd.Config{Docroot: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	site.Handle(CGIPath, a.cgi)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	srv := httpd.NewServer(site, nil)
	srv.Tick(now)
	return func(target string) (int, string) {
		c := srv.NewConn(netip.MustParseAddrPort("198.18.0.2:40000"), now)
		defer srv.Release(c)
		c.Feed([]byte("GET "+target+" HTTP/1.1\r\nHost: x\r\n\r\n"), now)
		var out bytes.Buffer
		for _, s := range c.Output() {
			out.Write(s)
		}
		resp, err := http.ReadResponse(bufio.NewReader(&out), nil)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
}

// TestCGIRunsAProgram: the CGI-style GET is answered by a separate process
// with the standard dynamic GET's page; bad queries and a program that
// cannot run get clear errors.
func TestCGIRunsAProgram(t *testing.T) {
	root := t.TempDir()
	if err := Generate(root, 10, 1, 20, nil); err != nil {
		t.Fatal(err)
	}
	get := cgiServer(t, root, []string{os.Args[0], "cgi"})
	query := "/file_set/dir00003/class1_2"
	code, body := get(CGIPath + "?" + query)
	want := string(fileset.AppendPagePrefix(nil, "198.18.0.2", CGIPath, query)) +
		string(AppendFile(nil, 3, 1, 2)) + fileset.PageSuffix
	if code != 200 || body != want {
		t.Fatalf("CGI GET: %d %.200q", code, body)
	}
	if code, body := get(CGIPath + "?/file_set/dir00010/class1_2"); code != 404 { // 10 directories
		t.Errorf("a directory past the set: %d %q", code, body)
	}

	get = cgiServer(t, root, []string{"/nonexistent/specweb-cgi"})
	if code, body := get(CGIPath + "?" + query); code != 502 || !strings.Contains(body, "CGI program failed") {
		t.Errorf("a program that cannot run: %d %q", code, body)
	}
	get = cgiServer(t, root, nil)
	if code, _ := get(CGIPath + "?" + query); code != 501 {
		t.Errorf("no program: %d", code)
	}
}

// TestCGIAnswer: the program's header fields become the response's.
func TestCGIAnswer(t *testing.T) {
	for _, tc := range []struct {
		out  string
		code int
		body string
	}{
		{"Content-Type: text/plain\n\nhi", 200, "hi"},
		{"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nno", 404, "no"},
		{"Status: 99\r\n\r\n", 502, ""},
		{"Status:\r\n\r\n", 502, ""},
		{"no header at all", 502, ""},
		{"bad line\n\nx", 502, ""},
	} {
		site, err := httpd.NewSite(httpd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		a := &App{}
		j := &cgiJob{out: limitedBuffer{[]byte(tc.out)}}
		site.Handle("/x", func(w *httpd.ResponseWriter, r *httpd.Request) { a.cgiAnswer(w, j) })
		now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		srv := httpd.NewServer(site, nil)
		srv.Tick(now)
		c := srv.NewConn(netip.MustParseAddrPort("198.18.0.2:40000"), now)
		c.Feed([]byte("GET /x HTTP/1.1\r\nHost: x\r\n\r\n"), now)
		var out bytes.Buffer
		for _, s := range c.Output() {
			out.Write(s)
		}
		resp, err := http.ReadResponse(bufio.NewReader(&out), nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.out, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tc.code || tc.code == 200 && string(body) != tc.body {
			t.Errorf("%q: %d %q, want %d %q", tc.out, resp.StatusCode, body, tc.code, tc.body)
		}
		site.Close()
	}
}

// BenchmarkCGIRun is one CGI-style GET's process: fork, exec, the program
// reading a class 1 file, its output back.
func BenchmarkCGIRun(b *testing.B) {
	root := b.TempDir()
	if err := Generate(root, 10, 1, 20, nil); err != nil {
		b.Fatal(err)
	}
	env := []string{"DOCUMENT_ROOT=" + root, "QUERY_STRING=/file_set/dir00003/class1_2", "SCRIPT_NAME=" + CGIPath}
	for b.Loop() {
		j := &cgiJob{argv: []string{os.Args[0], "cgi"}, env: env}
		j.Run()
		if j.err != nil {
			b.Fatal(j.err)
		}
	}
}
