package server

import (
	"strings"
	"testing"
	"time"

	"percore/afxdp"
	"percore/native"
	"percore/netstack"
	"percore/shard"
)

func TestParseNativeFlags(t *testing.T) {
	o, err := ParseFlags([]string{"--network-stack", "native", "--iface", "eth1", "--host-ipv4-addr", "198.18.0.1",
		"--netmask-ipv4-addr", "255.255.0.0", "--gw-ipv4-addr", "198.18.0.254", "--xdp-mode", "generic", "--rss", "queues",
		"--port", "80,8080", "--port", "9000", "--smp", "2", "--poll-mode", "--stats-interval", "2s", "--prometheus-port", "9180", "--busy-poll", "64"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := o.Native
	if n.Iface != "eth1" || n.Addr.String() != "198.18.0.1" || n.Netmask.String() != "255.255.0.0" ||
		n.Gateway.String() != "198.18.0.254" || n.XDPMode != afxdp.Generic || n.Lab || n.RSS != native.RSSQueues || n.CC != netstack.CUBIC || n.BusyPoll != 64 {
		t.Fatalf("native options %+v", n)
	}
	if len(o.Ports) != 3 || o.Ports[0] != 80 || o.Ports[2] != 9000 || o.Port != 80 || o.StatsInterval != 2*time.Second ||
		o.PrometheusAddr != ":9180" || !o.PollMode {
		t.Fatalf("options %+v", o)
	}
	o, err = ParseFlags([]string{"--network-stack", "native", "--lab", "--lab-impair", "loss=5%,seed=3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !o.Native.Lab || o.Native.RSS != native.RSSAuto || o.Native.Impair == nil || o.Native.Impair.Loss != 0.05 || o.Ports[0] != 10000 {
		t.Fatalf("--lab options %+v", o.Native)
	}
	o, err = ParseFlags([]string{"--network-stack", "native", "--lab", "--tcp-cc", "newreno"}, nil)
	if err != nil || o.Native.CC != netstack.NewReno {
		t.Fatalf("--tcp-cc newreno: %v %+v", err, o)
	}
	o, err = ParseFlags([]string{"--network-stack", "native", "--lab", "--memory", "2G/total"}, nil)
	if err != nil || o.Native.Memory != 2<<30 || !o.Native.MemTotal {
		t.Fatalf("--memory 2G/total: %v %+v", err, o.Native)
	}
	if o, _ := ParseFlags(nil, nil); o.StatsInterval != time.Second || o.PrometheusAddr != "" {
		t.Fatalf("defaults: stats %v prometheus %q", o.StatsInterval, o.PrometheusAddr)
	}
}

func TestParseNativeFlagErrors(t *testing.T) {
	native := []string{"--network-stack", "native"}
	cases := map[string][]string{
		"needs --host-ipv4-addr":  append(native, "--iface", "eth1"),
		"--host-ipv4-addr":        append(native, "--iface", "eth1", "--host-ipv4-addr", "::1"),
		"--netmask-ipv4-addr":     append(native, "--iface", "eth1", "--host-ipv4-addr", "198.18.0.1", "--netmask-ipv4-addr", "x"),
		"--gw-ipv4-addr":          append(native, "--iface", "eth1", "--host-ipv4-addr", "198.18.0.1", "--gw-ipv4-addr", "y"),
		"--xdp-mode":              append(native, "--lab", "--xdp-mode", "offload"),
		"--lab-impair needs":      append(native, "--iface", "e", "--host-ipv4-addr", "198.18.0.1", "--lab-impair", "loss=1%"),
		"--lab-impair \"":         append(native, "--lab", "--lab-impair", "loss=lots"),
		"--lab chooses":           append(native, "--lab", "--iface", "eth1"),
		"--port 0":                append(native, "--lab", "--port", "0"),
		"--xdp-frames":            append(native, "--lab", "--xdp-frames", "1000"),
		"--max-connections":       append(native, "--lab", "--max-connections", "0"),
		"--rss \"all\": use auto": append(native, "--lab", "--rss", "all"),
		"--rss belongs":           {"--rss", "off"},
		"--tcp-cc":                append(native, "--lab", "--tcp-cc", "bbr"),
		"--memory \"lots\"":       append(native, "--lab", "--memory", "lots"),
		"--memory \"0\"":          append(native, "--lab", "--memory", "0"),
		"--memory belongs":        {"--memory", "1G"},
		"--busy-poll -1: give":    append(native, "--lab", "--busy-poll", "-1"),
		"--busy-poll belongs":     {"--busy-poll", "64"},
		"belongs to the native s": {"--tcp-cc", "newreno"},
		"belongs to the native":   {"--iface", "eth1"},
		"serves one port":         {"--port", "80,81"},
		"not a port number":       {"--port", "eighty"},
		"--prometheus-port":       {"--prometheus-port", "70000"},
		"--stats-interval":        {"--stats-interval", "-1s"},
	}
	for want, args := range cases {
		_, err := ParseFlags(args, nil)
		if err == nil {
			t.Errorf("%v: no error", args)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("%v: error %q, want one line containing %q", args, msg, want)
		}
	}
}

func TestStatsLine(t *testing.T) {
	prev := []shard.Report{
		{Shard: 0, Counters: []shard.Counter{{Name: "http.requests", Value: 100}, {Name: "native.open", Value: 3}}},
		{Shard: 1, Counters: []shard.Counter{{Name: "http.requests", Value: 50}}},
	}
	cur := []shard.Report{
		{Shard: 0, Counters: []shard.Counter{{Name: "http.requests", Value: 1100}, {Name: "native.open", Value: 4}, {Name: "xsk.rx_ring_full", Kind: shard.Drop, Value: 2}}},
		{Shard: 1, Counters: []shard.Counter{{Name: "http.requests", Value: 550}, {Name: "posix.open", Value: 1}, {Name: "posix.read_errors", Kind: shard.Error, Value: 1}, {Name: "posix.linger_drops", Kind: shard.Drop, Value: 1}}},
	}
	got := statsLine(prev, cur, 2*time.Second)
	want := "stats: 750 req/s, 5 open, 3 drops, 1 errors | s0 500 req/s 4 open 2 drops 0 errors | s1 250 req/s 1 open 1 drops 1 errors"
	if got != want {
		t.Fatalf("statsLine:\n got %q\nwant %q", got, want)
	}
}

func TestParseMemory(t *testing.T) {
	for _, tc := range []struct {
		in    string
		n     int
		total bool
	}{{"1048576", 1 << 20, false}, {"256M", 256 << 20, false}, {"256MiB", 256 << 20, false}, {"64k", 64 << 10, false},
		{"2G/total", 2 << 30, true}, {"1TB", 1 << 40, false}} {
		n, total, err := parseMemory(tc.in)
		if err != nil || n != tc.n || total != tc.total {
			t.Errorf("parseMemory(%q) = %d, %v, %v; want %d, %v", tc.in, n, total, err, tc.n, tc.total)
		}
	}
	for _, bad := range []string{"", "M", "-1M", "1.5G", "1X", "2G/all", "0", "99999999T"} {
		if _, _, err := parseMemory(bad); err == nil {
			t.Errorf("parseMemory(%q): no error", bad)
		}
	}
}

// A shard's budget: --memory per shard, a share of --memory/total, or the
// sizing rule for each queue it owns.
func TestShardMemory(t *testing.T) {
	for _, tc := range []struct {
		o              NativeOptions
		shards, queues int
		want           int
	}{
		{NativeOptions{Memory: 1 << 30}, 4, 1, 1 << 30},
		{NativeOptions{Memory: 1 << 30, MemTotal: true}, 4, 1, 256 << 20},
		{NativeOptions{MaxConns: 16384}, 2, 1, 256 << 20},
		{NativeOptions{MaxConns: 16384}, 1, 2, 512 << 20},
	} {
		if got := shardMemory(&tc.o, tc.shards, tc.queues); got != tc.want {
			t.Errorf("shardMemory(%+v, %d shards, %d queues) = %d, want %d", tc.o, tc.shards, tc.queues, got, tc.want)
		}
	}
}
