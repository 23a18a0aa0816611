package specsearch

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"percore/lab"
	"percore/shard"
)

// Config is the search's settings, one per flag.
type Config struct {
	Lo, Hi, Steps, Resolution int
	Warmup, Duration          time.Duration
	Dir                       string // the file set (generated if missing)
	FileSet                   int    // connections the file set is for (0: Hi, as the rules want)
	ServerCPUs, ClientCPUs    string
	Server                    string // percore, or nginx on the static-only mix
	Stack                     string // the server's: posix (loopback, or a lab with a native client) or native (a lab)
	ClientStack               string // wreck's: native (on the lab's client end) or posix (kernel sockets)
	Port                      int
	TLS                       bool     // SPECweb99_SSL: the workload over TLS (tls.go)
	ServerArgs                []string // more specweb serve flags (--cache-size 1G)
	Root                      string   // the module to build from
}

// Main runs "bench specweb" with args and returns the exit status; the
// result goes to out, progress to log.
func Main(ctx context.Context, args []string, out, log io.Writer) int {
	var c Config
	fs := flag.NewFlagSet("bench specweb", flag.ContinueOnError)
	fs.SetOutput(log)
	fs.IntVar(&c.Lo, "lo", 100, "fewest users to try: the search's first run")
	fs.IntVar(&c.Hi, "hi", 2000, "most users to try: the second run")
	fs.IntVar(&c.Steps, "steps", 6, "runs at most, lo and hi included")
	fs.IntVar(&c.Resolution, "resolution", 0, "stop once the interval is this many users (default: 2% of lo)")
	fs.DurationVar(&c.Warmup, "warmup", 5*time.Second, "each run's warm-up before measuring (SPECweb99: 1200s)")
	fs.DurationVar(&c.Duration, "duration", 20*time.Second, "each run's measured time (SPECweb99: 1200s, three runs)")
	fs.StringVar(&c.Dir, "dir", filepath.Join(os.TempDir(), "percore-specweb"), "the file set's directory (specweb gen; made here if missing, resumably)")
	fs.IntVar(&c.FileSet, "file-set", 0, "connections the file set is generated for (default: --hi, as SPECweb99 sizes it; less is not a conforming setting)")
	fs.StringVar(&c.ServerCPUs, "server-cpus", "1", "CPUs of the server's shards (one shard each)")
	fs.StringVar(&c.ClientCPUs, "client-cpus", "0", "CPUs of wreck's shards")
	fs.StringVar(&c.Server, "server", "percore", "the server: percore (specweb serve), or nginx serving the file set as static files on the static-only mix (nginx has no SPECweb99 dynamic modules)")
	fs.StringVar(&c.Stack, "network-stack", "posix", "server stack: posix (kernel sockets) or native (AF_XDP on a lab veth pair)")
	fs.StringVar(&c.ClientStack, "client-stack", "native", "wreck's stack: native (AF_XDP on the client end of a lab veth pair: one client core drives thousands of paced users) or posix (kernel sockets: over loopback to a posix server, from the lab's client namespace to a native one; the only one with --tls, and its default)")
	fs.IntVar(&c.Port, "port", 18080, "the server's port")
	fs.BoolVar(&c.TLS, "tls", false, "SPECweb99_SSL: the workload over TLS 1.3 (ECDSA P-256 certificate, X25519, AES-128-GCM), a full handshake per connection")
	serverArgs := fs.String("server-args", "", "more specweb serve flags, space-separated (e.g. \"--cache-size 1G\")")
	fs.StringVar(&c.Root, "root", ".", "the percore module to build from")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c.ServerArgs = strings.Fields(*serverArgs)
	if c.FileSet == 0 {
		c.FileSet = c.Hi
	}
	if c.Resolution == 0 {
		c.Resolution = max(1, c.Lo/50)
	}
	for flag, list := range map[string]string{"--server-cpus": c.ServerCPUs, "--client-cpus": c.ClientCPUs} {
		if _, err := shard.ParseCPUSet(list); err != nil {
			fmt.Fprintf(log, "bench specweb: %s %q: %v; want a list like 0-3,6\n", flag, list, err)
			return 2
		}
	}
	if c.Stack != "posix" && c.Stack != "native" {
		fmt.Fprintln(log, "bench specweb: --network-stack is posix or native")
		return 2
	}
	if c.ClientStack != "posix" && c.ClientStack != "native" {
		fmt.Fprintln(log, "bench specweb: --client-stack is native or posix")
		return 2
	}
	if c.TLS && c.ClientStack == "native" { // wreck's users speak TLS on kernel sockets only
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "client-stack" })
		if given {
			fmt.Fprintln(log, "bench specweb: --tls runs wreck on kernel sockets: drop --client-stack native")
			return 2
		}
		c.ClientStack = "posix"
	}
	switch {
	case c.Server != "percore" && c.Server != "nginx":
		fmt.Fprintln(log, "bench specweb: --server is percore or nginx")
		return 2
	case c.Server == "nginx" && (c.Stack != "posix" || len(c.ServerArgs) > 0):
		fmt.Fprintln(log, "bench specweb: --server nginx runs on kernel sockets: drop --network-stack native and --server-args")
		return 2
	case c.Server == "nginx" && c.TLS:
		fmt.Fprintln(log, "bench specweb: --tls runs with --server percore")
		return 2
	}
	if err := run(ctx, &c, out, log); err != nil {
		fmt.Fprintf(log, "bench specweb: %v\n", err)
		return 1
	}
	return 0
}

