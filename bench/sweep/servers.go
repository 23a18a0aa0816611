package sweep

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"percore/lab"
)

// Labels are the servers' names in tables and the plot.
var Labels = map[string]string{
	"native":   "percore native",
	"posix":    "percore posix",
	"nginx":    "nginx",
	"fasthttp": "fasthttp",
	"gnet":     "gnet",
}

// basePort + index in AllServers is each server's port.
const basePort = 18080

func serverPort(name string) int {
	for i, s := range AllServers {
		if s == name {
			return basePort + i
		}
	}
	panic("sweep: unknown server " + name) // names are validated by Config
}

// peersBuildLimit bounds building bench/peers, downloads included.
const peersBuildLimit = 2 * time.Minute

// binaries are the programs the sweep built into its temporary directory.
type binaries struct {
	dir          string
	httpd, wreck string
	peers        string // "" when the peers module did not build (skip reason in peersErr)
	peersErr     error
}

// build compiles httpd and wreck from the main module and the peers from
// their own module (bench/peers). A peers failure (no network for its
// modules) only skips fasthttp and gnet.
func build(ctx context.Context, root, dir string, needPeers bool) (*binaries, error) {
	b := &binaries{dir: dir, httpd: filepath.Join(dir, "httpd"), wreck: filepath.Join(dir, "wreck")}
	gobuild := func(ctx context.Context, moddir, out string, pkgs ...string) error {
		cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", out}, pkgs...)...)
		cmd.Dir = moddir
		if o, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s in %s: %v: %s", strings.Join(pkgs, " "), moddir, err, strings.TrimSpace(string(o)))
		}
		return nil
	}
	if err := gobuild(ctx, root, b.httpd, "./cmd/httpd"); err != nil {
		return nil, err
	}
	if err := gobuild(ctx, root, b.wreck, "./cmd/wreck"); err != nil {
		return nil, err
	}
	if needPeers {
		// Its modules may have to be downloaded: bounded, so a machine
		// without a module proxy skips the peers instead of hanging.
		pctx, cancel := context.WithTimeout(ctx, peersBuildLimit)
		defer cancel()
		b.peers = filepath.Join(dir, "peers")
		if b.peersErr = gobuild(pctx, filepath.Join(root, "bench", "peers"), b.peers, "."); b.peersErr != nil {
			b.peers = ""
		}
	}
	return b, nil
}

// serverArgv is the command that starts server name with smp shards on cpus,
// listening on port; files it needs (nginx's prefix) go under dir.
func serverArgv(name string, cfg *Config, b *binaries, t *target, smp int, port int, dir string) ([]string, error) {
	cpus := cpuList(t.serverCPUs)
	p := strconv.Itoa(port)
	var argv []string
	switch name {
	case "native":
		argv = []string{b.httpd, "--network-stack", "native", "--iface", t.iface,
			"--host-ipv4-addr", t.serverIP.String(), "--smp", strconv.Itoa(smp), "--cpuset", cpus,
			"--port", p, "--stats-interval", "0"}
		if cfg.BusyPoll > 0 {
			argv = append(argv, "--busy-poll", strconv.Itoa(cfg.BusyPoll))
		}
	case "posix":
		argv = []string{b.httpd, "--smp", strconv.Itoa(smp), "--cpuset", cpus,
			"--address", t.serverIP.String(), "--port", p, "--stats-interval", "0"}
	case "nginx":
		conf, err := nginxConf(filepath.Join(dir, "nginx-"+strconv.Itoa(smp)), t, smp, port)
		if err != nil {
			return nil, err
		}
		argv = []string{"nginx", "-p", filepath.Dir(conf), "-c", conf, "-e", filepath.Join(filepath.Dir(conf), "error.log")}
	case "fasthttp", "gnet":
		if b.peers == "" {
			return nil, fmt.Errorf("peers did not build: %w", b.peersErr)
		}
		argv = []string{b.peers, name, "--port", p, "--smp", strconv.Itoa(smp), "--cpuset", cpus}
	default:
		return nil, fmt.Errorf("unknown server %q", name)
	}
	return append(append([]string{}, t.serverPre...), argv...), nil
}

