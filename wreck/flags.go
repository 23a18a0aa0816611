package wreck

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"percore/shard"
)

// headerList is the repeatable --header flag.
type headerList []string

func (h *headerList) String() string     { return strings.Join(*h, ", ") }
func (h *headerList) Set(v string) error { *h = append(*h, v); return nil }

// flagSet binds the flags to cfg, *cpuset and *jsonOut.
func flagSet(cfg *Config, cpuset *string, jsonOut *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("wreck", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.Server, "server", "", "server `host:port`")
	fs.IntVar(&cfg.SMP, "smp", cfg.SMP, "client shards (pinned threads, one epoll each)")
	fs.StringVar(cpuset, "cpuset", "", "CPUs for the shards, e.g. `0-3,6` (default: the process's CPUs)")
	fs.IntVar(&cfg.Conns, "conn", cfg.Conns, "connections in total, spread over the shards")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "run time (an upper bound with --reqs); specweb99: the measured time after --warmup, 30s unless given")
	fs.Int64Var(&cfg.Reqs, "reqs", 0, "stop after this many requests complete (0: no cap)")
	fs.IntVar(&cfg.Pipeline, "pipeline", cfg.Pipeline, "requests in flight per connection, written as one batch when the last batch is answered (topped up one by one under --rate)")
	fs.Func("host-ipv4-addr", "the client's own IPv4 `addresses`: one, a range 198.18.0.3-198.18.0.10, or a comma list; each adds a source's ports. native: addresses no kernel interface holds; posix: kernel addresses, bound in turn (default: the kernel picks)", func(s string) (err error) {
		cfg.Sources, err = ParseAddrs(s)
		return err
	})
	fs.StringVar(&cfg.Path, "path", cfg.Path, "request path")
	fs.Var((*headerList)(&cfg.Headers), "header", "extra request header `Name: value` (repeatable)")
	fs.BoolVar(&cfg.KeepAlive, "keepalive", cfg.KeepAlive, "keep connections open; false: one connection per request, latency from connect start (connection rate)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open loop: total requests per second, latency from the intended send time (0: closed loop)")
	fs.Float64Var(&cfg.ConnectRate, "connect-rate", 0, "open at most this many connections a second in total, reconnects included (0: all at once)")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "per request and per connect")
	fs.BoolVar(&cfg.CheckSeq, "check-seq", false, "send X-Wreck-Seq and require the server to echo it, in order")
	fs.IntVar(&cfg.MaxHead, "max-head", defaultMaxHead, "largest response header section accepted, bytes")
	fs.BoolVar(jsonOut, "json", false, "print the result as JSON on stdout")
	fs.StringVar(&cfg.Workload, "workload", "", "`specweb99`: --conn paced SPECweb99 users over a file set (specweb gen), every answer checked, in place of --path")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "run this long before measuring for --duration (connects and errors count over both; default 5s with specweb99, else 0)")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "specweb99: seed of the users' draws")
	fs.IntVar(&cfg.FileSet, "file-set", 0, "specweb99: the connections the file set was generated for (specweb gen --conns; 0: --conn)")
	fs.BoolVar(&cfg.StaticOnly, "specweb-static-only", false, "specweb99: only the static GETs (same files, pacing and checks), for servers without SPECweb99's dynamic modules")
	bindNativeFlags(fs, &cfg.Native)
	bindTLSFlags(fs, &cfg.TLS)
	return fs
}

// ParseFlags turns command-line arguments into a validated Config; jsonOut
// reports --json. -h gives flag.ErrHelp.
func ParseFlags(args []string) (cfg Config, jsonOut bool, err error) {
	cfg = DefaultConfig()
	var cpuset string
	fs := flagSet(&cfg, &cpuset, &jsonOut)
	if err = fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, false, err
		}
		return cfg, false, fmt.Errorf("%v (see wreck -h)", err)
	}
	if fs.NArg() > 0 {
		return cfg, false, fmt.Errorf("unexpected argument %q: all options are flags (see wreck -h)", fs.Arg(0))
	}
	if cfg.Workload == WorkloadSpecweb99 {
		specwebDefaults(fs, &cfg)
	}
	if err = cfg.Native.checkFlags(fs); err != nil {
		return cfg, false, err
	}
	if cpuset != "" {
		if cfg.CPUSet, err = shard.ParseCPUSet(cpuset); err != nil {
			return cfg, false, fmt.Errorf("--cpuset %q: %w; want a list like 0-3,6", cpuset, err)
		}
	}
	return cfg, jsonOut, cfg.validate()
}

// The SPECweb99 workload's defaults: far shorter than the official 1200 s
// warm-up and 3 x 1200 s runs, to fit a development machine.
const (
	specwebWarmup   = 5 * time.Second
	specwebDuration = 30 * time.Second
)

// specwebDefaults puts the SPECweb99 defaults where the flags were not given.
func specwebDefaults(fs *flag.FlagSet, cfg *Config) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if !given["warmup"] {
		cfg.Warmup = specwebWarmup
	}
	if !given["duration"] {
		cfg.Duration = specwebDuration
	}
}

func printUsage(w io.Writer) {
	cfg := DefaultConfig()
	var cpuset string
	var jsonOut bool
	fs := flagSet(&cfg, &cpuset, &jsonOut)
	fmt.Fprintln(w, "usage: wreck --server host:port [flags]")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// Main is the wreck command: it returns the exit status (2 for bad flags,
// 1 when the run could not start). hint rewrites an error for the command
// line, a ConfigError's settings as the flags that set them (nil: as is).
func Main(args []string, stdout, stderr io.Writer, hint func(error) error) int {
	if hint == nil {
		hint = func(err error) error { return err }
	}
	cfg, jsonOut, err := ParseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stderr)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "wreck: %v\n", hint(err))
		return 2
	}
	stop := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		select {
		case <-sig:
			close(stop)
		case <-quit:
		}
	}()
	cfg.Stop = stop
	cfg.Progress = stderr
	res, err := Run(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "wreck: %v\n", hint(err))
		return 1
	}
	if jsonOut {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "wreck: write result: %v\n", err)
		return 1
	}
	return 0
}