// usersPerAddr is how many users a native client's address carries: each
// user holds one connection at a time, and a source address has 28,232
// ports (32768-60999).
const usersPerAddr = 8000

func run(ctx context.Context, c *Config, out, log io.Writer) error {
	bin, err := os.MkdirTemp("", "percore-specweb-bin")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	fmt.Fprintf(log, "bench specweb: building specweb, specweb-cgi and wreck\n")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+"/", "./cmd/specweb", "./cmd/specweb-cgi", "./cmd/wreck")
	build.Dir, build.Stderr = c.Root, log
	if err := build.Run(); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	gen := exec.CommandContext(ctx, filepath.Join(bin, "specweb"), "gen", "--conns", strconv.Itoa(c.FileSet), "--dir", c.Dir)
	gen.Stderr = log
	if err := gen.Run(); err != nil {
		return fmt.Errorf("specweb gen: %w", err)
	}
	// Where the server and the client run: loopback, or a lab (a veth pair
	// between the server's namespace and the client's) when either end is
	// native. A native client's frames reach a kernel server's veth end
	// only through an XDP program there: it gets one that passes all.
	host, serverPre, clientPre, clientArgs := "127.0.0.1", []string(nil), []string(nil), []string(nil)
	serverFlags := []string{"--address", host}
	dial := func(f func() error) error { return f() } // in the server's namespace
	if c.Stack == "native" || c.ClientStack == "native" {
		queues := max(cpuCount(c.ServerCPUs), cpuCount(c.ClientCPUs))
		l, err := lab.NewNativePair(lab.Config{Prefix: "sws", Queues: queues})
		if err != nil {
			return fmt.Errorf("build the lab: %w", err)
		}
		defer l.Close()
		host = l.ServerIP.String()
		serverFlags = []string{"--address", host}
		if c.Stack == "native" {
			serverFlags = []string{"--network-stack", "native", "--iface", l.ServerIf, "--host-ipv4-addr", host}
		} else {
			if err := lab.AddAddr(l.ServerNS, l.ServerIf, netip.PrefixFrom(l.ServerIP, 24)); err != nil {
				return fmt.Errorf("address the lab's server end: %w", err)
			}
			// The native client drops frames with the partial checksums
			// of tx offload.
			if err := lab.DisableOffloads(l.ServerNS, l.ServerIf); err != nil {
				return err
			}
			pass, err := lab.AttachPass(l.ServerNS, l.ServerIf)
			if err != nil {
				return err
			}
			defer pass.Close()
		}
		dial = l.ServerNS.Do
		serverPre = []string{"ip", "netns", "exec", l.ServerNS.Name}
		clientPre = []string{"ip", "netns", "exec", l.ClientNS.Name}
		if c.ClientStack == "native" {
			// One source address per usersPerAddr users, so that the
			// ports the server still holds in TIME-WAIT come round late.
			addrs, err := l.NativeAddrs(min((c.Hi+usersPerAddr-1)/usersPerAddr, lab.MaxNativeAddrs))
			if err != nil {
				return err
			}
			clientArgs = append(l.NativeClientArgs(), "--host-ipv4-addr", addrs[0].String()+"-"+addrs[len(addrs)-1].String())
		}
		fmt.Fprintf(log, "bench specweb: %s\n", l)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(c.Port))
	var clientTLS []string
	if c.TLS {
		cert, key, err := tlsFiles(bin, host)
		if err != nil {
			return err
		}
		serverFlags = append(serverFlags, "--tls-cert", cert, "--tls-key", key)
		clientTLS = []string{"--tls", "--tls-ca", cert, "--tls-curves", "x25519"}
		// Each side's handshakes run on helper goroutines beside its
		// pinned shards: keep them on that side's CPUs too.
		serverPre = append(serverPre, "taskset", "-c", c.ServerCPUs)
		clientPre = append(clientPre, "taskset", "-c", c.ClientCPUs)
	}
	argv := append(append(append(serverPre, filepath.Join(bin, "specweb"), "serve", "--dir", c.Dir), serverFlags...),
		"--port", strconv.Itoa(c.Port), "--cpuset", c.ServerCPUs, "--stats-interval", "0", "--post-log", "-")
	argv = append(argv, c.ServerArgs...)
	ready := func(logs string) bool { return strings.Contains(logs, " directories from ") }
	if c.Server == "nginx" {
		if argv, err = nginxArgv(c, host, bin); err != nil {
			return err
		}
		argv = append(serverPre[:len(serverPre):len(serverPre)], argv...)
		ready = func(string) bool { // nginx says nothing once it listens
			return dial(func() error {
				conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
				if err == nil {
					conn.Close()
				}
				return err
			}) == nil
		}
	}
	fmt.Fprintf(log, "bench specweb: %s\n", strings.Join(argv, " "))
	step := func(conns int) (Step, error) {
		// A fresh server for each run: an empty post log and cache, as
		// SPECweb99's reset between runs; the warm-up fills the cache.
		stop, pid, err := startServer(ctx, argv, ready)
		if err != nil {
			return Step{}, err
		}
		srv := sample(func() schedTime { return readGroupSched(pid) }, 200*time.Millisecond)
		s, err := runWreck(ctx, clientPre, bin, c, addr, conns, append(clientArgs, clientTLS...)...)
		st := srv.end()
		stop()
		if err != nil {
			return s, err
		}
		s.ServerCPU, s.ServerWait = st.run.Seconds()/s.wall.Seconds(), st.wait.Seconds()/s.wall.Seconds()
		s.Load = load1()
		verdict := "valid"
		if !s.Valid {
			verdict = "invalid: " + strings.Join(s.Why, "; ")
		}
		fmt.Fprintf(log, "bench specweb: %d users: %d conforming (%.1f%%), %.0f ops/s, mean response %.2f ms, %s\n",
			conns, s.Conforming, s.Percent, s.OpsPerSec, s.MeanMs, verdict)
		fmt.Fprintf(log, "bench specweb:   CPUs busy (waiting for a CPU): server %.2f (%.2f), client %.2f (%.2f); load average %.1f\n",
			s.ServerCPU, s.ServerWait, s.ClientCPU, s.ClientWait, s.Load)
		return s, nil
	}
	best, tried, err := Search(c.Lo, c.Hi, c.Steps, c.Resolution, step)
	if err != nil {
		return err
	}
	report(out, c, best, tried)
	return nil
}

