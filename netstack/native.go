package netstack

import (
	"fmt"
	"io"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"percore/afxdp"
	"percore/httpd"
	"percore/shard"
)

// The native shard glue: one shard's AF_XDP socket, AFXDPLink, userspace
// Stack with TCP listeners, and httpd.Server, plugged into the shard's loop as
// a Poller (the rings), a Source (the socket fd wakes a sleeping shard), a
// Stopper (graceful drain) and a Reporter (counters).
//
// Data path, per loop iteration: Poll -> Stack.Poll(now, link) -> rx batch ->
// eth/arp/ipv4/tcp -> nativeConn (TCPApp) -> httpd.Conn.Feed -> responses
// queued as immutable slices -> TCP cuts segments into UMEM frames -> tx ring
// -> kick. The stack's next deadline arms one wheel timer, so a sleeping
// shard wakes for retransmissions and delayed ACKs.

// NativeConfig configures one shard's native stack.
type NativeConfig struct {
	Stack Config      // MAC, address, netmask, gateway; limits
	MTU   int         // IP MTU of the link; default 1500
	TCP   TCPConfig   // connection limits and timers (Addr comes from Stack)
	Ports []uint16    // listen ports
	Site  *httpd.Site // shared, read-only
	Log   io.Writer   // access log (nil: none)
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
	Accepted uint64 // connections handed to httpd
	Released uint64 // connections whose httpd side was released
	Refused  uint64 // handshakes completed while draining: answered by RST
	Timeouts uint64 // connections aborted by httpd's header or idle timeout
	Forced   uint64 // connections aborted at the stop deadline
	Kicks    uint64 // connections given a send opportunity outside a segment (drain, timeout)
	Wakeups  uint64 // epoll events on the socket fd (a sleeping shard woken by received frames)
}

