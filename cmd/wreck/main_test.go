package main

import (
	"regexp"
	"strings"
	"testing"

	"percore/wreck"
)

// TestFlagHint: every setting wreck's validation names comes out as the
// flag that sets it.
func TestFlagHint(t *testing.T) {
	field := regexp.MustCompile(`\b(TLS|Native)\.[A-Z]|\b(SMP|Conns|Reqs|Rate|ConnectRate|KeepAlive|Pipeline|Duration|Timeout|Path|MaxHead|Headers|CPUSet|Server|CheckSeq|Sources|Workload|Warmup|FileSet|StaticOnly)\b`)
	for _, args := range [][]string{
		{"--conn", "1", "--smp", "2"},
		{"--reqs", "1", "--smp", "2"},
		{"--keepalive=false", "--pipeline", "2"},
		{"--connect-rate", "5", "--keepalive=false"},
		{"--conn", "2000000"},
		{"--path", "x"},
		{"--header", "x"},
		{"--timeout", "0s"},
		{"--duration", "0s"},
		{"--tls-insecure"},
		{"--tls", "--rate", "5"},
		{"--tls", "--check-seq"},
		{"--tls", "--tls-curves", "x448"},
		{"--tls", "--tls-insecure", "--tls-ca", "ca.pem"},
		{"--network-stack", "native", "--host-ipv4-addr", "198.18.0.3"},
		{"--network-stack", "native", "--iface", "veth0"},
		{"--network-stack", "native", "--iface", "veth0", "--host-ipv4-addr", "198.18.0.3", "--source-ports", "40000-40000", "--smp", "2", "--conn", "2"},
		{"--network-stack", "native", "--iface", "veth0", "--host-ipv4-addr", "198.18.0.3,198.18.0.4", "--rss-key", "6d:5a:56:da:25:5b:0e:c2:41:67:25:3d"},
		{"--network-stack", "native", "--iface", "veth0", "--host-ipv4-addr", "198.18.0.3", "--xdp-frames", "100"},
		{"--network-stack", "native", "--iface", "veth0", "--host-ipv4-addr", "198.18.0.3", "--busy-poll", "70000"},
		{"--network-stack", "native", "--iface", "veth0", "--host-ipv4-addr", "198.18.0.3", "--rss-table", "-1"},
		{"--file-set", "100"},
		{"--specweb-static-only"},
		{"--warmup", "-1s"},
		{"--warmup", "1s", "--reqs", "10"},
		{"--workload", "specweb"},
		{"--workload", "specweb99", "--rate", "10"},
		{"--workload", "specweb99", "--file-set", "-1"},
	} {
		_, _, err := wreck.ParseFlags(append([]string{"--server", "127.0.0.1:1"}, args...))
		if err == nil {
			t.Errorf("%v: accepted", args)
			continue
		}
		msg := flagHint(err).Error()
		if !strings.HasPrefix(msg, "--") || field.MatchString(msg) {
			t.Errorf("%v: %q: want the flags' names", args, msg)
		}
	}
}
