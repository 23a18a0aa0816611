package native

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"percore/afxdp"
	"percore/netstack"
	"percore/shard"
)

// QueueConfig is what one shard runs on its queue.
type QueueConfig struct {
	// TCP's limits, timers and client ports. MSS is the device's MTU less
	// 40 whatever is given: TCP fits its options into that (the MSS shrinks
	// by the timestamps' 12 bytes, SACK blocks yield to data), so no segment
	// outgrows the MTU.
	TCP netstack.TCPConfig
	App App // runs around each Poll; nil: none
}

// App is what runs on a queue's stack, beside the callbacks TCP makes: the
// queue calls Before just ahead of each Stack.Poll and After just after it,
// on the shard's goroutine. A client opens connections and queues requests
// in Before, and acts in After on what the Poll delivered (handshakes done,
// connections to reset). After reports whether it left work for the next
// Poll, so that the shard does not sleep first.
type App interface {
	Before(now time.Time)
	After(now time.Time) (busy bool)
}

// QueueStats are a queue's own counters; its stack's and socket's are read
// from them.
type QueueStats struct {
	Wakeups     uint64 `stat:"count"` // epoll events on the socket fd: a sleeping shard woken by received frames
	FramesShort uint64 `stat:"count"` // polls begun with few frames free: new SYNs shed (tcp.syn_shed), windows held back (tcp.mem_window_clamped)
	FragsIn     uint64 `stat:"count"` // ICMP "fragmentation needed" taken from other queues' stacks (their ip.icmp_forwarded)
	FragsFull   uint64 `stat:"drop"`  // ... not passed to a queue whose mailbox was full

	// Software forwarding (RSSForward); zero without it.
	FwdOut       uint64 `stat:"count"` // frames this shard's queue received for another shard, copied into its ring
	FwdIn        uint64 `stat:"count"` // frames another shard's queue received for this one
	FwdRingFull  uint64 `stat:"drop"`  // frames for another shard dropped: its ring was full
	FwdTxOut     uint64 `stat:"count"` // frames this queueless shard handed its home owner to send
	FwdTxSent    uint64 `stat:"count"` // frames this owner sent for queueless shards
	FwdWakes     uint64 `stat:"count"` // eventfd wakeups of this shard by another's ring
	FwdTxPool    int    `stat:"gauge"` // queueless: transmit buffers free in the shard's pool
	FwdRingsLeft int    `stat:"gauge"` // frames left in the rings this shard reads, as it closed
}

// Queue is one shard's native stack on its rx queue: the AF_XDP socket, the
// link over it and the userspace stack. With software forwarding (RSSForward)
// the link is the shard's fwdLink, and a shard without a queue has a Queue
// without a socket (NewForwarded), fed by the other shards' rings. It is
// owned by the shard: every method runs on the shard's goroutine. The owner
// closes it (Close) when the shard stops, after what runs on it has
// finished with the stack.
type Queue struct {
	sock   *afxdp.Socket // nil: a shard without a queue (forwarded)
	link   netstack.Link
	fwd    *fwdLink // software forwarding; nil: none
	wake   *waker   // the shard's, with fwd
	stack  *netstack.Stack
	app    App
	wheel  *shard.Wheel
	next   shard.Timer // the stack's next deadline: only wakes the loop
	stats  QueueStats
	size   Sizing
	budget *netstack.MemBudget // the shard's, from QueueConfig.TCP.Budget; nil: none
	frags  *fragRouter         // the device's; nil with one queue
	id     int                 // the stack's in frags: the rx queue's, or (forwarded) the shard's
	low    int                 // free transmit frames under which new connections are shed
	rxKeep int                 // fill-ring frames flight credit leaves for segments nobody paces: SYNs, ACKs, repairs
	closed bool
	xsk    afxdp.Stats // the socket's numbers as it closed
}

// frameSize is the UMEM chunk for an IP MTU: 2 KiB where the Ethernet
// frame and the kernel's 256 bytes of XDP headroom fit (MTU 1500 does),
// halving the UMEM; else 4 KiB.
func frameSize(mtu int) int {
	if mtu+14+256 <= 2048 {
		return 2048
	}
	return 4096
}

// defaultMaxConns is TCP's table size when QueueConfig.TCP leaves it 0.
const defaultMaxConns = 4096

// lowFraction: a queue sheds new connections (its TCP drops SYNs, counted)
// while fewer than 1/lowFraction of its transmit frames are free, so that
// the frames left carry the established connections' data and ACKs; a
// dropped SYN is sent again by the client. Flight credit likewise leaves
// 1/lowFraction of the receive frames to segments it does not pace.
const lowFraction = 8

