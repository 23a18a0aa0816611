package native

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"percore/afxdp"
)

// checkCase is one NIC, as the ioctls would read it, and what the checks
// must say about it in a mode: nothing (want nil) or one line with the
// sentinel and the fix.
type checkCase struct {
	name string
	nic  nic
	mode afxdp.AttachMode
	want error
	fix  string
}

func runChecks(t *testing.T, cases []checkCase) {
	t.Helper()
	for _, c := range cases {
		err := c.nic.check(c.mode)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
			continue
		}
		if err == nil {
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.fix) || strings.Contains(msg, "\n") || strings.Contains(msg, "--") {
			t.Errorf("%s: %q, want one line with %q and no flag", c.name, msg, c.fix)
		}
	}
}

func on(names ...string) map[string]bool {
	m := map[string]bool{"rx-gro": true} // GRO is on by default everywhere
	for _, n := range names {
		m[n] = true
	}
	return m
}

func TestCheckOffloadAndMTU(t *testing.T) {
	runChecks(t, []checkCase{
		{"i40e as shipped", nic{name: "eth2", driver: "i40e", features: on(), mtu: 1500}, afxdp.Native, nil, ""},
		{"mlx5 with LRO", nic{name: "eth2", driver: "mlx5_core", features: on("rx-lro"), mtu: 1500}, afxdp.Native, ErrOffload,
			"rx-lro on: `ethtool -K eth2 lro off`"},
		{"virtio_net with HW-GRO", nic{name: "eth0", driver: "virtio_net", features: on("rx-gro-hw"), mtu: 1500}, afxdp.Native, ErrOffload,
			"`ethtool -K eth0 rx-gro-hw off`"},
		{"both", nic{name: "eth2", driver: "mlx5_core", features: on("rx-lro", "rx-gro-hw"), mtu: 1500}, afxdp.Native, ErrOffload,
			"rx-lro and rx-gro-hw on: `ethtool -K eth2 lro off rx-gro-hw off`"},
		{"ice jumbo", nic{name: "eth3", driver: "ice", features: on(), mtu: 9000}, afxdp.Native, ErrJumbo,
			"eth3 (ice) has MTU 9000, and ice takes XDP on one buffer up to 3046: `ip link set dev eth3 mtu 1500` (at most 3046)"},
		{"i40e at the limit", nic{name: "eth2", driver: "i40e", features: on(), mtu: 3046}, afxdp.Native, nil, ""},
		{"mlx5 jumbo", nic{name: "eth2", driver: "mlx5_core", features: on(), mtu: 3499}, afxdp.Native, ErrJumbo, "up to 3498"},
		{"unknown driver jumbo", nic{name: "eth2", driver: "bnxt_en", features: on(), mtu: 9000}, afxdp.Native, nil, ""},
		{"no ethtool", nic{name: "eth2", mtu: 1500}, afxdp.Native, nil, ""},
	})
}

// TestReadNICOnVeth reads the lab's veth through the ioctls, and Open
// refuses an MTU veth takes no XDP at before it attaches anything.
func TestReadNICOnVeth(t *testing.T) {
	pair := newPair(t, "nn")
	ifi, err := net.InterfaceByName(pair.ServerIf)
	if err != nil {
		t.Fatal(err)
	}
	n := readNIC(ifi)
	if n.driver != "veth" || n.mtu != 1500 || n.kernel[0] < 5 || len(n.vlans) != 0 || n.features == nil || n.features["rx-lro"] || n.features["rx-gro-hw"] {
		t.Fatalf("read %+v", n)
	}
	l, err := netlink.LinkByName(pair.ServerIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetMTU(l, 4000); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Config{Iface: pair.ServerIf, Addr: pair.ServerIP, MTU: 1500})
	if !errors.Is(err, ErrJumbo) || !strings.Contains(err.Error(), "up to 3506") {
		t.Errorf("Open on veth with MTU 4000: %v", err)
	}
}

func TestCheckKernel(t *testing.T) {
	mlx5 := func(kernel [2]int) nic {
		return nic{name: "eth2", driver: "mlx5_core", features: on(), mtu: 1500, kernel: kernel}
	}
	runChecks(t, []checkCase{
		{"mlx5 on 5.15", mlx5([2]int{5, 15}), afxdp.Native, ErrKernel,
			"eth2 (mlx5_core) on Linux 5.15 numbers its zero-copy AF_XDP queues N..2N-1 after its N channels, and percore binds queues 0..N-1: run Linux 6.1 or later"},
		{"mlx5 on 6.0", mlx5([2]int{6, 0}), afxdp.Native, ErrKernel, "run Linux 6.1 or later"},
		{"mlx5 on 6.1", mlx5([2]int{6, 1}), afxdp.Native, nil, ""},
		{"mlx5 on 7.0", mlx5([2]int{7, 0}), afxdp.Native, nil, ""},
		{"mlx5 on 5.15 in generic mode (copy mode anyway)", nic{name: "eth2", driver: "mlx5_core", features: map[string]bool{}, mtu: 1500, kernel: [2]int{5, 15}}, afxdp.Generic, nil, ""},
		{"mlx5, kernel unknown", mlx5([2]int{}), afxdp.Native, nil, ""},
		{"i40e on 5.15", nic{name: "eth2", driver: "i40e", features: on(), mtu: 1500, kernel: [2]int{5, 15}}, afxdp.Native, nil, ""},
	})
	for r, want := range map[string][2]int{"5.15.0-91-generic": {5, 15}, "6.18.44-fc-v669": {6, 18}, "4.19-rc1": {4, 19}, "6": {6, 0}, "x.y": {}} {
		if got := parseRelease(r); got != want {
			t.Errorf("parseRelease(%q) = %v, want %v", r, got, want)
		}
	}
}

