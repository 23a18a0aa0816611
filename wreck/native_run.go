package wreck

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"percore/afxdp"
	"percore/netstack"
)

// runNative is Run on the native stack: one XDP program on the interface
// steers the replies (TCP to our address and a source port of ours, ARP for
// our address) to the AF_XDP socket of the queue they arrive on; shard i
// owns queue i with its own netstack and connections. On veth a flow sent
// on tx queue q comes back on rx queue q, so each shard sees its own
// replies; on a NIC with RSS, --rss-key keeps each shard to the source
// ports whose replies hash to its queue.
func runNative(cfg Config) (*Result, error) {
	n := &cfg.Native
	if os.Geteuid() != 0 {
		return nil, errors.New("--network-stack native needs root (CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_IPC_LOCK) for AF_XDP and XDP: run as root, or use --network-stack posix")
	}
	server, _ := serverAddr(cfg.Server) // checked by validate
	cpus := cfg.CPUSet
	if len(cpus) == 0 {
		cpus = processCPUs()
	}
	ns := netns.None()
	if n.Netns != "" {
		var err error
		if ns, err = netns.GetFromName(n.Netns); err != nil {
			return nil, fmt.Errorf("--netns %s: %v: name a namespace that `ip netns list` shows", n.Netns, err)
		}
		defer ns.Close()
	}

	// The program, attached from a thread in the interface's namespace.
	var (
		ifi  *net.Interface
		prog *afxdp.Program
	)
	err := inNetns(ns, func() error {
		var err error
		if ifi, err = net.InterfaceByName(n.Iface); err != nil {
			return fmt.Errorf("--iface %q: no such interface in this network namespace: check `ip link` (or --netns)", n.Iface)
		}
		if len(ifi.HardwareAddr) != 6 {
			return fmt.Errorf("--iface %s has no Ethernet address: the native stack needs an Ethernet interface", n.Iface)
		}
		if err := notKernelAddr(n.Addr); err != nil {
			return err
		}
		if prog, err = afxdp.NewProgram(afxdp.ProgramConfig{IP: n.Addr, MaxQueues: max(64, cfg.SMP), MaxPorts: int(n.PortHi-n.PortLo) + 1}); err != nil {
			return err
		}
		for p := int(n.PortLo); p <= int(n.PortHi); p++ {
			if err := prog.AllowPort(uint16(p)); err != nil {
				return err
			}
		}
		return prog.Attach(n.Iface, n.XDPMode)
	})
	if prog != nil {
		defer prog.Close()
	}
	if err != nil {
		return nil, err
	}
	mtu := min(max(ifi.MTU, 576), 1500)

	req, seqOff := buildRequest(&cfg, cfg.CheckSeq)
	var seed [8]byte
	rand.Read(seed[:])
	var stop atomic.Bool
	shards := make([]*nshard, cfg.SMP)
	accts := make([]*shard, cfg.SMP)
	for i := range shards {
		conns := cfg.Conns / cfg.SMP
		if i < cfg.Conns%cfg.SMP {
			conns++
		}
		budget := int64(-1)
		if cfg.Reqs > 0 {
			budget = cfg.Reqs / int64(cfg.SMP)
			if int64(i) < cfg.Reqs%int64(cfg.SMP) {
				budget++
			}
		}
		if accts[i], err = newAcct(i, &cfg, conns, budget, &stop); err != nil {
			return nil, err
		}
		shards[i] = &nshard{id: i, cpu: cpus[i%len(cpus)], acct: accts[i], conns: conns}
	}

	// Each shard: a locked thread in the namespace, pinned, opens its socket
	// and builds its stack there, then waits for the start.
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + cfg.SMP)
	defer runtime.GOMAXPROCS(procs)
	start, done, err := launch(len(shards), cfg.Duration, &stop, func(i int) error {
		return shards[i].setup(ns, ifi, mtu, prog, server, req, seqOff, binary.LittleEndian.Uint64(seed[:])+uint64(i))
	}, func(i int, start, end int64) { shards[i].run(start, end) }, func(i int) { shards[i].close() })
	if err != nil {
		return nil, err
	}
	progressLoop(&cfg, accts, start, &stop, done)
	if cfg.Progress != nil {
		for _, d := range shards {
			d.summary(cfg.Progress)
		}
	}
	return result(&cfg, accts, cpus, start), nil
}

