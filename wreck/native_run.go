package wreck

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"percore/afxdp"
	"percore/native"
	"percore/netstack"
	"percore/shard"
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
	logf := func(string, ...any) {}
	if cfg.Progress != nil {
		logf = func(f string, a ...any) { fmt.Fprintf(cfg.Progress, "wreck: "+f+"\n", a...) }
	}
	dev, err := native.Open(native.Config{
		Iface: n.Iface, Netns: n.Netns,
		Addr: n.Addr, Aliases: n.Aliases, Netmask: n.Netmask, Gateway: n.Gateway,
		Queues: cfg.SMP, XDPMode: n.XDPMode, Frames: n.Frames,
		PortLo: n.PortLo, PortHi: n.PortHi,
		BusyPoll: afxdp.BusyPoll{Budget: n.BusyPoll},
		Logf:     logf,
	})
	if err != nil {
		return nil, n.explain(err, cfg.SMP)
	}
	defer dev.Close()
	if len(n.RSSKey) > 0 && n.RSSTable == 0 {
		if n.RSSTable = dev.RSSTableSize(); n.RSSTable == 0 {
			return nil, fmt.Errorf("--rss-key: %s has no RSS indirection table to read the size of: give --rss-table", n.Iface)
		}
	}

	cfg.Duration += cfg.Warmup // the shards' deadline
	req, seqOff := buildRequest(&cfg, cfg.CheckSeq)
	var seed [8]byte
	rand.Read(seed[:])
	r := newRun(&cfg)
	shards := make([]*nshard, cfg.SMP)
	g, err := r.start(func(sh *shard.Shard, a *acct) error {
		d, err := newNShard(sh, dev, a, server, req, seqOff, binary.LittleEndian.Uint64(seed[:])+uint64(sh.ID))
		shards[sh.ID] = d
		return err
	})
	if err != nil {
		return nil, err
	}
	r.wait(g)
	if cfg.Progress != nil {
		for _, d := range shards {
			d.summary(cfg.Progress)
		}
	}
	return r.result(), nil
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
		return fmt.Errorf("--host-ipv4-addr: one is the kernel's address (%w): give the native client addresses no interface holds (in the lab, .3 of the subnet and up)", err)
	}
	return err
}

// nshard is one native client shard: its queue (socket, link, stack, run
// by the shard as a Poller) and the connections on it (the queue's App). It
// ends the run as the shard's Stopper. Owned by the shard's goroutine; Run
// reads it after the shards have exited.
type nshard struct {
	id int
	q  *native.Queue
	cl *nclient

	// The stack's, TCP's and the socket's counters as the shard stopped.
	ipStats  netstack.Stats
	tcpStats netstack.TCPStats
	xskStats afxdp.Stats
}

// newNShard runs on shard sh's thread: its queue of dev (entering the
// interface's namespace) with a's connections on it, to server.
func newNShard(sh *shard.Shard, dev *native.Device, a *acct, server netip.AddrPort, req []byte, seqOff int, seed uint64) (*nshard, error) {
	n := &a.cfg.Native
	d := &nshard{id: sh.ID}
	lo, hi := n.shardPorts(d.id, a.cfg.SMP)
	tc := netstack.TCPConfig{
		MaxConns: clientTableSize(a.slots),
		Seed:     seed,
		PortLo:   lo, PortHi: hi,
	}
	if len(n.RSSKey) > 0 {
		tc.PortFilter = rssPortFilter(n.RSSKey, n.RSSTable, a.cfg.SMP, d.id, server, n.Addr)
	}
	if err := forwarded(dev, d.id, server, n, &tc); err != nil {
		return d, err
	}
	dst, _ := netstack.IPv4AddrFrom(server.Addr())
	d.cl = newNClient(a, dst, server.Port(), req, seqOff)
	var err error
	if d.q, err = openQueue(dev, d.id, native.QueueConfig{TCP: tc, App: d.cl}); err != nil {
		return d, fmt.Errorf("shard %d: %w", d.id, err)
	}
	d.cl.use(d.q.Stack(), d.q.Link())
	if a.cfg.Progress != nil {
		fmt.Fprintf(a.cfg.Progress, "wreck: shard %d: %s\n", d.id, d.q.Describe())
	}
	sh.AddStopper(d)
	a.attach(sh, d.cl.tick)
	return d, d.q.Register(sh)
}

// clientTableSize is the TCP table of a shard with slots connections: one
// TCB a slot and three times as many for connections closing or in
// TIME-WAIT (the oldest of which TCP recycles when the table is full). The
// queue's UMEM and rings follow it (native.SizeFor).
func clientTableSize(slots int) int { return max(4096, 4*slots) }

// Drain implements shard.Stopper: Run stops the shard, its run ends now.
func (d *nshard) Drain(now time.Time) {
	d.cl.acct.setNow(now)
	d.cl.acct.end()
}

// Drained implements shard.Stopper: nothing to wait for.
func (d *nshard) Drained() bool { return true }

// Close implements shard.Stopper: the connections still open are reset,
// the counters kept, and the queue closed (its socket leaves the XSKMAP).
func (d *nshard) Close() {
	if d.q == nil {
		return
	}
	d.cl.shutdown(at(mono()))
	d.ipStats, d.tcpStats = d.q.Stack().Stats(), d.q.Stack().TCPStats()
	d.xskStats = d.q.XSKStats()
	d.q.Close()
}

// summary writes one line of the shard's native counters: what moved, what
// TCP had to repair, and what was dropped on the way.
func (d *nshard) summary(w io.Writer) {
	ip, t, x := &d.ipStats, &d.tcpStats, &d.xskStats
	fmt.Fprintf(w, "wreck: native shard %d (queue %d): %d frames in, %d out; tcp %d retransmits, %d RTOs, %d resets in; drops: %d checksum, %d no tx buffer, %d no tx frame, %d xsk rx, %d xsk rx ring full\n",
		d.id, d.id, ip.RxFrames, ip.TxFrames, t.Retransmits, t.RTOTimeouts, t.ResetsIn,
		t.ChecksumDrop+ip.IPv4BadChecksum, t.TxNoBuf, ip.TxNoFrame, x.RxDropped, x.RxRingFull)
}
