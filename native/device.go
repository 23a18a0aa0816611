package native

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/vishvananda/netns"

	"percore/afxdp"
	"percore/netstack"
)

// Config is the native stack on one interface. Zero fields take the
// defaults in brackets.
type Config struct {
	Iface string     // the interface whose rx queues the shards own (Device.Owned)
	Netns string     // named network namespace of Iface ["": the process's]
	Addr  netip.Addr // our IPv4 address (a client's: one no kernel interface holds)
	// Aliases are more IPv4 addresses of ours on the link, in the same
	// subnet (a client's sources beyond Addr's ports: netstack.Config.Aliases).
	Aliases []netip.Addr
	Netmask netip.Addr // [255.255.255.0]
	Gateway netip.Addr // next hop to off-link peers [none]
	MTU     int        // the largest IP MTU to use, lowered to the interface's [1500]
	Queues  int        // shards, each owning one rx queue or more, or none (RSSForward) [1]
	RSS     RSS        // how the shards take more rx queues than there are shards, or fewer [RSSAuto]

	XDPMode afxdp.AttachMode // [afxdp.Native]
	Frames  int              // UMEM frames per queue, a power of two [SizeFor each queue's MaxConns]

	// BusyPoll is each queue's socket's preferred busy polling [off]; a
	// kernel that refuses it leaves the socket polled by interrupts, with
	// one line to Logf.
	BusyPoll afxdp.BusyPoll

	// The local TCP ports whose segments the XDP program steers to us: a
	// server's listen ports, a client's source ports PortLo..PortHi, or
	// both (PortLo 0: no range).
	Ports          []uint16
	PortLo, PortHi uint16

	// OwnsAddr steers every TCP segment to Addr, whatever its port, so a
	// closed port answers a SYN with a RST as a host does (RFC 9293
	// §3.10.7.1) instead of the kernel, which has no such address, staying
	// silent. Never with a client port range. [nil: true for a server when
	// no kernel interface holds Addr]
	OwnsAddr *bool

	// Logf gets the line that says which queues each shard owns, and
	// each queue's line that says how its socket bound (copy or zero-copy
	// mode); nil: none.
	Logf func(format string, args ...any)

	rssDir string // where an RSS table being changed is saved [rssStateDir] (tests)
}

// minMTU is the least IP MTU the stack runs on: every IPv4 host takes
// 576-byte datagrams (RFC 791), and TCP's MSS is the MTU less 40.
const minMTU = 576

// Device is the native stack's hold on one interface: the XDP program
// attached to it and what the checks found. Open makes it before the shards
// start, each shard takes its queue with NewQueue, and Close detaches the
// program after every queue is closed. Read-only after Open: shards share it.
type Device struct {
	cfg  Config
	ns   netns.NsHandle // netns.None(): the process's namespace
	mac  netstack.MAC
	mtu  int
	prog *afxdp.Program

	rxq   int         // the interface's rx queues
	rss   RSS         // the strategy in use (never RSSAuto)
	own   [][]int     // the rx queues of each shard
	indir *indirState // the table to put back; nil: untouched
	fwd   *forwarding // RSSForward's hash and rings; nil: not forwarding

	frags *fragRouter // ICMP "fragmentation needed" between the queues' stacks; nil with one queue

	nic    nic  // what the checks read of the interface
	allTCP bool // every TCP port of the address is ours (Config.OwnsAddr)
}