func TestCheckGeneric(t *testing.T) {
	runChecks(t, []checkCase{
		{"i40e with GRO", nic{name: "eth2", driver: "i40e", features: on(), mtu: 1500}, afxdp.Generic, ErrGRO,
			"eth2 has GRO on: `ethtool -K eth2 gro off`"},
		{"i40e without GRO", nic{name: "eth2", driver: "i40e", features: map[string]bool{}, mtu: 1500}, afxdp.Generic, nil, ""},
		// The kernel turns LRO and HW-GRO off for generic XDP itself, and
		// generic XDP takes any MTU.
		{"mlx5 jumbo with LRO, GRO off", nic{name: "eth2", driver: "mlx5_core", features: map[string]bool{"rx-lro": true}, mtu: 9000}, afxdp.Generic, nil, ""},
	})
}

// TestGenericOnVeth: generic mode on the lab's veth is refused while GRO
// is on, and with GRO off every queue binds in copy mode without trying
// zero-copy.
func TestGenericOnVeth(t *testing.T) {
	pair := newPair(t, "ng")
	e, err := ethtool.NewEthtool()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Change(pair.ServerIf, map[string]bool{"rx-gro": true}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Iface: pair.ServerIf, Addr: pair.ServerIP, XDPMode: afxdp.Generic}
	if _, err := Open(cfg); !errors.Is(err, ErrGRO) {
		t.Fatalf("generic with GRO on: %v", err)
	}
	if err := e.Change(pair.ServerIf, map[string]bool{"rx-gro": false}); err != nil {
		t.Fatal(err)
	}
	var lines []string
	cfg.Logf = func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }
	d, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	q, err := d.NewQueue(0, QueueConfig{})
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	if log := strings.Join(lines, "\n"); !strings.Contains(log, "queue 0 bound in copy mode") || strings.Contains(log, "zero-copy") {
		t.Errorf("generic mode's bind line: %q", log)
	}
}

func TestCheckVLAN(t *testing.T) {
	strip := on("rx-vlan-hw-parse")
	runChecks(t, []checkCase{
		{"stripping with VLANs", nic{name: "eth2", driver: "i40e", features: strip, mtu: 1500, vlans: []string{"eth2.100", "eth2.200"}}, afxdp.Native, ErrVLAN,
			"eth2 carries eth2.100, eth2.200: `ethtool -K eth2 rxvlan off`, or serve on an untagged port"},
		{"both kinds", nic{name: "eth2", features: on("rx-vlan-hw-parse", "rx-vlan-stag-hw-parse"), mtu: 1500, vlans: []string{"v1"}}, afxdp.Native, ErrVLAN,
			"`ethtool -K eth2 rxvlan off rx-vlan-stag-hw-parse off`"},
		{"generic mode too", nic{name: "eth2", features: strip, mtu: 1500, vlans: []string{"v1"}}, afxdp.Generic, ErrVLAN, "rxvlan off"},
		{"stripping, no VLANs", nic{name: "eth2", driver: "i40e", features: strip, mtu: 1500}, afxdp.Native, nil, ""},
		{"VLANs, tags kept", nic{name: "eth2", driver: "i40e", features: on(), mtu: 1500, vlans: []string{"eth2.100"}}, afxdp.Native, nil, ""},
	})
}

// TestVLANOnVeth puts a VLAN on the lab's veth, which strips tags on
// receive by default: Open refuses until stripping is off.
func TestVLANOnVeth(t *testing.T) {
	pair := newPair(t, "nv")
	parent, err := netlink.LinkByName(pair.ServerIf)
	if err != nil {
		t.Fatal(err)
	}
	vlan := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: pair.ServerIf + ".7", ParentIndex: parent.Attrs().Index}, VlanId: 7}
	if err := netlink.LinkAdd(vlan); errors.Is(err, unix.EOPNOTSUPP) {
		t.Skip("the kernel has no VLAN interfaces (CONFIG_VLAN_8021Q)")
	} else if err != nil {
		t.Fatal(err)
	}
	defer netlink.LinkDel(vlan)
	e, err := ethtool.NewEthtool()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if f, err := e.Features(pair.ServerIf); err != nil || !f["rx-vlan-hw-parse"] {
		t.Fatalf("veth does not strip VLAN tags by default: %v", err)
	}
	cfg := Config{Iface: pair.ServerIf, Addr: pair.ServerIP}
	if _, err := Open(cfg); !errors.Is(err, ErrVLAN) || !strings.Contains(err.Error(), vlan.Name) {
		t.Fatalf("VLAN with stripping on: %v", err)
	}
	if err := e.Change(pair.ServerIf, map[string]bool{"rx-vlan-hw-parse": false, "rx-vlan-stag-hw-parse": false}); err != nil {
		t.Fatal(err)
	}
	d, err := Open(cfg)
	if err != nil {
		t.Fatalf("VLAN with stripping off: %v", err)
	}
	d.Close()
}
