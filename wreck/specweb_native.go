package wreck

// The SPECweb99 users over the userspace stack: nswclient is their
// transport on one native stack, each user's connection a TCB of the
// stack's TCP (active open) with the user's nswConn as its app.

import (
	"net/netip"
	"time"

	"percore/netstack"
)

// nswclient is the users of one native stack (swTransport) and the App of
// its queue (nApp). It knows nothing of AF_XDP; tests poll its stack over a
// ChanLink themselves.
//
// Owned by the shard's goroutine. TCP calls the conns (TCPApp) and the
// endpoint only from inside Stack.Poll and AbortTCP, which nswclient itself
// or its queue calls, so nothing here runs concurrently.
type nswclient struct {
	*swUsers
	stackSide
	dst  netstack.IPv4Addr
	port uint16
	ep   nswEndpoint

	conns      []nswConn // by user
	dials      []int32   // users whose dial waits to run outside the stack (or for their old connection's release)
	connecting []int32   // users whose handshake is under way (or was: checkConnecting removes them)
	scan       int       // where checkConnecting goes on in connecting
	rbuf       []byte    // a carried head joined with the bytes after it
}

// nswConn is one user's connection: the TCPApp of the TCB it holds (live).
// A user's next connection waits for the release of the last (dialing), so
// TCP calls only ever reach the user through its current connection.
type nswConn struct {
	cl   *nswclient
	u    *swUser
	h    netstack.TCPHandle
	outv [1][]byte

	live    bool // a TCB holds this app (from ConnectTCP until Release)
	dialing bool // the user wants a new connection
	// closing: the user hung up, TCP sends FIN after the output. failed: the
	// user dropped it and it waits for its reset. Either way the user has
	// moved on: bytes that still arrive are dropped.
	closing, failed bool
}

// nswEndpoint is the TCPEndpoint of the users' connections: they are never
// accepted, only released.
type nswEndpoint struct{ c *nswclient }

func (e *nswEndpoint) Accept(netip.AddrPort, netstack.TCPHandle, time.Time) netstack.TCPApp {
	return nil
}

func (e *nswEndpoint) Release(app netstack.TCPApp, now time.Time) {
	e.c.released(app.(*nswConn))
}

// newNswClient builds n users of a's shard on one stack, to dst:port; the
// first is user first of users, and stream keys its draws.
func newNswClient(a *acct, n int, dst netstack.IPv4Addr, port uint16, dirs, users, first int, stream uint64) *nswclient {
	c := &nswclient{
		dst: dst, port: port,
		conns:      make([]nswConn, n),
		dials:      make([]int32, 0, n),
		connecting: make([]int32, 0, n),
		rbuf:       make([]byte, readBuf),
	}
	c.aborts = make([]int32, 0, n)
	c.ep.c = c
	c.swUsers = newSwUsers(a, c, n, dirs, users, first, stream)
	for i := range c.conns {
		c.conns[i].cl, c.conns[i].u = c, &c.users[i]
	}
	return c
}

// use implements nApp: the stack (TCP enabled) the users connect on, and
// its link. Paced users need no bound on what is in flight.
func (c *nswclient) use(stack *netstack.Stack, link netstack.Link, _ int) {
	c.stack, c.link = stack, link
}

// Before implements native.App, ahead of the stack's Poll: every user
// starts at the first.
func (c *nswclient) Before(now time.Time) {
	c.setNow(now)
	c.nowT = now
	c.start()
	c.woke = false // what was woken goes out in this Poll
	c.inStack = true
}

// After implements native.App, after the stack's Poll: connections that
// failed inside it are reset, users waiting to connect do, handshakes that
// completed start their requests, and the run, once over, resets every
// connection. It asks for another Poll before the shard sleeps while
// connects or woken connections wait for one.
func (c *nswclient) After(now time.Time) bool {
	c.inStack = false
	c.runAborts()
	c.runDials()
	if len(c.connecting) > 0 {
		c.checkConnecting()
	}
	if c.finished {
		c.stopTimers()
		c.shutdown(now)
		return false
	}
	return c.woke || len(c.aborts) > 0
}

// dial implements swTransport: the SYN goes out at the next Poll, once the
// user's last connection is released.
func (c *nswclient) dial(u *swUser) {
	nc := &c.conns[u.idx]
	nc.dialing = true
	if nc.live || c.inStack {
		if !nc.live {
			c.dials = append(c.dials, u.idx)
		} // else released queues it
		return
	}
	c.connect(nc)
}

// runDials connects the users whose dial waited (those still dialing).
func (c *nswclient) runDials() {
	for len(c.dials) > 0 {
		nc := &c.conns[c.dials[len(c.dials)-1]]
		c.dials = c.dials[:len(c.dials)-1]
		if nc.dialing && !nc.live {
			c.connect(nc)
			c.woke = true
		}
	}
}

func (c *nswclient) connect(nc *nswConn) {
	nc.dialing = false
	h, err := c.stack.ConnectTCP(c.nowT, c.dst, c.port, nc, &c.ep)
	if err != nil {
		c.fail(nc.u, errConnect)
		return
	}
	nc.h, nc.live, nc.closing, nc.failed = h, true, false, false
	c.connecting = append(c.connecting, nc.u.idx)
}

