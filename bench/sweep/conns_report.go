package sweep

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Markdown writes the conns sweep's tables: one per load, a row per count
// and server, and where each server stopped.
func (r *ConnsResults) Markdown(w io.Writer, svg string) {
	cfg := r.Config
	p := func(f string, a ...any) { fmt.Fprintf(w, f, a...) }
	p("## Concurrent connections\n\n")
	p("Generated %s by:\n\n    %s\n\n", r.Finished.UTC().Format("2006-01-02 15:04 UTC"), cfg.Command)
	m := r.Machine
	p("Machine: `nproc` %d, %s, Linux %s; load average before / after: %s / %s; descriptors per process (`ulimit -Hn`): %d.\n\n",
		m.NProc, m.CPU, m.Kernel, r.LoadBefore, r.LoadAfter, r.FDLimit)
	p("Method: one lab with one queue, each server on the last CPU (one shard or worker), the client on the first:\n")
	p("wreck on percore's native stack (AF_XDP and userspace TCP, so no descriptor a connection), from as many\n")
	p("addresses as the count needs (%d source ports each). It opens the connections at %.0f/s and measures\n", portsPerAddr, cfg.ConnectRate)
	p("for %v after twice the time that takes, plus 3 s (`--warmup`: connects the server shed try again). A kernel-stack server's veth end gets an XDP program that passes\n", cfg.Duration)
	p("every frame, which a veth end needs to receive what an AF_XDP socket on its peer sends. The closed loop keeps\n")
	p("one request in flight on every connection; the open loop sends %.0f requests/s in all, spread over the\n", cfg.OpenRate)
	p("connections in turn, so every connection stays open and sends one request every count/%.0f s; its latency\n", cfg.OpenRate)
	p("counts from each request's intended send time. CPU-µs/req is the whole machine's busy time (`/proc/stat`)\n")
	p("over the measured interval divided by the responses: client and server together, and whatever else ran;\n")
	p("own CPU-µs/req counts only the server's and the client's processes (user+system time, without the softirq\n")
	p("time the kernel does not charge to a task), which other work on a shared machine leaves alone. Errors count the whole\n")
	p("run, connects included; a request or connect counts as failed after the larger of 16 s (four SYNs) and three\n")
	p("times the closed loop's inherent latency at 25,000 req/s (count / 25,000 s), unless `--timeout` says otherwise.\n")
	p("Each run has a fresh server; RSS is the server's (all its processes) at its peak\n")
	p("during the run, and per connection is that less its RSS before the run, divided by the count.\n\n")
	if cfg.RT {
		p("The server and the client ran SCHED_FIFO (`--rt`: `chrt --fifo 20`), so other work on the machine waited for them.\n\n")
	}
	if svg != "" {
		p("![closed-loop requests/s per connection count](%s)\n\n", svg)
	}
	for _, load := range cfg.Loads {
		if load == LoadClosed {
			p("### Closed loop\n\n")
		} else {
			p("### Open loop, %.0f requests/s in total\n\n", cfg.OpenRate)
		}
		p("| connections | server | req/s | CPU-µs/req | own CPU-µs/req | p50 | p99 | p99.9 | errors | connect p99 | server RSS | per connection |\n")
		p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, n := range cfg.Counts {
			for _, name := range cfg.Servers {
				s, ok := r.find(ConnsKey{Server: name, Load: load, Conns: n})
				if !ok {
					continue
				}
				count := CountLabel(n)
				if s.Interval > 0 {
					count += ", each every " + secondsLabel(s.Interval)
				}
				p("| %s | %s | %s | %.2f | %.2f | %s | %s | %s | %d | %s | %s | %s |\n", count, Labels[name],
					formatNum(s.ReqPerSec), s.CPUPerReq, s.ProcCPUPerReq, usLabel(s.P50), usLabel(s.P99), usLabel(s.P999), s.Errors,
					usLabel(s.ConnectP99), bytesLabel(float64(s.PeakRSS)), bytesLabel(s.MemPerConn()))
			}
		}
		p("\n")
	}
	if len(r.Stopped) > 0 {
		p("Where a server stopped:\n\n")
		for _, k := range sortedKeys(r.Stopped) {
			name, load, _ := strings.Cut(k, " ")
			if load != "" {
				load = ", " + load + " loop"
			}
			p("- %s%s: %s\n", Labels[name], load, r.Stopped[k])
		}
		p("\n")
	}
}

