package native

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"percore/afxdp"
)

// What a NIC's driver needs before it takes the XDP program, checked before
// the attach so that a refusal is one line saying what to do, not the bare
// EINVAL the drivers return.
var (
	ErrOffload = errors.New("the interface merges received frames in hardware (LRO or HW-GRO), which XDP cannot take")
	ErrJumbo   = errors.New("MTU above what the driver takes XDP at in one buffer")
	ErrKernel  = errors.New("the driver needs a newer kernel for zero-copy AF_XDP")
	ErrGRO     = errors.New("generic XDP runs after GRO, whose merged segments outgrow a frame and are dropped")
	ErrVLAN    = errors.New("the interface strips the VLAN tags of its VLANs' frames, which the stack would answer untagged")
)

// nic is what the checks read of an interface. Read-only once read; tests
// build it by hand to play any driver.
type nic struct {
	name     string
	driver   string          // ETHTOOL_GDRVINFO ("" unknown)
	features map[string]bool // active offloads by their ethtool names (ETHTOOL_GFEATURES)
	mtu      int
	kernel   [2]int   // the running kernel's major and minor release ({0, 0} unknown)
	vlans    []string // VLAN interfaces on top of it (netlink)
	indir    int      // entries of its RSS indirection table (0: none)
}

// readNIC reads the interface's driver and offloads through the ethtool
// ioctls, the VLAN interfaces on it through netlink, and the kernel's
// release. What cannot be read (no ethtool support) reads as unknown and
// passes the checks: the attach reports what it refuses. It runs in the
// interface's network namespace.
func readNIC(ifi *net.Interface) nic {
	n := nic{name: ifi.Name, mtu: ifi.MTU, vlans: vlansOn(ifi.Index)}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		n.kernel = parseRelease(unix.ByteSliceToString(u.Release[:]))
	}
	e, err := ethtool.NewEthtool()
	if err != nil {
		return n
	}
	defer e.Close()
	n.driver, _ = e.DriverName(ifi.Name)
	n.features, _ = e.Features(ifi.Name)
	if t, err := getIndir(ifi.Name); err == nil {
		n.indir = len(t)
	}
	return n
}

// RSSTableSize is the entries of the interface's RSS indirection table as
// Open found it, 0 when it has none: with the NIC's key, what a client
// needs to tell which queue a flow's replies land on.
func (d *Device) RSSTableSize() int { return d.nic.indir }

// vlansOn names the VLAN interfaces whose parent is ifindex.
func vlansOn(ifindex int) []string {
	links, _ := netlink.LinkList()
	var names []string
	for _, l := range links {
		if v, ok := l.(*netlink.Vlan); ok && v.ParentIndex == ifindex {
			names = append(names, v.Name)
		}
	}
	return names
}

// xdpMTU is the largest MTU each driver takes a one-buffer XDP program at
// (4 KiB pages): i40e and ice put a frame with two VLAN tags and the FCS in
// a 3 KiB buffer (3072 - 26); mlx5 one page less the XDP headroom and the
// skb's shared info; veth answers ERANGE above 3506.
var xdpMTU = map[string]int{"i40e": 3046, "ice": 3046, "mlx5_core": 3498, "veth": 3506}

// check is every check the interface must pass before the program attaches
// in mode.
func (n nic) check(mode afxdp.AttachMode) error {
	if err := n.checkVLAN(); err != nil {
		return err
	}
	if mode == afxdp.Generic {
		return n.checkGRO()
	}
	if err := n.checkOffload(); err != nil {
		return err
	}
	if err := n.checkMTU(); err != nil {
		return err
	}
	return n.checkKernel()
}

// checkOffload: drivers refuse native XDP (EINVAL) while LRO or HW-GRO
// merges frames, since a program must see each frame as it came; generic
// mode turns both off itself.
func (n nic) checkOffload() error {
	var on, off []string
	for _, f := range []struct{ name, arg string }{{"rx-lro", "lro"}, {"rx-gro-hw", "rx-gro-hw"}} {
		if n.features[f.name] {
			on = append(on, f.name)
			off = append(off, f.arg+" off")
		}
	}
	if len(on) == 0 {
		return nil
	}
	return fmt.Errorf("native: %w: %s has %s on: `ethtool -K %s %s`", ErrOffload, n.name, strings.Join(on, " and "), n.name, strings.Join(off, " "))
}

