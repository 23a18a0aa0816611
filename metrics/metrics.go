// Package metrics exports the shards' counters to Prometheus. A custom
// Collector asks the shards for their reports by message (shard.Group.Stats)
// at scrape time and turns every named counter into a const metric with a
// shard label: a Prometheus gauge for a shard.Gauge, a counter for every other
// kind. Nothing on the data path knows about Prometheus and no
// counter is shared between shards. The endpoint is served by net/http on the
// kernel stack, in ordinary goroutines, never on a shard.
package metrics

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"percore/shard"
)

// Namespace prefixes every metric name.
const Namespace = "percore"

// Collector is a prometheus.Collector over shard reports. It is unchecked
// (Describe sends nothing): the set of counters depends on the stack.
type Collector struct {
	stats func() []shard.Report

	mu    sync.Mutex
	descs map[string]*prometheus.Desc
}

// NewCollector collects from stats, called once per scrape.
func NewCollector(stats func() []shard.Report) *Collector {
	return &Collector{stats: stats, descs: map[string]*prometheus.Desc{}}
}

// Describe implements prometheus.Collector; an unchecked collector sends nothing.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector: one metric per counter and shard.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	rs := c.stats()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rs {
		sh := strconv.Itoa(r.Shard)
		c.emit(ch, shard.Counter{Name: "loop.iterations", Value: r.Loop.Loops}, sh)
		c.emit(ch, shard.Counter{Name: "loop.sleeps", Value: r.Loop.Sleeps}, sh)
		c.emit(ch, shard.Counter{Name: "loop.events", Value: r.Loop.Events}, sh)
		c.emit(ch, shard.Counter{Name: "loop.timers", Value: r.Loop.Fired}, sh)
		for _, ctr := range r.Counters {
			c.emit(ch, ctr, sh)
		}
	}
}

func (c *Collector) emit(ch chan<- prometheus.Metric, ctr shard.Counter, sh string) {
	full := MetricName(ctr.Name, ctr.Kind)
	d, ok := c.descs[full]
	if !ok {
		d = prometheus.NewDesc(full, "percore per-shard "+ctr.Kind.String()+" "+ctr.Name, []string{"shard"}, nil)
		c.descs[full] = d
	}
	t := prometheus.CounterValue
	if ctr.Kind == shard.Gauge {
		t = prometheus.GaugeValue
	}
	m, err := prometheus.NewConstMetric(d, t, float64(ctr.Value), sh)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(d, err)
		return
	}
	ch <- m
}

// MetricName is the Prometheus name of a report counter of kind k:
// "tcp.retransmits" -> "percore_tcp_retransmits_total" (every kind but a
// gauge is a Prometheus counter and gets _total).
func MetricName(name string, k shard.Kind) string {
	var b strings.Builder
	b.WriteString(Namespace)
	b.WriteByte('_')
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if k != shard.Gauge {
		b.WriteString("_total")
	}
	return b.String()
}

// Server is a running metrics endpoint.
type Server struct {
	Addr netip.AddrPort // where it listens
	srv  *http.Server
	done chan struct{}
}

// Handler serves /metrics for the reports from stats, with the process's
// own metrics (CPU seconds, memory) beside them.
func Handler(stats func() []shard.Report) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(stats), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	return mux
}

// Listen serves Handler(stats) on addr (host:port; ":9180" is Seastar's
// port) over kernel TCP, in its own goroutines.
func Listen(addr string, stats func() []shard.Report) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{
		Addr: netip.MustParseAddrPort(l.Addr().String()),
		srv:  &http.Server{Handler: Handler(stats), ReadHeaderTimeout: 10 * time.Second},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return
		}
	}()
	return s, nil
}

// Close stops the endpoint and waits for its serving goroutine.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}
