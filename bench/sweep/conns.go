package sweep

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"percore/lab"
	"percore/wreck"
)

// The conns sweep (`bench conns`): how each server holds a growing number
// of concurrent keep-alive connections on one core. One lab with one queue
// (server on the last CPU, client on the first); for each connection
// count, server and load a fresh server starts, and native wreck (its own
// AF_XDP queue and TCP, no descriptor per connection) opens the connections
// at a paced rate from as many addresses as the count needs, then measures
// the load: the closed loop, or an open loop at a fixed total rate in which
// every connection stays open and sends one request every count/rate
// seconds.

// Loads of the conns sweep.
const (
	LoadClosed = "closed"
	LoadOpen   = "open"
)

// ConnsServers are the servers the conns sweep can run.
var ConnsServers = []string{"native", "posix", "nginx", "gnet"}

// portsPerAddr is the native client's source ports on each address
// (--source-ports 1024-65535).
const portsPerAddr = 65535 - 1024 + 1

// fdSlack is the descriptors a kernel-stack server needs beside one a
// connection (listeners, epoll, logs, the runtime's).
const fdSlack = 100

// ConnsConfig is one conns sweep.
type ConnsConfig struct {
	Root        string
	Counts      []int         // connection counts
	Servers     []string      // subset of ConnsServers
	Loads       []string      // LoadClosed, LoadOpen
	Duration    time.Duration // each measured run, after the warm-up
	OpenRate    float64       // open loop: total requests per second
	ConnectRate float64       // connects per second while the connections open
	Timeout     time.Duration // wreck --timeout; 0: ConnsTimeout of each count
	RT          bool          // the server and the client run SCHED_FIFO (chrt), ahead of other work on the machine
	Out         string        // markdown tables ("": none)
	SVG         string        // plot of closed-loop req/s per count ("": none)
	JSON        string        // raw results ("": none)
	Command     string        // the command line, quoted in the report
	Log         io.Writer     `json:"-"`
}

// DefaultConnsConfig: 64 to 1M connections, every server, both loads, 10 s
// each, the open loop at 10,000 req/s; outputs under bench/out.
func DefaultConnsConfig() ConnsConfig {
	return ConnsConfig{
		Counts: []int{64, 1 << 10, 8 << 10, 64 << 10, 256 << 10, 1 << 20}, Servers: ConnsServers,
		Loads: []string{LoadClosed, LoadOpen}, Duration: 10 * time.Second, OpenRate: 10000, ConnectRate: 25000,
		Out: "bench/out/conns.md", SVG: "bench/out/conns.svg", JSON: "bench/out/conns.json",
	}
}

// The client's timeout follows the count. A closed loop of n connections
// keeps n requests in flight, so each waits about n / rate, the whole
// queue, however fast the server: at 256K connections and the 25,000
// req/s a loaded core still serves, 10 s. A connect whose SYN the server
// shed for want of frames completes at the client's next try, 1, 3, 7 or
// 15 s after the first.
const (
	minClosedRate  = 25000            // req/s: the closed loop's latency is count / rate
	closedSlack    = 3                // times that latency before a request counts as lost
	connectTimeout = 16 * time.Second // four SYNs: 1 + 2 + 4 + 8 s
)

// timeout is wreck's --timeout for n connections.
func (c *ConnsConfig) timeout(n int) time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return ConnsTimeout(n)
}

// ConnsTimeout is wreck's --timeout for n connections: the larger of
// connectTimeout and closedSlack times n / minClosedRate.
func ConnsTimeout(n int) time.Duration {
	return max(connectTimeout, time.Duration(closedSlack*float64(n)/minClosedRate*float64(time.Second)))
}

// ParseCount reads a connection count: 64, 1K (1,024), 256K, 1M (1,048,576).
func ParseCount(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"), strings.HasSuffix(s, "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"), strings.HasSuffix(s, "m"):
		mult, s = 1<<20, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n*mult > 1<<20 {
		return 0, fmt.Errorf("connection count %q: want 1 to 1M, like 64, 8K or 1M", s)
	}
	return n * mult, nil
}

// CountLabel writes a count as ParseCount reads it: 1K, 256K, 1M, 100.
func CountLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "M"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "K"
	}
	return strconv.Itoa(n)
}

