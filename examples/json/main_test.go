package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"percore"
)

func TestJSONAPI(t *testing.T) {
	a := &api{}
	a.publish("0.50 0.40 0.30")
	s := newServer(a)
	o := percore.DefaultOptions()
	o.Port, o.SMP, o.StatsInterval = 0, 1, 0
	if err := s.Start(o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(); <-s.Done() })
	base := "http://" + s.Addr().String()

	var st status
	getJSON(t, "GET", base+"/api/status", "", 200, &st)
	if st.Load != "0.50 0.40 0.30" || st.Updated.IsZero() {
		t.Fatalf("status %+v", st)
	}
	a.publish("1.00 2.00 3.00") // what a refresh does: handlers see it next
	getJSON(t, "GET", base+"/api/status", "", 200, &st)
	if st.Load != "1.00 2.00 3.00" {
		t.Fatalf("status after publish %+v", st)
	}

	var sum map[string]float64
	getJSON(t, "POST", base+"/api/sum", `{"numbers":[1,2,3.5]}`, 200, &sum)
	if sum["sum"] != 6.5 {
		t.Fatalf("sum %v", sum)
	}
	var bad map[string]string
	getJSON(t, "POST", base+"/api/sum", `{"numbers":[1,`, 400, &bad)
	if bad["error"] == "" {
		t.Fatalf("bad body answer %v", bad)
	}
	// The wrong method is refused with the allowed one.
	resp, err := http.Post(base+"/api/status", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST /api/status: %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func getJSON(t *testing.T, method, url, body string, status int, v any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%s %s: %d %q %s", method, url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s %s: %v in %s", method, url, err, b)
	}
}

func TestRefreshStops(t *testing.T) {
	a := &api{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { a.refresh(0, stop); close(done) }()
	for a.latest.Load() == nil {
		// the first snapshot is published at once
	}
	close(stop)
	<-done
	if a.latest.Load().Load == "" {
		t.Fatal("empty load")
	}
}