// Open checks the interface and attaches the steering program to it, inside
// cfg.Netns.
func Open(cfg Config) (_ *Device, err error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if !cfg.Addr.Is4() {
		return nil, fmt.Errorf("native: address %v is not IPv4", cfg.Addr)
	}
	for _, a := range cfg.Aliases {
		if !a.Is4() {
			return nil, fmt.Errorf("native: alias %v is not IPv4", a)
		}
	}
	if !cfg.Netmask.IsValid() {
		cfg.Netmask = netip.AddrFrom4([4]byte{255, 255, 255, 0})
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1500
	}
	if cfg.Queues == 0 {
		cfg.Queues = 1
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.rssDir == "" {
		cfg.rssDir = rssStateDir
	}
	d := &Device{cfg: cfg, ns: netns.None()}
	if cfg.Netns != "" {
		if d.ns, err = netns.GetFromName(cfg.Netns); err != nil {
			return nil, fmt.Errorf("native: %w: %s: %v", ErrNoNetns, cfg.Netns, err)
		}
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	err = d.inNetns(func() error {
		if err := d.check(); err != nil {
			return err
		}
		if err := d.spread(); err != nil {
			return err
		}
		return d.attach()
	})
	if err != nil {
		return nil, err
	}
	switch {
	case d.fwd != nil: // a stack on every shard, the queueless ones too: shard i's is i
		d.frags = newFragRouter(d.fwd.shards, assignQueues(d.fwd.shards, d.fwd.shards))
	case len(d.own) > 1 || len(d.own[0]) > 1:
		d.frags = newFragRouter(d.rxq, d.own)
	}
	cfg.Logf("%s", d.Layout())
	return d, nil
}

// spread chooses how the shards take the rx queues (Config.RSS) and
// programs the indirection table where that is the choice; it runs in the
// interface's namespace.
func (d *Device) spread() error {
	c := &d.cfg
	// Whatever the strategy now, a table a crashed run left goes back first.
	if err := restoreLeftover(c.rssDir, c.Iface, c.Logf); err != nil {
		return err
	}
	d.rss = c.RSS
	if d.rxq == c.Queues {
		d.rss = RSSOff // one queue each: nothing to spread
	}
	if d.rxq < c.Queues { // check let only RSSAuto and RSSForward through
		return d.forward()
	}
	if d.rss == RSSForward {
		d.rss = RSSAuto // no fewer queues than shards: nothing to forward
	}
	if d.rss == RSSIndir || d.rss == RSSAuto {
		st, err := programIndir(c.rssDir, c.Iface, c.Queues)
		switch {
		case err == nil:
			d.indir, d.rss = st, RSSIndir
		case d.rss == RSSAuto && errors.Is(err, ErrIndirRefused):
			d.rss = RSSQueues
		default:
			return err
		}
	}
	if d.rss == RSSQueues {
		d.own = assignQueues(d.rxq, c.Queues)
	} else {
		d.own = assignQueues(c.Queues, c.Queues)
	}
	if d.rss == RSSOff && d.rxq > c.Queues {
		c.Logf("native: warning: %s has %d rx queues and only %d are served: flows RSS hashes to the others go to the kernel, which resets or ignores them", c.Iface, d.rxq, c.Queues)
	}
	return nil
}

// forward sets up software forwarding (RSSForward): shard i < rxq owns
// queue i, the others none; the hash key is the NIC's where it shows one.
func (d *Device) forward() error {
	c := &d.cfg
	key, why := readRSSKey(c.Iface)
	note := "the NIC's Toeplitz key"
	if key == nil {
		key, note = fixedKey[:], "a fixed Toeplitz key: "+why
	}
	f, err := newForwarding(c.Queues, d.rxq, d.mtu, key, note)
	if err != nil {
		return err
	}
	d.fwd, d.rss = f, RSSForward
	d.own = make([][]int, c.Queues)
	for q := range d.rxq {
		d.own[q] = []int{q}
	}
	return nil
}

// FlowShard is the shard whose stack software forwarding (RSSForward) gives
// the TCP flow whose segments arrive from src to dst, both IPv4; -1 when
// the device does not forward.
func (d *Device) FlowShard(src, dst netip.AddrPort) int {
	if d.fwd == nil || !src.Addr().Is4() || !dst.Addr().Is4() {
		return -1
	}
	return d.fwd.flowShard(src.Addr().As4(), dst.Addr().As4(), src.Port(), dst.Port())
}

// Owned is the rx queues shard i owns, in order: open each with NewQueue.
// None: the shard has no queue (RSSForward): open its stack with
// NewForwarded.
func (d *Device) Owned(i int) []int { return d.own[i] }

// RSS is the strategy in use: RSSIndir, RSSQueues or RSSOff (also when
// there are no more queues than shards).
func (d *Device) RSS() RSS { return d.rss }

// Layout is the start-up line: the queue and shard counts, the strategy,
// which queues each shard owns (forwarding: which shards forward, and
// which send through whom) and who answers the address's closed ports.
func (d *Device) Layout() string {
	var b strings.Builder
	fmt.Fprintf(&b, "native: %s: %d rx queues, %d shards: ", d.cfg.Iface, d.rxq, len(d.own))
	switch {
	case d.rxq == len(d.own):
		b.WriteString("one queue each")
	case d.rss == RSSForward:
		fmt.Fprintf(&b, "forward strategy (fewer queues than shards: queue owners hash each TCP flow to its shard with %s)", d.fwd.keyNote)
	case d.rss == RSSIndir:
		fmt.Fprintf(&b, "indir strategy (RSS table over queues 0-%d)", len(d.own)-1)
	case d.cfg.RSS == RSSAuto && d.rss == RSSQueues: // found no table it could program
		fmt.Fprintf(&b, "%v strategy (auto: the driver has no RSS table to program)", d.rss)
	default:
		fmt.Fprintf(&b, "%v strategy", d.rss)
	}
	for i, qs := range d.own {
		sep := "; "
		if i == 0 {
			sep = ", "
		}
		fmt.Fprintf(&b, "%sshard %d: ", sep, i)
		for j, q := range qs {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(q))
		}
		switch {
		case d.fwd == nil:
		case len(qs) > 0:
			b.WriteString(" (forwards)")
		default:
			fmt.Fprintf(&b, "none (forwarded, sends through shard %d)", d.fwd.home(i))
		}
	}
	if d.allTCP {
		b.WriteString("; closed ports answered with RST")
	} else {
		b.WriteString("; closed ports left to the kernel")
	}
	return b.String()
}

// check runs in the interface's namespace.
func (d *Device) check() error {
	c := &d.cfg
	ifi, err := net.InterfaceByName(c.Iface)
	if err != nil {
		return fmt.Errorf("native: %w: %q", ErrNoIface, c.Iface)
	}
	if len(ifi.HardwareAddr) != 6 {
		return fmt.Errorf("native: %w: %s", ErrNotEthernet, c.Iface)
	}
	copy(d.mac[:], ifi.HardwareAddr)
	d.mtu = c.MTU
	if ifi.MTU > 0 && ifi.MTU < d.mtu {
		d.mtu = ifi.MTU
	}
	if d.mtu < minMTU {
		return fmt.Errorf("native: %w: %s has %d, the stack needs %d", ErrMTU, c.Iface, d.mtu, minMTU)
	}
	d.nic = readNIC(ifi)
	if err := d.nic.check(c.XDPMode); err != nil {
		return err
	}
	nq, err := afxdp.RxQueues(ifi.Index)
	if err != nil {
		return fmt.Errorf("native: read the rx queue count of %s: %w", c.Iface, err)
	}
	d.rxq = nq
	// Fewer queues than shards: forwarding, for a server's flows and a
	// client's alike (a client's shards pick source ports whose replies
	// forwarding gives them: Device.FlowShard).
	if nq < c.Queues && c.RSS != RSSAuto && c.RSS != RSSForward {
		return &QueueError{Iface: c.Iface, Have: nq, Need: c.Queues}
	}
	if c.PortLo != 0 {
		for _, a := range append([]netip.Addr{c.Addr}, c.Aliases...) {
			if err := kernelFree(a); err != nil {
				return err
			}
		}
		return nil
	}
	if c.OwnsAddr != nil {
		d.allTCP = *c.OwnsAddr
	} else {
		d.allTCP = kernelFree(c.Addr) == nil
	}
	return nil
}

// attach loads the program and attaches it; it runs in the interface's
// namespace.
func (d *Device) attach() error {
	c := &d.cfg
	span := 0
	if c.PortLo != 0 {
		span = int(c.PortHi-c.PortLo) + 1
	}
	var err error
	d.prog, err = afxdp.NewProgram(afxdp.ProgramConfig{
		IP:        c.Addr,
		Aliases:   c.Aliases,
		Ports:     c.Ports,
		MaxQueues: max(64, d.rxq),
		AllTCP:    d.allTCP,
	})
	if err != nil {
		return err
	}
	for p := range span {
		if err := d.prog.AllowPort(c.PortLo + uint16(p)); err != nil {
			return err
		}
	}
	return d.prog.Attach(c.Iface, c.XDPMode)
}

// kernelFree refuses a client an address a kernel interface holds: the
// program would take the address's ARP, and the replies to the kernel's own
// connections from ports in the client's range, away from the kernel. A
// server may share its address with the kernel (the kernel keeps its other
// ports; the benchmark lab serves both stacks on one address).
func kernelFree(a netip.Addr) error {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil // nothing to check against
	}
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, ad := range addrs {
			if ipn, ok := ad.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP); ok && ip.Unmap() == a {
					return fmt.Errorf("native: %w: %s is on %s", ErrKernelAddr, a, ifc.Name)
				}
			}
		}
	}
	return nil
}

