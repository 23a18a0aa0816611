package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"percore"
)

// Any method on any path comes back 200 with the body it sent.
func TestEcho(t *testing.T) {
	s := newServer()
	o := percore.DefaultOptions()
	o.Port, o.SMP, o.StatsInterval = 0, 1, 0
	if err := s.Start(o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(); <-s.Done() })
	base := "http://" + s.Addr().String()
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/anything", "ping"},
		{"PUT", "/a/b/c?x=1", strings.Repeat("x", 100<<10)},
		{"DELETE", "/", ""},
		{"GET", "/", ""},
		{"PATCH", "/p", `{"k":1}`},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "text/x-test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(got) != tc.body || resp.Header.Get("Content-Type") != "text/x-test" {
			t.Errorf("%s %s: %d %q (%d bytes) %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), len(got), got[:min(len(got), 40)])
		}
	}
}