// Native is one shard's native stack. It is owned by the shard: every method
// runs on the shard's goroutine. The socket is owned by Native from
// NewNative on and closed by Close.
type Native struct {
	sh    *shard.Shard
	wheel *shard.Wheel
	sock  *afxdp.Socket
	link  *AFXDPLink
	stack *Stack
	srv   *httpd.Server
	ports []uint16
	eps   []nativeEndpoint

	pool  []*nativeConn // free conns, reused
	live  []*nativeConn // every conn ever made (index = nativeConn.idx)
	open  int
	kicks []*nativeConn // conns to give a send opportunity at the next Poll

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

// nativeEndpoint is the TCPEndpoint of one listen port.
type nativeEndpoint struct {
	n    *Native
	port uint16
}

func (e *nativeEndpoint) Accept(remote netip.AddrPort, now time.Time) TCPApp {
	return e.n.accept(remote, e.port, now)
}

func (e *nativeEndpoint) Release(app TCPApp, now time.Time) {
	e.n.release(app.(*nativeConn), now)
}

// nativeConn is the TCPApp of one connection: the httpd.Conn plus what the
// glue needs to act on the connection outside a segment (its TCB, a timer for
// httpd's header and idle timeouts). Pooled by Native.
type nativeConn struct {
	n     *Native
	idx   int
	hc    *httpd.Conn // nil when free
	tc    *tcpConn    // the connection's TCB while hc is set
	timer shard.Timer
	kick  bool // queued in Native.kicks
}

func (c *nativeConn) Feed(p []byte, now time.Time) int { return c.hc.Feed(p, now) }
func (c *nativeConn) Output() [][]byte                 { return c.hc.Output() }
func (c *nativeConn) Advance(n int)                    { c.hc.Advance(n) }
func (c *nativeConn) PeerClosed(now time.Time)         { c.hc.PeerClosed(now) }

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
	link, err := NewAFXDPLink(sock, mtu, max(cfg.Stack.Batch, 64))
	if err != nil {
		return nil, err
	}
	st, err := NewStack(cfg.Stack)
	if err != nil {
		return nil, err
	}
	if cfg.TCP.MSS == 0 {
		// Room for the largest TCP option block (40 bytes: timestamps and
		// SACK blocks) beside the 40 bytes of IPv4 and TCP headers, so no
		// segment outgrows the MTU.
		cfg.TCP.MSS = uint16(mtu - 80)
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
		kicks: make([]*nativeConn, 0, 64),
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

// Stack returns the shard's userspace stack (for its counters).
func (n *Native) Stack() *Stack { return n.stack }

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

// Poll implements shard.Poller: connections kicked by timers or the drain get
// their send opportunity, then the stack runs over the link once. It reports
// work when frames moved, frames remain queued, or the kernel still has tx
// frames to take (copy mode wants a kick while any are outstanding).
func (n *Native) Poll(now time.Time) bool {
	if n.closed {
		return false
	}
	n.now = now
	st := &n.stack.stats
	rx, tx := st.RxFrames, st.TxFrames
	if len(n.kicks) > 0 {
		n.runKicks(now)
	}
	next := n.stack.Poll(now, n.link)
	busy := st.RxFrames != rx || st.TxFrames != tx || n.sock.TxOutstanding() > 0
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
func (n *Native) accept(remote netip.AddrPort, port uint16, now time.Time) TCPApp {
	if n.drain || n.closed {
		n.stats.Refused++
		return nil
	}
	l := n.stack.tcp
	k := tcpKey{raddr: ip4(remote.Addr().As4()), laddr: ip4(n.stack.cfg.Addr), rport: remote.Port(), lport: port}
	i := l.table.lookup(k)
	if i < 0 {
		return nil // cannot happen: TCP accepts from a TCB in the table
	}
	var c *nativeConn
	if k := len(n.pool); k > 0 {
		c = n.pool[k-1]
		n.pool = n.pool[:k-1]
	} else {
		c = &nativeConn{n: n, idx: len(n.live)}
		c.timer.Init(c.expire)
		n.live = append(n.live, c)
	}
	c.hc = n.srv.NewConn(remote, now)
	c.tc = l.conns[i]
	n.open++
	n.stats.Accepted++
	c.armTimer()
	return c
}

// release takes back a connection TCP is done with.
func (n *Native) release(c *nativeConn, now time.Time) {
	if c.hc == nil {
		return
	}
	n.wheel.Stop(&c.timer)
	n.srv.Release(c.hc)
	c.hc, c.tc = nil, nil
	n.open--
	n.stats.Released++
	n.pool = append(n.pool, c)
}

// armTimer makes the timer fire no later than httpd's deadline; a deadline
// pushed later by activity leaves it, and expire re-arms (no timer work per
// request).
func (c *nativeConn) armTimer() {
	d := c.hc.Deadline()
	if d.IsZero() {
		return
	}
	if !c.timer.Armed() || d.Before(c.timer.When()) {
		c.n.wheel.Start(&c.timer, d)
	}
}

// expire is the connection's timer: httpd decides whether the header or idle
// timeout passed; if so the connection is aborted at the next Poll.
func (c *nativeConn) expire(now time.Time) {
	if c.hc == nil {
		return
	}
	if c.hc.Expire(now) {
		c.n.stats.Timeouts++
		c.n.kick(c)
		return
	}
	c.armTimer()
}

func (n *Native) kick(c *nativeConn) {
	if !c.kick {
		c.kick = true
		n.kicks = append(n.kicks, c)
	}
}

// runKicks acts on the kicked connections with the stack's tx path open: an
// expired connection (httpd dropped its output) is aborted with RST, any other
// gets a send opportunity, which sends FIN when it is closing.
func (n *Native) runKicks(now time.Time) {
	n.stack.withTx(now, n.link, func(l *tcpLayer) {
		for i, c := range n.kicks {
			n.kicks[i] = nil
			c.kick = false
			if c.hc == nil || c.tc == nil || c.tc.app != TCPApp(c) {
				continue // released since it was kicked
			}
			n.stats.Kicks++
			tc := c.tc
			if c.hc.Closing() && c.hc.Pending() == 0 && tc.sndMax != tc.sndUna && !tc.finSent {
				// httpd dropped output TCP had in flight (a timeout):
				// nothing consistent is left to send.
				l.sendReset(tc)
				l.closeConn(tc)
				continue
			}
			l.output(tc)
			if tc.state != tcpClosed {
				l.schedule(tc)
			}
		}
		n.kicks = n.kicks[:0]
	})
}

// Drain implements shard.Stopper: stop listening (new SYNs get RST), refuse
// handshakes in progress, and let every connection finish the responses it
// has queued and then close with FIN.
func (n *Native) Drain(now time.Time) {
	n.drain = true
	l := n.stack.tcp
	clear(l.listeners)
	l.listeners = l.listeners[:0]
	for _, c := range n.live {
		if c.hc != nil {
			n.kick(c)
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
	n.stack.withTx(n.now, n.link, func(l *tcpLayer) {
		for _, c := range n.live {
			if c.hc != nil && c.tc != nil {
				n.stats.Forced++
				l.sendReset(c.tc)
				l.closeConn(c.tc)
			}
		}
	})
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

// withTx runs fn with the stack's transmit path open on link, as inside
// Poll, and submits what fn produced. The Poll that follows flushes.
func (s *Stack) withTx(now time.Time, link Link, fn func(l *tcpLayer)) {
	if s.tcp == nil {
		return
	}
	if !s.started {
		s.epoch, s.started = now, true
	}
	if t := now.Sub(s.epoch).Nanoseconds(); t > s.now {
		s.now = t
	}
	s.link, s.mtu = link, link.MTU()
	s.tcp.setNow(s.epoch.Add(time.Duration(s.now)))
	fn(s.tcp)
	s.submitTx()
	if len(s.txDrop) > 0 {
		link.TxFree(s.txDrop)
		clear(s.txDrop)
		s.txDrop = s.txDrop[:0]
	}
	s.link = nil
}
