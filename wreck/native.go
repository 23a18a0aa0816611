package wreck

import (
	"flag"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"percore/afxdp"
)

// NativeConfig is wreck on percore's native stack (--network-stack native):
// each client shard owns one AF_XDP queue of Iface (shard i, queue i) with
// its own userspace netstack that opens the connections, as Seastar's
// seawreck runs on its native stack. Zero value: the posix stack (kernel
// sockets).
type NativeConfig struct {
	Enabled bool             // --network-stack native
	Iface   string           // interface whose queues the shards own (--iface)
	Addr    netip.Addr       // our IPv4 address on it (the first of --host-ipv4-addr); not the kernel's
	Aliases []netip.Addr     // the rest of --host-ipv4-addr: more sources, each with the whole port range
	Netmask netip.Addr       // (--netmask-ipv4-addr)
	Gateway netip.Addr       // invalid: none (--gw-ipv4-addr)
	Netns   string           // named network namespace the shards (and the XDP attach) enter (--netns); "": the process's
	XDPMode afxdp.AttachMode // (--xdp-mode)
	Frames  int              // UMEM frames per shard, a power of two (--xdp-frames); 0: sized for the shard's connections

	BusyPoll int // preferred busy polling's budget per NAPI poll; 0: off (--busy-poll)

	// Source ports: PortLo..PortHi in all, split into one contiguous range
	// per stack (veth: a flow sent on tx queue q comes back on rx queue q,
	// so any port works), or, with an RSS key, shared by all stacks and
	// kept by each only where the Toeplitz hash of the reply's 4-tuple
	// picks its queue (a real NIC with RSS). Every port is in the XDP
	// program's port map.
	PortLo, PortHi uint16
	RSSKey         []byte // Toeplitz key of the client NIC (ethtool -x); nil: the NIC's where it shows one, else no RSS filter
	RSSTable       int    // RSS indirection table size; entry i -> queue i % the queues the table spreads over [the NIC's, read at start]
}

// bindNativeFlags adds the native stack's flags to fs; their values go
// straight into n (defaults, where a flag is not given, come from validate).
func bindNativeFlags(fs *flag.FlagSet, n *NativeConfig) {
	fs.Func("network-stack", "network `stack`: posix (kernel sockets, the default) or native (an AF_XDP queue and userspace TCP per shard)", func(s string) error {
		switch s {
		case "posix":
			n.Enabled = false
		case "native":
			n.Enabled = true
		default:
			return fmt.Errorf("use posix or native")
		}
		return nil
	})
	fs.StringVar(&n.Iface, "iface", "", "native: interface whose queues the shards own (shard i, queue i)")
	ip := func(dst *netip.Addr) func(string) error {
		return func(s string) (err error) { *dst, err = parseIPv4(s); return err }
	}
	fs.Func("netmask-ipv4-addr", "native: netmask of --host-ipv4-addr (default 255.255.255.0)", ip(&n.Netmask))
	fs.Func("gw-ipv4-addr", "native: IPv4 gateway to an off-link server (default: none)", ip(&n.Gateway))
	fs.StringVar(&n.Netns, "netns", "", "native: named network namespace of --iface (default: this process's)")
	fs.Func("xdp-mode", "native: XDP attach `mode`, native (driver, the default) or generic (skb)", func(s string) (err error) {
		n.XDPMode, err = afxdp.ParseAttachMode(s)
		return err
	})
	fs.IntVar(&n.Frames, "xdp-frames", 0, "native: UMEM frames per shard, a power of two (default: sized for the shard's share of --conn)")
	fs.IntVar(&n.BusyPoll, "busy-poll", 0, "native: preferred busy polling with this `budget` of frames per NAPI poll, e.g. 64 (0: off)")
	fs.Func("source-ports", "native: source port range `LO-HI`, split over the shards, or shared with --rss-key (default 32768-60999)", func(s string) error {
		lo, hi, ok := strings.Cut(s, "-")
		a, err1 := strconv.ParseUint(lo, 10, 16)
		b, err2 := strconv.ParseUint(hi, 10, 16)
		if !ok || err1 != nil || err2 != nil || a == 0 || b < a {
			return fmt.Errorf("want a range like 32768-60999")
		}
		n.PortLo, n.PortHi = uint16(a), uint16(b)
		return nil
	})
	fs.Func("rss-key", "native: the client NIC's Toeplitz RSS key in `hex`, as ethtool -x prints it: keep only source ports whose replies hash to the queue of the stack that opens them (default: the key --iface shows)", func(s string) (err error) {
		n.RSSKey, err = parseHexKey(s)
		return err
	})
	fs.IntVar(&n.RSSTable, "rss-table", 0, "native: with --rss-key, the indirection table `size`; entry i -> queue i mod the queues it spreads over (--smp where wreck programs the table, else all of --iface's), as the driver's default and ethtool -X IFACE equal N set it (default: the size of --iface's table)")
}

