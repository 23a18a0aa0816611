package percore_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"percore/internal/testutil"
	"strings"
	"testing"

	"percore"
)

func start(t *testing.T, s *percore.Server) string {
	t.Helper()
	o := percore.DefaultOptions()
	o.Port, o.SMP, o.StatsInterval = 0, 1, 0
	if err := s.Start(o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(); <-s.Done() })
	return "http://" + s.Addr().String()
}

// Routes, methods, headers, body and status, through the public API over
// real connections.
func TestServerRoutes(t *testing.T) {
	s := percore.New()
	s.HandleMethod("GET", "/items", func(w *percore.ResponseWriter, r *percore.Request) {
		w.Header("X-Query", string(r.Query))
		w.WriteString("list")
	})
	s.HandleMethod("POST", "/items", func(w *percore.ResponseWriter, r *percore.Request) {
		w.WriteHeader(201)
		w.Header("Location", "/items/1")
		fmt.Fprintf(w, "%s:%s", r.Header("x-user"), r.Body)
	})
	s.Handle("/files/", func(w *percore.ResponseWriter, r *percore.Request) { w.Write(r.Path) })
	base := start(t, s)
	for _, tc := range []struct {
		method, path, body, user string
		status                   int
		want, header, value      string
	}{
		{"GET", "/items?page=2", "", "", 200, "list", "X-Query", "page=2"},
		{"POST", "/items", "thing", "ann", 201, "ann:thing", "Location", "/items/1"},
		{"DELETE", "/items", "", "", 405, "405 Method Not Allowed\n", "Allow", "GET, HEAD, POST"},
		{"PUT", "/files/a/b%20c", "", "", 200, "/files/a/b c", "", ""},
		{"GET", "/", "", "", 200, "hello", "", ""},
		{"GET", "/nope", "", "", 404, "404 Not Found\n", "", ""},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		if tc.user != "" {
			req.Header.Set("X-User", tc.user)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || string(b) != tc.want || (tc.header != "" && resp.Header.Get(tc.header) != tc.value) {
			t.Errorf("%s %s: %d %q %s=%q", tc.method, tc.path, resp.StatusCode, b, tc.header, resp.Header.Get(tc.header))
		}
	}
	if n := percore.Merge(s.Stats()).Get("http.requests"); n != 6 {
		t.Errorf("http.requests %d, want 6", n)
	}
}

// A simple handler allocates nothing per request: AllocsPerRun counts the
// whole process, the shard serving the requests included.
func TestSimpleHandlerNoAllocs(t *testing.T) {
	s := percore.New()
	s.HandleMethod("GET", "/hi", func(w *percore.ResponseWriter, r *percore.Request) {
		w.Header("Content-Type", "text/plain")
		w.Write(r.Query)
		w.WriteString(" hi\n")
	})
	start(t, s)
	allocs, first := testutil.ServeAllocs(t, s.Addr(), []byte("GET /hi?x HTTP/1.1\r\nHost: x\r\n\r\n"))
	if !bytes.HasSuffix(first, []byte("\r\n\r\nx hi\n")) {
		t.Fatalf("first response %q", first)
	}
	if allocs != 0 {
		t.Fatalf("%.2f allocations per request", allocs)
	}
}

func TestBadRoutePanics(t *testing.T) {
	h := func(*percore.ResponseWriter, *percore.Request) {}
	for name, reg := range map[string]func(*percore.Server){
		"no slash":   func(s *percore.Server) { s.Handle("x", h) },
		"nil":        func(s *percore.Server) { s.Handle("/x", nil) },
		"bad method": func(s *percore.Server) { s.HandleMethod("G T", "/x", h) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			reg(percore.New())
		}()
	}
}

func TestParseFlags(t *testing.T) {
	o, err := percore.ParseFlags([]string{"--port", "8080", "--smp", "2"})
	if err != nil || o.Port != 8080 || o.SMP != 2 || o.NetworkStack != "posix" {
		t.Fatalf("%+v %v", o, err)
	}
	if _, err := percore.ParseFlags([]string{"--port", "x"}); err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("bad port: %v", err)
	}
}

// A server that never started answers its control calls without panicking,
// and a second Start is refused.
func TestServerLifecycle(t *testing.T) {
	s := percore.New()
	s.Stop()
	<-s.Done()
	if s.Addr().IsValid() || s.Stats() != nil {
		t.Fatal("unstarted server has an address or stats")
	}
	start(t, s)
	if err := s.Start(percore.DefaultOptions()); err == nil {
		t.Fatal("second Start accepted")
	}
}
