package wreck

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// HTTPS load (--tls). On kernel sockets each connection is a goroutine
// running Go's crypto/tls client over its socket, so the handshakes and the
// record layer spread over the Go scheduler's threads rather than wreck's
// pinned shards. On the native stack the shards drive the connections as
// for cleartext, each handshake on a helper goroutine and the record layer
// on the shard (native_tls.go, tls_shard.go). Keep-alive mode measures requests over TLS; with
// --keepalive=false every request opens a connection and its handshake
// (full ones, or resumed from the session ticket of the connection before
// with --tls-resume): the handshake rate. Latency counts from the request's
// write in keep-alive mode and from the connect in one-shot mode, as for
// cleartext.

// TLSConfig is the client's TLS: the --tls flags.
type TLSConfig struct {
	Enabled    bool
	Insecure   bool   // do not validate the server's certificate
	CA         string // PEM file of the CAs to trust ("": the system's)
	ServerName string // sent as SNI and verified ("": the host of Server)
	Resume     bool   // resume each connection's session from the last one's ticket
	Curves     string // key exchanges to offer, comma-separated ("": crypto/tls's defaults)
}

// tlsCurves names the key exchanges --tls-curves takes.
var tlsCurves = map[string]tls.CurveID{
	"x25519": tls.X25519, "p256": tls.CurveP256, "p384": tls.CurveP384, "p521": tls.CurveP521,
	"x25519mlkem768": tls.X25519MLKEM768,
}

// bindTLSFlags binds the --tls flags to c.
func bindTLSFlags(fs *flag.FlagSet, c *TLSConfig) {
	fs.BoolVar(&c.Enabled, "tls", false, "HTTPS over TLS 1.3 or 1.2; with --keepalive=false every request is a new handshake")
	fs.BoolVar(&c.Insecure, "tls-insecure", false, "with --tls: do not validate the server's certificate")
	fs.StringVar(&c.CA, "tls-ca", "", "with --tls: trust the CAs in this PEM `file` (default: the system's)")
	fs.StringVar(&c.ServerName, "tls-server-name", "", "with --tls: the `name` to send (SNI) and verify (default: the host of --server)")
	fs.BoolVar(&c.Resume, "tls-resume", false, "with --tls --keepalive=false: resume each connection's session from the ticket of the one before (resumed handshakes)")
	fs.StringVar(&c.Curves, "tls-curves", "", "with --tls: the key exchanges to offer, in order, from x25519, p256, p384, p521, x25519mlkem768 (default: Go's, post-quantum hybrid first)")
}

// validate checks the --tls flags against the rest of the run.
func (t *TLSConfig) validate(c *Config) error {
	switch {
	case !t.Enabled && (t.Insecure || t.CA != "" || t.ServerName != "" || t.Resume || t.Curves != ""):
		return badField("TLS.Enabled", "TLS.Insecure, TLS.CA, TLS.ServerName, TLS.Resume and TLS.Curves need TLS.Enabled")
	case !t.Enabled:
		return nil
	case t.Insecure && t.CA != "":
		return badField("TLS.Insecure", "skips validation: drop TLS.CA or TLS.Insecure")
	case c.Rate > 0:
		return badField("TLS.Enabled", "runs closed loop only: drop Rate")
	case c.CheckSeq:
		return badField("TLS.Enabled", "does not check sequence numbers: drop CheckSeq")
	}
	_, err := t.curves()
	return err
}