func (r *ConnsResults) find(k ConnsKey) (ConnsSample, bool) {
	for _, s := range r.Samples {
		if s.ConnsKey == k {
			return s, true
		}
	}
	return ConnsSample{}, false
}

// usLabel writes a latency in µs as µs below a millisecond, else ms or s.
func usLabel(us float64) string {
	switch {
	case us <= 0:
		return "–"
	case us < 1000:
		return fmt.Sprintf("%.0f µs", us)
	case us < 1e6:
		return fmt.Sprintf("%.1f ms", us/1e3)
	}
	return fmt.Sprintf("%.2f s", us/1e6)
}

// secondsLabel writes an interval with two significant digits, or whole
// seconds from 10 s.
func secondsLabel(s float64) string {
	if s >= 10 {
		return fmt.Sprintf("%.0f s", s)
	}
	return strconv.FormatFloat(s, 'g', 2, 64) + " s"
}

// bytesLabel writes bytes as B, KiB, MiB or GiB.
func bytesLabel(b float64) string {
	switch {
	case b <= 0:
		return "–"
	case b < 1<<10:
		return fmt.Sprintf("%.0f B", b)
	case b < 1<<20:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	case b < 1<<30:
		return fmt.Sprintf("%.0f MiB", b/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", b/(1<<30))
}

// plotInput is closed-loop requests/s per count, a line per server, on a
// log₂ axis labelled with the counts.
func (r *ConnsResults) plotInput() PlotInput {
	in := PlotInput{
		Title:  fmt.Sprintf("closed loop, requests/s per connection count (veth lab, one server core, %d-CPU machine)", r.Machine.NProc),
		XLabel: "concurrent keep-alive connections", YLabel: "requests/s",
	}
	for _, n := range r.Config.Counts {
		in.XTicks = append(in.XTicks, PlotTick{Value: math.Log2(float64(n)), Label: CountLabel(n)})
	}
	for _, name := range r.Config.Servers {
		s := PlotSeries{Name: Labels[name]}
		for _, n := range r.Config.Counts {
			if v, ok := r.find(ConnsKey{Server: name, Load: LoadClosed, Conns: n}); ok {
				x := math.Log2(float64(n))
				s.Points = append(s.Points, PlotPoint{X: x, Y: v.ReqPerSec, Lo: v.ReqPerSec, Hi: v.ReqPerSec})
			}
		}
		in.Series = append(in.Series, s)
	}
	return in
}

// WriteFiles writes the JSON, the plot and the markdown tables as the
// config names them.
func (r *ConnsResults) WriteFiles(plot func(in, out string) error) error {
	cfg := r.Config
	if cfg.JSON != "" {
		if err := writeJSON(cfg.JSON, r); err != nil {
			return err
		}
	}
	svg := ""
	if cfg.SVG != "" && slices.Contains(cfg.Loads, LoadClosed) {
		in := strings.TrimSuffix(cfg.SVG, filepath.Ext(cfg.SVG)) + ".plot.json"
		if err := writeJSON(in, r.plotInput()); err != nil {
			return err
		}
		defer os.Remove(in)
		if err := plot(in, cfg.SVG); err != nil {
			return fmt.Errorf("plot %s: %w", cfg.SVG, err)
		}
		svg = cfg.SVG
		if cfg.Out != "" {
			if rel, err := filepath.Rel(filepath.Dir(cfg.Out), cfg.SVG); err == nil {
				svg = filepath.ToSlash(rel)
			}
		}
	}
	if cfg.Out == "" {
		return nil
	}
	var b strings.Builder
	r.Markdown(&b, svg)
	if err := os.MkdirAll(filepath.Dir(cfg.Out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfg.Out, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", cfg.Out, err)
	}
	return nil
}

// ParseConnsFlags reads `bench conns` flags.
func ParseConnsFlags(args []string, usage io.Writer) (ConnsConfig, error) {
	c := DefaultConnsConfig()
	fs := flag.NewFlagSet("bench conns", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	counts := ""
	for i, n := range c.Counts {
		if i > 0 {
			counts += ","
		}
		counts += CountLabel(n)
	}
	servers, loads := strings.Join(c.Servers, ","), strings.Join(c.Loads, ",")
	fs.StringVar(&counts, "counts", counts, "connection counts, e.g. 64,1K,8K,64K (K = 1024, M = 1048576; at most 1M)")
	fs.StringVar(&servers, "servers", servers, "servers to run, a subset of "+strings.Join(ConnsServers, ","))
	fs.StringVar(&loads, "loads", loads, "loads: closed (one request in flight on each connection), open (--open-rate in total)")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "each measured run, after the connections are open")
	fs.Float64Var(&c.OpenRate, "open-rate", c.OpenRate, "open loop: requests per second in total, spread over the connections")
	fs.Float64Var(&c.ConnectRate, "connect-rate", c.ConnectRate, "connects per second while the connections open")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "per request and per connect (wreck --timeout) (default: the larger of 16s and 3 x count / 25000 req/s, the closed loop's inherent latency)")
	fs.BoolVar(&c.RT, "rt", c.RT, "run the server and the client SCHED_FIFO (chrt --fifo 20), so that other work on a shared machine does not delay them")
	fs.StringVar(&c.Out, "out", c.Out, "markdown tables (empty: none)")
	fs.StringVar(&c.SVG, "svg", c.SVG, "SVG plot of closed-loop req/s per count (empty: none)")
	fs.StringVar(&c.JSON, "json", c.JSON, "raw results as JSON (empty: none)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(usage, "usage: bench conns [flags]   (as root, from the repository)")
			fs.SetOutput(usage)
			fs.PrintDefaults()
			return c, err
		}
		return c, fmt.Errorf("%v (see bench conns -h)", err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q: all options are flags (see bench conns -h)", fs.Arg(0))
	}
	c.Counts = nil
	for _, s := range splitList(counts) {
		n, err := ParseCount(s)
		if err != nil {
			return c, fmt.Errorf("--counts: %w", err)
		}
		c.Counts = append(c.Counts, n)
	}
	c.Servers, c.Loads = splitList(servers), splitList(loads)
	root, err := FindRoot()
	if err != nil {
		return c, err
	}
	c.Root = root
	c.Command = "go run ./cmd/bench conns " + strings.Join(args, " ")
	return c, c.Validate()
}

// ConnsMain is `bench conns`: 2 for bad flags, 1 when the sweep fails.
func ConnsMain(ctx context.Context, args []string, stderr io.Writer) int {
	cfg, err := ParseConnsFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench conns: %v\n", err)
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "bench conns: needs root (network namespaces, veth, XDP): run it with sudo")
		return 1
	}
	cfg.Log = stderr
	for _, p := range []*string{&cfg.Out, &cfg.SVG, &cfg.JSON} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(cfg.Root, *p)
		}
	}
	res, err := RunConns(ctx, cfg)
	if res != nil && len(res.Samples) > 0 {
		// What was measured is written even when the sweep ends early.
		if werr := res.WriteFiles(ModulePlotter(context.WithoutCancel(ctx), cfg.Root)); werr != nil {
			fmt.Fprintf(stderr, "bench conns: %v\n", werr)
			return 1
		}
		fmt.Fprintf(stderr, "bench conns: wrote %s\n", strings.Join(nonEmpty(cfg.Out, cfg.SVG, cfg.JSON), ", "))
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench conns: %v\n", err)
		return 1
	}
	return 0
}
