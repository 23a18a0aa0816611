package sweep

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"percore/shard"
)

// ParseFlags reads `bench sweep` flags into a Config. --quick starts from
// QuickConfig; flags given with it override its settings.
func ParseFlags(args []string, usage io.Writer) (Config, error) {
	quick := false
	for _, a := range args {
		if a == "--quick" || a == "-quick" || a == "--quick=true" || a == "-quick=true" {
			quick = true
		}
	}
	c := DefaultConfig()
	if quick {
		c = QuickConfig()
	}
	fs := flag.NewFlagSet("bench sweep", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	smps := listFlag{ints: &c.SMPs}
	pipes := listFlag{ints: &c.Pipeline}
	fs.Var(&smps, "smp", "shard counts to sweep, e.g. 1-4 or 1,2,4,8 (default 1..nproc)")
	fs.Var(&pipes, "pipeline", "requests in flight per connection, a list: 1,16 adds the TechEmpower plaintext setting")
	fs.BoolVar(&c.Quick, "quick", c.Quick, "CI smoke run: 1 round of 1 s, output under bench/out")
	fs.IntVar(&c.Rounds, "rounds", c.Rounds, "interleaved rounds per shard count")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "each measured run (whole seconds)")
	fs.DurationVar(&c.Warmup, "warmup", c.Warmup, "unmeasured wreck run after each server start (0: none)")
	fs.IntVar(&c.Conns, "conn", c.Conns, "connections per run, in total")
	fs.IntVar(&c.BusyPoll, "busy-poll", 0, "percore native's preferred busy polling budget, server and native client (0: off)")
	servers := strings.Join(c.Servers, ",")
	clients := strings.Join(c.Clients, ",")
	fs.StringVar(&servers, "servers", servers, "servers to run, a subset of "+strings.Join(AllServers, ","))
	fs.StringVar(&clients, "clients", clients, "clients to run, a subset of "+strings.Join(AllClients, ","))
	fs.StringVar(&c.Out, "out", c.Out, "markdown file whose sweep section is replaced (empty: none)")
	fs.StringVar(&c.SVG, "svg", c.SVG, "SVG plot of req/s per shard count (empty: none)")
	fs.StringVar(&c.JSON, "json", c.JSON, "raw samples as JSON (empty: none)")
	fs.StringVar(&c.ReportFrom, "report-from", "", "do not measure: rewrite the report and plots from a saved --json file")
	fs.StringVar(&c.Iface, "iface", "", "bare metal: serve on this NIC (no lab); needs --host-ipv4-addr, --cpuset, --client-exec")
	var addr, cpuset, clientExec, clientAddr string
	fs.StringVar(&addr, "host-ipv4-addr", "", "bare metal: the server's IPv4 address on --iface")
	fs.StringVar(&cpuset, "cpuset", "", "bare metal: CPUs for the shards, on the NIC's NUMA node; k shards take the first k, one thread of each physical core before any second thread")
	fs.StringVar(&clientExec, "client-exec", "", "bare metal: command prefix that runs the client on the client machine, e.g. \"ssh root@loadgen\"")
	fs.IntVar(&c.ClientThreads, "client-threads", 0, "bare metal: client threads (wrk -t, wreck --smp) on the client machine")
	fs.BoolVar(&c.SetChannels, "set-channels", false, "bare metal: `ethtool -L IFACE combined k` before each shard count k")
	fs.BoolVar(&c.IRQAffinity, "irq-affinity", false, "bare metal: pin queue q's interrupt to shard q's CPU for each shard count (irqbalance must be off)")
	fs.StringVar(&c.ClientWreck, "client-wreck", "wreck", "bare metal: wreck's path on the client machine")
	fs.StringVar(&c.ClientIface, "client-iface", "", "bare metal: the client machine's NIC, for wreck-native (its RSS key and table are read there with ethtool -x)")
	fs.StringVar(&clientAddr, "client-ipv4-addr", "", "bare metal: wreck-native's own IPv4 address on --client-iface, one no kernel interface there holds")
	fs.StringVar(&c.ClientWrkScript, "client-wrk-script", "/tmp/wrk-pipeline.lua", "bare metal: bench/wrk-pipeline.lua's path on the client machine")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(usage, "usage: bench sweep [flags]   (as root, from the repository)")
			fs.SetOutput(usage)
			fs.PrintDefaults()
			return c, err
		}
		return c, fmt.Errorf("%v (see bench sweep -h)", err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q: all options are flags (see bench sweep -h)", fs.Arg(0))
	}
	c.Servers, c.Clients = splitList(servers), splitList(clients)
	if addr != "" {
		a, err := netip.ParseAddr(addr)
		if err != nil || !a.Is4() {
			return c, fmt.Errorf("--host-ipv4-addr %q: give an IPv4 address such as 198.18.0.1", addr)
		}
		c.ServerAddr = a
	}
	if cpuset != "" {
		set, err := shard.ParseCPUSet(cpuset)
		if err != nil {
			return c, fmt.Errorf("--cpuset %q: %v; write CPUs like 0-13", cpuset, err)
		}
		c.ServerCPUs = physicalFirst(set, sysCore)
	}
	c.ClientExec = strings.Fields(clientExec)
	if clientAddr != "" {
		a, err := netip.ParseAddr(clientAddr)
		if err != nil || !a.Is4() {
			return c, fmt.Errorf("--client-ipv4-addr %q: give an IPv4 address such as 198.18.0.3", clientAddr)
		}
		c.ClientAddr = a
	}
	if c.Iface != "" && c.ClientIface == "" && clients == strings.Join(AllClients, ",") {
		c.Clients = []string{"wreck", "wrk"} // the native client needs the client machine's NIC
	}
	if c.Iface != "" && !smps.set {
		c.SMPs = seq(1, len(c.ServerCPUs))
	}
	root, err := FindRoot()
	if err != nil {
		return c, err
	}
	c.Root = root
	c.Command = "go run ./cmd/bench sweep " + strings.Join(args, " ")
	return c, c.Validate()
}

