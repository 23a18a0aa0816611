package specsearch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"percore/shard"
)

// nginxArgv writes an nginx configuration under dir (its own prefix: pid,
// logs and temp paths never touch the system's nginx) and returns the
// command that runs it in the foreground.
func nginxArgv(c *Config, host, dir string) ([]string, error) {
	if _, err := exec.LookPath("nginx"); err != nil {
		return nil, fmt.Errorf("nginx not found: apt-get install nginx")
	}
	prefix := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, fmt.Errorf("nginx prefix: %w", err)
	}
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxConf(c, host, prefix)), 0o644); err != nil {
		return nil, fmt.Errorf("write nginx config: %w", err)
	}
	return []string{"nginx", "-p", prefix, "-c", conf, "-e", filepath.Join(prefix, "error.log")}, nil
}

// nginxConf serves the file set's directory as static files: one worker per
// server CPU, pinned to it, a reuseport listener, sendfile, open file
// descriptors cached (as specweb serve caches files), access log off.
func nginxConf(c *Config, host, prefix string) string {
	cpus := cpuIDs(c.ServerCPUs)
	masks := make([]string, len(cpus))
	for i, cpu := range cpus {
		masks[i] = "1" + strings.Repeat("0", cpu) // the rightmost digit is CPU 0
	}
	return fmt.Sprintf(`daemon off;
worker_processes %d;
worker_cpu_affinity %s;
worker_rlimit_nofile 1048576;
pid %[3]s/nginx.pid;
error_log %[3]s/error.log warn;
events { worker_connections 65536; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	open_file_cache max=200000 inactive=10m;
	default_type application/octet-stream;
	client_body_temp_path %[3]s/body;
	proxy_temp_path %[3]s/proxy;
	fastcgi_temp_path %[3]s/fastcgi;
	uwsgi_temp_path %[3]s/uwsgi;
	scgi_temp_path %[3]s/scgi;
	server {
		listen %[4]s:%[5]d reuseport backlog=4096;
		root %[6]s;
	}
}
`, len(cpus), strings.Join(masks, " "), prefix, host, c.Port, c.Dir)
}

// cpuIDs lists the CPUs of a list like 0-3,6, which Main checked.
func cpuIDs(list string) []int {
	cpus, _ := shard.ParseCPUSet(list)
	return cpus
}
