package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"percore/httpd"
	"percore/native"
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
	Ports []uint16    // listen ports
	Site  *httpd.Site // shared, read-only
	Log   io.Writer   // access log (nil: none)
	// Drain, shared by the shards of one interface, makes them finish a
	// graceful stop together (see DrainGroup); nil: each shard alone.
	Drain *DrainGroup
	// Shard, where a shard serves several queues, stops them together and
	// sums their counters; nil: the Native is the shard's stopper and
	// reporter itself.
	Shard *NativeShard
	// Memory is the shard's memory budget, the one its queues' TCP charges
	// (netstack.TCPConfig.Budget): httpd's buffers are charged to it too.
	// nil: none.
	Memory *netstack.MemBudget
	// TLS, when set, is served on TLSPorts (listened on beside Ports).
	TLS                 *tls.Config
	TLSPorts            []uint16
	TLSHandshakeTimeout time.Duration // 0: TLSHandshakeTimeout
}

// NativeShard is the shard.Stopper and shard.Reporter of a shard that serves
// several queues, one Native each: one report per shard with the Natives'
// counters summed (a metric has one series per shard), and one stopper that
// asks every Native (each counts itself in the DrainGroup when asked).
type NativeShard struct{ natives []*Native }

func (ns *NativeShard) Drain(now time.Time) {
	for _, n := range ns.natives {
		n.Drain(now)
	}
}

func (ns *NativeShard) Drained() bool {
	all := true
	for _, n := range ns.natives {
		all = n.Drained() && all
	}
	return all
}

func (ns *NativeShard) Close() {
	for _, n := range ns.natives {
		n.Close()
	}
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
}

// Native is httpd on one shard's native stack. It is owned by the shard:
// every method runs on the shard's goroutine. The queue is owned by Native
// from NewNative on and closed by Close.
type Native struct {
	wheel *shard.Wheel
	q     *native.Queue
	stack *netstack.Stack
	srv   *httpd.Server
	ports []uint16 // cleartext and TLS
	eps   []nativeEndpoint
	tls   *tlsShard // nil: no TLS port

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
	now     time.Time   // the latest time the shard gave us, for Close
	stats   NativeStats
	mem     *netstack.MemBudget // reported by the shard's first Native only: the queues share it
}

// nativeEndpoint is the netstack.TCPEndpoint of one listen port.
type nativeEndpoint struct {
	n    *Native
	port uint16
	tls  bool
}

func (e *nativeEndpoint) Accept(remote netip.AddrPort, h netstack.TCPHandle, now time.Time) netstack.TCPApp {
	return e.n.accept(remote, h, e.tls, now)
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

	tls *nativeTLS // nil: cleartext
}

func (c *nativeConn) Feed(p []byte, now time.Time) int {
	if c.tls != nil {
		c.tls.now = now
		return c.tlsFeed(p, now)
	}
	return c.hc.Feed(p, now)
}

func (c *nativeConn) Output() [][]byte {
	if c.tls != nil {
		return c.tlsOutput()
	}
	return c.hc.Output()
}

func (c *nativeConn) Advance(n int) {
	if c.tls != nil {
		c.tlsAdvance(n)
		return
	}
	c.hc.Advance(n)
}

func (c *nativeConn) PeerClosed(now time.Time) {
	if c.tls != nil {
		c.tls.now = now
		c.tlsPeerClosed(now)
		return
	}
	c.hc.PeerClosed(now)
}

// Deadline is httpd's, and TLS's for the records left after httpd
// finished; the helper times a handshake out itself.
func (c *nativeConn) Deadline() time.Time {
	if c.tls == nil {
		return c.hc.Deadline()
	}
	if !c.tls.Established() {
		return time.Time{}
	}
	return c.tls.deadline(c.hc, c.n.srv, c.tls.now)
}

// Wake implements httpd.Waker: a file job gave the connection output, which
// TCP sends on the next Poll (over TLS, once it is sealed into records).
func (c *nativeConn) Wake(now time.Time) {
	if c.hc == nil {
		return
	}
	if c.tls != nil && c.tls.Established() && !c.tls.broken {
		c.tls.now = now
		if err := c.tls.pump(c.hc, now); err != nil {
			c.tlsFailed(err)
		}
	}
	c.n.stack.WakeTCP(c.h)
}

// Expire is httpd's verdict on its deadline. When it expired, httpd has
// dropped its output and reports Closing: TCP sends FIN if nothing is in
// flight and aborts with RST otherwise (netstack.TCPAppTimer). So it does
// when TLS records left after httpd finished were not taken in time.
func (c *nativeConn) Expire(now time.Time) bool {
	if c.hc.Expire(now) {
		c.n.stats.Timeouts++
		return true
	}
	return c.tls != nil && c.tls.expire(c.hc, now)
}