// nginxConf writes an nginx configuration with its own prefix under dir (pid,
// logs and temp paths never touch the system's nginx): smp workers, each
// pinned to one of the server CPUs, a reuseport listener, GET / answering
// the same 5-byte hello as percore, access log off.
func nginxConf(dir string, t *target, smp, port int) (string, error) {
	if _, err := exec.LookPath("nginx"); err != nil {
		return "", fmt.Errorf("nginx not found: apt-get install nginx")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("nginx prefix: %w", err)
	}
	masks := make([]string, len(t.serverCPUs))
	for i, c := range t.serverCPUs {
		masks[i] = "1" + strings.Repeat("0", c) // the rightmost digit is CPU 0
	}
	conf := fmt.Sprintf(`daemon off;
worker_processes %d;
worker_cpu_affinity %s;
pid %[3]s/nginx.pid;
error_log %[3]s/error.log warn;
events { worker_connections 65536; }
http {
	access_log off;
	keepalive_requests 100000000;
	client_body_temp_path %[3]s/body;
	proxy_temp_path %[3]s/proxy;
	fastcgi_temp_path %[3]s/fastcgi;
	uwsgi_temp_path %[3]s/uwsgi;
	scgi_temp_path %[3]s/scgi;
	server {
		listen %[4]s:%[5]d reuseport backlog=4096;
		location = / { default_type text/plain; return 200 "hello"; }
	}
}
`, smp, strings.Join(masks, " "), dir, t.serverIP, port)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return "", fmt.Errorf("write nginx config: %w", err)
	}
	return path, nil
}

// clientArgv is the measured client command against port for dur. wrk
// pipelines with bench/wrk-pipeline.lua (TechEmpower's pipeline.lua).
func clientArgv(client string, cfg *Config, b *binaries, t *target, port, pipeline int, dur time.Duration) []string {
	addr := fmt.Sprintf("%s:%d", t.serverIP, port)
	argv := append([]string{}, t.clientPre...)
	if len(t.clientCPUs) > 0 && client == "wrk" {
		argv = append(argv, "taskset", "-c", cpuList(t.clientCPUs))
	}
	secs := strconv.Itoa(int(dur / time.Second))
	switch client {
	case "wreck":
		wreck := b.wreck
		if cfg.Iface != "" {
			wreck = cfg.ClientWreck
		}
		argv = append(argv, wreck, "--server", addr, "--smp", strconv.Itoa(t.threads),
			"--conn", strconv.Itoa(cfg.Conns), "--pipeline", strconv.Itoa(pipeline), "--duration", secs+"s", "--json")
		if len(t.clientCPUs) > 0 {
			argv = append(argv, "--cpuset", cpuList(t.clientCPUs))
		}
	case "wreck-native":
		// wreck on percore's native stack with an address no kernel interface
		// holds. In the lab: on the client end's queues (lab.NativePair's .3),
		// entering the client namespace itself (--netns), one client shard
		// per queue at most (the lab has as many queues as server shards). On
		// bare metal: on the client machine's NIC, with that NIC's RSS key and
		// table size, so each client shard opens only connections whose
		// replies hash to its own queue.
		if t.lab == nil {
			argv = append(argv, cfg.ClientWreck, "--network-stack", "native", "--iface", cfg.ClientIface,
				"--host-ipv4-addr", cfg.ClientAddr.String(), "--smp", strconv.Itoa(t.threads))
			if t.rssKey != "" {
				argv = append(argv, "--rss-key", t.rssKey, "--rss-table", strconv.Itoa(t.rssTable))
			}
		} else {
			n := min(t.threads, t.queues)
			argv = []string{b.wreck, "--network-stack", "native", "--iface", t.lab.ClientIf, "--netns", t.lab.ClientNS.Name,
				"--host-ipv4-addr", lab.Host(t.lab.Subnet, 3).String(), "--netmask-ipv4-addr", "255.255.255.0",
				"--smp", strconv.Itoa(n), "--cpuset", cpuList(t.clientCPUs[:n])}
		}
		argv = append(argv, "--server", addr, "--conn", strconv.Itoa(cfg.Conns), "--pipeline", strconv.Itoa(pipeline),
			"--duration", secs+"s", "--json")
		if cfg.BusyPoll > 0 {
			argv = append(argv, "--busy-poll", strconv.Itoa(cfg.BusyPoll))
		}
	case "wrk":
		argv = append(argv, "wrk", "-t", strconv.Itoa(min(t.threads, cfg.Conns)), "-c", strconv.Itoa(cfg.Conns),
			"-d", secs+"s", "--latency")
		if pipeline > 1 {
			script := filepath.Join(cfg.Root, "bench", "wrk-pipeline.lua")
			if cfg.Iface != "" {
				script = cfg.ClientWrkScript
			}
			argv = append(argv, "-s", script, "http://"+addr+"/", "--", strconv.Itoa(pipeline))
		} else {
			argv = append(argv, "http://"+addr+"/")
		}
	}
	return argv
}
