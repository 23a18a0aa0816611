package lab

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestClientAddrs: the client end gets .2 and then .128 on, and a native
// pair hands out .3 on; the kernel holds exactly the former.
func TestClientAddrs(t *testing.T) {
	needRoot(t)
	p, err := NewNativePair(Config{Prefix: "ca", ClientAddrs: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	want := []netip.Addr{Host(p.Subnet, 2), Host(p.Subnet, 128), Host(p.Subnet, 129)}
	if !slices.Equal(p.ClientIPs, want) || p.ClientIP != want[0] {
		t.Fatalf("client addresses %v (%v), want %v", p.ClientIPs, p.ClientIP, want)
	}
	h, err := p.ClientNS.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	link, err := h.LinkByName(p.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	list, err := h.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var got []netip.Addr
	for _, a := range list {
		ip, _ := netip.AddrFromSlice(a.IP.To4())
		got = append(got, ip)
	}
	slices.SortFunc(got, netip.Addr.Compare)
	if !slices.Equal(got, want) {
		t.Errorf("kernel addresses on %s: %v, want %v", p.ClientIf, got, want)
	}
	nat, err := p.NativeAddrs(3)
	if err != nil || fmt.Sprint(nat) != fmt.Sprintf("[%v %v %v]", Host(p.Subnet, 3), Host(p.Subnet, 4), Host(p.Subnet, 5)) {
		t.Errorf("NativeAddrs(3) = %v, %v", nat, err)
	}
	for _, n := range []int{0, MaxNativeAddrs + 1} {
		if _, err := p.NativeAddrs(n); err == nil {
			t.Errorf("NativeAddrs(%d): want an error", n)
		}
	}
	if _, err := New(Config{ClientAddrs: MaxClientAddrs + 1}); err == nil {
		t.Errorf("%d client addresses: want an error", MaxClientAddrs+1)
	}
}

// TestAttachPass: the pass program sits on the interface until closed.
func TestAttachPass(t *testing.T) {
	needRoot(t)
	l, err := New(Config{Prefix: "xp"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	attached := func() bool {
		h, err := l.ServerNS.Handle()
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		link, err := h.LinkByName(l.ServerIf)
		if err != nil {
			t.Fatal(err)
		}
		x := link.Attrs().Xdp
		return x != nil && x.Attached
	}
	c, err := AttachPass(l.ServerNS, l.ServerIf)
	if err != nil {
		t.Fatal(err)
	}
	if !attached() {
		t.Error("no XDP program on the interface after AttachPass")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if attached() {
		t.Error("XDP program still attached after Close")
	}
}
