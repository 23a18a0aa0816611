package server

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"percore/afxdp"
	"percore/lab"
	"percore/shard"
)

// TestNativeStartErrors checks that the setup failures a user meets come out
// of Main as one line naming the cause and the fix, with exit status 2, and
// leave nothing attached.
func TestNativeStartErrors(t *testing.T) {
	requireNative(t)
	cpus, err := shard.AllowedCPUs()
	must(t, err)
	if len(cpus) < 2 {
		t.Skip("needs 2 CPUs for --smp 2")
	}
	l, err := lab.New(lab.Config{Prefix: "pe", Queues: 1, ServerRoot: true})
	must(t, err)
	t.Cleanup(func() { l.Close() })
	base := []string{"--network-stack", "native", "--host-ipv4-addr", l.ServerIP.String(), "--stats-interval", "0"}
	run := func(args ...string) (int, string) {
		var stderr bytes.Buffer
		code := Main("httpd", append(append([]string{}, base...), args...), &stderr, nil, nil)
		return code, stderr.String()
	}
	check := func(name string, code int, stderr string, want ...string) {
		t.Helper()
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "httpd: ") {
			t.Errorf("%s: exit %d, stderr %q; want 2 and one line", name, code, stderr)
		}
		for _, w := range want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q lacks %q", name, stderr, w)
			}
		}
	}
	code, stderr := run("--iface", l.ServerIf, "--smp", "2", "--rss", "queues") // auto would forward
	check("queues", code, stderr, "ethtool -L "+l.ServerIf+" combined 2", "has 1")

	code, stderr = run("--iface", "pe-nosuch0", "--smp", "1")
	check("no interface", code, stderr, "no such interface", "--lab")

	// Somebody else's XDP program on the interface.
	p, err := afxdp.NewProgram(afxdp.ProgramConfig{IP: l.ServerIP})
	must(t, err)
	defer p.Close()
	must(t, p.Attach(l.ServerIf, afxdp.Native))
	code, stderr = run("--iface", l.ServerIf, "--smp", "1")
	check("xdp busy", code, stderr, "already has an XDP program", "xdp off")
	must(t, p.Detach())

	// An MTU veth takes no XDP at, refused before the attach.
	link, err := netlink.LinkByName(l.ServerIf)
	must(t, err)
	must(t, netlink.LinkSetMTU(link, 4000))
	code, stderr = run("--iface", l.ServerIf, "--smp", "1")
	check("jumbo", code, stderr, "MTU 4000", "up to 3506", "`ip link set dev "+l.ServerIf+" mtu 1500`", "--xdp-mode generic")
	must(t, netlink.LinkSetMTU(link, 1500))

	// With the interface free again the same command line starts (and the
	// failed attempts left nothing behind that would stop it).
	o, err := ParseFlags(append(append([]string{}, base...), "--iface", l.ServerIf, "--smp", "1"), nil)
	must(t, err)
	o.Native.Logf = t.Logf
	s, err := Start(o, nil)
	if err != nil {
		t.Fatalf("start after the failures: %v", err)
	}
	s.Stop()
	<-s.Done()
	if s.closeErr != nil {
		t.Fatal(s.closeErr)
	}
}
