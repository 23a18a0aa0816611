package server

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestPrometheusPosix checks the Prometheus endpoint on the posix stack:
// per-shard counters collected at scrape time, and the endpoint gone after
// the server stops.
func TestPrometheusPosix(t *testing.T) {
	ts := startTestServer(t, func(o *Options) { o.PrometheusAddr = "127.0.0.1:0" })
	c := &http.Client{Timeout: 10 * time.Second}
	for i := 0; i < 3; i++ {
		resp, err := c.Get(ts.base + "/")
		must(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	m := scrape(t, ts.Metrics.String())
	var reqs float64
	for i := range ts.CPUs {
		v, ok := m[fmt.Sprintf(`percore_http_requests_total{shard="%d"}`, i)]
		if !ok {
			t.Fatalf("no http requests metric for shard %d", i)
		}
		reqs += v
		if _, ok := m[fmt.Sprintf(`percore_posix_open{shard="%d"}`, i)]; !ok {
			t.Fatalf("no open-connections gauge for shard %d", i)
		}
	}
	if reqs != 3 {
		t.Fatalf("requests over the shards %v, want 3", reqs)
	}
	ts.Stop()
	<-ts.Done()
	if _, err := c.Get("http://" + ts.Metrics.String() + "/metrics"); err == nil {
		t.Fatalf("metrics endpoint still up after stop")
	}
}