// newAcct is the kernel mode's shard, built by its own constructor, for
// accounting only (counters, histograms, budget, the --rate schedule): its
// descriptors are closed at once and its conns stay idle without sockets,
// giving the per-shard connection count.
func newAcct(id int, cfg *Config, conns int, budget int64, stop *atomic.Bool) (*shard, error) {
	s, err := newShard(id, cfg, nil, unix.AF_INET, conns, budget, nil, -1, stop)
	if err != nil {
		return nil, err
	}
	s.close()
	return s, nil
}

// notKernelAddr refuses an address the kernel holds: the XDP program would
// take its ARP and its TCP on our source ports away from the kernel.
func notKernelAddr(a netip.Addr) error {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil // nothing to check against
	}
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, ad := range addrs {
			if ipn, ok := ad.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP); ok && ip.Unmap() == a {
					return fmt.Errorf("--host-ipv4-addr %s is the kernel's address on %s: give the native client an address no interface holds (in the lab, .3 of the subnet)", a, ifc.Name)
				}
			}
		}
	}
	return nil
}

// inNetns runs fn on a fresh locked thread inside ns (netns.None(): the
// process's namespace). The thread exits with it.
func inNetns(ns netns.NsHandle, fn func() error) error {
	var err error
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err = enterNetns(ns); err == nil {
			err = fn()
		}
	}()
	<-ch
	return err
}

func enterNetns(ns netns.NsHandle) error {
	if !ns.IsOpen() {
		return nil
	}
	if err := netns.Set(ns); err != nil {
		return fmt.Errorf("enter --netns: %w", err)
	}
	return nil
}

// nshard is one native client shard: its socket, link, stack and
// connections. Owned by its goroutine; Run reads acct after it is done.
type nshard struct {
	id, cpu int
	acct    *shard
	conns   int
	sock    *afxdp.Socket
	link    *netstack.AFXDPLink
	stack   *netstack.Stack
	cl      *nclient
	pfd     [1]unix.PollFd

	// The stack's, TCP's and the socket's counters as the shard stopped.
	ipStats  netstack.Stats
	tcpStats netstack.TCPStats
	xskStats afxdp.Stats
}

// setup runs on the shard's locked thread: into the namespace, onto its
// CPU, then the socket of queue id, registered with prog, and the stack.
func (d *nshard) setup(ns netns.NsHandle, ifi *net.Interface, mtu int, prog *afxdp.Program, server netip.AddrPort, req []byte, seqOff int, seed uint64) error {
	n := &d.acct.cfg.Native
	if err := enterNetns(ns); err != nil {
		return err
	}
	var set unix.CPUSet
	set.Set(d.cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin shard %d to CPU %d: %w", d.id, d.cpu, err)
	}
	logf := func(string, ...any) {}
	if d.id == 0 && d.acct.cfg.Progress != nil {
		logf = func(f string, a ...any) { fmt.Fprintf(d.acct.cfg.Progress, "wreck: "+f+"\n", a...) }
	}
	var err error
	if d.sock, err = afxdp.Open(afxdp.Config{Interface: ifi.Name, Queue: d.id, FrameCount: n.Frames, Logf: logf}); err != nil {
		return fmt.Errorf("shard %d: %w", d.id, err)
	}
	if err = prog.Register(d.sock); err != nil {
		return fmt.Errorf("shard %d: %w", d.id, err)
	}
	if d.link, err = netstack.NewAFXDPLink(d.sock, mtu, 64); err != nil {
		return fmt.Errorf("shard %d: %w", d.id, err)
	}
	var mac netstack.MAC
	copy(mac[:], ifi.HardwareAddr)
	a4, _ := netstack.IPv4AddrFrom(n.Addr)
	m4, _ := netstack.IPv4AddrFrom(n.Netmask)
	var g4 netstack.IPv4Addr
	if n.Gateway.IsValid() {
		g4, _ = netstack.IPv4AddrFrom(n.Gateway)
	}
	if d.stack, err = netstack.NewStack(netstack.Config{MAC: mac, Addr: a4, Netmask: m4, Gateway: g4}); err != nil {
		return fmt.Errorf("shard %d: %w", d.id, err)
	}
	lo, hi := n.shardPorts(d.id, d.acct.cfg.SMP)
	tc := netstack.TCPConfig{
		MaxConns: max(4096, 4*d.conns),
		MSS:      uint16(mtu - 80), // room for a full option block, as the server
		Seed:     seed,
		PortLo:   lo, PortHi: hi,
	}
	if len(n.RSSKey) > 0 {
		tc.PortFilter = rssPortFilter(n.RSSKey, n.RSSTable, d.acct.cfg.SMP, d.id, server, n.Addr)
	}
	d.stack.EnableTCP(tc)
	dst, _ := netstack.IPv4AddrFrom(server.Addr())
	d.cl = newNClient(d.acct, d.stack, d.link, dst, server.Port(), d.conns, req, seqOff)
	d.pfd[0] = unix.PollFd{Fd: int32(d.sock.Fd()), Events: unix.POLLIN}
	return nil
}

