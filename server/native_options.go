package server

import (
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"percore/afxdp"
	"percore/lab"
	"percore/native"
	"percore/netstack"
)

// NativeOptions are the settings of --network-stack native, named as in
// Seastar's native stack where it has them (--host-ipv4-addr,
// --netmask-ipv4-addr, --gw-ipv4-addr).
type NativeOptions struct {
	Iface     string     // interface whose queues the shards own (--iface)
	Addr      netip.Addr // our IPv4 address on it (--host-ipv4-addr)
	Netmask   netip.Addr // (--netmask-ipv4-addr)
	Gateway   netip.Addr // invalid: none (--gw-ipv4-addr)
	XDPMode   afxdp.AttachMode
	Lab       bool                       // build a veth lab with one queue per shard and serve on it
	Impair    *lab.ImpairSpec            // put the impairment bridge in the lab (--lab-impair)
	Frames    int                        // UMEM frames per queue (a power of two); 0: native.SizeFor MaxConns
	MaxConns  int                        // TCP connections per shard
	Memory    int                        // memory budget in bytes, per shard or, with MemoryTotal, for all shards (--memory); 0: native.SizeFor's for MaxConns
	MemTotal  bool                       // Memory is split evenly among the shards
	RSS       native.RSS                 // how shards take more or fewer rx queues than shards (--rss)
	CC        netstack.CongestionControl // TCP congestion control (--tcp-cc)
	BusyPoll  int                        // preferred busy polling's budget per NAPI poll; 0: off (--busy-poll)
	LabPrefix string                     // lab name prefix (tests)
	LabQueues int                        // rx queues of the lab's interfaces (tests) [one per shard]
	tcp       func(*netstack.TCPConfig)  // tests: adjust TCP's limits and timers (nil: defaults)
	Logf      func(string, ...any)       // the queue layout and each socket's mode line; nil: stderr
}

// nativeFlags holds the raw flag values until check.
type nativeFlags struct {
	fs                        *flag.FlagSet
	iface, addr, mask, gw, xm string
	impair, rss, cc, memory   string
	o                         *NativeOptions
}

func (n *NativeOptions) flags(fs *flag.FlagSet) *nativeFlags {
	f := &nativeFlags{fs: fs, o: n}
	fs.StringVar(&f.iface, "iface", "", "native: network interface whose rx queues the shards own (one per --smp shard; more or fewer: see --rss)")
	fs.StringVar(&f.addr, "host-ipv4-addr", "", "native: our IPv4 address on --iface")
	fs.StringVar(&f.mask, "netmask-ipv4-addr", "255.255.255.0", "native: netmask of --host-ipv4-addr")
	fs.StringVar(&f.gw, "gw-ipv4-addr", "", "native: IPv4 gateway for off-link clients (default: none)")
	fs.StringVar(&f.xm, "xdp-mode", "native", "native: XDP attach mode, native (driver) or generic (skb)")
	fs.BoolVar(&n.Lab, "lab", false, "native: build a veth lab (one queue per shard), serve on it, print how to reach it, remove it on exit")
	fs.StringVar(&f.impair, "lab-impair", "", "native: with --lab, put the impairment bridge in between, e.g. loss=5%,reorder=10%,duplicate=1%,corrupt=0.1%,delay=1ms,seed=1")
	fs.StringVar(&f.rss, "rss", "auto", "native: with more rx queues than shards, indir (program the NIC's RSS table onto the shards' queues), queues (each shard owns several), auto (indir where the driver can) or off (the other queues go to the kernel); with fewer, forward (the queues' shards hash each flow to its shard in software; auto does it too)")
	fs.IntVar(&n.Frames, "xdp-frames", 0, "native: UMEM frames per queue (power of two; half receive, half transmit) (default: 2 per --max-connections, 4096 to 65536)")
	fs.IntVar(&n.MaxConns, "max-connections", 16384, "native: TCP connections per queue; the UMEM frames, rings and SYN backlog follow it")
	fs.IntVar(&n.BusyPoll, "busy-poll", 0, "native: preferred busy polling with this budget of frames per NAPI poll, e.g. 64 (0: off): the shard's system calls run the NIC queue's poll instead of an interrupt per batch; set the interface's napi_defer_hard_irqs and gro_flush_timeout too (see the tuning guide)")
	fs.StringVar(&f.cc, "tcp-cc", "cubic", "native: TCP congestion control, cubic (as Linux) or newreno")
	fs.StringVar(&f.memory, "memory", "", "native: memory budget per shard for TCP receive and httpd buffers, e.g. 256M, or for all shards with /total, e.g. 2G/total; past 3/4 of it windows are held back and SYNs get cookies (default: 16K per --max-connections, 32M to 512M)")
	return f
}