// inNetns runs fn on a fresh locked thread inside the device's namespace;
// the thread exits with it.
func (d *Device) inNetns(fn func() error) error {
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err = d.enter(); err == nil {
			err = fn()
		}
	}()
	<-done
	return err
}

// enter locks the calling thread for good and moves it into the namespace
// (without one, it does nothing).
func (d *Device) enter() error {
	if !d.ns.IsOpen() {
		return nil
	}
	runtime.LockOSThread() // never unlocked: the thread stays in the namespace
	if err := netns.Set(d.ns); err != nil {
		return fmt.Errorf("native: enter network namespace %s: %w", d.cfg.Netns, err)
	}
	return nil
}

// MTU is the IP MTU the queues use: Config.MTU, or the interface's if lower.
func (d *Device) MTU() int { return d.mtu }

// MAC is the interface's Ethernet address.
func (d *Device) MAC() netstack.MAC { return d.mac }

// Close detaches the program (frames for us go to the kernel again) and
// releases the namespace. Close the queues first.
func (d *Device) Close() error {
	var errs []error
	if d.indir != nil {
		errs = append(errs, d.inNetns(d.indir.restore))
		d.indir = nil
	}
	if d.prog != nil {
		errs = append(errs, d.prog.Close())
		d.prog = nil
	}
	if d.fwd != nil {
		d.fwd.close()
		d.fwd = nil
	}
	if d.ns.IsOpen() {
		errs = append(errs, d.ns.Close())
		d.ns = netns.None()
	}
	return errors.Join(errs...)
}