// checkConnecting starts the requests of the users whose handshake
// completed: at most connScan users a step, going on where the last step
// stopped.
func (c *nswclient) checkConnecting() {
	for range min(len(c.connecting), connScan) {
		if c.scan >= len(c.connecting) {
			c.scan = 0
		}
		nc := &c.conns[c.connecting[c.scan]]
		switch {
		case !nc.live || nc.failed || nc.closing || nc.u.state != cConnecting:
			c.unlistConnecting() // released (refused, timed out), dropped, or listed twice
		case c.stack.TCPEstablished(nc.h):
			c.unlistConnecting()
			c.connected(nc.u)
		default:
			c.scan++
		}
	}
}

// unlistConnecting removes the entry at the scan point (the last one takes
// its place).
func (c *nswclient) unlistConnecting() {
	last := len(c.connecting) - 1
	c.connecting[c.scan] = c.connecting[last]
	c.connecting = c.connecting[:last]
}

// write implements swTransport: TCP takes u.req from Output.
func (c *nswclient) write(u *swUser) { c.wake(c.conns[u.idx].h) }

// hangUp implements swTransport: TCP sends FIN; the connection is released
// once closed.
func (c *nswclient) hangUp(u *swUser) {
	nc := &c.conns[u.idx]
	nc.dialing = false
	if !nc.live || nc.closing || nc.failed {
		return
	}
	nc.closing = true
	c.wake(nc.h)
}

// drop implements swTransport: the connection is reset (after the Poll,
// from inside it).
func (c *nswclient) drop(u *swUser) {
	nc := &c.conns[u.idx]
	nc.dialing = false
	if !nc.live || nc.failed {
		return
	}
	nc.failed = true
	if c.inStack {
		c.aborts = append(c.aborts, u.idx)
		return
	}
	c.stack.AbortTCP(c.nowT, c.link, nc.h)
}

// runAborts resets the connections of the users that dropped them inside
// the Poll.
func (c *nswclient) runAborts() { runAborts(&c.stackSide, c.conns, (*nswConn).tcb) }

// tcb is the user's TCP connection: its handle, and whether a TCB holds it.
func (nc *nswConn) tcb() (netstack.TCPHandle, bool) { return nc.h, nc.live }

// fail ends the user's connection at the end of the run (no dial after it)
// and returns its TCB.
func (nc *nswConn) fail() (netstack.TCPHandle, bool) {
	nc.dialing = false
	if nc.live {
		nc.failed = true
	}
	return nc.tcb()
}

// released is TCP's Release of a user's connection: closed, reset, timed
// out or in TIME-WAIT. One that ends unasked is the user's error (a
// handshake that failed, a reset under a request), or, idle, the end of
// its keep-alive connection. A dial that waited for it goes ahead.
func (c *nswclient) released(nc *nswConn) {
	nc.live = false
	u := nc.u
	if !nc.closing && !nc.failed {
		nc.failed = true // no hangUp or drop of the user's reaches it now
		switch {
		case u.state == cConnecting:
			c.fail(u, errConnect)
		case u.inFlight || u.p.midResponse(len(u.carry)):
			c.fail(u, errReset)
		case u.state == cOpen || u.state == cDraining:
			u.carry = u.carry[:0]
			u.state = cIdle
			if !u.timer.Armed() {
				c.schedule(u)
			}
		}
	}
	if nc.dialing {
		c.dials = append(c.dials, u.idx)
	}
}

// Output implements netstack.TCPApp: the request bytes not yet
// acknowledged.
func (nc *nswConn) Output() [][]byte {
	if nc.closing || nc.failed {
		return nil
	}
	u := nc.u
	if u.wpos >= len(u.req) || !u.inFlight || u.state != cOpen {
		return nil
	}
	nc.outv[0] = u.req[u.wpos:]
	return nc.outv[:1]
}

// Advance implements netstack.TCPApp.
func (nc *nswConn) Advance(n int) { nc.u.wpos += n }

// Closing implements netstack.TCPApp.
func (nc *nswConn) Closing() bool { return nc.closing }

// Feed implements netstack.TCPApp: the user parses the answer in place; a
// head left incomplete in its carry is joined with what follows. It takes
// every byte: a connection the user left drops them.
func (nc *nswConn) Feed(p []byte, now time.Time) int {
	c, u := nc.cl, nc.u
	n := len(p)
	if nc.closing || nc.failed {
		return n
	}
	c.received(u, n)
	for len(p) > 0 {
		if len(u.carry) == 0 {
			c.parse(u, p)
			break
		}
		k := copy(c.rbuf, u.carry)
		m := copy(c.rbuf[k:], p)
		p = p[m:]
		u.carry = u.carry[:0]
		if !c.parse(u, c.rbuf[:k+m]) {
			break
		}
	}
	return n
}

// PeerClosed implements netstack.TCPApp: the server's FIN, after every byte
// before it was fed.
func (nc *nswConn) PeerClosed(now time.Time) {
	if nc.closing || nc.failed {
		return
	}
	nc.cl.eof(nc.u)
}

// tick implements nApp: timeouts and back-offs.
func (c *nswclient) tick() {
	c.nowT = at(c.now)
	c.swUsers.tick()
	c.runAborts()
	c.runDials()
}

// shutdown implements nApp: every connection still open is reset and the
// resets flushed. Once.
func (c *nswclient) shutdown(now time.Time) { resetAll(&c.stackSide, now, c.conns, (*nswConn).fail) }