// nativeOnly are the flags that mean nothing on the posix stack.
var nativeOnly = []string{"iface", "netmask-ipv4-addr", "gw-ipv4-addr", "netns", "xdp-mode", "xdp-frames", "source-ports", "rss-key", "rss-table", "busy-poll"}

// checkFlags reports a native-only flag given without --network-stack native.
func (n *NativeConfig) checkFlags(fs *flag.FlagSet) error {
	if n.Enabled {
		return nil
	}
	var bad string
	fs.Visit(func(fl *flag.Flag) {
		if bad == "" && slices.Contains(nativeOnly, fl.Name) {
			bad = fl.Name
		}
	})
	if bad != "" {
		return fmt.Errorf("--%s belongs to the native stack: add --network-stack native", bad)
	}
	return nil
}

func parseIPv4(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("want an IPv4 address like 198.18.0.3")
	}
	return a, nil
}

// parseHexKey parses an RSS key as ethtool -x prints it (aa:bb:...) or as
// plain hex.
func parseHexKey(s string) ([]byte, error) {
	s = strings.ReplaceAll(s, ":", "")
	if len(s)%2 != 0 || len(s) < 2*12 {
		return nil, fmt.Errorf("want at least 12 bytes of hex, as `ethtool -x IFACE` prints the key")
	}
	k := make([]byte, len(s)/2)
	for i := range k {
		v, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("%q is not hex", s[2*i:2*i+2])
		}
		k[i] = byte(v)
	}
	return k, nil
}

// validate fills in the defaults and checks the native settings against
// the rest of c.
func (n *NativeConfig) validate(c *Config) error {
	if !n.Enabled {
		return nil
	}
	if len(c.Sources) > 0 {
		n.Addr, n.Aliases = c.Sources[0], c.Sources[1:]
	}
	if !n.Netmask.IsValid() {
		n.Netmask = netip.AddrFrom4([4]byte{255, 255, 255, 0})
	}
	if n.PortLo == 0 {
		n.PortLo, n.PortHi = 32768, 60999
	}
	switch {
	case n.Iface == "":
		return badField("Native.Iface", "required with Native.Enabled: name the interface whose queues the shards own")
	case !n.Addr.Is4():
		return badField("Sources", "required with Native.Enabled: give the client's own IPv4 address")
	case len(n.RSSKey) == 0 && int(n.PortHi-n.PortLo)+1 < c.SMP:
		return badField("Native.PortLo..PortHi", "%d-%d: fewer ports than SMP %d shards", n.PortLo, n.PortHi, c.SMP)
	case len(n.Aliases) > 0 && len(n.RSSKey) > 0:
		return badField("Native.RSSKey", "takes one address in Sources: its port filter hashes one source address")
	case n.RSSTable < 0:
		return badField("Native.RSSTable", "%d: must be positive", n.RSSTable)
	case n.BusyPoll < 0 || n.BusyPoll > 65535:
		return badField("Native.BusyPoll", "%d: give a budget from 1 to 65535, or 0 for off", n.BusyPoll)
	case n.Frames != 0 && (n.Frames < 64 || n.Frames&(n.Frames-1) != 0):
		return badField("Native.Frames", "%d: want a power of two, at least 64", n.Frames)
	}
	if _, err := serverAddr(c.Server); err != nil {
		return err
	}
	return nil
}

// serverAddr is Server as an IPv4 address and port: the native stack
// resolves no names.
func serverAddr(server string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(server)
	if err != nil || !ap.Addr().Is4() || ap.Port() == 0 {
		return netip.AddrPort{}, badField("Server", "%q: the native stack needs an IPv4 address and port, e.g. 198.18.0.1:80", server)
	}
	return ap, nil
}

// shardPorts is shard i's source port range out of n shards: contiguous
// slices of PortLo..PortHi, or the whole range with an RSS filter.
func (n *NativeConfig) shardPorts(i, shards int) (lo, hi uint16) {
	if len(n.RSSKey) > 0 {
		return n.PortLo, n.PortHi
	}
	span := int(n.PortHi-n.PortLo) + 1
	per := span / shards
	lo = n.PortLo + uint16(i*per)
	return lo, lo + uint16(per-1)
}