// Validate reports the first bad setting, naming the flag that fixes it.
func (c *ConnsConfig) Validate() error {
	switch {
	case c.Root == "":
		return fmt.Errorf("no repository root: run from inside percore's checkout")
	case len(c.Counts) == 0:
		return fmt.Errorf("--counts: give connection counts such as 64,1K,8K")
	case c.Duration < time.Second:
		return fmt.Errorf("--duration %v: give 1s or more", c.Duration)
	case c.OpenRate <= 0:
		return fmt.Errorf("--open-rate %v: give the open loop's requests per second", c.OpenRate)
	case c.ConnectRate <= 0:
		return fmt.Errorf("--connect-rate %v: give connects per second", c.ConnectRate)
	case c.Timeout < 0:
		return fmt.Errorf("--timeout %v: must be positive (0: by the count)", c.Timeout)
	}
	for _, l := range c.Loads {
		if l != LoadClosed && l != LoadOpen {
			return fmt.Errorf("--loads: unknown %q; choose from closed,open", l)
		}
	}
	if len(c.Loads) == 0 {
		return fmt.Errorf("--loads: name closed, open or both")
	}
	return subset("--servers", c.Servers, ConnsServers)
}

// ConnsKey names one cell of the conns sweep.
type ConnsKey struct {
	Server string `json:"server"`
	Load   string `json:"load"`
	Conns  int    `json:"conns"`
}

// ConnsSample is one measured run.
type ConnsSample struct {
	ConnsKey
	ReqPerSec float64 `json:"req_per_sec"`
	CPUPerReq float64 `json:"cpu_us_per_req"` // whole-machine busy CPU-µs per request over the measured interval
	// ProcCPUPerReq is the server's and the client's own CPU-µs per
	// request (their processes' user+system time; softirq time the kernel
	// does not charge to them is left out): what the two cost on a machine
	// other work shares.
	ProcCPUPerReq float64 `json:"proc_cpu_us_per_req"`
	P50           float64 `json:"p50_us"`
	P99           float64 `json:"p99_us"`
	P999          float64 `json:"p99_9_us"`
	Errors        uint64  `json:"errors"`   // over the whole run, connects included
	Connects      uint64  `json:"connects"` // connections established (each count once, unless some were lost)
	// ConnectP99 is the 99th percentile of connect times (µs).
	ConnectP99 float64 `json:"connect_p99_us"`
	IdleRSS    uint64  `json:"idle_rss"` // server resident bytes before the first load
	PeakRSS    uint64  `json:"peak_rss"` // most resident bytes seen during the run
	// Interval is, in the open loop, how often each connection sends (s).
	Interval float64 `json:"interval_s,omitempty"`
	// SendLagP99 is, in the open loop, the 99th percentile of how late
	// the client sent against the intended time (µs): its own delay,
	// inside the latency.
	SendLagP99 float64 `json:"send_lag_p99_us,omitempty"`
	// ServerRunQueue is how long the server's threads waited on a run
	// queue, runnable but not running, per second measured (ms): time
	// the machine's other work took from it.
	ServerRunQueue float64 `json:"server_runq_ms_per_s"`
}

// MemPerConn is the server's resident bytes a connection: peak less idle.
func (s ConnsSample) MemPerConn() float64 {
	if s.PeakRSS < s.IdleRSS || s.Conns == 0 {
		return 0
	}
	return float64(s.PeakRSS-s.IdleRSS) / float64(s.Conns)
}

// ConnsResults is a finished conns sweep.
type ConnsResults struct {
	Machine    Machine           `json:"machine"`
	Target     string            `json:"target"`
	Started    time.Time         `json:"started"`
	Finished   time.Time         `json:"finished"`
	LoadBefore string            `json:"load_before"`
	LoadAfter  string            `json:"load_after"`
	FDLimit    uint64            `json:"fd_limit"`
	Samples    []ConnsSample     `json:"samples"`
	Stopped    map[string]string `json:"stopped"` // server, or "server load", -> from which count it did not run, and why
	Config     *ConnsConfig      `json:"config"`
}

