package sweep

import (
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"slices"
	"time"
)

// Server and client names, in the order they run within a round.
var (
	AllServers = []string{"native", "posix", "nginx", "fasthttp", "gnet"}
	AllClients = []string{"wreck", "wrk", "wreck-native"}
)

// nativeOnlyClient explains why wreck-native drives percore native only: the
// lab pairs two native ends, as Seastar's test paired seawreck with httpd on
// the same native stack. Against the kernel-stack servers in this lab it gets
// no responses: the kernel end of the veth runs no XDP program, and frames
// an AF_XDP socket sends into a veth need one on the receiving end.
const nativeOnlyClient = "wreck-native drives percore native only: two native ends, as seawreck and Seastar's httpd"

// Config is one sweep. The zero value is not valid; start from
// DefaultConfig or QuickConfig.
type Config struct {
	Root     string        // percore's repository root (go.mod of module percore)
	SMPs     []int         // shard counts to sweep
	Rounds   int           // interleaved rounds per shard count
	Duration time.Duration // each measured client run (whole seconds: wrk's unit)
	Warmup   time.Duration // one unmeasured wreck run after each server start (0: none)
	Conns    int           // connections per client run, in total
	Pipeline []int         // requests in flight per connection; one table set each
	Servers  []string      // subset of AllServers
	Clients  []string      // subset of AllClients
	Quick    bool          // CI smoke mode (recorded in the report)
	BusyPoll int           // percore native's --busy-poll budget, server and native client (0: off)

	// Bare metal (Iface set): the servers serve on a real NIC in this
	// namespace and the clients run on another machine through ClientExec.
	Iface           string
	ServerAddr      netip.Addr // our IPv4 address on Iface
	ServerCPUs      []int      // CPUs for the shards, on the NIC's NUMA node (smp k takes the first k)
	ClientExec      []string   // argv prefix that runs a command on the client machine, e.g. ssh loadgen
	ClientThreads   int        // wrk -t and wreck --smp on the client machine
	SetChannels     bool       // run `ethtool -L Iface combined k` before each shard count
	IRQAffinity     bool       // point queue q's interrupt at shard q's CPU for each shard count
	ClientWreck     string     // wreck's path on the client machine
	ClientWrkScript string     // bench/wrk-pipeline.lua's path on the client machine
	ClientIface     string     // the client machine's NIC for wreck-native ("": no wreck-native)
	ClientAddr      netip.Addr // wreck-native's own IPv4 address on ClientIface, one no kernel interface there holds

	ReportFrom string `json:"-"` // rewrite the outputs from this saved JSON instead of measuring

	Out  string // markdown file whose sweep section is replaced ("" : none)
	SVG  string // plot of req/s per shard count for the first pipeline depth ("": none)
	JSON string // raw samples ("": none)

	Command string    // the command line, quoted in the report
	Log     io.Writer `json:"-"` // progress lines
}

// DefaultConfig is the full sweep on this machine: --smp 1..NumCPU, 3 rounds
// of 5 s per point.
func DefaultConfig() Config {
	return Config{
		SMPs: seq(1, runtime.NumCPU()), Rounds: 3, Duration: 5 * time.Second, Warmup: time.Second,
		Conns: 64, Pipeline: []int{1}, Servers: AllServers, Clients: AllClients,
		Out: "docs/benchmarks.md", SVG: "docs/sweep.svg", JSON: "bench/out/sweep.json",
	}
}

// QuickConfig is the CI smoke sweep: one round of 1 s per point, no warm-up,
// pipeline 1 and 16, written under bench/out (ignored by git) so docs stay as
// committed. On the 2-CPU lab machine it finishes in about a minute.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Quick, c.Rounds, c.Duration, c.Warmup = true, 1, time.Second, 0
	c.Pipeline = []int{1, 16}
	c.Out, c.SVG, c.JSON = "bench/out/benchmarks-quick.md", "bench/out/sweep-quick.svg", "bench/out/sweep-quick.json"
	return c
}

func seq(a, b int) []int {
	var s []int
	for i := a; i <= b; i++ {
		s = append(s, i)
	}
	return s
}

// Validate reports the first bad setting as a one-line error naming the fix.
func (c *Config) Validate() error {
	if c.Root == "" {
		return fmt.Errorf("no repository root: run from inside percore's checkout")
	}
	if len(c.SMPs) == 0 {
		return fmt.Errorf("--smp: give shard counts such as 1-4")
	}
	for _, k := range c.SMPs {
		if k < 1 {
			return fmt.Errorf("--smp %d: shard counts start at 1", k)
		}
		if c.Iface == "" && k > runtime.NumCPU() {
			return fmt.Errorf("--smp %d: this machine has %d CPUs; sweep up to %d", k, runtime.NumCPU(), runtime.NumCPU())
		}
		if c.Iface != "" && k > len(c.ServerCPUs) {
			return fmt.Errorf("--smp %d: --cpuset has only %d CPUs; give at least %d", k, len(c.ServerCPUs), k)
		}
	}
	if c.Rounds < 1 {
		return fmt.Errorf("--rounds %d: give 1 or more", c.Rounds)
	}
	if c.Duration < time.Second || c.Duration%time.Second != 0 {
		return fmt.Errorf("--duration %v: give whole seconds, 1s or more (wrk's unit)", c.Duration)
	}
	if c.Warmup < 0 {
		return fmt.Errorf("--warmup %v: give 0 or a positive duration", c.Warmup)
	}
	if c.BusyPoll < 0 || c.BusyPoll > 65535 {
		return fmt.Errorf("--busy-poll %d: give a budget from 1 to 65535, or 0 for off", c.BusyPoll)
	}
	if c.Conns < 1 {
		return fmt.Errorf("--conn %d: give 1 or more", c.Conns)
	}
	if len(c.Pipeline) == 0 {
		return fmt.Errorf("--pipeline: give depths such as 1,16")
	}
	for _, p := range c.Pipeline {
		if p < 1 || p > 1024 {
			return fmt.Errorf("--pipeline %d: give 1 to 1024", p)
		}
	}
	if err := subset("--servers", c.Servers, AllServers); err != nil {
		return err
	}
	if err := subset("--clients", c.Clients, AllClients); err != nil {
		return err
	}
	if c.Iface != "" {
		if slices.Contains(c.Clients, "wreck-native") && (c.ClientIface == "" || !c.ClientAddr.Is4()) {
			return fmt.Errorf("--clients wreck-native on bare metal needs --client-iface and --client-ipv4-addr, the client machine's NIC and an address no interface there holds")
		}
		if len(c.ServerCPUs) == 0 {
			return fmt.Errorf("--iface %s needs --cpuset, the CPUs on the NIC's NUMA node for the shards", c.Iface)
		}
		if !c.ServerAddr.Is4() {
			return fmt.Errorf("--iface %s needs --host-ipv4-addr, the server's IPv4 address on it", c.Iface)
		}
		if len(c.ClientExec) == 0 {
			return fmt.Errorf("--iface %s needs --client-exec, e.g. \"ssh root@loadgen\": the client runs on another machine", c.Iface)
		}
		if c.ClientThreads < 1 {
			return fmt.Errorf("--client-threads %d: give the client machine's cores for wrk -t and wreck --smp", c.ClientThreads)
		}
	}
	return nil
}

func subset(flag string, got, all []string) error {
	if len(got) == 0 {
		return fmt.Errorf("%s: name at least one of %v", flag, all)
	}
	for _, g := range got {
		if !slices.Contains(all, g) {
			return fmt.Errorf("%s: unknown %q; choose from %v", flag, g, all)
		}
	}
	return nil
}