// startServer starts argv in its own process group and waits until ready
// (given its output so far); stop ends that group (and nothing else) and
// waits. pid is the process's, and its group's id.
func startServer(ctx context.Context, argv []string, ready func(logs string) bool) (stop func(), pid int, err error) {
	srv := exec.Command(argv[0], argv[1:]...)
	srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs := &lockedBuffer{}
	srv.Stdout, srv.Stderr = logs, logs
	if err := srv.Start(); err != nil {
		return nil, 0, fmt.Errorf("start %s: %w", argv[0], err)
	}
	pid = srv.Process.Pid
	exited := make(chan struct{})
	go func() { srv.Wait(); close(exited) }()
	stop = func() {
		syscall.Kill(-srv.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-srv.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if ready(logs.String()) {
			return stop, pid, nil
		}
		select {
		case <-ctx.Done():
			stop()
			return nil, 0, ctx.Err()
		case <-exited:
			return nil, 0, fmt.Errorf("%s exited: %s", argv[0], tail(logs.String()))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, 0, fmt.Errorf("%s: not serving after 20s: %s", argv[0], tail(logs.String()))
		}
	}
}

// lockedBuffer collects a process's output for the goroutine that reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil // keep the start of a chatty server
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runWreck runs one step and reads its verdict.
func runWreck(ctx context.Context, pre []string, bin string, c *Config, addr string, conns int, extra ...string) (Step, error) {
	argv := append(wreckArgv(pre, bin, c, addr, conns), extra...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout bytes.Buffer
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return Step{}, fmt.Errorf("wreck: %w", err)
	}
	pid := cmd.Process.Pid
	cl := sample(func() schedTime { return readSched(pid) }, 200*time.Millisecond)
	err := cmd.Wait()
	ct := cl.end()
	wall := time.Since(t0)
	if err != nil {
		return Step{}, fmt.Errorf("wreck %s: %w: %s", strings.Join(argv, " "), err, tail(stderr.String()))
	}
	b := stdout.Bytes()
	var r struct {
		Specweb *struct {
			Conforming int      `json:"conforming"`
			Percent    float64  `json:"percent_conforming"`
			OpsPerSec  float64  `json:"ops_per_sec"`
			MeanMs     float64  `json:"mean_response_ms"`
			Valid      bool     `json:"valid"`
			Invalid    []string `json:"invalid"`
		} `json:"specweb"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Specweb == nil {
		return Step{}, fmt.Errorf("wreck: no SPECweb99 result in its output (%v)", err)
	}
	w := r.Specweb
	return Step{Conns: conns, Valid: w.Valid, Conforming: w.Conforming, Percent: w.Percent,
		OpsPerSec: w.OpsPerSec, MeanMs: w.MeanMs, Why: w.Invalid,
		ClientCPU: ct.run.Seconds() / wall.Seconds(), ClientWait: ct.wait.Seconds() / wall.Seconds(), wall: wall}, nil
}

// wreckArgv is the client command of one step: the static-only mix for
// nginx, which has no SPECweb99 dynamic modules.
func wreckArgv(pre []string, bin string, c *Config, addr string, conns int) []string {
	argv := append(append(pre[:len(pre):len(pre)], filepath.Join(bin, "wreck")), "--server", addr, "--workload", "specweb99", "--conn", strconv.Itoa(conns),
		"--file-set", strconv.Itoa(c.FileSet), "--warmup", c.Warmup.String(), "--duration", c.Duration.String(),
		"--cpuset", c.ClientCPUs, "--smp", strconv.Itoa(cpuCount(c.ClientCPUs)), "--json")
	if c.Server == "nginx" {
		argv = append(argv, "--specweb-static-only")
	}
	return argv
}

// cpuCount counts the CPUs of a list like 0-3,6.
func cpuCount(list string) int { return max(1, len(cpuIDs(list))) }

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}
