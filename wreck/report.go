package wreck

import (
	"encoding/json"
	"fmt"
	"io"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Result is a finished run, merged over the shards. Latencies are in
// microseconds; rates are per second of the run's wall time.
type Result struct {
	Server      string        `json:"server"`
	SMP         int           `json:"smp"`
	Conns       int           `json:"conns"`
	Pipeline    int           `json:"pipeline"`
	KeepAlive   bool          `json:"keepalive"`
	Rate        float64       `json:"rate,omitempty"`
	Warmup      float64       `json:"warmup_seconds,omitempty"` // run before the measured Seconds (connects and errors count over both)
	Seconds     float64       `json:"seconds"`
	Requests    uint64        `json:"requests"` // complete responses, any status
	ReqPerSec   float64       `json:"req_per_sec"`
	BytesRead   uint64        `json:"bytes_read"`
	BytesPerSec float64       `json:"bytes_per_sec"`
	Connects    uint64        `json:"connects"`
	Errors      ErrorCounts   `json:"errors"`
	Latency     Latency       `json:"latency_us"`
	Connect     Latency       `json:"connect_us"` // connect start (after any --connect-rate wait) to established
	ConnectRate float64       `json:"connect_rate,omitempty"`
	SendLag     *Latency      `json:"send_lag_us,omitempty"` // --rate: how late requests left against their intended time
	Shards      []ShardResult `json:"shards"`

	Specweb *SpecwebResult `json:"specweb,omitempty"` // --workload specweb99
	TLS     *TLSResult     `json:"tls,omitempty"`     // --tls
}

// ErrorCounts are errors by class.
type ErrorCounts struct {
	Non2xx    uint64 `json:"non2xx"`    // well-framed responses with a status other than 2xx
	Malformed uint64 `json:"malformed"` // invalid responses, oversized headers, unsolicited bytes
	Oversized uint64 `json:"oversized"` // of Malformed: header section over the limit
	Timeout   uint64 `json:"timeout"`   // no response within --timeout
	Reset     uint64 `json:"reset"`     // connection reset
	Closed    uint64 `json:"closed"`    // EOF before a response completed
	Connect   uint64 `json:"connect"`   // connects that failed or timed out
	Mismatch  uint64 `json:"mismatch"`  // sequence number missing or out of order
}

// Total is every error except non-2xx responses.
func (e ErrorCounts) Total() uint64 {
	return e.Malformed + e.Timeout + e.Reset + e.Closed + e.Connect + e.Mismatch
}

// Latency percentiles in microseconds.
type Latency struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// ShardResult is one shard's share.
type ShardResult struct {
	CPU       int         `json:"cpu"`
	Conns     int         `json:"conns"`
	Requests  uint64      `json:"requests"`
	ReqPerSec float64     `json:"req_per_sec"`
	Errors    ErrorCounts `json:"errors"`
	Latency   Latency     `json:"latency_us"`
}

func errorCounts(c *Counters) ErrorCounts {
	return ErrorCounts{
		Non2xx: c.Errors[errNon2xx], Malformed: c.Errors[errMalformed], Oversized: c.Oversized,
		Timeout: c.Errors[errTimeout], Reset: c.Errors[errReset], Closed: c.Errors[errClosed],
		Connect: c.Errors[errConnect], Mismatch: c.Errors[errMismatch],
	}
}

func latency(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	us := func(v int64) float64 { return float64(v) / 1e3 }
	return Latency{
		Mean: h.Mean() / 1e3,
		P50:  us(h.ValueAtQuantile(50)),
		P90:  us(h.ValueAtQuantile(90)),
		P99:  us(h.ValueAtQuantile(99)),
		P999: us(h.ValueAtQuantile(99.9)),
		Max:  us(h.Max()),
	}
}

// result merges the shards after they have stopped.
func (r *run) result() *Result {
	cfg := r.cfg
	res := &Result{
		Server: cfg.Server, SMP: cfg.SMP, Conns: cfg.Conns, Pipeline: cfg.Pipeline,
		KeepAlive: cfg.KeepAlive, Rate: cfg.Rate, ConnectRate: cfg.ConnectRate, Warmup: cfg.Warmup.Seconds(),
	}
	var total Counters
	hist, conn := newHist(), newHist()
	var lag *hdrhistogram.Histogram
	if cfg.Rate > 0 {
		lag = newHist()
	}
	start, stopped := r.accts[0].measuredFrom(), int64(0)
	for i, s := range r.accts {
		total.add(&s.cnt)
		hist.Merge(s.hist)
		conn.Merge(s.conn)
		if lag != nil {
			lag.Merge(s.lag)
		}
		start, stopped = min(start, s.measuredFrom()), max(stopped, s.stopped)
		secs := float64(s.stopped-s.measuredFrom()) / 1e9
		sr := ShardResult{
			CPU: r.cpus[i], Conns: s.slots, Requests: s.cnt.Responses,
			Errors: errorCounts(&s.cnt), Latency: latency(s.hist),
		}
		if secs > 0 {
			sr.ReqPerSec = float64(s.cnt.Responses) / secs
		}
		res.Shards = append(res.Shards, sr)
	}
	res.Seconds = float64(stopped-start) / 1e9
	res.Requests, res.BytesRead, res.Connects = total.Responses, total.Bytes, total.Connects
	if res.Seconds > 0 {
		res.ReqPerSec = float64(res.Requests) / res.Seconds
		res.BytesPerSec = float64(res.BytesRead) / res.Seconds
	}
	res.Errors = errorCounts(&total)
	res.Latency = latency(hist)
	res.Connect = latency(conn)
	if cfg.TLS.Enabled { // native: a connect is counted once its handshake is done
		res.TLS = &TLSResult{Handshake: res.Connect}
		for _, s := range r.accts {
			res.TLS.Handshakes += s.tls.handshakes
			res.TLS.Resumed += s.tls.resumed
			res.TLS.HandshakeErrors += s.tls.failed
		}
		if res.Seconds > 0 {
			res.TLS.HandshakesPerS = float64(res.TLS.Handshakes) / res.Seconds
		}
	}
	if lag != nil {
		l := latency(lag)
		res.SendLag = &l
	}
	return res
}

// WriteJSON writes r as one JSON document.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes r for people, in the manner of wrk.
func (r *Result) WriteText(w io.Writer) error {
	mode := "keep-alive"
	if !r.KeepAlive {
		mode = "one connection per request"
	}
	loop := "closed loop"
	if r.Specweb != nil {
		mode, loop = "paced users", fmt.Sprintf("SPECweb99 mix, counted after a %.1fs warm-up", r.Specweb.WarmupSeconds)
	}
	if r.Rate > 0 {
		loop = fmt.Sprintf("open loop at %.0f req/s", r.Rate)
	}
	if r.Warmup > 0 && r.Specweb == nil {
		loop += fmt.Sprintf(", measured after a %.1fs warm-up", r.Warmup)
	}
	fmt.Fprintf(w, "wreck %s: %d shards, %d connections, pipeline %d, %s, %s, %.2fs\n",
		r.Server, r.SMP, r.Conns, r.Pipeline, mode, loop, r.Seconds)
	l := r.Latency
	fmt.Fprintf(w, "  latency us  mean %.1f  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n",
		l.Mean, l.P50, l.P90, l.P99, l.P999, l.Max)
	c := r.Connect
	fmt.Fprintf(w, "  connect us  p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f", c.P50, c.P99, c.P999, c.Max)
	if r.ConnectRate > 0 {
		fmt.Fprintf(w, "  (paced at %.0f/s)", r.ConnectRate)
	}
	fmt.Fprintln(w)
	if r.SendLag != nil {
		l := r.SendLag
		fmt.Fprintf(w, "  send lag us  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  (sent after the intended time: the client's own delay, inside latency)\n",
			l.P50, l.P90, l.P99, l.Max)
	}
	for i, s := range r.Shards {
		fmt.Fprintf(w, "  shard %d (cpu %d, %d conns): %d requests, %.0f req/s, %d errors\n",
			i, s.CPU, s.Conns, s.Requests, s.ReqPerSec, s.Errors.Total())
	}
	fmt.Fprintf(w, "  %d requests in %.2fs, %.2f MB read, %d connects\n",
		r.Requests, r.Seconds, float64(r.BytesRead)/1e6, r.Connects)
	e := r.Errors
	fmt.Fprintf(w, "  errors: non2xx %d, malformed %d (oversized %d), timeout %d, reset %d, closed %d, connect %d, mismatch %d\n",
		e.Non2xx, e.Malformed, e.Oversized, e.Timeout, e.Reset, e.Closed, e.Connect, e.Mismatch)
	if r.Specweb != nil {
		r.Specweb.writeText(w)
	}
	if r.TLS != nil {
		r.TLS.writeText(w)
	}
	fmt.Fprintf(w, "Requests/sec: %.2f\n", r.ReqPerSec)
	_, err := fmt.Fprintf(w, "Transfer/sec: %.2f MB\n", r.BytesPerSec/1e6)
	return err
}