// curves parses Curves.
func (t *TLSConfig) curves() ([]tls.CurveID, error) {
	if t.Curves == "" {
		return nil, nil
	}
	var ids []tls.CurveID
	for _, name := range strings.Split(t.Curves, ",") {
		id, ok := tlsCurves[strings.ToLower(strings.TrimSpace(name))]
		if !ok {
			return nil, badField("TLS.Curves", "unknown key exchange %q: choose from x25519, p256, p384, p521, x25519mlkem768", name)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// clientConfig is the crypto/tls configuration for server (host:port).
func (t *TLSConfig) clientConfig(server string) (*tls.Config, error) {
	conf := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		NextProtos:         []string{"http/1.1"},
		InsecureSkipVerify: t.Insecure,
		ServerName:         t.ServerName,
	}
	if conf.ServerName == "" {
		conf.ServerName, _, _ = net.SplitHostPort(server)
	}
	conf.CurvePreferences, _ = t.curves() // checked by validate
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, badField("TLS.CA", "%v", err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, badField("TLS.CA", "%q: no PEM certificate in it", t.CA)
		}
	}
	return conf, nil
}

// TLSResult is what --tls adds to a Result.
type TLSResult struct {
	Handshakes      uint64  `json:"handshakes"`
	Resumed         uint64  `json:"resumed"`
	HandshakeErrors uint64  `json:"handshake_errors"` // of errors.connect: the handshake failed (certificate, protocol, timeout)
	HandshakesPerS  float64 `json:"handshakes_per_sec"`
	Handshake       Latency `json:"handshake_us"` // connect and handshake
}

// ownTicket is a copy of conf whose one-entry session cache keeps one
// connection's ticket: when resuming (TLSConfig.Resume) each connection
// resumes its own session, as each of a real client's would.
func ownTicket(conf *tls.Config) *tls.Config {
	own := conf.Clone()
	own.ClientSessionCache = tls.NewLRUClientSessionCache(1)
	return own
}

// handshakeConf is the configuration a shard connection's handshake
// starts from: shared, or when resuming the connection's own (*own, made
// on first use and kept for its later handshakes).
func handshakeConf(shared *tls.Config, resume bool, own **tls.Config) *tls.Config {
	if !resume {
		return shared
	}
	if *own == nil {
		*own = ownTicket(shared)
	}
	return *own
}

// runTLS is Run for --tls.
func runTLS(cfg Config) (*Result, error) {
	conf, err := cfg.TLS.clientConfig(cfg.Server)
	if err != nil {
		return nil, err
	}
	req, _ := buildRequest(&cfg, false)
	r := &tlsRun{cfg: &cfg, batch: bytes.Repeat(req, cfg.Pipeline), budget: cfg.Reqs}
	if r.budget == 0 {
		r.budget = -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
	defer cancel()
	if cfg.Stop != nil {
		go func() {
			select {
			case <-cfg.Stop:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	ws := make([]*tlsWorker, cfg.Conns)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range ws {
		w := &tlsWorker{r: r, conf: conf, hist: newHist(), hs: newHist(), buf: make([]byte, readBuf)}
		w.p.maxHead = cfg.headLimit()
		if cfg.TLS.Resume {
			w.conf = ownTicket(conf)
		}
		ws[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx)
		}()
	}
	if cfg.Progress != nil {
		go r.progress(ctx, t0, ws)
	}
	wg.Wait()
	return r.result(ws, time.Since(t0)), nil
}

// tlsRun is what the connections of a --tls run share.
type tlsRun struct {
	cfg    *Config
	batch  []byte // Pipeline requests, back to back
	budget int64  // requests left to start (-1: no cap); taken atomically
}

// take claims n requests of the budget and returns how many it got.
func (r *tlsRun) take(n int) int {
	if r.cfg.Reqs == 0 {
		return n
	}
	for {
		left := atomic.LoadInt64(&r.budget)
		if left <= 0 {
			return 0
		}
		k := min(int64(n), left)
		if atomic.CompareAndSwapInt64(&r.budget, left, left-k) {
			return int(k)
		}
	}
}

// giveBack returns n requests a failed connect did not send.
func (r *tlsRun) giveBack(n int) {
	if r.cfg.Reqs != 0 {
		atomic.AddInt64(&r.budget, int64(n))
	}
}

// progress prints the responses of the last second, summed over ws.
func (r *tlsRun) progress(ctx context.Context, t0 time.Time, ws []*tlsWorker) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			var n uint64
			for _, w := range ws {
				n += w.responses.Load()
			}
			fmt.Fprintf(r.cfg.Progress, "wreck: %5.1fs %10d req/s (TLS)\n", now.Sub(t0).Seconds(), n-last)
			last = n
		}
	}
}

// tlsWorker is one connection slot of a --tls run, on its own goroutine.
type tlsWorker struct {
	r          *tlsRun
	conf       *tls.Config
	p          parser
	buf        []byte
	cnt        Counters
	hist, hs   *hdrhistogram.Histogram
	handshakes uint64
	resumed    uint64
	hsErrors   uint64
	responses  atomic.Uint64 // cnt.Responses, for the progress line: one writer, so no contention
}

// run connects, shakes hands and sends requests until the run ends.
func (w *tlsWorker) run(ctx context.Context) {
	cfg := w.r.cfg
	dialer := &net.Dialer{Timeout: cfg.Timeout}
	for ctx.Err() == nil {
		n := w.r.take(cfg.Pipeline)
		if n == 0 {
			return
		}
		start := time.Now()
		raw, err := dialer.DialContext(ctx, "tcp", cfg.Server)
		if err != nil {
			w.r.giveBack(n)
			if ctx.Err() == nil {
				w.cnt.Errors[errConnect]++
				time.Sleep(10 * time.Millisecond) // a refused connect: do not spin
			}
			continue
		}
		c := tls.Client(raw, w.conf)
		c.SetDeadline(start.Add(cfg.Timeout))
		if err := c.HandshakeContext(ctx); err != nil {
			raw.Close()
			w.r.giveBack(n)
			if ctx.Err() == nil {
				w.cnt.Errors[errConnect]++
				w.hsErrors++
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		w.cnt.Connects++
		w.handshakes++
		if c.ConnectionState().DidResume {
			w.resumed++
		}
		recordNs(w.hs, int64(time.Since(start)))
		w.p.reset()
		for {
			if cfg.KeepAlive {
				start = time.Now()
			}
			if !w.exchange(ctx, c, n, start) || !cfg.KeepAlive || ctx.Err() != nil {
				break
			}
			if n = w.r.take(cfg.Pipeline); n == 0 {
				break
			}
		}
		c.Close()
	}
}

// exchange writes n requests on c and reads their responses; false: the
// connection is done (an error, the server closing, or the run's end).
func (w *tlsWorker) exchange(ctx context.Context, c *tls.Conn, n int, start time.Time) bool {
	cfg := w.r.cfg
	c.SetDeadline(time.Now().Add(cfg.Timeout))
	if _, err := c.Write(w.r.batch[:n*len(w.r.batch)/cfg.Pipeline]); err != nil {
		w.fail(ctx, err)
		return false
	}
	have := 0 // unparsed bytes at the front of buf
	for n > 0 {
		k, err := c.Read(w.buf[have:])
		w.cnt.Bytes += uint64(k)
		have += k
		off := 0
		for n > 0 && off < have {
			m, res := w.p.feed(w.buf[off:have])
			off += m
			if res == pMore {
				break
			}
			if res != pDone {
				w.cnt.Errors[errMalformed]++
				if res == pOversized {
					w.cnt.Oversized++
				}
				return false
			}
			n--
			w.cnt.Responses++
			w.responses.Store(w.cnt.Responses)
			recordNs(w.hist, int64(time.Since(start)))
			if w.p.status < 200 || w.p.status > 299 {
				w.cnt.Errors[errNon2xx]++
			}
			if w.p.close && n == 0 {
				return false
			}
		}
		have = copy(w.buf, w.buf[off:have])
		if have == len(w.buf) {
			w.cnt.Errors[errMalformed]++ // the parser keeps no more than a header section
			return false
		}
		if err != nil && n > 0 {
			w.fail(ctx, err)
			return false
		}
	}
	return true
}

// fail counts a failed request by its cause (nothing once the run ended).
func (w *tlsWorker) fail(ctx context.Context, err error) {
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.cnt.Errors[errTimeout]++
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		w.cnt.Errors[errClosed]++
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		w.cnt.Errors[errReset]++
	default:
		w.cnt.Errors[errMalformed]++ // a TLS alert: bad records from the server
	}
}

// result merges the workers.
func (r *tlsRun) result(ws []*tlsWorker, took time.Duration) *Result {
	cfg := r.cfg
	res := &Result{Server: cfg.Server, SMP: cfg.SMP, Conns: cfg.Conns, Pipeline: cfg.Pipeline,
		KeepAlive: cfg.KeepAlive, Seconds: took.Seconds(), TLS: &TLSResult{}}
	var total Counters
	hist, hs := newHist(), newHist()
	for _, w := range ws {
		total.add(&w.cnt)
		hist.Merge(w.hist)
		hs.Merge(w.hs)
		res.TLS.Handshakes += w.handshakes
		res.TLS.Resumed += w.resumed
		res.TLS.HandshakeErrors += w.hsErrors
	}
	res.Requests, res.BytesRead, res.Connects = total.Responses, total.Bytes, total.Connects
	if res.Seconds > 0 {
		res.ReqPerSec = float64(res.Requests) / res.Seconds
		res.BytesPerSec = float64(res.BytesRead) / res.Seconds
		res.TLS.HandshakesPerS = float64(res.TLS.Handshakes) / res.Seconds
	}
	res.Errors = errorCounts(&total)
	res.Latency = latency(hist)
	res.TLS.Handshake = latency(hs)
	res.Shards = []ShardResult{{CPU: -1, Conns: cfg.Conns, Requests: res.Requests, ReqPerSec: res.ReqPerSec,
		Errors: res.Errors, Latency: res.Latency}}
	return res
}

// writeText adds the TLS lines to WriteText's.
func (t *TLSResult) writeText(w io.Writer) {
	l := t.Handshake
	fmt.Fprintf(w, "  tls: %d handshakes (%d resumed), %.2f/s, %d failed; connect+handshake us p50 %.1f p99 %.1f max %.1f\n",
		t.Handshakes, t.Resumed, t.HandshakesPerS, t.HandshakeErrors, l.P50, l.P99, l.Max)
}
