package metrics

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"percore/shard"
)

func reports() []shard.Report {
	return []shard.Report{
		{Shard: 0, Loop: shard.LoopStats{Loops: 10}, Counters: []shard.Counter{
			{Name: "http.requests", Value: 7}, {Name: "native.open", Kind: shard.Gauge, Value: 2},
			{Name: "tcp.retransmits", Value: 1}, {Name: "xsk.rx_ring_full", Kind: shard.Drop, Value: 4}}},
		{Shard: 1, Loop: shard.LoopStats{Loops: 20}, Counters: []shard.Counter{
			{Name: "http.requests", Value: 5}, {Name: "native.open", Kind: shard.Gauge, Value: 0},
			{Name: "tcp.retransmits", Value: 3}, {Name: "xsk.rx_ring_full", Kind: shard.Drop, Value: 0}}},
	}
}

func TestCollector(t *testing.T) {
	c := NewCollector(reports)
	want := `
# HELP percore_http_requests_total percore per-shard count http.requests
# TYPE percore_http_requests_total counter
percore_http_requests_total{shard="0"} 7
percore_http_requests_total{shard="1"} 5
# HELP percore_native_open percore per-shard gauge native.open
# TYPE percore_native_open gauge
percore_native_open{shard="0"} 2
percore_native_open{shard="1"} 0
# HELP percore_tcp_retransmits_total percore per-shard count tcp.retransmits
# TYPE percore_tcp_retransmits_total counter
percore_tcp_retransmits_total{shard="0"} 1
percore_tcp_retransmits_total{shard="1"} 3
# HELP percore_xsk_rx_ring_full_total percore per-shard drop xsk.rx_ring_full
# TYPE percore_xsk_rx_ring_full_total counter
percore_xsk_rx_ring_full_total{shard="0"} 4
percore_xsk_rx_ring_full_total{shard="1"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"percore_http_requests_total", "percore_native_open", "percore_tcp_retransmits_total", "percore_xsk_rx_ring_full_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "percore_loop_iterations_total"); n != 2 {
		t.Fatalf("%d loop metrics, want one per shard", n)
	}
	// A registry checks names, types and label consistency on every scrape.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

func TestMetricName(t *testing.T) {
	for _, c := range []struct {
		name string
		kind shard.Kind
		want string
	}{
		{"tcp.retransmits", shard.Count, "percore_tcp_retransmits_total"},
		{"xsk.rx_ring_full", shard.Drop, "percore_xsk_rx_ring_full_total"},
		{"xsk.kick_errors", shard.Error, "percore_xsk_kick_errors_total"},
		{"http.responses_2xx", shard.Count, "percore_http_responses_2xx_total"},
		{"odd-name/x", shard.Count, "percore_odd_name_x_total"},
		{"posix.open", shard.Gauge, "percore_posix_open"},
		{"xsk.free_frames", shard.Gauge, "percore_xsk_free_frames"},
	} {
		if got := MetricName(c.name, c.kind); got != c.want {
			t.Errorf("MetricName(%q, %v) = %q, want %q", c.name, c.kind, got, c.want)
		}
	}
}

func TestListen(t *testing.T) {
	s, err := Listen("127.0.0.1:0", reports)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `percore_http_requests_total{shard="1"} 5`) ||
		!strings.Contains(string(b), "process_cpu_seconds_total") {
		t.Fatalf("status %d:\n%s", resp.StatusCode, b)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + s.Addr.String() + "/metrics"); err == nil {
		t.Fatalf("endpoint still serves after Close")
	}
}
