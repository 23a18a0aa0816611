package server

import (
	"fmt"
	"io"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"percore/afxdp"
	"percore/httpd"
	"percore/netstack"
	"percore/shard"
)

// The native shard glue: one shard's AF_XDP socket, netstack.AFXDPLink, userspace
// netstack.Stack with TCP listeners, and httpd.Server, plugged into the shard's loop as
// a Poller (the rings), a Source (the socket fd wakes a sleeping shard), a
// Stopper (graceful drain) and a Reporter (counters).
//
// Data path, per loop iteration: Poll -> netstack.Stack.Poll(now, link) -> rx batch ->
// eth/arp/ipv4/tcp -> nativeConn (netstack.TCPApp) -> httpd.Conn.Feed -> responses
// queued as immutable slices -> TCP cuts segments into UMEM frames -> tx ring
// -> kick. The stack's next deadline arms one wheel timer, so a sleeping
// shard wakes for retransmissions, delayed ACKs and httpd's timeouts (TCP
// runs those too: nativeConn is a netstack.TCPAppTimer).

// NativeConfig configures one shard's native stack.
type NativeConfig struct {
	Stack netstack.Config    // MAC, address, netmask, gateway; limits
	MTU   int                // IP MTU of the link; default 1500
	TCP   netstack.TCPConfig // connection limits and timers (Addr comes from Stack)
	Ports []uint16           // listen ports
	Site  *httpd.Site        // shared, read-only
	Log   io.Writer          // access log (nil: none)
	// Drain, shared by the shards of one interface, makes them finish a
	// graceful stop together (see DrainGroup); nil: each shard alone.
	Drain *DrainGroup
}

// DrainGroup lets the native shards of one interface finish draining
// together. A shard whose connections have all closed keeps its queue open,
// answering new SYNs with RST (its listener is closed), until every shard's
// connections have closed: a queue whose socket is gone passes its frames to
// the kernel, which would leave those clients unanswered. Control path only:
// one atomic touched by Drained during a stop, never on the data path.
type DrainGroup struct{ left atomic.Int32 }

// NewDrainGroup is a DrainGroup for n shards.
func NewDrainGroup(n int) *DrainGroup {
	g := &DrainGroup{}
	g.left.Store(int32(n))
	return g
}

// NativeStats are the glue's own counters; the stack's, TCP's, httpd's and the
// socket's are reported beside them.
type NativeStats struct {
	Accepted uint64 `stat:"count"` // connections handed to httpd
	Released uint64 `stat:"count"` // connections whose httpd side was released
	Refused  uint64 `stat:"count"` // handshakes completed while draining: answered by RST
	Timeouts uint64 `stat:"count"` // httpd's header or idle timeout passed (TCP then sends FIN, or RST with data in flight)
	Forced   uint64 `stat:"count"` // connections aborted at the stop deadline
	Kicks    uint64 `stat:"count"` // connections woken for a send opportunity outside a segment (the drain)
	Wakeups  uint64 `stat:"count"` // epoll events on the socket fd (a sleeping shard woken by received frames)
}

// Native is one shard's native stack. It is owned by the shard: every method
// runs on the shard's goroutine. The socket is owned by Native from
// NewNative on and closed by Close.
type Native struct {
	sh    *shard.Shard
	wheel *shard.Wheel
	sock  *afxdp.Socket
	link  *netstack.AFXDPLink
	stack *netstack.Stack
	srv   *httpd.Server
	ports []uint16
	eps   []nativeEndpoint

	pool []*nativeConn // free conns, reused
	live []*nativeConn // every conn ever made (index = nativeConn.idx)
	open int

	next    shard.Timer // the stack's next deadline: only wakes the loop
	tick    shard.Timer // Date header and access-log flush, each second
	drain   bool
	closed  bool
	group   *DrainGroup
	counted bool        // this shard's drain is counted in group
	recheck shard.Timer // wakes the loop while waiting for the other shards
	now     time.Time
	stats   NativeStats
	lastXsk afxdp.Stats // the socket's numbers as it closed, for the final report
}

// nativeEndpoint is the netstack.TCPEndpoint of one listen port.
type nativeEndpoint struct {
	n    *Native
	port uint16
}

func (e *nativeEndpoint) Accept(remote netip.AddrPort, h netstack.TCPHandle, now time.Time) netstack.TCPApp {
	return e.n.accept(remote, h, now)
}

func (e *nativeEndpoint) Release(app netstack.TCPApp, now time.Time) {
	e.n.release(app.(*nativeConn), now)
}