// RunConns runs the conns sweep. A server that cannot hold a count (its
// descriptor limit, a failed start) is stopped there, with the reason, for
// the larger counts too, and one whose run of a load fails, for that load;
// the others go on. Every process and
// namespace it made is gone when it returns.
func RunConns(ctx context.Context, cfg ConnsConfig) (*ConnsResults, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logf := logger(cfg.Log)
	dir, err := os.MkdirTemp("", "percore-conns-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	needPeers := slices.Contains(cfg.Servers, "gnet")
	bins, err := build(ctx, cfg.Root, dir, needPeers)
	if err != nil {
		return nil, err
	}
	res := &ConnsResults{Machine: ReadMachine(), Started: time.Now(), LoadBefore: loadAvg(), Stopped: map[string]string{}, Config: &cfg}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
		res.FDLimit = lim.Max
	}
	if bins.peersErr != nil && needPeers {
		res.Stopped["gnet"] = "not built: " + firstLine(bins.peersErr.Error())
	}
	t, err := newLabTarget(1)
	if err != nil {
		return nil, err
	}
	defer t.close()
	// The kernel-stack servers' segments must carry full checksums: the
	// native client checks them (the lab turns offloads off on the client
	// end only).
	if err := lab.DisableOffloads(t.lab.ServerNS, t.lab.ServerIf); err != nil {
		return nil, err
	}
	res.Target = t.describe
	logf("%s; server CPU %v, client CPU %v; descriptor limit %d", t.describe, t.serverCPUs, t.clientCPUs, res.FDLimit)
	for _, n := range cfg.Counts {
		for _, name := range cfg.Servers {
			if _, stop := res.Stopped[name]; stop {
				continue
			}
			if err := ctx.Err(); err != nil {
				return res, err
			}
			if name != "native" && res.FDLimit > 0 && uint64(n+fdSlack) > res.FDLimit {
				res.Stopped[name] = fmt.Sprintf("from %s on: a descriptor a connection, and the process limit is %d (ulimit -Hn)", CountLabel(n), res.FDLimit)
				logf("stop %s: %s", Labels[name], res.Stopped[name])
				continue
			}
			for _, load := range cfg.Loads {
				key := name + " " + load
				if _, stop := res.Stopped[key]; stop {
					continue
				}
				if err := connsServer(ctx, &cfg, bins, dir, t, ConnsKey{Server: name, Load: load, Conns: n}, res, logf); err != nil {
					if ctx.Err() != nil {
						return res, ctx.Err()
					}
					res.Stopped[key] = fmt.Sprintf("from %s on: %s", CountLabel(n), firstLine(err.Error()))
					logf("stop %s, %s loop: %v", Labels[name], load, err)
				}
			}
		}
	}
	res.Finished, res.LoadAfter = time.Now(), loadAvg()
	return res, nil
}

// sched runs argv SCHED_FIFO at priority 20 with RT (every thread it makes
// inherits the policy), as it is otherwise.
func (cfg *ConnsConfig) sched(argv []string) []string {
	if !cfg.RT {
		return argv
	}
	return append([]string{"chrt", "--fifo", "20"}, argv...)
}

// connsIdleTimeout is the server's keep-alive timeout for n connections
// sharing an open loop of rate requests/s: a minute beyond twice the time
// between two requests on one connection.
func connsIdleTimeout(n int, rate float64) time.Duration {
	return time.Minute + 2*time.Duration(float64(n)/rate*float64(time.Second))
}