// NewQueue opens the socket of rx queue id, registers it with the device's
// program and builds the stack on it with TCP on. Call it on the thread that
// will own the queue (a shard's, in its setup): inside the device's network
// namespace, which it enters, locking the thread for good.
func (d *Device) NewQueue(id int, cfg QueueConfig) (_ *Queue, err error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	if id < 0 || id >= d.rxq {
		return nil, fmt.Errorf("native: %w: queue %d, %s has %d", afxdp.ErrNoQueue, id, d.cfg.Iface, d.rxq)
	}
	q, tc := d.sizedQueue(id, cfg)
	ac := afxdp.Config{Interface: d.cfg.Iface, Queue: id, Bind: d.bindMode(), FrameSize: frameSize(d.mtu), FrameCount: q.size.Frames, RingSize: q.size.Ring, BusyPoll: d.cfg.BusyPoll, Logf: d.cfg.Logf}
	if q.sock, err = afxdp.Open(ac); err != nil {
		return nil, fmt.Errorf("native: queue %d: %w", id, err)
	}
	defer func() {
		if err != nil {
			q.sock.Close()
		}
	}()
	if err = d.prog.Register(q.sock); err != nil {
		return nil, fmt.Errorf("native: queue %d: %w", id, err)
	}
	link, err := netstack.NewAFXDPLink(q.sock, d.mtu, linkBatch)
	if err != nil {
		return nil, fmt.Errorf("native: queue %d: %w", id, err)
	}
	q.link = link
	if d.fwd != nil { // owner i owns queue i
		q.fwd, q.wake = d.fwd.newFwdLink(id, link, d.mtu, linkBatch, 0, &q.stats), d.fwd.wake[id]
		q.link = q.fwd
	}
	if err := d.newStack(q, tc); err != nil {
		return nil, fmt.Errorf("native: queue %d: %w", id, err)
	}
	return q, nil
}

// sizedQueue is the Queue of shard id, sized for its TCP table, and cfg.TCP
// with the defaults its zero fields take.
func (d *Device) sizedQueue(id int, cfg QueueConfig) (*Queue, netstack.TCPConfig) {
	tc := cfg.TCP
	if tc.MaxConns == 0 {
		tc.MaxConns = defaultMaxConns
	}
	q := &Queue{app: cfg.App, size: SizeFor(tc.MaxConns, d.cfg.Frames), id: id}
	if tc.SynBacklog == 0 {
		tc.SynBacklog = q.size.SynBacklog
	}
	return q, tc
}

// linkBatch is the frames one call on a queue's link moves.
const linkBatch = 64

// newStack builds q's stack with TCP on, over q.link.
func (d *Device) newStack(q *Queue, tc netstack.TCPConfig) (err error) {
	q.low = q.size.Frames / 2 / lowFraction
	q.rxKeep = q.size.RxFrames() / lowFraction
	sc := netstack.Config{MAC: d.mac}
	sc.Addr, _ = netstack.IPv4AddrFrom(d.cfg.Addr)
	sc.Netmask, _ = netstack.IPv4AddrFrom(d.cfg.Netmask)
	for _, a := range d.cfg.Aliases {
		v, _ := netstack.IPv4AddrFrom(a)
		sc.Aliases = append(sc.Aliases, v)
	}
	if d.cfg.Gateway.IsValid() {
		sc.Gateway, _ = netstack.IPv4AddrFrom(d.cfg.Gateway)
	}
	if q.stack, err = netstack.NewStack(sc); err != nil {
		return err
	}
	tc.MSS = uint16(d.mtu - 40)
	q.stack.EnableTCP(tc)
	q.budget = tc.Budget
	if q.frags = d.frags; q.frags != nil {
		q.stack.ForwardFragNeeded(func(e netstack.FragNeeded) {
			q.stats.FragsFull += uint64(q.frags.post(q.id, e))
		})
	}
	return nil
}

// bindMode is the sockets' bind: copy mode under generic XDP, which hands
// the program skbs, not the driver's buffers (as the kernel's xdpsock
// sample binds); else zero-copy where the driver has it.
func (d *Device) bindMode() afxdp.BindMode {
	if d.cfg.XDPMode == afxdp.Generic {
		return afxdp.BindCopy
	}
	return afxdp.BindAuto
}

// Register plugs q into shard sh's loop: q polls the stack as a Poller, its
// socket fd in the shard's epoll wakes the shard when frames arrive, and the
// stack's next deadline arms a timer on the shard's wheel. Call it in the
// shard's setup.
func (q *Queue) Register(sh *shard.Shard) error {
	q.wheel = sh.Wheel()
	q.next.Init(func(time.Time) {})
	src := sh.AddSource(q)
	if q.sock != nil {
		if err := sh.AddFD(q.sock.Fd(), unix.EPOLLIN, src, 0); err != nil {
			return fmt.Errorf("native: queue %d: %w", q.sock.Queue(), err)
		}
	}
	if q.wake != nil {
		if err := sh.AddFD(q.wake.fd, unix.EPOLLIN, src, wakeToken); err != nil {
			return fmt.Errorf("native: shard %d: forwarding eventfd: %w", sh.ID, err)
		}
	}
	sh.AddPoller(q)
	return nil
}

