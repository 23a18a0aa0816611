package wreck

import (
	"crypto/rand"
	"crypto/tls"
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
// our address) to the AF_XDP socket of the queue they arrive on. Shard i
// owns the queues the server's shard i would (native.Device.Owned: queue
// i, or i, i+N, ... on a NIC with more queues and no indirection table to
// program), a netstack and a share of its connections on each. On veth a
// flow sent on tx queue q comes back on rx queue q, so each stack sees its
// own replies; on a NIC with RSS, each stack keeps to the source ports
// whose replies hash to its queue, under --rss-key or the key the NIC
// shows (nicSpread).
func runNative(cfg Config) (*Result, error) {
	req, seqOff := buildRequest(&cfg, cfg.CheckSeq)
	var tconf *tls.Config
	if cfg.TLS.Enabled {
		var err error
		if tconf, err = cfg.TLS.clientConfig(cfg.Server); err != nil {
			return nil, err
		}
	}
	return runNativeApps(cfg, tconf != nil, func(a *acct, slots, _, _ int, dst netstack.IPv4Addr, port uint16, box *tlsBox) nApp {
		c := newNClient(a, slots, dst, port, req, seqOff)
		if box != nil {
			c.useTLS(box, tconf)
		}
		return c
	})
}

// nApp is a native client's connections on one stack: the App of the
// stack's queue, with the shard's tick (timeouts and back-offs) and the
// end of the run (every connection still open reset).
type nApp interface {
	native.App
	// use gives the stack (TCP enabled), its link, and the queue's
	// receive frames, which bound the responses that may be on their way
	// at once (0: no bound).
	use(stack *netstack.Stack, link netstack.Link, rxFrames int)
	tick()
	shutdown(now time.Time)
}

// newNApp makes the connections of shard a's j-th stack: slots of them,
// after the off that the shard's stacks before it hold, to dst:port; box is
// the shard's TLS handshakes' mailbox (nil: cleartext). Called on the
// shard's thread, once per stack.
type newNApp func(a *acct, slots, j, off int, dst netstack.IPv4Addr, port uint16, box *tlsBox) nApp

// runNativeApps is runNative with the connections newApp makes on each
// stack; withTLS gives each shard a TLS handshakes' mailbox.
func runNativeApps(cfg Config, withTLS bool, newApp newNApp) (*Result, error) {
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
			return nil, badField("Native.RSSKey", "%s has no RSS indirection table to read the size of: give Native.RSSTable", n.Iface)
		}
	}
	rss, err := nicSpread(dev, n, cfg.SMP, server)
	if err != nil {
		return nil, err
	}

	cfg.Duration += cfg.Warmup // the shards' deadline
	var seed [8]byte
	rand.Read(seed[:])
	r := newRun(&cfg)
	shards := make([]*nshard, cfg.SMP)
	g, err := r.start(func(sh *shard.Shard, a *acct) error {
		d, err := newNShard(sh, dev, a, rss, server, newApp, binary.LittleEndian.Uint64(seed[:])+uint64(sh.ID), withTLS)
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

// explain adds to an error of native.Open the setting that fixes it.
func (n *NativeConfig) explain(err error, smp int) error {
	switch {
	case errors.Is(err, native.ErrNotRoot):
		return refused(err, "Native.Enabled", "%v: run as root, or drop Native.Enabled (kernel sockets)", err)
	case errors.Is(err, native.ErrNoNetns):
		return refused(err, "Native.Netns", "%s: %v: name a namespace that `ip netns list` shows", n.Netns, err)
	case errors.Is(err, native.ErrNoIface):
		return refused(err, "Native.Iface", "%v: check `ip link` (or Native.Netns)", err)
	case errors.Is(err, native.ErrNotEthernet):
		return refused(err, "Native.Iface", "%v: the native stack needs an Ethernet interface", err)
	case errors.Is(err, native.ErrTooFewQueues):
		return refused(err, "SMP", "%d: %v: lower SMP, or raise the queues with `ethtool -L %s combined %d`", smp, err, n.Iface, smp)
	case errors.Is(err, native.ErrKernelAddr):
		return refused(err, "Sources", "one is the kernel's address (%v): give the native client addresses no interface holds (in the lab, .3 of the subnet and up)", err)
	}
	return err
}

// nshard is one native client shard: its stacks, one per rx queue it owns
// (shardQueues), each a native.Queue (socket, link, stack, run by the shard
// as a Poller) with a share of the shard's connections on it (the queue's
// App). It ends the run as the shard's Stopper. Owned by the shard's
// goroutine; Run reads it after the shards have exited.
type nshard struct {
	id   int
	acct *acct
	qs   []*nqueue
	box  *tlsBox // --tls: the handshakes' mailbox; nil: cleartext
}

// nqueue is one of a shard's stacks and the connections on it.
type nqueue struct {
	rxq int // the rx queue; -1: the stack the queues' owners forward to
	q   *native.Queue
	cl  nApp

	// The stack's, TCP's and the socket's counters as the shard stopped.
	ipStats  netstack.Stats
	tcpStats netstack.TCPStats
	xskStats afxdp.Stats
}

// newNShard runs on shard sh's thread: a stack on each of its queues of
// dev (entering the interface's namespace), a's connections (newApp's)
// dealt over them, to server. Each stack filters its source ports so that
// the NIC puts their replies on its queue (rss, stackPorts). withTLS: the
// shard gets a TLS handshakes' mailbox, for HTTPS.
func newNShard(sh *shard.Shard, dev *native.Device, a *acct, rss rssSpread, server netip.AddrPort, newApp newNApp, seed uint64, withTLS bool) (*nshard, error) {
	n := &a.cfg.Native
	d := &nshard{id: sh.ID, acct: a}
	sh.AddStopper(d) // closes the stacks opened so far, should one fail
	a.attach(sh, d.tick)
	if withTLS {
		var err error
		if d.box, err = newTLSBox(sh); err != nil {
			return d, fmt.Errorf("shard %d: tls: %w", d.id, err)
		}
	}
	dst, _ := netstack.IPv4AddrFrom(server.Addr())
	rxqs := shardQueues(dev, d.id)
	k, off := len(rxqs), 0
	for j, rxq := range rxqs {
		slots := (a.slots - j + k - 1) / k // the shard's slots dealt over its k stacks
		tc := netstack.TCPConfig{MaxConns: clientTableSize(slots), Seed: seed + uint64(j)<<32}
		if err := stackPorts(n, rss, d.id, a.cfg.SMP, j, k, rxq, server, &tc); err != nil {
			return d, err
		}
		if err := forwarded(dev, d.id, server, n, &tc); err != nil {
			return d, err
		}
		nq := &nqueue{rxq: rxq, cl: newApp(a, slots, j, off, dst, server.Port(), d.box)}
		off += slots
		var err error
		if nq.q, err = openQueue(dev, d.id, rxq, native.QueueConfig{TCP: tc, App: nq.cl}); err != nil {
			return d, fmt.Errorf("shard %d: %w", d.id, err)
		}
		d.qs = append(d.qs, nq)
		nq.cl.use(nq.q.Stack(), nq.q.Link(), nq.q.Sizing().RxFrames())
		if a.cfg.Progress != nil {
			fmt.Fprintf(a.cfg.Progress, "wreck: shard %d: %s\n", d.id, nq.q.Describe())
		}
		if err := nq.q.Register(sh); err != nil {
			return d, err
		}
	}
	return d, nil
}

// tick is the shard's: every stack's connections' timeouts and back-offs.
func (d *nshard) tick() {
	for _, nq := range d.qs {
		nq.cl.tick()
	}
}

// clientTableSize is the TCP table of a shard with slots connections: one
// TCB a slot and three times as many for connections closing or in
// TIME-WAIT (the oldest of which TCP recycles when the table is full). The
// queue's UMEM and rings follow it (native.SizeFor).
func clientTableSize(slots int) int { return max(4096, 4*slots) }

// closedLoopMax is the closed loop's requests in flight on a queue: three
// quarters of its receive frames at two a request (the response and, where
// the server holds the response back, its ACK of the request first), the
// rest kept for SYN-ACKs and retransmissions.
func closedLoopMax(rxFrames int) int { return rxFrames * 3 / 8 }

// Drain implements shard.Stopper: Run stops the shard, its run ends now.
func (d *nshard) Drain(now time.Time) {
	d.acct.setNow(now)
	d.acct.end()
}

// Drained implements shard.Stopper: nothing to wait for.
func (d *nshard) Drained() bool { return true }

// Close implements shard.Stopper: on each stack, the connections still open
// are reset, the counters kept, and the queue closed (its socket leaves the
// XSKMAP).
func (d *nshard) Close() {
	for _, nq := range d.qs {
		if nq.q == nil {
			continue
		}
		nq.cl.shutdown(at(mono()))
		nq.ipStats, nq.tcpStats = nq.q.Stack().Stats(), nq.q.Stack().TCPStats()
		nq.xskStats = nq.q.XSKStats()
		nq.q.Close()
		nq.q = nil
	}
	if d.box != nil {
		d.box.close() // after the resets: every handshake's helper ends
	}
}

// summary writes a line of native counters for each of the shard's stacks:
// what moved, what TCP had to repair, and what was dropped on the way.
func (d *nshard) summary(w io.Writer) {
	for _, nq := range d.qs {
		ip, t, x := &nq.ipStats, &nq.tcpStats, &nq.xskStats
		fmt.Fprintf(w, "wreck: native shard %d (queue %d): %d frames in, %d out; tcp %d connects, %d retransmits, %d RTOs, %d resets in; drops: %d checksum, %d no tx buffer, %d no tx frame, %d xsk rx, %d xsk rx ring full\n",
			d.id, nq.rxq, ip.RxFrames, ip.TxFrames, t.ActiveOpens, t.Retransmits, t.RTOTimeouts, t.ResetsIn,
			t.ChecksumDrop+ip.IPv4BadChecksum, t.TxNoBuf, ip.TxNoFrame, x.RxDropped, x.RxRingFull)
	}
}