// connsServer starts a fresh server for one cell and measures it: a client
// ends with all its connections at once, and not every reset gets out, so a
// server that carried one load would carry that run's leftovers into the
// next (in its memory, and as 4-tuples still open).
func connsServer(ctx context.Context, cfg *ConnsConfig, bins *binaries, dir string, t *target, k ConnsKey, res *ConnsResults, logf func(string, ...any)) error {
	name, n := k.Server, k.Conns
	port := serverPort(name)
	argv, err := serverArgv(name, &Config{}, bins, t, 1, port, dir)
	if err != nil {
		return err
	}
	if name == "native" || name == "posix" {
		// The open loop sends on each connection every n / rate seconds
		// (105 s at 1M): a keep-alive timeout shorter than that (httpd's
		// default is 60 s) would close idle connections for the client to
		// make again, and the cell would no longer hold n of them.
		argv = append(argv, "--idle-timeout", connsIdleTimeout(n, cfg.OpenRate).String())
	}
	if name == "native" {
		// Its table, UMEM, rings and SYN backlog follow the count.
		argv = append(argv, "--max-connections", strconv.Itoa(n+n/8+64))
	} else {
		// The native client's frames reach a veth end only through an XDP
		// program there: a kernel-stack server gets one that passes all.
		pass, err := lab.AttachPass(t.lab.ServerNS, t.lab.ServerIf)
		if err != nil {
			return err
		}
		defer pass.Close()
	}
	p, err := startProc(Labels[name], cfg.sched(argv), nil)
	if err != nil {
		return err
	}
	defer p.stop(5 * time.Second)
	if err := t.ready(ctx, p, port, 10*time.Second); err != nil {
		return err
	}
	s, err := connsRun(ctx, cfg, bins, t, p, port, k, groupRSS(p.cmd.Process.Pid))
	if err != nil {
		return fmt.Errorf("%w (server: %s)", err, p.tail())
	}
	res.Samples = append(res.Samples, s)
	logf("%-14s %5s %-6s %9.0f req/s %6.2f (own %.2f) CPU-µs/req p50 %8.0f p99 %8.0f p99.9 %8.0f µs, %d errors, %d connects (p99 %.0f µs), RSS %.0f MiB, %.0f B/conn; send lag p99 %.0f µs, server run-queue wait %.1f ms/s",
		Labels[name], CountLabel(n), k.Load, s.ReqPerSec, s.CPUPerReq, s.ProcCPUPerReq, s.P50, s.P99, s.P999, s.Errors, s.Connects, s.ConnectP99,
		float64(s.PeakRSS)/(1<<20), s.MemPerConn(), s.SendLagP99, s.ServerRunQueue)
	return nil
}

// connsRun runs native wreck for one load and charges the machine's busy
// CPU time over the measured interval (after the warm-up) to it.
func connsRun(ctx context.Context, cfg *ConnsConfig, bins *binaries, t *target, p *proc, port int, k ConnsKey, idle uint64) (ConnsSample, error) {
	n := k.Conns
	// The connects take n / rate, and as long again for those the server
	// shed while its frames were short and the client sent again.
	warmup := time.Duration(2*float64(n)/cfg.ConnectRate*float64(time.Second)) + 3*time.Second
	addrs := (n + portsPerAddr - 1) / portsPerAddr
	argv := []string{bins.wreck, "--network-stack", "native", "--iface", t.lab.ClientIf, "--netns", t.lab.ClientNS.Name,
		"--host-ipv4-addr", fmt.Sprintf("%s-%s", lab.Host(t.lab.Subnet, 3), lab.Host(t.lab.Subnet, byte(2+addrs))),
		"--source-ports", "1024-65535", "--server", fmt.Sprintf("%s:%d", t.serverIP, port),
		"--smp", "1", "--cpuset", cpuList(t.clientCPUs[:1]), "--conn", strconv.Itoa(n),
		"--connect-rate", strconv.FormatFloat(cfg.ConnectRate, 'f', -1, 64),
		"--warmup", warmup.String(), "--duration", cfg.Duration.String(), "--timeout", cfg.timeout(n).String(), "--json"}
	s := ConnsSample{ConnsKey: k, IdleRSS: idle}
	if k.Load == LoadOpen {
		argv = append(argv, "--rate", strconv.FormatFloat(cfg.OpenRate, 'f', -1, 64))
		s.Interval = float64(n) / cfg.OpenRate
	}
	rctx, cancel := context.WithTimeout(ctx, warmup+cfg.Duration+cfg.timeout(n)+60*time.Second)
	defer cancel()

	// The server's resident memory at its peak, and from the end of the
	// warm-up the machine's busy time and the server's and the client's
	// own, sampled beside the client.
	var (
		mu               sync.Mutex
		peak             = idle
		atWarm           CPUTimes
		warmOK           bool
		client           int    // the client's pid and process group
		srvWarm, cliWarm uint64 // their CPU ticks as the warm-up ended
		srvWaitWarm      uint64 // the server's run-queue wait then (ns)
		cliLast          uint64 // the client's at the last sample
		server           = p.cmd.Process.Pid
	)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		warmAt := time.After(warmup)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-warmAt:
				c, err := readProcStat()
				mu.Lock()
				atWarm, warmOK = c, err == nil
				srvWarm, cliWarm = groupCPU(server), groupCPU(client)
				srvWaitWarm = groupRunDelay(server)
				cliLast = cliWarm
				mu.Unlock()
			case <-tick.C:
				r := groupRSS(server)
				mu.Lock()
				peak = max(peak, r)
				if warmOK {
					// The client's last sample stands for its end: it is
					// gone when the run returns.
					if c := groupCPU(client); c > 0 {
						cliLast = c
					}
				}
				mu.Unlock()
			}
		}
	}()
	out, err := runClientPid(rctx, cfg.sched(argv), func(pid int) { mu.Lock(); client = pid; mu.Unlock() })
	end, serr := readProcStat()
	srvEnd, srvWaitEnd := groupCPU(server), groupRunDelay(server)
	close(done)
	wg.Wait()
	if err != nil {
		return s, err
	}
	var r wreck.Result
	if err := json.Unmarshal(out, &r); err != nil {
		return s, fmt.Errorf("parse wreck --json output: %w", err)
	}
	if p.exited() {
		return s, fmt.Errorf("the server exited during the run")
	}
	s.ReqPerSec, s.P50, s.P99, s.P999 = r.ReqPerSec, r.Latency.P50, r.Latency.P99, r.Latency.P999
	s.Errors = r.Errors.Total() + r.Errors.Non2xx
	s.Connects, s.ConnectP99 = r.Connects, r.Connect.P99
	s.PeakRSS = peak
	if r.SendLag != nil {
		s.SendLagP99 = r.SendLag.P99
	}
	if warmOK && srvWaitEnd > srvWaitWarm {
		s.ServerRunQueue = float64(srvWaitEnd-srvWaitWarm) / 1e6 / cfg.Duration.Seconds()
	}
	if warmOK && serr == nil && r.Requests > 0 {
		s.CPUPerReq = float64(end.Busy()-atWarm.Busy()) * 1e6 / clockTicks / float64(r.Requests)
		s.ProcCPUPerReq = float64(srvEnd-srvWarm+cliLast-cliWarm) * 1e6 / clockTicks / float64(r.Requests)
	}
	if r.Requests == 0 {
		return s, fmt.Errorf("no responses (%d errors, %d connects)", s.Errors, s.Connects)
	}
	return s, nil
}

