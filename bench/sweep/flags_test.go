package sweep

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	c, err := ParseFlags([]string{"--quick", "--smp", "1-2", "--servers", "posix,gnet"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Quick || c.Rounds != 1 || c.Duration != time.Second || !slices.Equal(c.SMPs, []int{1, 2}) ||
		!slices.Equal(c.Servers, []string{"posix", "gnet"}) || !strings.HasPrefix(c.Out, "bench/out/") {
		t.Errorf("--quick config: %+v", c)
	}
	c, err = ParseFlags([]string{"--iface", "eth2", "--host-ipv4-addr", "198.18.0.1", "--cpuset", "0-3",
		"--client-exec", "ssh root@loadgen", "--client-threads", "8", "--pipeline", "1,16", "--busy-poll", "64"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.SMPs, []int{1, 2, 3, 4}) || !slices.Equal(c.ClientExec, []string{"ssh", "root@loadgen"}) ||
		!slices.Equal(c.Pipeline, []int{1, 16}) || c.ServerAddr.String() != "198.18.0.1" || c.BusyPoll != 64 {
		t.Errorf("--iface config: %+v", c)
	}
	c, err = ParseFlags([]string{"--iface", "eth2", "--host-ipv4-addr", "198.18.0.1", "--cpuset", "0-3",
		"--client-exec", "ssh root@loadgen", "--client-threads", "8", "--client-iface", "eth5", "--client-ipv4-addr", "198.18.0.3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.Clients, "wreck-native") || c.ClientIface != "eth5" || c.ClientAddr.String() != "198.18.0.3" {
		t.Errorf("--client-iface config: %+v", c)
	}
	metal := []string{"--iface", "eth2", "--cpuset", "0-3", "--host-ipv4-addr", "198.18.0.1", "--client-exec", "ssh x", "--client-threads", "2"}
	for _, bad := range [][]string{
		append(slices.Clone(metal), "--clients", "wreck-native"),
		append(slices.Clone(metal), "--client-iface", "eth5", "--client-ipv4-addr", "::1"),
		{"--smp", "0"},
		{"--smp", "1-999"},
		{"--duration", "1500ms"},
		{"--rounds", "0"},
		{"--servers", "apache"},
		{"--clients", ""},
		{"--pipeline", "0"},
		{"--conn", "0"},
		{"--busy-poll", "-1"},
		{"extra"},
		{"--iface", "eth2"},
		{"--iface", "eth2", "--cpuset", "0-3"},
		{"--iface", "eth2", "--cpuset", "0-3", "--host-ipv4-addr", "::1"},
		{"--iface", "eth2", "--cpuset", "0-3", "--host-ipv4-addr", "198.18.0.1"},
		{"--iface", "eth2", "--cpuset", "0-3", "--host-ipv4-addr", "198.18.0.1", "--client-exec", "ssh x"},
		{"--iface", "eth2", "--cpuset", "0-1", "--smp", "4", "--host-ipv4-addr", "198.18.0.1", "--client-exec", "ssh x", "--client-threads", "2"},
	} {
		if _, err := ParseFlags(bad, io.Discard); err == nil {
			t.Errorf("ParseFlags accepted %q", bad)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseFlags(%q): error is not one line: %q", bad, err)
		}
	}
}
