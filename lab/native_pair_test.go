package lab

import (
	"testing"

	"github.com/vishvananda/netlink"
)

func TestNativePair(t *testing.T) {
	needRoot(t)
	p, err := NewNativePair(Config{Prefix: "np", Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	t.Log(p.Lab)
	if !p.Subnet.Contains(p.ClientNativeIP) || p.ClientNativeIP == p.ClientIP || p.ClientNativeIP == p.ServerIP {
		t.Fatalf("native client address %s: want a third address of %s", p.ClientNativeIP, p.Subnet)
	}
	h, err := p.ClientNS.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	cl, err := h.LinkByName(p.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	if a := cl.Attrs(); a.NumRxQueues != 2 || a.NumTxQueues != 2 {
		t.Errorf("client end has %d rx / %d tx queues, want 2 / 2", a.NumRxQueues, a.NumTxQueues)
	}
	addrs, err := h.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	kernelIP := false
	for _, a := range addrs {
		ip := a.IPNet.IP.String()
		if ip == p.ClientNativeIP.String() {
			t.Errorf("the native client's address %s is on kernel interface %s", ip, a.Label)
		}
		if ip == p.ClientIP.String() {
			kernelIP = true
		}
	}
	if !kernelIP {
		t.Errorf("the client end lost its kernel address %s", p.ClientIP)
	}
	args := p.NativeClientArgs()
	if len(args) != 8 || args[3] != p.ClientIf || args[5] != p.ClientNativeIP.String() {
		t.Errorf("NativeClientArgs = %q", args)
	}
}

func TestNativePairMTU(t *testing.T) {
	if _, err := NewNativePair(Config{MTU: MaxXDPMTU + 1}); err == nil {
		t.Fatal("a native pair with an MTU above MaxXDPMTU was built")
	}
}