// groupRSS is the resident memory, in bytes, of every process in process
// group pgid (a server and its workers; `ip netns exec` execs the server in
// the group's leader).
func groupRSS(pgid int) uint64 {
	return groupSum(pgid, "status", statusRSS)
}

// groupCPU is the user+system time, in clock ticks, of every process in
// process group pgid (0: none).
func groupCPU(pgid int) uint64 {
	if pgid <= 0 {
		return 0
	}
	return groupSum(pgid, "stat", statCPU)
}

// groupSum adds up parse of /proc/PID/name over every process in process
// group pgid; a process that is gone or unreadable counts 0.
func groupSum(pgid int, name string, parse func(string) uint64) uint64 {
	var total uint64
	for _, pid := range groupPids(pgid) {
		if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), name)); err == nil {
			total += parse(string(b))
		}
	}
	return total
}

// groupPids lists the processes in process group pgid.
func groupPids(pgid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := unix.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// groupRunDelay is how long, in ns, the threads of every process in
// process group pgid have waited on a run queue (the second field of
// /proc/PID/task/TID/schedstat).
func groupRunDelay(pgid int) uint64 {
	var total uint64
	for _, pid := range groupPids(pgid) {
		tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
		for _, t := range tasks {
			if b, err := os.ReadFile(t); err == nil {
				if f := strings.Fields(string(b)); len(f) > 1 {
					d, _ := strconv.ParseUint(f[1], 10, 64)
					total += d
				}
			}
		}
	}
	return total
}

// statCPU reads utime+stime (clock ticks) from a /proc/PID/stat line; the
// fields count from after the command name's closing parenthesis.
func statCPU(stat string) uint64 {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return u + s
}

// statusRSS reads VmRSS (kB) from a /proc/PID/status text, in bytes.
func statusRSS(status string) uint64 {
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
