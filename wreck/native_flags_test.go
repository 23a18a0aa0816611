package wreck

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestNativeFlags(t *testing.T) {
	base := []string{"--server", "198.18.0.1:80"}
	nat := []string{"--network-stack", "native", "--iface", "veth0", "--host-ipv4-addr", "198.18.0.3", "--server", "198.18.0.1:80"}
	native := func(more ...string) []string { return append(slices.Clone(nat), more...) }

	cfg, _, err := ParseFlags(native("--smp", "2", "--source-ports", "40000-40999", "--gw-ipv4-addr", "198.18.0.254", "--busy-poll", "64"))
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.Native
	if !n.Enabled || n.Iface != "veth0" || n.Addr != netip.MustParseAddr("198.18.0.3") || n.Gateway != netip.MustParseAddr("198.18.0.254") {
		t.Errorf("native config %+v", n)
	}
	if n.Netmask != netip.MustParseAddr("255.255.255.0") || n.Frames != 0 || n.RSSTable != 0 || n.BusyPoll != 64 {
		t.Errorf("defaults: netmask %v frames %d rss table %d", n.Netmask, n.Frames, n.RSSTable)
	}
	if lo, hi := n.shardPorts(0, 2); lo != 40000 || hi != 40499 {
		t.Errorf("shard 0 ports %d-%d, want 40000-40499", lo, hi)
	}
	if lo, hi := n.shardPorts(1, 2); lo != 40500 || hi != 40999 {
		t.Errorf("shard 1 ports %d-%d, want 40500-40999", lo, hi)
	}

	cfg, _, err = ParseFlags(native("--host-ipv4-addr", "198.18.0.3-198.18.0.5,198.18.0.9"))
	if err != nil {
		t.Fatal(err)
	}
	if n := cfg.Native; n.Addr != netip.MustParseAddr("198.18.0.3") || fmt.Sprint(n.Aliases) != "[198.18.0.4 198.18.0.5 198.18.0.9]" {
		t.Errorf("--host-ipv4-addr 198.18.0.3-198.18.0.5,198.18.0.9: address %v, aliases %v", n.Addr, n.Aliases)
	}

	cfg, _, err = ParseFlags(native("--rss-key", "6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Native.RSSKey) != 16 || cfg.Native.RSSKey[0] != 0x6d {
		t.Errorf("rss key %x", cfg.Native.RSSKey)
	}
	if lo, hi := cfg.Native.shardPorts(1, 2); lo != 32768 || hi != 60999 {
		t.Errorf("with an RSS key every shard shares the range, got %d-%d", lo, hi)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{append([]string{"--iface", "veth0"}, base...), "--iface belongs to the native stack"},
		{append([]string{"--network-stack", "dpdk"}, base...), "use posix or native"},
		{append([]string{"--network-stack", "native", "--host-ipv4-addr", "198.18.0.3"}, base...), "Native.Iface: required"},
		{append([]string{"--network-stack", "native", "--iface", "veth0"}, base...), "Sources: required"},
		{[]string{"--network-stack", "native", "--iface", "veth0", "--host-ipv4-addr", "198.18.0.3", "--server", "example.com:80"}, "needs an IPv4 address and port"},
		{native("--host-ipv4-addr", "::1"), "want addresses like"},
		{native("--host-ipv4-addr", "198.18.0.3-198.18.0.2"), "want a range"},
		{native("--host-ipv4-addr", "198.18.0.3,198.18.0.3"), "twice"},
		{native("--host-ipv4-addr", "198.18.0.3-198.18.1.255"), "more than 256"},
		{native("--host-ipv4-addr", "198.18.0.3,198.18.0.4", "--rss-key", "6d:5a:56:da:25:5b:0e:c2:41:67:25:3d"), "Native.RSSKey: takes one address in Sources"},
		{native("--source-ports", "9-3"), "want a range like"},
		{native("--source-ports", "40000-40000", "--smp", "2", "--conn", "2"), "fewer ports than SMP"},
		{native("--rss-key", "zz"), "hex"},
		{native("--xdp-frames", "100"), "power of two"},
		{native("--busy-poll", "70000"), "Native.BusyPoll: 70000: give a budget"},
		{append([]string{"--busy-poll", "64"}, base...), "--busy-poll belongs to the native stack"},
	} {
		_, _, err := ParseFlags(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseFlags(%q) = %v, want an error with %q", c.args, err, c.want)
		}
	}
}
