package lab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// MaxXDPMTU is the largest veth MTU that native XDP accepts (larger: ERANGE).
const MaxXDPMTU = 3506

// VethConfig describes one veth pair. Both ends get the same number of rx and
// tx queues: veth needs queue counts on both ends, else only one queue is
// active, and native XDP attach fails (ENOSPC) when the peer has more tx
// queues than our end has rx queues.
type VethConfig struct {
	Name, PeerName string // interface names, at most 15 bytes
	NS, PeerNS     *NS    // where each end lives; nil is the root namespace
	Queues         int    // rx and tx queues on each end; 0 means 1
	MTU            int    // 0 means 1500; at most MaxXDPMTU
}

// NewVeth creates the pair directly inside the two namespaces and sets both
// ends up. Deleting either end (or its namespace) deletes the pair.
func NewVeth(c VethConfig) error {
	if c.Queues <= 0 {
		c.Queues = 1
	}
	if c.MTU == 0 {
		c.MTU = 1500
	}
	if c.MTU < 68 || c.MTU > MaxXDPMTU {
		return fmt.Errorf("create veth %s: mtu %d out of range 68..%d (native XDP limit)", c.Name, c.MTU, MaxXDPMTU)
	}
	if len(c.Name) > 15 || len(c.PeerName) > 15 {
		return fmt.Errorf("create veth %s/%s: names longer than 15 bytes", c.Name, c.PeerName)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = c.Name
	attrs.MTU = c.MTU
	attrs.NumTxQueues = c.Queues
	attrs.NumRxQueues = c.Queues
	if c.NS != nil {
		attrs.Namespace = netlink.NsFd(c.NS.Fd())
	}
	v := &netlink.Veth{
		LinkAttrs:       attrs,
		PeerName:        c.PeerName,
		PeerNumTxQueues: uint32(c.Queues),
		PeerNumRxQueues: uint32(c.Queues),
		PeerMTU:         uint32(c.MTU),
	}
	if c.PeerNS != nil {
		v.PeerNamespace = netlink.NsFd(c.PeerNS.Fd())
	}
	h, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("create veth %s: %w", c.Name, err)
	}
	defer h.Close()
	if err := h.LinkAdd(v); err != nil {
		return fmt.Errorf("create veth %s/%s: %w", c.Name, c.PeerName, err)
	}
	if err := LinkUp(c.NS, c.Name); err != nil {
		DeleteLink(c.NS, c.Name)
		return err
	}
	if err := LinkUp(c.PeerNS, c.PeerName); err != nil {
		DeleteLink(c.NS, c.Name)
		return err
	}
	return nil
}

// withLink runs fn with a netlink handle in ns and the interface name there.
func withLink(ns *NS, name string, fn func(h *netlink.Handle, l netlink.Link) error) error {
	h, err := ns.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s in %s: %w", name, ns, err)
	}
	return fn(h, l)
}

// LinkUp sets interface name in ns up.
func LinkUp(ns *NS, name string) error {
	return withLink(ns, name, func(h *netlink.Handle, l netlink.Link) error {
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("link %s up in %s: %w", name, ns, err)
		}
		return nil
	})
}

// DeleteLink deletes interface name in ns; a missing link is not an error,
// nor one that vanishes before LinkDel (ENODEV: its namespace was being freed).
func DeleteLink(ns *NS, name string) error {
	err := withLink(ns, name, func(h *netlink.Handle, l netlink.Link) error {
		if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("delete link %s in %s: %w", name, ns, err)
		}
		return nil
	})
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil
	}
	return err
}

// AddAddr adds addr (with its prefix length) to interface name in ns.
func AddAddr(ns *NS, name string, addr netip.Prefix) error {
	return withLink(ns, name, func(h *netlink.Handle, l netlink.Link) error {
		a := &netlink.Addr{IPNet: &net.IPNet{
			IP:   addr.Addr().AsSlice(),
			Mask: net.CIDRMask(addr.Bits(), addr.Addr().BitLen()),
		}}
		if err := h.AddrAdd(l, a); err != nil {
			return fmt.Errorf("add %s to %s in %s: %w", addr, name, ns, err)
		}
		return nil
	})
}

// AddNeighbour adds a permanent neighbour entry (ip at mac) on interface name
// in ns, so the kernel there sends to ip without asking ARP.
func AddNeighbour(ns *NS, name string, ip netip.Addr, mac net.HardwareAddr) error {
	return withLink(ns, name, func(h *netlink.Handle, l netlink.Link) error {
		n := &netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: ip.AsSlice(), HardwareAddr: mac}
		if err := h.NeighAdd(n); err != nil {
			return fmt.Errorf("add neighbour %s at %s on %s in %s: %w", ip, mac, name, ns, err)
		}
		return nil
	})
}

// HardwareAddr returns the MAC address of interface name in ns.
func HardwareAddr(ns *NS, name string) (net.HardwareAddr, error) {
	var mac net.HardwareAddr
	err := withLink(ns, name, func(_ *netlink.Handle, l netlink.Link) error {
		mac = l.Attrs().HardwareAddr
		return nil
	})
	return mac, err
}
