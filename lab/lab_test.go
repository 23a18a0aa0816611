package lab

import (
	"os"
	"testing"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
)

// NeedRoot skips t when the process is not root, saying why.
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("lab tests need root (network namespaces, veth)")
	}
}

func TestNameFits(t *testing.T) {
	for _, c := range []struct {
		prefix, suffix string
		id             uint32
	}{{"pc", "-srv", 0xffffffff}, {"averyveryverylongprefix", "c", 7}, {"", "", 0}} {
		n := Name(c.prefix, c.id, c.suffix)
		if len(n) > 15 || len(n) == 0 {
			t.Errorf("Name(%q,%x,%q)=%q: length %d", c.prefix, c.id, c.suffix, n, len(n))
		}
	}
	if Name("pc", 1, "s") == Name("pc", 2, "s") {
		t.Error("names for different ids collide")
	}
}

func TestSubnetInBenchmarkRange(t *testing.T) {
	for id := uint32(0); id < 1024; id += 7 {
		s := Subnet(id)
		b := s.Addr().As4()
		if b[0] != 198 || (b[1] != 18 && b[1] != 19) || s.Bits() != 24 {
			t.Fatalf("Subnet(%d)=%s outside 198.18.0.0/15", id, s)
		}
	}
}

func TestLabUpDown(t *testing.T) {
	needRoot(t)
	l, err := New(Config{Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	t.Log(l)

	h, err := l.ServerNS.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	sl, err := h.LinkByName(l.ServerIf)
	if err != nil {
		t.Fatal(err)
	}
	if a := sl.Attrs(); a.NumRxQueues != 2 || a.NumTxQueues != 2 || a.MTU != 1500 {
		t.Errorf("server end queues rx %d tx %d mtu %d, want 2 2 1500", a.NumRxQueues, a.NumTxQueues, a.MTU)
	}
	if addrs, _ := h.AddrList(sl, netlink.FAMILY_V4); len(addrs) != 0 {
		t.Errorf("server end has kernel addresses %v", addrs)
	}
	var txrehash []byte
	if err := l.ClientNS.Do(func() (err error) {
		txrehash, err = os.ReadFile("/proc/sys/net/core/txrehash")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if string(txrehash) != "0\n" {
		t.Errorf("client txrehash %q, want 0", txrehash)
	}

	if err := l.ClientNS.Do(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		f, err := e.Features(l.ClientIf)
		if err != nil {
			return err
		}
		for _, k := range []string{"tx-checksum-ip-generic", "tx-tcp-segmentation", "tx-generic-segmentation"} {
			if on, ok := f[k]; !ok || on {
				t.Errorf("client %s: %s present %v on %v, want off", l.ClientIf, k, ok, on)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, ns := range []string{l.ClientNS.Name, l.ServerNS.Name} {
		if _, err := os.Stat(netnsDir + "/" + ns); !os.IsNotExist(err) {
			t.Errorf("netns %s left behind (%v)", ns, err)
		}
	}
}

func TestLabServerInRoot(t *testing.T) {
	needRoot(t)
	l, err := New(Config{ServerRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, err := netlink.LinkByName(l.ServerIf); err != nil {
		t.Fatalf("server end not in root: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(l.ServerIf); err == nil {
		t.Errorf("server end %s left in root", l.ServerIf)
	}
}
