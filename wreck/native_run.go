package wreck

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"percore/afxdp"
	"percore/native"
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
	server, _ := serverAddr(cfg.Server) // checked by validate
	cpus := cfg.CPUSet
	if len(cpus) == 0 {
		cpus = processCPUs()
	}
	logf := func(string, ...any) {}
	if cfg.Progress != nil {
		logf = func(f string, a ...any) { fmt.Fprintf(cfg.Progress, "wreck: "+f+"\n", a...) }
	}
	dev, err := native.Open(native.Config{
		Iface: n.Iface, Netns: n.Netns,
		Addr: n.Addr, Netmask: n.Netmask, Gateway: n.Gateway,
		Queues: cfg.SMP, XDPMode: n.XDPMode, Frames: n.Frames,
		PortLo: n.PortLo, PortHi: n.PortHi,
		Logf: logf,
	})
	if err != nil {
		return nil, n.explain(err, cfg.SMP)
	}
	defer dev.Close()

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

	// Each shard: a locked thread, pinned, opens its queue (in the
	// interface's namespace) and builds its stack there, then waits for the
	// start.
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + cfg.SMP)
	defer runtime.GOMAXPROCS(procs)
	start, done, err := launch(len(shards), cfg.Duration, &stop, func(i int) error {
		return shards[i].setup(dev, server, req, seqOff, binary.LittleEndian.Uint64(seed[:])+uint64(i))
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

// explain adds to an error of native.Open the flag that fixes it.
func (n *NativeConfig) explain(err error, smp int) error {
	switch {
	case errors.Is(err, native.ErrNotRoot):
		return fmt.Errorf("--network-stack native: %w: run as root, or use --network-stack posix", err)
	case errors.Is(err, native.ErrNoNetns):
		return fmt.Errorf("--netns %s: %w: name a namespace that `ip netns list` shows", n.Netns, err)
	case errors.Is(err, native.ErrNoIface):
		return fmt.Errorf("--iface: %w: check `ip link` (or --netns)", err)
	case errors.Is(err, native.ErrNotEthernet):
		return fmt.Errorf("--iface: %w: the native stack needs an Ethernet interface", err)
	case errors.Is(err, native.ErrTooFewQueues):
		return fmt.Errorf("--smp %d: %w: lower --smp, or raise the queues with `ethtool -L %s combined %d`", smp, err, n.Iface, smp)
	case errors.Is(err, native.ErrKernelAddr):
		return fmt.Errorf("--host-ipv4-addr %s is the kernel's address (%w): give the native client an address no interface holds (in the lab, .3 of the subnet)", n.Addr, err)
	}
	return err
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

// nshard is one native client shard: its queue (socket, link, stack) and
// connections. Owned by its goroutine; Run reads acct after it is done.
type nshard struct {
	id, cpu int
	acct    *shard
	conns   int
	q       *native.Queue
	cl      *nclient
	pfd     [1]unix.PollFd

	// The stack's, TCP's and the socket's counters as the shard stopped.
	ipStats  netstack.Stats
	tcpStats netstack.TCPStats
	xskStats afxdp.Stats
}

// setup runs on the shard's locked thread: onto its CPU, then its queue of
// dev (entering the interface's namespace) and the connections on it.
func (d *nshard) setup(dev *native.Device, server netip.AddrPort, req []byte, seqOff int, seed uint64) error {
	n := &d.acct.cfg.Native
	var set unix.CPUSet
	set.Set(d.cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin shard %d to CPU %d: %w", d.id, d.cpu, err)
	}
	lo, hi := n.shardPorts(d.id, d.acct.cfg.SMP)
	tc := netstack.TCPConfig{
		MaxConns: max(4096, 4*d.conns),
		Seed:     seed,
		PortLo:   lo, PortHi: hi,
	}
	if len(n.RSSKey) > 0 {
		tc.PortFilter = rssPortFilter(n.RSSKey, n.RSSTable, d.acct.cfg.SMP, d.id, server, n.Addr)
	}
	var err error
	if d.q, err = dev.NewQueue(d.id, native.QueueConfig{TCP: tc}); err != nil {
		return fmt.Errorf("shard %d: %w", d.id, err)
	}
	dst, _ := netstack.IPv4AddrFrom(server.Addr())
	d.cl = newNClient(d.acct, d.q.Stack(), d.q.Link(), dst, server.Port(), d.conns, req, seqOff)
	d.pfd[0] = unix.PollFd{Fd: int32(d.q.Socket().Fd()), Events: unix.POLLIN}
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
		if c.step(now) || d.q.Socket().TxOutstanding() > 0 || len(c.retry) > 0 || len(c.aborts) > 0 || s.finished {
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
	d.ipStats, d.tcpStats = d.cl.stack.Stats(), d.cl.stack.TCPStats()
	d.xskStats = d.q.XSKStats()
}

// summary writes one line of the shard's native counters: what moved, what
// TCP had to repair, and what was dropped on the way.
func (d *nshard) summary(w io.Writer) {
	ip, t, x := &d.ipStats, &d.tcpStats, &d.xskStats
	fmt.Fprintf(w, "wreck: native shard %d (queue %d): %d frames in, %d out; tcp %d retransmits, %d RTOs, %d resets in; drops: %d checksum, %d no tx buffer, %d no tx frame, %d xsk rx, %d xsk rx ring full\n",
		d.id, d.id, ip.RxFrames, ip.TxFrames, t.Retransmits, t.RTOTimeouts, t.ResetsIn,
		t.ChecksumDrop+ip.IPv4BadChecksum, t.TxNoBuf, ip.TxNoFrame, x.RxDropped, x.RxRingFull)
}

// close releases the shard's queue (its socket leaves the XSKMAP as it
// closes).
func (d *nshard) close() {
	if d.q != nil {
		d.q.Close()
	}
}
