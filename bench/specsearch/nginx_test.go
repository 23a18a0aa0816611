package specsearch

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestNginxArgs: nginx is driven with the static-only mix and serves the
// file set's directory; percore gets the full mix.
func TestNginxArgs(t *testing.T) {
	c := &Config{Server: "nginx", Stack: "posix", FileSet: 20, ClientCPUs: "0", ServerCPUs: "1,3", Port: 18080, Dir: "/srv/sw"}
	if argv := wreckArgv(nil, "/b", c, "127.0.0.1:18080", 10); !slices.Contains(argv, "--specweb-static-only") {
		t.Errorf("nginx without the static-only mix: %v", argv)
	}
	c.Server = "percore"
	if argv := wreckArgv(nil, "/b", c, "127.0.0.1:18080", 10); slices.Contains(argv, "--specweb-static-only") {
		t.Errorf("percore on the static-only mix: %v", argv)
	}
	conf := nginxConf(c, "127.0.0.1", "/p")
	for _, want := range []string{"worker_processes 2;", "worker_cpu_affinity 10 1000;", "listen 127.0.0.1:18080 ", "root /srv/sw;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx config lacks %q:\n%s", want, conf)
		}
	}
	c.Server = "nginx"
	var b bytes.Buffer
	report(&b, c, Step{Conns: 10, Valid: true}, []Step{{Conns: 10, Valid: true}})
	for _, want := range []string{"SPECweb99-style result (static-only mix: nginx has no SPECweb99 dynamic modules) = 10", "| nginx (this run, static-only mix) |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	for _, args := range [][]string{{"--server", "apache"}, {"--server", "nginx", "--network-stack", "native"}, {"--server", "nginx", "--server-args", "--cache-size 1G"},
		{"--client-stack", "dpdk"}, {"--server-cpus", "1,x"}, {"--client-cpus", "0-70000"}, {"--server-cpus", ""}} {
		if Main(context.Background(), args, &b, &b) != 2 {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestNginxRun: one short step of nginx on the static-only mix over a
// small file set.
func TestNginxRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: nginx's workers and wreck's users")
	}
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("needs nginx (apt-get install nginx)")
	}
	if testing.Short() {
		t.Skip("builds specweb and wreck and runs them")
	}
	root, _ := filepath.Abs("../..")
	var out, log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"--server", "nginx", "--lo", "5", "--hi", "5", "--steps", "1", "--warmup", "1s", "--duration", "2s",
		"--dir", t.TempDir(), "--root", root, "--port", "18091"}
	if rc := Main(ctx, args, &out, &log); rc != 0 {
		t.Fatalf("exit %d:\n%s", rc, log.String())
	}
	if !strings.Contains(out.String(), "SPECweb99-style result (static-only mix") || !strings.Contains(out.String(), "| 5 | 5 | 100.0 |") {
		t.Errorf("5 users on nginx:\n%s\n%s", out.String(), log.String())
	}
}