// wakeToken marks the forwarding eventfd's events (the socket's are 0).
const wakeToken = 1

// Poll implements shard.Poller: the App's Before, the stack once over the
// link, the App's After. It reports work while frames move, the kernel still
// has tx frames to take (copy mode wants a kick while any are outstanding),
// the stack's deadline has come, or the App asks.
func (q *Queue) Poll(now time.Time) bool {
	if q.closed {
		return false
	}
	if q.app != nil {
		q.app.Before(now)
	}
	short := q.freeFrames() < q.low
	if short {
		q.stats.FramesShort++
	}
	q.stack.ShedSYNs(short)
	q.stack.FramesShort(short)
	if q.sock != nil {
		// New flights of data are what draw segments in: TCP starts
		// no more of them than the fill ring can take (tcp.flights_held
		// counts those that waited), so that a burst from many
		// connections waits in TCP rather than being dropped.
		q.stack.FlightCredit(max(q.sock.FillQueued()-q.rxKeep, 0))
	}
	if q.frags != nil {
		q.stats.FragsIn += uint64(q.frags.drain(q.id, now, q.stack, q.link))
	}
	rx, tx := q.stack.Frames()
	moved := q.moved()
	next := q.stack.Poll(now, q.link)
	rx2, tx2 := q.stack.Frames()
	busy := rx2 != rx || tx2 != tx || q.moved() != moved || (q.sock != nil && q.sock.TxOutstanding() > 0)
	if q.app != nil && q.app.After(now) {
		busy = true
	}
	if q.wake != nil {
		busy = q.drowse(busy)
	}
	switch {
	case next.IsZero():
		q.wheel.Stop(&q.next)
	case !next.After(now):
		busy = true
	case !q.next.Armed() || !next.Equal(q.next.When()):
		q.wheel.Start(&q.next, next)
	}
	return busy
}

// Events implements shard.Source: the socket fd became readable, or another
// shard woke this one through the forwarding eventfd. Nothing more to do
// here: the loop polls the rings next.
func (q *Queue) Events(evs []shard.Event, now time.Time) {
	for _, ev := range evs {
		if ev.Token == wakeToken {
			q.wake.reset()
			q.stats.FwdWakes++
		} else {
			q.stats.Wakeups++
		}
	}
}

// Sizing is what the queue holds: its connections, UMEM frames, rings and
// SYN backlog.
func (q *Queue) Sizing() Sizing { return q.size }

// Describe is the queue's start-up line: what it holds, the UMEM that
// takes, and the memory budget its buffers are charged to.
func (q *Queue) Describe() string {
	mem := "no memory budget"
	if q.budget != nil && q.budget.Limit() > 0 {
		mem = fmt.Sprintf("memory budget %d MiB (the shard's)", q.budget.Limit()>>20)
	}
	if q.sock == nil {
		return fmt.Sprintf("no queue, forwarded: %d connections, %d transmit buffers (%d MiB), SYN backlog %d, %s",
			q.size.Conns, len(q.fwd.free), len(q.fwd.pool)>>20, q.size.SynBacklog, mem)
	}
	return fmt.Sprintf("queue %d: %d connections, %d frames (%d MiB UMEM), rings of %d, SYN backlog %d, %s",
		q.sock.Queue(), q.size.Conns, q.size.Frames, q.size.UMEMBytes(q.sock.FrameSize())>>20, q.size.Ring, q.size.SynBacklog, mem)
}

// Stack is the queue's userspace stack.
func (q *Queue) Stack() *netstack.Stack { return q.stack }

// Link is the link the stack runs over: pass it to the stack's calls that
// take one (AbortTCP).
func (q *Queue) Link() netstack.Link { return q.link }

// Socket is the queue's AF_XDP socket; nil for a shard without a queue.
func (q *Queue) Socket() *afxdp.Socket { return q.sock }

// Stats returns the queue's own counters, forwarding's among them.
func (q *Queue) Stats() QueueStats {
	st := q.stats
	if q.fwd != nil {
		st.FwdTxPool = len(q.fwd.free)
	}
	return st
}

// XSKStats returns the socket's counters; after Close, those it had as it
// closed.
func (q *Queue) XSKStats() afxdp.Stats {
	if q.closed || q.sock == nil {
		return q.xsk
	}
	st, _ := q.sock.Stats()
	return st
}

// Close sends what the stack has queued (resets of an abort), gives every
// frame back and closes the socket: its UMEM is unmapped and it leaves the
// program's XSKMAP, so the queue's frames go to the kernel. Polls after Close
// do nothing.
func (q *Queue) Close() {
	if q.closed {
		return
	}
	q.closed = true
	if q.wheel != nil {
		q.wheel.Stop(&q.next)
	}
	q.link.Flush()
	q.stack.Close(q.link)
	if q.fwd != nil {
		q.fwd.close()
	}
	if q.sock != nil {
		q.xsk, _ = q.sock.Stats()
		q.sock.Close()
	}
}