// unused reports native-only flags given to the posix stack.
func (f *nativeFlags) unused() error {
	var bad string
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "iface", "host-ipv4-addr", "netmask-ipv4-addr", "gw-ipv4-addr", "xdp-mode", "lab", "lab-impair", "xdp-frames", "max-connections", "rss", "tcp-cc", "memory", "busy-poll":
			if bad == "" {
				bad = fl.Name
			}
		}
	})
	if bad != "" {
		return fmt.Errorf("--%s belongs to the native stack: add --network-stack native", bad)
	}
	return nil
}

// check validates the native flags into o.Native.
func (f *nativeFlags) check(o *Options) error {
	n := f.o
	var err error
	if n.XDPMode, err = afxdp.ParseAttachMode(f.xm); err != nil {
		return fmt.Errorf("--xdp-mode %q: use native or generic", f.xm)
	}
	if n.RSS, err = native.ParseRSS(f.rss); err != nil {
		return fmt.Errorf("--rss %q: use auto, indir, queues, off or forward", f.rss)
	}
	if n.CC, err = netstack.ParseCongestionControl(f.cc); err != nil {
		return fmt.Errorf("--tcp-cc %q: use cubic or newreno", f.cc)
	}
	if f.impair != "" {
		if !n.Lab {
			return fmt.Errorf("--lab-impair needs --lab")
		}
		sp, err := lab.ParseImpair(f.impair)
		if err != nil {
			return fmt.Errorf("--lab-impair %q: %v", f.impair, err)
		}
		n.Impair = &sp
	}
	if n.Frames != 0 && (n.Frames < 64 || n.Frames&(n.Frames-1) != 0 || n.Frames > 1<<20) {
		return fmt.Errorf("--xdp-frames %d: give a power of two from 64 to 1048576", n.Frames)
	}
	if n.BusyPoll < 0 || n.BusyPoll > 65535 {
		return fmt.Errorf("--busy-poll %d: give a budget from 1 to 65535, or 0 for off", n.BusyPoll)
	}
	if n.MaxConns < 1 || n.MaxConns > 1<<22 {
		return fmt.Errorf("--max-connections %d: give 1 to 4194304", n.MaxConns)
	}
	if f.memory != "" {
		if n.Memory, n.MemTotal, err = parseMemory(f.memory); err != nil {
			return fmt.Errorf("--memory %q: %v; give a size such as 256M (per shard) or 2G/total", f.memory, err)
		}
	}
	for _, p := range o.Ports {
		if p == 0 {
			return fmt.Errorf("--port 0: the native stack needs a fixed port such as 10000")
		}
	}
	if n.Lab {
		if f.iface != "" || f.addr != "" || f.gw != "" {
			return fmt.Errorf("--lab chooses the interface and addresses itself: drop --iface, --host-ipv4-addr and --gw-ipv4-addr")
		}
		return nil
	}
	if f.iface == "" {
		return fmt.Errorf("--network-stack native needs --iface NAME (and --host-ipv4-addr), or --lab to build a veth lab")
	}
	n.Iface = f.iface
	parse4 := func(flagName, v string) (netip.Addr, error) {
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is4() {
			return a, fmt.Errorf("--%s %q: give an IPv4 address such as 198.18.0.1", flagName, v)
		}
		return a, nil
	}
	if f.addr == "" {
		return fmt.Errorf("--iface %s needs --host-ipv4-addr: the IPv4 address percore answers for", f.iface)
	}
	if n.Addr, err = parse4("host-ipv4-addr", f.addr); err != nil {
		return err
	}
	if n.Netmask, err = parse4("netmask-ipv4-addr", f.mask); err != nil {
		return err
	}
	if f.gw != "" {
		if n.Gateway, err = parse4("gw-ipv4-addr", f.gw); err != nil {
			return err
		}
	}
	return nil
}

// parseMemory reads a size in bytes with an optional K, M, G or T suffix
// (powers of 1024, "KiB" and "KB" alike), per shard, or for all shards
// with a trailing "/total" (Seastar's -m is the total).
func parseMemory(v string) (n int, total bool, err error) {
	v, total = strings.CutSuffix(v, "/total")
	num := strings.TrimRight(v, "KMGTiBkmgtb")
	unit := strings.ToUpper(v[len(num):])
	shift := map[string]int{"": 0, "B": 0, "K": 10, "KB": 10, "KIB": 10, "M": 20, "MB": 20, "MIB": 20, "G": 30, "GB": 30, "GIB": 30, "T": 40, "TB": 40, "TIB": 40}
	s, ok := shift[unit]
	x, perr := strconv.ParseUint(num, 10, 64)
	switch {
	case !ok || perr != nil:
		return 0, false, fmt.Errorf("not a size")
	case x == 0 || x > 1<<50>>s:
		return 0, false, fmt.Errorf("out of range")
	}
	return int(x << s), total, nil
}