// run drives the shard from start until end, its budget is done, or stop.
// Busy, it polls the rings; idle (no frame moved, none waiting for the
// kernel), it sleeps in poll(2) on the socket until a frame arrives, the
// stack's next deadline, or the next tick.
func (d *nshard) run(start, end int64) {
	s, c := d.acct, d.cl
	s.now, s.t0, s.end = mono(), start, end
	s.nextTick = s.now + int64(tick)
	c.begin()
	for !s.finished {
		s.now = mono()
		if s.now >= s.end {
			break
		}
		now := epoch.Add(time.Duration(s.now))
		if s.now >= s.nextTick {
			c.nowT = now
			c.tick()
			s.tick()
			s.nextTick = s.now + int64(tick)
		}
		if c.step(now) || d.sock.TxOutstanding() > 0 || len(c.retry) > 0 || len(c.aborts) > 0 || s.finished {
			continue
		}
		wait := min(s.nextTick, s.end)
		if !c.next.IsZero() {
			wait = min(wait, int64(c.next.Sub(epoch)))
		}
		if s.rate && !s.saturated && s.room() {
			if s.rqN > 0 {
				continue // given-back requests wait for a slot: dispatch again
			}
			wait = min(wait, s.t0+int64(float64(s.next)*s.iv)) // the next intended send
		}
		if wait > s.now {
			sysPoll(d.pfd[:], wait-s.now)
		}
	}
	s.stopped = mono()
	s.publish()
	c.shutdown(epoch.Add(time.Duration(mono())))
	d.ipStats, d.tcpStats = d.stack.Stats(), d.stack.TCPStats()
	d.xskStats, _ = d.sock.Stats()
}

// summary writes one line of the shard's native counters: what moved, what
// TCP had to repair, and what was dropped on the way.
func (d *nshard) summary(w io.Writer) {
	ip, t, x := &d.ipStats, &d.tcpStats, &d.xskStats
	fmt.Fprintf(w, "wreck: native shard %d (queue %d): %d frames in, %d out; tcp %d retransmits, %d RTOs, %d resets in; drops: %d checksum, %d no tx buffer, %d no tx frame, %d xsk rx, %d xsk rx ring full\n",
		d.id, d.id, ip.RxFrames, ip.TxFrames, t.Retransmits, t.RTOTimeouts, t.ResetsIn,
		t.ChecksumDrop+ip.IPv4BadChecksum, t.TxNoBuf, ip.TxNoFrame, x.RxDropped, x.RxRingFull)
}

// close releases the shard's stack and socket (the socket leaves the
// XSKMAP as it closes).
func (d *nshard) close() {
	if d.stack != nil && d.link != nil {
		d.stack.Close(d.link)
	}
	if d.sock != nil {
		d.sock.Close()
	}
}