// listFlag is a list of positive integers with ranges: 1-4,8.
type listFlag struct {
	ints *[]int
	set  bool
}

func (l *listFlag) String() string {
	if l.ints == nil {
		return ""
	}
	s := make([]string, len(*l.ints))
	for i, v := range *l.ints {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *listFlag) Set(v string) error {
	set, err := shard.ParseCPUSet(v) // the same grammar: 1-4,8
	if err != nil {
		return fmt.Errorf("%q: %v; write a list like 1-4,8", v, err)
	}
	*l.ints, l.set = set, true
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// FindRoot walks up from the working directory to percore's go.mod.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module percore\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("not inside percore's checkout (no go.mod of module percore above the working directory): cd to the repository")
		}
		dir = parent
	}
}

// Main is `bench sweep`: 2 for bad flags, 1 when the sweep fails. ctx is
// cancelled on SIGINT/SIGTERM; everything started is stopped before return.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	cfg, err := ParseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench sweep: %v\n", err)
		return 2
	}
	cfg.Log = stderr
	// Output paths are relative to the repository root, like the defaults.
	for _, p := range []*string{&cfg.Out, &cfg.SVG, &cfg.JSON} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(cfg.Root, *p)
		}
	}
	var res *Results
	if cfg.ReportFrom != "" {
		res, err = LoadResults(cfg.ReportFrom, cfg)
	} else if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "bench sweep: needs root (network namespaces, veth, XDP): run it with sudo")
		return 1
	} else {
		res, err = Run(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench sweep: %v\n", err)
		return 1
	}
	if err := res.WriteFiles(ModulePlotter(ctx, cfg.Root)); err != nil {
		fmt.Fprintf(stderr, "bench sweep: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "bench sweep: wrote %s\n", strings.Join(nonEmpty(res.Config.Out, res.Config.SVG, res.Config.JSON), ", "))
	return 0
}

func nonEmpty(s ...string) []string {
	var out []string
	for _, x := range s {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}
