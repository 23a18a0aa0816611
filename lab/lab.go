package lab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
)

// Config describes a two-namespace lab. The zero value is a 1-queue lab with
// MTU 1500 and the server end in its own namespace.
type Config struct {
	Prefix     string // name prefix, default "pc"
	Queues     int    // queues on both veth ends, default 1
	MTU        int    // default 1500, at most MaxXDPMTU
	ServerRoot bool   // put the server end in the root namespace instead of its own

	// ClientAddrs is the kernel addresses on the client end, default 1
	// (.2); more come from .128 up, at most MaxClientAddrs in all, so that a
	// kernel client binds more connections to one server than the
	// ephemeral ports of one address allow.
	ClientAddrs int

	// Between, when set, builds the path between the server end and the
	// client namespace instead of one direct veth pair (an impairment
	// middle namespace uses it). It must create l.ServerIf in l.ServerNS and
	// l.ClientIf in l.ClientNS, both up, with c.Queues queues and c.MTU, and
	// register the teardown of anything else it makes with l.OnClose. New
	// then configures the client end (offloads, txrehash, address) as usual.
	Between func(l *Lab, c Config) error
}

// Lab is a veth pair between a client namespace (kernel TCP/IP, an address
// from 198.18.0.0/15, offloads off, net.core.txrehash=0) and the server end
// for percore (no kernel address). Built by New, removed by Close; the fields
// are read-only after New.
type Lab struct {
	ID       uint32
	ServerNS *NS // nil when Config.ServerRoot
	ClientNS *NS
	ServerIf string // server end, for the AF_XDP socket
	ClientIf string // client end, inside ClientNS
	Queues   int
	MTU      int

	Subnet    netip.Prefix     // the /24 both ends share
	ServerIP  netip.Addr       // the address percore answers for (.1)
	ClientIP  netip.Addr       // configured on ClientIf (.2)
	ClientIPs []netip.Addr     // every kernel address of ClientIf: ClientIP, then .128 on (Config.ClientAddrs)
	ServerMAC net.HardwareAddr // MAC of ServerIf
	ClientMAC net.HardwareAddr // MAC of ClientIf

	onClose   []func() error
	closeOnce sync.Once
	closeErr  error
}

// OnClose registers fn to run first in Close (in reverse order of
// registration), before the client and server namespaces go.
func (l *Lab) OnClose(fn func() error) { l.onClose = append(l.onClose, fn) }

// New builds a lab. On failure everything made so far is removed.
func New(c Config) (_ *Lab, err error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if c.Prefix == "" {
		c.Prefix = "pc"
	}
	if c.Queues <= 0 {
		c.Queues = 1
	}
	if c.MTU == 0 {
		c.MTU = 1500
	}
	if c.ClientAddrs <= 0 {
		c.ClientAddrs = 1
	}
	if c.ClientAddrs > MaxClientAddrs {
		return nil, fmt.Errorf("lab: %d client addresses, at most %d", c.ClientAddrs, MaxClientAddrs)
	}
	// Labs of this prefix left by a process killed before its cleanup ran;
	// best effort: a failure here does not stop a new lab.
	SweepStale(c.Prefix)
	id := uniqueID()
	l := &Lab{
		ID:       id,
		ServerIf: Name(c.Prefix, id, "s"),
		ClientIf: Name(c.Prefix, id, "c"),
		Queues:   c.Queues,
		MTU:      c.MTU,
		Subnet:   Subnet(id),
	}
	l.ServerIP = Host(l.Subnet, 1)
	l.ClientIP = Host(l.Subnet, 2)
	l.ClientIPs = []netip.Addr{l.ClientIP}
	for i := range c.ClientAddrs - 1 {
		l.ClientIPs = append(l.ClientIPs, Host(l.Subnet, byte(firstExtraClient+i)))
	}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if !c.ServerRoot {
		if l.ServerNS, err = NewNS(Name(c.Prefix, id, "-srv")); err != nil {
			return nil, err
		}
	}
	if l.ClientNS, err = NewNS(Name(c.Prefix, id, "-cli")); err != nil {
		return nil, err
	}
	if c.Between != nil {
		err = c.Between(l, c)
	} else {
		err = NewVeth(VethConfig{
			Name: l.ServerIf, NS: l.ServerNS,
			PeerName: l.ClientIf, PeerNS: l.ClientNS,
			Queues: c.Queues, MTU: c.MTU,
		})
	}
	if err != nil {
		return nil, err
	}
	if err = DisableOffloads(l.ClientNS, l.ClientIf); err != nil {
		return nil, err
	}
	// A flow keeps its tx queue (and so our rx queue) for the socket's life.
	if err = l.ClientNS.Sysctl("net/core/txrehash", "0"); err != nil {
		return nil, err
	}
	for _, a := range l.ClientIPs {
		if err = AddAddr(l.ClientNS, l.ClientIf, netip.PrefixFrom(a, 24)); err != nil {
			return nil, err
		}
	}
	if l.ServerMAC, err = HardwareAddr(l.ServerNS, l.ServerIf); err != nil {
		return nil, err
	}
	if l.ClientMAC, err = HardwareAddr(l.ClientNS, l.ClientIf); err != nil {
		return nil, err
	}
	return l, nil
}

// The /24's plan: .1 the server, .2 the client's kernel address, .3 to .127
// a native client's (NativePair.NativeAddrs), .128 to .253 the client's
// further kernel addresses.
const (
	firstNativeClient = 3
	firstExtraClient  = 128
	MaxClientAddrs    = 1 + 253 - firstExtraClient + 1       // .2 and .128-.253
	MaxNativeAddrs    = firstExtraClient - firstNativeClient // .3-.127
)

// Close removes the veth pair and the namespaces. Idempotent; safe on a
// partly built lab.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() {
		var errs []error
		for i := len(l.onClose) - 1; i >= 0; i-- {
			errs = append(errs, l.onClose[i]())
		}
		// With the server end in root, deleting it removes the pair now rather
		// than when the client namespace is freed.
		if l.ServerNS == nil {
			errs = append(errs, DeleteLink(nil, l.ServerIf))
		}
		if l.ClientNS != nil {
			errs = append(errs, DeleteLink(l.ClientNS, l.ClientIf))
		}
		errs = append(errs, l.ClientNS.Delete(), l.ServerNS.Delete())
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// Disown keeps the lab when this process exits without closing it (see
// NS.Disown): for a lab made to outlive its maker.
func (l *Lab) Disown() {
	l.ClientNS.Disown()
	l.ServerNS.Disown()
}

// ClientExec is the shell prefix that runs a command in the client namespace.
func (l *Lab) ClientExec() string { return "ip netns exec " + l.ClientNS.Name }

// String describes the lab in one line.
func (l *Lab) String() string {
	return fmt.Sprintf("lab %x: server %s (ns %s, %s, %s) <-> client %s (ns %s, %s, %s), %d queues, mtu %d",
		l.ID, l.ServerIf, l.ServerNS, l.ServerIP, l.ServerMAC, l.ClientIf, l.ClientNS, l.ClientIP, l.ClientMAC, l.Queues, l.MTU)
}