// nativeConn is the netstack.TCPApp (and netstack.TCPAppTimer: httpd's header and idle
// timeouts run on TCP's timers) of one connection: the httpd.Conn plus the
// handle the glue needs to act on the connection outside a segment (drain,
// stop). Pooled by Native.
type nativeConn struct {
	n   *Native
	idx int
	hc  *httpd.Conn        // nil when free
	h   netstack.TCPHandle // the connection, while hc is set
}

func (c *nativeConn) Feed(p []byte, now time.Time) int { return c.hc.Feed(p, now) }
func (c *nativeConn) Output() [][]byte                 { return c.hc.Output() }
func (c *nativeConn) Advance(n int)                    { c.hc.Advance(n) }
func (c *nativeConn) PeerClosed(now time.Time)         { c.hc.PeerClosed(now) }
func (c *nativeConn) Deadline() time.Time              { return c.hc.Deadline() }

// Expire is httpd's verdict on its deadline. When it expired, httpd has
// dropped its output and reports Closing: TCP sends FIN if nothing is in
// flight and aborts with RST otherwise (netstack.TCPAppTimer).
func (c *nativeConn) Expire(now time.Time) bool {
	if !c.hc.Expire(now) {
		return false
	}
	c.n.stats.Timeouts++
	return true
}

// Closing is httpd's verdict, or, while the shard drains, true as soon as
// every response queued has been sent: TCP then sends FIN.
func (c *nativeConn) Closing() bool {
	return c.hc.Closing() || (c.n.drain && c.hc.Pending() == 0)
}

// NewNative builds shard sh's native stack around sock (the socket of the
// shard's queue, already registered with the XDP program; Native owns it from
// now on, also on error) and registers it with the shard as poller, source,
// stopper and reporter. Call from the shard's setup, on its thread.
func NewNative(sh *shard.Shard, sock *afxdp.Socket, cfg NativeConfig, now time.Time) (_ *Native, err error) {
	defer func() {
		if err != nil {
			sock.Close()
		}
	}()
	if len(cfg.Ports) == 0 {
		return nil, fmt.Errorf("native stack: no listen port")
	}
	mtu := cfg.MTU
	if mtu == 0 {
		mtu = 1500
	}
	link, err := netstack.NewAFXDPLink(sock, mtu, max(cfg.Stack.Batch, 64))
	if err != nil {
		return nil, err
	}
	st, err := netstack.NewStack(cfg.Stack)
	if err != nil {
		return nil, err
	}
	if cfg.TCP.MSS == 0 {
		// MTU-40: TCP fits its options in (the MSS shrinks by the 12
		// bytes of timestamps, SACK blocks yield to data), so no segment
		// outgrows the MTU (TestNativeMSSFitsMTU).
		cfg.TCP.MSS = uint16(mtu - 40)
	}
	st.EnableTCP(cfg.TCP)
	n := &Native{
		sh:    sh,
		wheel: sh.Wheel(),
		sock:  sock,
		link:  link,
		stack: st,
		srv:   httpd.NewServer(cfg.Site, cfg.Log),
		ports: cfg.Ports,
		eps:   make([]nativeEndpoint, len(cfg.Ports)),
		now:   now,
		group: cfg.Drain,
	}
	for i, p := range cfg.Ports {
		n.eps[i] = nativeEndpoint{n: n, port: p}
		if err := st.ListenTCP(p, &n.eps[i]); err != nil {
			return nil, fmt.Errorf("native stack: listen on port %d: %w", p, err)
		}
	}
	// A readable socket (rx ring not empty) wakes a shard sleeping in epoll;
	// the loop's next iteration polls the rings.
	src := sh.AddSource(n)
	if err := sh.AddFD(sock.Fd(), unix.EPOLLIN, src, 0); err != nil {
		return nil, err
	}
	sh.AddPoller(n)
	sh.AddStopper(n)
	sh.AddReporter(n)
	n.next.Init(func(time.Time) {})
	n.recheck.Init(func(time.Time) {})
	n.tick.Init(n.onTick)
	n.srv.Tick(now)
	n.wheel.Start(&n.tick, now.Truncate(time.Second).Add(time.Second))
	return n, nil
}

func (n *Native) onTick(now time.Time) {
	n.srv.Tick(now)
	n.wheel.Start(&n.tick, now.Truncate(time.Second).Add(time.Second))
}

// netstack.Stack returns the shard's userspace stack (for its counters).
func (n *Native) Stack() *netstack.Stack { return n.stack }

