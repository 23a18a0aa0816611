package specsearch

import (
	"fmt"
	"io"
	"strings"
)

// published are SPECweb99 results of TUX (Red Hat Content Accelerator 2,
// a static server in the Linux kernel with dynamic content in user
// modules), from SPEC's published SPECweb99 results
// (www.spec.org/web99/results/).
var published = []struct {
	server, machine, network string
	cores, conns             int
}{
	{"TUX 2 (Red Hat Content Accelerator)", "4x AMD Opteron 846 2.0 GHz, 32 GB", "4x 1 GbE", 4, 10502},
	{"TUX 2 (Red Hat Content Accelerator)", "2x Intel Xeon 3.06 GHz, 12 GB", "1 GbE", 2, 5373},
}

// report prints the steps, the result line and the comparison table.
func report(w io.Writer, c *Config, best Step, tried []Step) {
	cores := cpuCount(c.ServerCPUs)
	fmt.Fprintf(w, "| users | conforming | %% | ops/s | mean response ms | server CPU (waiting) | client CPU (waiting) | load | verdict |\n|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, s := range tried {
		v := "valid"
		if !s.Valid {
			v = "invalid: " + strings.Join(s.Why, "; ")
		}
		fmt.Fprintf(w, "| %d | %d | %.1f | %.0f | %.2f | %.2f (%.2f) | %.2f (%.2f) | %.1f | %s |\n", s.Conns, s.Conforming, s.Percent, s.OpsPerSec, s.MeanMs,
			s.ServerCPU, s.ServerWait, s.ClientCPU, s.ClientWait, s.Load, v)
	}
	server, mix, bench := serverName(c), "", "SPECweb99"
	if c.Server == "nginx" {
		mix = " (static-only mix: nginx has no SPECweb99 dynamic modules)"
	}
	if c.TLS {
		bench = "SPECweb99_SSL"
		server += " over TLS 1.3"
	}
	setting := fmt.Sprintf("%s, %d server core(s), %s warm-up, %s measured, one run per step, file set for %d connections",
		server, cores, c.Warmup, c.Duration, c.FileSet)
	if c.FileSet < best.Conns {
		setting += " (smaller than the rules' set for the result)"
	}
	fmt.Fprintln(w)
	if best.Conns == 0 {
		fmt.Fprintf(w, "%s-style result%s: none: %d users already fail (%s; not an official run)\n", bench, mix, tried[0].Conns, setting)
		return
	}
	bound := ""
	if best.Conns == c.Hi {
		bound = " (at least: --hi passed)"
	}
	fmt.Fprintf(w, "%s-style result%s = %d conforming connections%s, %.0f ops/s (%s; not an official run)\n\n",
		bench, mix, best.Conns, bound, best.OpsPerSec, setting)
	fmt.Fprintf(w, "| server | machine | network | cores | conforming connections | per core |\n|---|---|---|---:|---:|---:|\n")
	link := "loopback"
	switch {
	case c.Stack == "native" && c.ClientStack == "native":
		link = "veth, AF_XDP copy mode on both ends"
	case c.Stack == "native":
		link = "veth, AF_XDP copy mode on the server end"
	case c.ClientStack == "native":
		link = "veth, AF_XDP copy mode on the client end"
	}
	row := server + " (this run)"
	if c.Server == "nginx" {
		row = server + " (this run, static-only mix)"
	}
	fmt.Fprintf(w, "| %s | this machine, %s client on CPUs %s | %s | %d | %d | %d |\n",
		row, c.ClientStack, c.ClientCPUs, link, cores, best.Conns, best.Conns/cores)
	if c.TLS {
		for _, p := range publishedSSL {
			fmt.Fprintf(w, "| %s (SPECweb99_SSL) | %s | | %d | %d | %d |\n", p.server, p.machine, p.cores, p.conns, p.conns/p.cores)
		}
		fmt.Fprintf(w, "\nZeus: SPEC's published SPECweb99_SSL results (www.spec.org/web99ssl/results/): official runs (1200 s warm-up, three 1200 s runs),\n"+
			"clients on separate machines over real NICs, with the SSL protocols and ciphers of that time (see each result's disclosure); this run is\n"+
			"shorter, on one machine, its client sharing it, TLS 1.3 with X25519, an ECDSA P-256 certificate, AES-128-GCM and a full handshake per connection.\n")
		return
	}
	for _, p := range published {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %d |\n", p.server, p.machine, p.network, p.cores, p.conns, p.conns/p.cores)
	}
	fmt.Fprintf(w, "\nTUX: SPEC's published SPECweb99 results (www.spec.org/web99/results/): official runs of 1200 s warm-up and three 1200 s runs,\n"+
		"clients on separate machines over real NICs; this run is shorter, on one machine, its client sharing it.\n")
	if c.Server == "nginx" {
		fmt.Fprintf(w, "nginx: the static-only mix (SPECweb99's static GETs alone: the same files, pacing and checks), as nginx has no SPECweb99 dynamic modules;\n"+
			"not comparable with the full mix of the other rows.\n")
	}
}

// serverName is the server as the result names it.
func serverName(c *Config) string {
	if c.Server == "nginx" {
		return "nginx"
	}
	return "percore " + c.Stack
}
