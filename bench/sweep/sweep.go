package sweep

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Key names one cell of the sweep.
type Key struct {
	Server   string `json:"server"`
	Client   string `json:"client"`
	Pipeline int    `json:"pipeline"`
	SMP      int    `json:"smp"`
}

// Point is every round's sample of one cell.
type Point struct {
	Key
	Samples []Sample `json:"samples"`
}

// Results is a finished sweep.
type Results struct {
	Machine        Machine           `json:"machine"`
	Target         string            `json:"target"` // the lab or NIC of the last shard count
	Started        time.Time         `json:"started"`
	Finished       time.Time         `json:"finished"`
	LoadBefore     string            `json:"load_before"`
	LoadAfter      string            `json:"load_after"`
	Points         []*Point          `json:"points"`
	Skipped        map[string]string `json:"skipped"`         // server -> why it did not run
	SkippedClients map[string]string `json:"skipped_clients"` // client -> why it did not run
	XDPBind        map[int][]string  `json:"xdp_bind"`        // shard count -> the native stack's bind line of every queue
	Config         *Config           `json:"config"`
}

// hasClient reports whether client has any sample at all.
func (r *Results) hasClient(client string) bool {
	for _, p := range r.Points {
		if p.Client == client {
			return true
		}
	}
	return false
}

func (r *Results) point(k Key) *Point {
	for _, p := range r.Points {
		if p.Key == k {
			return p
		}
	}
	p := &Point{Key: k}
	r.Points = append(r.Points, p)
	return p
}

// Run sweeps: for each shard count a fresh target; for each round, each
// server (started, probed, warmed up), each pipeline depth and each client,
// one measured run. A server that cannot start is skipped for the rest of
// the sweep with its reason; a client run that fails ends the sweep. Every
// process and namespace it made is gone when Run returns, whatever the
// outcome, including cancellation of ctx (SIGINT/SIGTERM in cmd/bench).
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logf := logger(cfg.Log)
	dir, err := os.MkdirTemp("", "percore-sweep-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	needPeers := slices.Contains(cfg.Servers, "fasthttp") || slices.Contains(cfg.Servers, "gnet")
	logf("building httpd, wreck%s", map[bool]string{true: " and bench/peers", false: ""}[needPeers])
	bins, err := build(ctx, cfg.Root, dir, needPeers)
	if err != nil {
		return nil, err
	}
	res := &Results{Machine: ReadMachine(), Started: time.Now(), LoadBefore: loadAvg(), Skipped: map[string]string{}, SkippedClients: map[string]string{}, XDPBind: map[int][]string{}, Config: &cfg}
	if bins.peersErr != nil {
		for _, s := range []string{"fasthttp", "gnet"} {
			if slices.Contains(cfg.Servers, s) {
				res.Skipped[s] = firstLine(bins.peersErr.Error())
				logf("skip %s: %v", s, bins.peersErr)
			}
		}
	}
	for _, smp := range cfg.SMPs {
		if err := sweepSMP(ctx, &cfg, bins, dir, smp, res, logf); err != nil {
			return res, err
		}
	}
	res.Finished, res.LoadAfter = time.Now(), loadAvg()
	return res, nil
}