// Closing is httpd's verdict, or, while the shard drains, true as soon as
// every response queued has been sent: TCP then sends FIN.
func (c *nativeConn) Closing() bool {
	if c.tls != nil {
		return c.tlsClosing()
	}
	return c.hc.Closing() || (c.n.drain && c.hc.Pending() == 0 && !c.hc.Waiting())
}

// NewNative serves httpd on shard sh's queue q (opened and registered with
// the shard; Native owns it from now on, also on error): it listens on the
// ports and registers itself with the shard as stopper and reporter. Call
// from the shard's setup, on its thread.
func NewNative(sh *shard.Shard, q *native.Queue, cfg NativeConfig, now time.Time) (_ *Native, err error) {
	defer func() {
		if err != nil {
			q.Close()
		}
	}()
	if len(cfg.Ports)+len(cfg.TLSPorts) == 0 {
		return nil, fmt.Errorf("native stack: no listen port")
	}
	ports := append(slices.Clone(cfg.Ports), cfg.TLSPorts...)
	n := &Native{
		wheel: sh.Wheel(),
		q:     q,
		stack: q.Stack(),
		srv:   httpd.NewServer(cfg.Site, cfg.Log),
		ports: ports,
		eps:   make([]nativeEndpoint, len(ports)),
		now:   now,
		group: cfg.Drain,
	}
	if cfg.TLS != nil && len(cfg.TLSPorts) > 0 {
		if n.tls, err = newTLSShard(sh, cfg.TLS, cfg.TLSHandshakeTimeout); err != nil {
			return nil, fmt.Errorf("native stack: tls: %w", err)
		}
	}
	for i, p := range ports {
		n.eps[i] = nativeEndpoint{n: n, port: p, tls: i >= len(cfg.Ports)}
		if err := n.stack.ListenTCP(p, &n.eps[i]); err != nil {
			return nil, fmt.Errorf("native stack: listen on port %d: %w", p, err)
		}
	}
	if cfg.Memory != nil {
		n.srv.SetMemory(cfg.Memory)
		if cfg.Shard == nil || len(cfg.Shard.natives) == 0 {
			n.mem = cfg.Memory
		}
	}
	if cfg.Shard != nil {
		cfg.Shard.natives = append(cfg.Shard.natives, n)
	} else {
		sh.AddStopper(n)
		sh.AddReporter(n)
	}
	n.recheck.Init(func(time.Time) {})
	n.tick.Init(n.onTick)
	n.srv.Tick(now)
	n.wheel.Start(&n.tick, now.Truncate(time.Second).Add(time.Second))
	return n, nil
}

func (n *Native) onTick(now time.Time) {
	n.now = now
	n.srv.Tick(now)
	n.wheel.Start(&n.tick, now.Truncate(time.Second).Add(time.Second))
}

// netstack.Stack returns the shard's userspace stack (for its counters).
func (n *Native) Stack() *netstack.Stack { return n.stack }

// Server returns the shard's HTTP responder.
func (n *Native) Server() *httpd.Server { return n.srv }

// Open is the number of connections httpd holds.
func (n *Native) Open() int { return n.open }

// Stats returns the glue's counters.
func (n *Native) Stats() NativeStats { return n.stats }

// accept gives a connection that completed its handshake an httpd.Conn, or
// refuses it (nil: TCP answers RST) while draining.
func (n *Native) accept(remote netip.AddrPort, h netstack.TCPHandle, tls bool, now time.Time) netstack.TCPApp {
	if n.drain || n.closed {
		n.stats.Refused++
		return nil
	}
	if tls && n.tls.full() {
		n.tls.stats.Refused++
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
	c.hc.SetWaker(c)
	c.h = h
	if tls {
		c.tls = &nativeTLS{tlsConn: n.tls.start(c, nil), now: now}
	}
	n.open++
	n.stats.Accepted++
	return c
}

// release takes back a connection TCP is done with.
func (n *Native) release(c *nativeConn, now time.Time) {
	if c.hc == nil {
		return
	}
	if c.tls != nil {
		c.tls.release()
		c.tls = nil
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
	n.now = now
	n.drain = true
	for _, p := range n.ports {
		n.stack.UnlistenTCP(p)
	}
	for _, c := range n.live {
		if c.hc != nil {
			// Closing is now true once its responses are sent: the
			// next Poll sends what is left, then FIN.
			if c.tls != nil {
				c.tlsDrain()
			}
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

// Close implements shard.Stopper: abort what is left with RST, then close the
// queue (every frame back, the socket out of the XSKMAP).
func (n *Native) Close() {
	if n.closed {
		return
	}
	for _, c := range n.live {
		if c.hc != nil {
			n.stats.Forced++
			n.stack.AbortTCP(n.now, n.q.Link(), c.h) // releases c
		}
	}
	if n.tls != nil {
		n.tls.close()
	}
	n.wheel.Stop(&n.tick)
	n.wheel.Stop(&n.recheck)
	n.srv.Tick(n.now) // flush the access log
	n.q.Close()
	n.closed = true
}
