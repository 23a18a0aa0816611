package lab

import (
	"fmt"
	"net/netip"
)

// NativePair is a lab whose both ends can run percore's native stack: the
// server end (no kernel address) and the client end in the client
// namespace, where a native load generator (wreck --network-stack native)
// owns the queues through AF_XDP.
//
// The client end keeps its kernel address (ClientIP, .2) so kernel clients
// (wrk, wreck on kernel sockets) can run in the same lab, side by side; the
// native client uses ClientNativeIP (.3), which no kernel interface holds:
// the kernel neither answers ARP for it nor resets its TCP segments, and
// the client's XDP program steers exactly the frames for it (ARP for .3,
// TCP to .3 on the client's source ports) to the socket of the queue they
// arrive on. Offloads are off on the client end (as New does for every
// lab), so the kernel clients send full checksums too.
//
// XDP runs on both ends: each native process attaches its own program
// (frames redirected or sent into a veth are dropped unless the receiving
// end has an XDP program, and each end's sockets need one to receive).
// Both ends have Queues queues, so flow q (sent on tx queue q) arrives on
// the peer's rx queue q, and the native server, replying on the queue a
// flow arrived on, sends it back to the client's queue q.
type NativePair struct {
	*Lab
	ClientNativeIP netip.Addr // the native client's address (.3), on no kernel interface
}

// NewNativePair builds a lab for two native ends. c is as for New.
func NewNativePair(c Config) (*NativePair, error) {
	if c.MTU > MaxXDPMTU {
		return nil, fmt.Errorf("native pair: MTU %d is above %d, the most native XDP on veth takes", c.MTU, MaxXDPMTU)
	}
	l, err := New(c)
	if err != nil {
		return nil, err
	}
	return &NativePair{Lab: l, ClientNativeIP: Host(l.Subnet, firstNativeClient)}, nil
}

// NativeAddrs are n addresses for a native client, from ClientNativeIP on
// (.3 to .127): on no kernel interface, each with the whole port range.
func (p *NativePair) NativeAddrs(n int) ([]netip.Addr, error) {
	if n < 1 || n > MaxNativeAddrs {
		return nil, fmt.Errorf("native pair: %d native client addresses, want 1 to %d", n, MaxNativeAddrs)
	}
	addrs := make([]netip.Addr, n)
	for i := range addrs {
		addrs[i] = Host(p.Subnet, byte(firstNativeClient+i))
	}
	return addrs, nil
}

// NativeClientArgs are the wreck flags that put a native client on the
// pair's client end (run it inside ClientNS, or add --netns).
func (p *NativePair) NativeClientArgs() []string {
	return []string{"--network-stack", "native", "--iface", p.ClientIf,
		"--host-ipv4-addr", p.ClientNativeIP.String(), "--netmask-ipv4-addr", "255.255.255.0"}
}