// checkMTU refuses an MTU the driver takes no one-buffer XDP program at
// (percore's program is not multi-buffer).
func (n nic) checkMTU() error {
	limit, ok := xdpMTU[n.driver]
	if !ok || n.mtu <= limit {
		return nil
	}
	return fmt.Errorf("native: %w: %s (%s) has MTU %d, and %s takes XDP on one buffer up to %d: `ip link set dev %s mtu 1500` (at most %d)",
		ErrJumbo, n.name, n.driver, n.mtu, n.driver, limit, n.name, limit)
}

// zeroCopyFloor is the first kernel release each driver numbers its
// zero-copy AF_XDP queues as its rx queues at. mlx5 before 6.1 gave them
// their own numbers, from the channel count N up (N..2N-1), reached only
// through flow-steering rules; percore binds the rx queues themselves, which
// there get copy mode on every queue.
var zeroCopyFloor = map[string][2]int{"mlx5_core": {6, 1}}

// checkKernel refuses a driver older than its floor in native mode.
func (n nic) checkKernel() error {
	floor, ok := zeroCopyFloor[n.driver]
	if !ok || n.kernel == [2]int{} || !older(n.kernel, floor) {
		return nil
	}
	return fmt.Errorf("native: %w: %s (%s) on Linux %d.%d numbers its zero-copy AF_XDP queues N..2N-1 after its N channels, and percore binds queues 0..N-1: run Linux %d.%d or later",
		ErrKernel, n.name, n.driver, n.kernel[0], n.kernel[1], floor[0], floor[1])
}

func older(a, b [2]int) bool { return a[0] < b[0] || a[0] == b[0] && a[1] < b[1] }

// parseRelease reads the major and minor numbers of a kernel release such
// as "5.15.0-91-generic"; {0, 0} when it has none.
func parseRelease(r string) [2]int {
	var v [2]int
	for i, f := range strings.SplitN(r, ".", 3) {
		if i == 2 {
			break
		}
		if j := strings.IndexFunc(f, func(c rune) bool { return c < '0' || c > '9' }); j >= 0 {
			f = f[:j] // "19-rc1"
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return [2]int{}
		}
		v[i] = n
	}
	return v
}

// checkGRO: generic XDP sees each skb after GRO has merged a flow's
// segments, often into more than a UMEM frame holds, and AF_XDP drops what
// does not fit (the kernel turns LRO and HW-GRO off for generic XDP, not
// GRO).
func (n nic) checkGRO() error {
	if !n.features["rx-gro"] {
		return nil
	}
	return fmt.Errorf("native: %w: %s has GRO on: `ethtool -K %s gro off`", ErrGRO, n.name, n.name)
}

// checkVLAN: a NIC that strips VLAN tags on receive hands the program a
// VLAN's frames untagged (the tag in metadata the program does not read),
// so the stack would take them for its own and answer them untagged. With
// stripping off they arrive tagged, and the program passes every ethertype
// but IPv4 and ARP to the kernel's VLAN interfaces.
func (n nic) checkVLAN() error {
	var off []string
	for _, f := range []struct{ name, arg string }{{"rx-vlan-hw-parse", "rxvlan"}, {"rx-vlan-stag-hw-parse", "rx-vlan-stag-hw-parse"}} {
		if n.features[f.name] {
			off = append(off, f.arg+" off")
		}
	}
	if len(n.vlans) == 0 || len(off) == 0 {
		return nil
	}
	return fmt.Errorf("native: %w: %s carries %s: `ethtool -K %s %s`, or serve on an untagged port",
		ErrVLAN, n.name, strings.Join(n.vlans, ", "), n.name, strings.Join(off, " "))
}