// Socket returns the shard's AF_XDP socket.
func (n *Native) Socket() *afxdp.Socket { return n.sock }

// Server returns the shard's HTTP responder.
func (n *Native) Server() *httpd.Server { return n.srv }

// Open is the number of connections httpd holds.
func (n *Native) Open() int { return n.open }

// Stats returns the glue's counters.
func (n *Native) Stats() NativeStats { return n.stats }

// Events implements shard.Source: the socket fd became readable. Nothing to
// do here: the loop polls the rings at its next iteration.
func (n *Native) Events(evs []shard.Event, now time.Time) { n.stats.Wakeups++ }

// Poll implements shard.Poller: the stack runs over the link once (woken
// connections get their send opportunity there). It reports
// work when frames moved, frames remain queued, or the kernel still has tx
// frames to take (copy mode wants a kick while any are outstanding).
func (n *Native) Poll(now time.Time) bool {
	if n.closed {
		return false
	}
	n.now = now
	rx, tx := n.stack.Frames()
	next := n.stack.Poll(now, n.link)
	rx2, tx2 := n.stack.Frames()
	busy := rx2 != rx || tx2 != tx || n.sock.TxOutstanding() > 0
	switch {
	case next.IsZero():
		n.wheel.Stop(&n.next)
	case !next.After(now):
		busy = true
	case !n.next.Armed() || !next.Equal(n.next.When()):
		n.wheel.Start(&n.next, next)
	}
	return busy
}

// accept gives a connection that completed its handshake an httpd.Conn, or
// refuses it (nil: TCP answers RST) while draining.
func (n *Native) accept(remote netip.AddrPort, h netstack.TCPHandle, now time.Time) netstack.TCPApp {
	if n.drain || n.closed {
		n.stats.Refused++
		return nil
	}
	var c *nativeConn
	if k := len(n.pool); k > 0 {
		c = n.pool[k-1]
		n.pool = n.pool[:k-1]
	} else {
		c = &nativeConn{n: n, idx: len(n.live)}
		n.live = append(n.live, c)
	}
	c.hc = n.srv.NewConn(remote, now)
	c.h = h
	n.open++
	n.stats.Accepted++
	return c
}

// release takes back a connection TCP is done with.
func (n *Native) release(c *nativeConn, now time.Time) {
	if c.hc == nil {
		return
	}
	n.srv.Release(c.hc)
	c.hc, c.h = nil, netstack.TCPHandle{}
	n.open--
	n.stats.Released++
	n.pool = append(n.pool, c)
}

// Drain implements shard.Stopper: stop listening (new SYNs get RST), refuse
// handshakes in progress, and let every connection finish the responses it
// has queued and then close with FIN.
func (n *Native) Drain(now time.Time) {
	n.drain = true
	for _, p := range n.ports {
		n.stack.UnlistenTCP(p)
	}
	for _, c := range n.live {
		if c.hc != nil {
			// Closing is now true once its responses are sent: the
			// next Poll sends what is left, then FIN.
			n.stats.Kicks++
			n.stack.WakeTCP(c.h)
		}
	}
}

// Drained implements shard.Stopper: httpd holds no connection (connections
// in TIME-WAIT hold no httpd state and do not count), and neither do the
// other shards of the DrainGroup; while they do, the loop wakes every 10 ms
// to look again.
func (n *Native) Drained() bool {
	if n.open > 0 {
		return false
	}
	if n.group == nil {
		return true
	}
	if !n.counted {
		n.counted = true
		n.group.left.Add(-1)
	}
	if n.group.left.Load() <= 0 {
		return true
	}
	if !n.recheck.Armed() {
		n.wheel.Start(&n.recheck, n.now.Add(10*time.Millisecond))
	}
	return false
}

// Close implements shard.Stopper: abort what is left with RST, give every
// frame back and close the socket (its UMEM is unmapped and it leaves the
// XSKMAP).
func (n *Native) Close() {
	if n.closed {
		return
	}
	for _, c := range n.live {
		if c.hc != nil {
			n.stats.Forced++
			n.stack.AbortTCP(n.now, n.link, c.h) // releases c
		}
	}
	n.link.Flush()
	n.wheel.Stop(&n.tick)
	n.wheel.Stop(&n.next)
	n.wheel.Stop(&n.recheck)
	n.srv.Tick(n.now) // flush the access log
	n.stack.Close(n.link)
	n.lastXsk, _ = n.sock.Stats()
	n.sock.Close()
	n.closed = true
}