func sweepSMP(ctx context.Context, cfg *Config, bins *binaries, dir string, smp int, res *Results, logf func(string, ...any)) (err error) {
	var t *target
	if cfg.Iface != "" {
		t, err = newIfaceTarget(cfg, smp)
	} else {
		t, err = newLabTarget(smp)
	}
	if err != nil {
		return err
	}
	defer func() {
		if cerr := t.close(); cerr != nil && err == nil {
			err = fmt.Errorf("remove lab: %w", cerr)
		}
	}()
	res.Target = t.describe
	logf("smp %d: %s; server CPUs %v, client CPUs %v", smp, t.describe, t.serverCPUs, t.clientCPUs)
	for round := 1; round <= cfg.Rounds; round++ {
		for _, name := range cfg.Servers {
			if _, skip := res.Skipped[name]; skip {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := roundServer(ctx, cfg, bins, dir, t, smp, round, name, res, logf); err != nil {
				return err
			}
		}
	}
	return nil
}

func roundServer(ctx context.Context, cfg *Config, bins *binaries, dir string, t *target, smp, round int, name string, res *Results, logf func(string, ...any)) error {
	port := serverPort(name)
	argv, err := serverArgv(name, cfg, bins, t, smp, port, dir)
	if err == nil {
		var p *proc
		if p, err = startProc(Labels[name], argv, nil); err == nil {
			defer p.stop(3 * time.Second)
			if err = t.ready(ctx, p, port, 10*time.Second); err == nil {
				if cfg.IRQAffinity && t.lab == nil {
					if err := repin(cfg, t, smp, name, logf); err != nil {
						return err
					}
				}
				if name == "native" {
					res.XDPBind[smp] = bindLines(p.logs.String())
				}
				return measureServer(ctx, cfg, bins, t, smp, round, name, port, p, res, logf)
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	res.Skipped[name] = firstLine(err.Error())
	logf("skip %s from smp %d on: %v", Labels[name], smp, err)
	return nil
}

// repin points the queue interrupts at the shards' CPUs again once a
// server has started: i40e resets its rings, and their interrupts' affinity,
// on every XDP attach and detach.
func repin(cfg *Config, t *target, smp int, name string, logf func(string, ...any)) error {
	moved, err := pinQueueIRQs(cfg.Iface, t.serverCPUs)
	if len(moved) > 0 {
		logf("smp %d: %d queue interrupts of %s lost their CPU as %s started: pinned again", smp, len(moved), cfg.Iface, Labels[name])
	}
	return err
}

func measureServer(ctx context.Context, cfg *Config, bins *binaries, t *target, smp, round int, name string, port int, p *proc, res *Results, logf func(string, ...any)) error {
	if cfg.Warmup > 0 {
		w := max(cfg.Warmup, time.Second)
		argv := clientArgv("wreck", cfg, bins, t, port, cfg.Pipeline[0], w.Truncate(time.Second))
		wctx, cancel := runCtx(ctx, w)
		_, err := runClient(wctx, argv)
		cancel()
		if err != nil {
			return fmt.Errorf("warm up %s: %w (server: %s)", Labels[name], err, p.tail())
		}
	}
	for _, pl := range cfg.Pipeline {
		for _, client := range cfg.Clients {
			if _, skip := res.SkippedClients[client]; skip {
				continue
			}
			if client == "wreck-native" && name != "native" {
				continue // native client, native server: see nativeOnlyClient
			}
			argv := clientArgv(client, cfg, bins, t, port, pl, cfg.Duration)
			mctx, cancel := runCtx(ctx, cfg.Duration)
			s, err := measure(mctx, client, argv)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if client == "wreck-native" && !res.hasClient(client) {
					// Its own preconditions (XDP on the client end) failed
					// before it ever ran: skip the client, not the sweep.
					res.SkippedClients[client] = firstLine(err.Error())
					logf("skip client %s: %v", client, err)
					continue
				}
				return fmt.Errorf("smp %d round %d %s <- %s pipeline %d: %w (server: %s)", smp, round, Labels[name], client, pl, err, p.tail())
			}
			if p.exited() {
				return fmt.Errorf("smp %d round %d: %s exited during the run: %s", smp, round, Labels[name], p.tail())
			}
			k := Key{Server: name, Client: client, Pipeline: pl, SMP: smp}
			pt := res.point(k)
			pt.Samples = append(pt.Samples, s)
			logf("smp %d round %d %-14s <- %-5s pipeline %2d: %9.0f req/s %7.2f CPU-µs/req p99 %8.0f µs, %d errors",
				smp, round, Labels[name], client, pl, s.ReqPerSec, s.CPUPerReq, s.P99, s.Errors)
		}
	}
	return nil
}

// logger is the sweeps' progress log: "bench: " lines on w (nil: none).
func logger(w io.Writer) func(string, ...any) {
	if w == nil {
		w = io.Discard
	}
	return func(f string, a ...any) { fmt.Fprintf(w, "bench: "+f+"\n", a...) }
}

// runCtx bounds one client run: its duration plus time to connect and report.
func runCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d+30*time.Second)
}

// measure runs one client and charges it the machine's busy CPU time.
func measure(ctx context.Context, client string, argv []string) (Sample, error) {
	s0, err := readProcStat()
	if err != nil {
		return Sample{}, err
	}
	out, err := runClient(ctx, argv)
	if err != nil {
		return Sample{}, err
	}
	s1, err := readProcStat()
	if err != nil {
		return Sample{}, err
	}
	var s Sample
	if client == "wrk" { // wreck and wreck-native print wreck --json
		s, err = ParseWrk(out)
	} else {
		s, err = ParseWreck(out)
	}
	if err != nil {
		return s, err
	}
	if s.Requests == 0 {
		return s, fmt.Errorf("no responses (%d errors)", s.Errors)
	}
	s.CPUPerReq = float64(s1.Busy()-s0.Busy()) * 1e6 / clockTicks / float64(s.Requests)
	return s, nil
}

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux
// architecture's userspace ABI.
const clockTicks = 100

func readProcStat() (CPUTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, fmt.Errorf("read /proc/stat: %w", err)
	}
	return ParseProcStat(b)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// bindRE matches an AF_XDP socket's bind line: interface, queue, and how
// it bound (mode, UMEM pages, busy polling).
var bindRE = regexp.MustCompile(`afxdp: \S+ queue (\d+) (bound in .*)$`)

// bindLines finds every queue's bind line in a log, by queue.
func bindLines(log string) []string {
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if m := bindRE.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			lines = append(lines, "queue "+m[1]+" "+m[2])
		}
	}
	slices.SortFunc(lines, func(a, b string) int { return queueOf(a) - queueOf(b) })
	return lines
}

func queueOf(line string) int {
	n, _ := strconv.Atoi(strings.Fields(line)[1])
	return n
}

// bindSummary says how the queues bound in one phrase per way: queues that
// bound alike share it, so a queue that fell back stands out.
func bindSummary(lines []string) string {
	var ways []string
	queues := map[string][]string{}
	for _, l := range lines {
		q, how, _ := strings.Cut(strings.TrimPrefix(l, "queue "), " ")
		if queues[how] == nil {
			ways = append(ways, how)
		}
		queues[how] = append(queues[how], q)
	}
	parts := make([]string, len(ways))
	for i, how := range ways {
		qs := queues[how]
		label := "queue "
		if len(qs) > 1 {
			label = "queues "
		}
		parts[i] = label + strings.Join(qs, ",") + " " + how
	}
	return strings.Join(parts, "; ")
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
