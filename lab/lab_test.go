package lab

import (
	"os"
	"testing"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"

	"percore/internal/testutil"
)

// needRoot skips t when the process is not root, saying why.
func needRoot(t testing.TB) {
	t.Helper()
	testutil.NeedRoot(t, "lab tests make network namespaces and veth pairs")
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

// TestLabBetween builds the wire through a middle namespace with two veth
// pairs, the way an impairment bridge does, and checks Close removes it.
func TestLabBetween(t *testing.T) {
	needRoot(t)
	var mid *NS
	l, err := New(Config{Queues: 2, Between: func(l *Lab, c Config) error {
		var err error
		if mid, err = NewNS(Name("pc", l.ID, "-mid")); err != nil {
			return err
		}
		l.OnClose(mid.Delete)
		if err := NewVeth(VethConfig{Name: l.ServerIf, NS: l.ServerNS, PeerName: "ms", PeerNS: mid, Queues: c.Queues, MTU: c.MTU}); err != nil {
			return err
		}
		return NewVeth(VethConfig{Name: "mc", NS: mid, PeerName: l.ClientIf, PeerNS: l.ClientNS, Queues: c.Queues, MTU: c.MTU})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	h, err := mid.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, n := range []string{"ms", "mc"} {
		if _, err := h.LinkByName(n); err != nil {
			t.Errorf("middle %s: %v", n, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(netnsDir + "/" + mid.Name); !os.IsNotExist(err) {
		t.Errorf("middle netns left behind (%v)", err)
	}
}

// TestListAndRemove is what `lab status` and `lab down NAME` do.
func TestListAndRemove(t *testing.T) {
	needRoot(t)
	l, err := New(Config{Prefix: "pr"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	name := l.ClientNS.Name[:len(l.ClientNS.Name)-len("-cli")]
	got, err := Namespaces(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("Namespaces(%q) = %v, want the client and server namespaces", name, got)
	}
	if short, _ := Namespaces(name[:len(name)-1]); len(short) != 0 {
		t.Fatalf("a shorter name matched: %v", short)
	}
	if err := RemoveByName(got); err != nil {
		t.Fatal(err)
	}
	if got, _ := List(name); len(got) != 0 {
		t.Fatalf("after RemoveByName: %v", got)
	}
	// Close after an outside removal still succeeds.
	if err := l.Close(); err != nil {
		t.Fatalf("Close after removal: %v", err)
	}
}

func TestLabRejectsMTUAboveXDPLimit(t *testing.T) {
	needRoot(t)
	if l, err := New(Config{MTU: MaxXDPMTU + 1}); err == nil {
		l.Close()
		t.Fatal("lab with MTU above the native-XDP limit")
	}
	l, err := New(Config{MTU: MaxXDPMTU})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}
