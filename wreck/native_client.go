package wreck

import (
	"bytes"
	"crypto/tls"
	"net/netip"
	"time"

	"percore/internal/shardtls"
	"percore/netstack"
)

// nclient is one native client shard's connections on its own userspace
// stack: the same closed-loop, keep-alive, pipelined or one-shot request
// flow, parser and accounting as the kernel mode, with the netstack's TCP
// (active open) carrying the bytes. It knows nothing of AF_XDP: it runs as
// the App of the shard's native.Queue, around each Poll of the stack; tests
// poll the stack over a ChanLink themselves.
//
// Owned by the shard's goroutine. TCP calls the conns (TCPApp) and the
// endpoint only from inside Stack.Poll and AbortTCP, which nclient itself
// or its queue calls, so nothing here runs concurrently.
type nclient struct {
	stackSide
	acct *acct // counters, histograms, request budget, schedule
	cfg  *Config
	dst  netstack.IPv4Addr
	port uint16
	ep   nendpoint

	conns      []nconn
	retry      []int32 // slots to connect at the next step
	connecting []int32 // slots whose handshake is under way (or was: removed as checkConnecting finds them)
	opened     []int32 // slots whose handshake completed in this step (TCP asked them for output), maybe twice
	scan       int     // where checkConnecting goes on in connecting
	swept      int     // the next slot a tick checks for timeouts (sweepRange)
	begun      bool    // every slot was queued to connect (begin)

	// ready is the open connections that may take another request,
	// oldest first: a ring of slots, each at most once (inReady), so that
	// a request finds its connection in O(1) however many slots are still
	// connecting, and every connection gets its turn. The open loop (--rate,
	// keep-alive) takes them as requests come due; the closed loop parks
	// connections there while maxOut requests are in flight.
	ready readyRing

	// maxOut bounds the closed loop's requests in flight (0: no bound):
	// each draws a response into one of the queue's receive frames, and a
	// response that finds none is dropped, so no more go out than the
	// frames hold. The others wait in ready, their latency counting from
	// when they could have gone.
	maxOut int
	paced  bool // slots wait on retry for --connect-rate: its timer wakes the shard
	seqOff int
	reqLen int

	// --tls (native_tls.go): the shard's mailbox for the handshakes, and
	// the configuration they start from; nil: cleartext.
	box   *tlsBox
	tconf *tls.Config
}

// nendpoint is the TCPEndpoint of the client's connections: they are never
// accepted, only released.
type nendpoint struct{ c *nclient }

func (e *nendpoint) Accept(netip.AddrPort, netstack.TCPHandle, time.Time) netstack.TCPApp { return nil }

func (e *nendpoint) Release(app netstack.TCPApp, now time.Time) {
	e.c.released(app.(*nconn))
}

// nconn is one connection slot: the TCPApp of the TCP connection it holds
// (live), with its parser, request bytes and in-flight ring. The slot lives
// for the whole run; a new TCP connection reuses it after the old one is
// released.
type nconn struct {
	cl      *nclient
	idx     int32
	h       netstack.TCPHandle
	state   cstate
	live    bool // a TCB holds this app (from ConnectTCP until Release)
	queued  bool // on the retry list
	inReady bool // on the ready ring
	// closing is the Closing answer: TCP sends FIN after the output. failed:
	// the slot's failure is counted and it waits for its reset; bytes that
	// still arrive are dropped.
	closing, failed bool
	p               parser

	carry []byte // an incomplete header section or chunk line, at most maxHead+1 bytes; made on first use (see keep)

	// req is a ring of Pipeline request slots; the pend bytes from una on
	// (wrapping) are unsent or unacknowledged. Requests are appended whole,
	// so the append point (una+pend) is always at a slot boundary.
	req       []byte
	una, pend int
	outv      [2][]byte

	flights // in-flight requests

	seqSent, seqWant uint64
	since, wakeAt    int64
	readyAt          int64 // closed loop: when the slot was parked on the ready ring

	// --tls: the connection's TLS (nil before its handshake starts), and
	// the slot's own configuration when it resumes sessions (its ticket).
	tls   *shardtls.Conn
	tconf *tls.Config
}

// newNClient builds conns connections to dst:port, the shard's or, on a
// shard with several queues, one queue's share; a is the shard's account.
// use gives it its stack and link.
func newNClient(a *acct, conns int, dst netstack.IPv4Addr, port uint16, req []byte, seqOff int) *nclient {
	cfg := a.cfg
	c := &nclient{
		acct: a, cfg: cfg, dst: dst, port: port,
		conns:      make([]nconn, conns),
		retry:      make([]int32, 0, conns),
		connecting: make([]int32, 0, conns),
		opened:     make([]int32, 0, conns),
		ready:      newReadyRing(conns),
		seqOff:     seqOff, reqLen: len(req),
	}
	c.aborts = make([]int32, 0, conns)
	c.ep.c = c
	k := cfg.Pipeline
	shared := bytes.Repeat(req, k)
	maxHead := cfg.headLimit()
	for i := range c.conns {
		nc := &c.conns[i]
		nc.cl, nc.idx = c, int32(i)
		nc.start, nc.sent = make([]int64, k), make([]int64, k)
		nc.p.maxHead = maxHead
		nc.req = shared
		if seqOff >= 0 {
			nc.req = append([]byte(nil), shared...)
		}
	}
	return c
}

// dispatch puts due requests (--rate) on connections with room: keep-alive,
// the ready ring's; one-shot, idle slots found scanning from the cursor,
// which connect with them. No room marks the shard saturated until a slot
// frees room, as the kernel mode's dispatch does.
func (c *nclient) dispatch() {
	s := c.acct
	if s.saturated || !s.backlog() {
		return
	}
	if c.cfg.KeepAlive {
		c.dispatchReady()
		return
	}
	for range c.conns {
		nc := &c.conns[s.cursor]
		s.cursor++
		if s.cursor == len(c.conns) {
			s.cursor = 0
		}
		switch {
		case !c.cfg.KeepAlive && nc.state == cIdle && !nc.live:
			c.connect(nc)
		case nc.state == cOpen:
			c.fill(nc)
		}
		if !s.backlog() {
			return
		}
	}
	s.saturated = true
}

// dispatchReady puts due requests on the ready ring's connections, each
// going back to the ring's end while it has room for more.
func (c *nclient) dispatchReady() {
	s := c.acct
	for s.backlog() {
		if c.ready.n == 0 {
			s.saturated = true
			return
		}
		nc := &c.conns[c.ready.pop()]
		nc.inReady = false
		if nc.state != cOpen || nc.closing {
			continue // closed since: it is offered again once open
		}
		issued := s.issued
		c.fill(nc)
		if s.issued != issued {
			c.offer(nc)
		} // else its output ring is full: Advance offers it again
	}
}

// offer puts an open connection with room for a request on the ready
// ring (open loop, keep-alive).
func (c *nclient) offer(nc *nconn) {
	if !c.acct.rate || !c.cfg.KeepAlive || nc.inReady || nc.state != cOpen || nc.closing || nc.n >= c.cfg.Pipeline {
		return
	}
	c.ready.push(nc.idx)
	nc.inReady = true
	c.acct.saturated = false
}

// use implements nApp: the stack (TCP enabled) the connections open on, its
// link, and the closed loop's bound on requests in flight from the queue's
// receive frames.
func (c *nclient) use(stack *netstack.Stack, link netstack.Link, rxFrames int) {
	c.stack, c.link = stack, link
	c.maxOut = closedLoopMax(rxFrames)
}

// begin queues every slot to connect.
func (c *nclient) begin() {
	c.begun = true
	for i := range c.conns {
		c.queueRetry(&c.conns[i])
	}
}

// Before implements native.App, ahead of the stack's Poll: the run begins
// at the first; slots connect (their SYNs go out in this Poll), and under
// --rate the requests due go out.
func (c *nclient) Before(now time.Time) {
	s := c.acct
	s.setNow(now)
	c.nowT = now
	if !s.begun {
		s.begin()
	}
	if !c.begun { // the shard's other clients share s
		c.begin()
	}
	c.paced = false
	for len(c.retry) > 0 && !s.finished {
		nc := &c.conns[c.retry[len(c.retry)-1]]
		if nc.state == cIdle && !nc.live && !s.mayConnect() {
			c.paced = true
			break
		}
		c.retry = c.retry[:len(c.retry)-1]
		nc.queued = false
		if nc.state == cIdle && !nc.live {
			c.connect(nc)
		}
	}
	if s.rate {
		c.dispatch()
	}
	c.woke = false // what was woken goes out in this Poll
	c.inStack = true
}

// After implements native.App, after the stack's Poll: the slots that
// failed inside it are reset, handshakes that completed start their
// requests, and the run, once over, resets every connection. It asks for
// another Poll before the shard sleeps while connects, resets or woken
// connections wait for one, or under --rate while given-back requests wait
// for a slot; else, under --rate, the shard wakes at the next intended send.
func (c *nclient) After(now time.Time) bool {
	s := c.acct
	c.inStack = false
	c.runAborts()
	if !s.rate && c.ready.n > 0 {
		c.unpark()
	}
	if len(c.connecting) > 0 {
		c.checkConnecting()
	}
	if s.finished {
		c.shutdown(now)
		return false
	}
	busy := (len(c.retry) > 0 && !c.paced) || len(c.aborts) > 0 || c.woke
	if s.rate && !s.saturated && s.room() && s.rqN > 0 {
		busy = true // given-back requests wait for a slot: dispatch again
	}
	s.armSend()
	return busy
}

// connect opens a TCP connection for slot nc; the SYN goes out at the next
// Poll. A one-shot slot takes its request first, as the kernel mode does.
func (c *nclient) connect(nc *nconn) {
	s := c.acct
	if !c.cfg.KeepAlive {
		t, ok := s.take()
		if !ok {
			return
		}
		nc.push(t, s.now)
	}
	h, err := c.stack.ConnectTCP(c.nowT, c.dst, c.port, nc, &c.ep)
	if err != nil {
		c.connectFailed(nc)
		return
	}
	nc.h, nc.live, nc.state, nc.since = h, true, cConnecting, s.now
	nc.closing, nc.failed = false, false
	c.connecting = append(c.connecting, nc.idx)
}

// connScan bounds checkConnecting's look at the handshakes under way, so
// that tens of thousands of them (a burst of opens to a slow server) do not
// cost every step a pass over all. The handshakes that complete are found
// through opened; the scan only drops the slots that were released, and
// catches a handshake that completed without asking for output.
const connScan = 64

// checkConnecting moves slots whose handshake completed to cOpen and starts
// their requests: those in opened, then at most connScan slots of
// connecting, going on where the last step stopped.
func (c *nclient) checkConnecting() {
	for _, i := range c.opened {
		if nc := &c.conns[i]; nc.live && nc.state == cConnecting && c.stack.TCPEstablished(nc.h) {
			c.connected(nc) // its entry in connecting goes when the scan finds it open
		}
	}
	c.opened = c.opened[:0]
	for range min(len(c.connecting), connScan) {
		if c.scan >= len(c.connecting) {
			c.scan = 0
		}
		nc := &c.conns[c.connecting[c.scan]]
		switch {
		case !nc.live || nc.state != cConnecting:
			c.unlistConnecting() // released (refused, timed out) or reset
		case c.stack.TCPEstablished(nc.h):
			c.unlistConnecting()
			c.connected(nc)
		default:
			c.scan++
		}
	}
}

// unlistConnecting removes the entry at the scan point (the last one takes
// its place).
func (c *nclient) unlistConnecting() {
	last := len(c.connecting) - 1
	c.connecting[c.scan] = c.connecting[last]
	c.connecting = c.connecting[:last]
}

// connected starts the request flow on a fresh connection.
func (c *nclient) connected(nc *nconn) {
	s := c.acct
	if c.box != nil && nc.tls == nil {
		c.startTLS(nc)
		return
	}
	nc.state = cOpen
	s.recordConnect(nc.since)
	nc.p.reset()
	nc.carry = nc.carry[:0]
	nc.seqWant = nc.seqSent
	s.saturated = false
	if c.cfg.KeepAlive {
		c.fill(nc)
		c.offer(nc)
		return
	}
	nc.sent[nc.head] = s.now
	c.write(nc, 1)
}

// connectFailed counts a failed connect and backs off; a one-shot request
// waiting for the connection is given back.
func (c *nclient) connectFailed(nc *nconn) {
	s := c.acct
	s.cnt.Errors[errConnect]++
	c.drop(nc)
	nc.state, nc.wakeAt = cWait, s.now+int64(connBackoff)
}

// fill writes requests on an open keep-alive connection: closed loop, the
// next batch of Pipeline requests once the last batch is answered and
// acknowledged (as the kernel mode does); open loop (--rate), every due
// request the connection has room for.
func (c *nclient) fill(nc *nconn) {
	s := c.acct
	if s.finished || nc.state != cOpen || !c.cfg.KeepAlive || nc.closing {
		return
	}
	if !s.rate && (nc.n > 0 || nc.pend > 0) {
		return
	}
	if !s.rate && c.maxOut > 0 {
		if nc.inReady {
			return // parked: unpark sends
		}
		if c.ready.n > 0 || c.inFlight() >= c.maxOut {
			c.park(nc)
			return
		}
	}
	c.send(nc, s.now)
}

// send writes the requests nc has room for; a closed-loop request's
// latency counts from start.
func (c *nclient) send(nc *nconn, start int64) {
	s := c.acct
	k := 0
	for nc.n < c.cfg.Pipeline && nc.pend+(k+1)*c.reqLen <= len(nc.req) {
		t, ok := s.take()
		if !ok {
			break
		}
		if !s.rate {
			t = start
		}
		nc.push(t, s.now)
		k++
	}
	if k > 0 {
		c.write(nc, k)
	}
}

// inFlight is the shard's requests sent and not yet answered or given back.
func (c *nclient) inFlight() int { return int(c.acct.issued - c.acct.done) }

// park puts nc, ready for its next closed-loop request, at the back of
// the ready ring.
func (c *nclient) park(nc *nconn) {
	c.ready.push(nc.idx)
	nc.inReady = true
	nc.readyAt = c.acct.now
}

// unpark sends the parked connections' requests, oldest first, while
// fewer than maxOut are in flight.
func (c *nclient) unpark() {
	s := c.acct
	for c.ready.n > 0 && c.inFlight() < c.maxOut && !s.finished {
		nc := &c.conns[c.ready.pop()]
		nc.inReady = false
		if nc.state == cOpen && !nc.closing && !nc.failed && nc.n == 0 && nc.pend == 0 {
			c.send(nc, nc.readyAt)
		}
	}
}

// write appends k prebuilt requests (stamped with sequence numbers if
// asked) to the connection's output.
func (c *nclient) write(nc *nconn, k int) {
	if nc.tls != nil {
		c.writeTLS(nc, k)
	} else {
		at := (nc.una + nc.pend) % len(nc.req)
		if c.seqOff >= 0 {
			for i := range k {
				stampSeq(nc.req[(at+i*c.reqLen)%len(nc.req)+c.seqOff:], nc.seqSent)
				nc.seqSent++
			}
		}
		nc.pend += k * c.reqLen
	}
	c.wake(nc.h)
}

// Output implements netstack.TCPApp: the unacknowledged request bytes, in
// one slice or, wrapping around the ring, two.
func (nc *nconn) Output() [][]byte {
	if nc.state == cConnecting {
		// TCP asks for output once the handshake completes: After
		// starts the requests.
		nc.cl.opened = append(nc.cl.opened, nc.idx)
	}
	if nc.tls != nil {
		return nc.tlsOutput()
	}
	if nc.pend == 0 {
		return nc.outv[:0]
	}
	end := nc.una + nc.pend
	if end <= len(nc.req) {
		nc.outv[0] = nc.req[nc.una:end]
		return nc.outv[:1]
	}
	nc.outv[0], nc.outv[1] = nc.req[nc.una:], nc.req[:end-len(nc.req)]
	return nc.outv[:2]
}

// Advance implements netstack.TCPApp.
func (nc *nconn) Advance(n int) {
	if nc.tls != nil {
		nc.tls.Sent(n) // requests go out whole when written (closed loop only)
		return
	}
	nc.una = (nc.una + n) % len(nc.req)
	nc.pend -= n
	if nc.pend == 0 {
		nc.una = 0
	}
	if nc.cl.acct.rate {
		nc.cl.acct.saturated = false // room in the ring again
		nc.cl.offer(nc)
	} else if nc.pend == 0 {
		nc.cl.fill(nc) // a batch answered before its last bytes were acknowledged
	}
}

// Closing implements netstack.TCPApp.
func (nc *nconn) Closing() bool { return nc.closing }

// Feed implements netstack.TCPApp: parse responses in place (decrypted
// first under --tls); an incomplete header section (or chunk line) is
// carried to the next call. It takes every byte: a failed slot drops them.
func (nc *nconn) Feed(p []byte, now time.Time) int {
	if nc.tls != nil {
		nc.feedTLS(p)
		return len(p)
	}
	nc.feedPlain(p)
	return len(p)
}

// feedPlain parses the responses in p.
func (nc *nconn) feedPlain(p []byte) {
	c := nc.cl
	c.acct.cnt.Bytes += uint64(len(p))
	if nc.failed || (nc.state != cOpen && nc.state != cDraining) {
		return
	}
	off := 0
	for len(nc.carry) > 0 && off < len(p) {
		old := len(nc.carry)
		k := min(cap(nc.carry)-old, len(p)-off)
		if k == 0 { // cannot happen: the parser reports a head over maxHead as oversized
			c.acct.cnt.Oversized++
			c.fail(nc, errMalformed)
			return
		}
		nc.carry = append(nc.carry, p[off:off+k]...)
		m, ok := c.parse(nc, nc.carry, true)
		if !ok {
			return
		}
		if m < old {
			// Still incomplete: every byte appended is in the carry.
			off += k
			continue
		}
		// The carried item completed; parse on in p itself.
		nc.carry = nc.carry[:0]
		off += m - old
	}
	if off < len(p) {
		c.parse(nc, p[off:], false)
	}
}

// parse runs the parser over data and reports how much it consumed and
// whether nc is still usable. From the carry (inCarry) the incomplete tail
// stays where it is; from a frame it is copied into the carry.
func (c *nclient) parse(nc *nconn, data []byte, inCarry bool) (int, bool) {
	s := c.acct
	off := 0
	for off < len(data) {
		if nc.n == 0 {
			c.fail(nc, errMalformed) // bytes nobody asked for
			return off, false
		}
		m, r := nc.p.feed(data[off:])
		off += m
		switch r {
		case pMore:
			if inCarry {
				if off > 0 {
					nc.carry = append(nc.carry[:0], data[off:]...)
				}
				return off, true
			}
			nc.keep(data[off:])
			return len(data), true
		case pDone:
			if !c.complete(nc) {
				return off, false
			}
		case pOversized:
			s.cnt.Oversized++
			c.fail(nc, errMalformed)
			return off, false
		default:
			c.fail(nc, errMalformed)
			return off, false
		}
	}
	if inCarry {
		nc.carry = nc.carry[:0]
	}
	return off, true
}

// keep copies an incomplete tail from a frame into the carry, made on
// first use: few slots ever need one, and a million slots cannot each hold
// maxHead bytes.
func (nc *nconn) keep(tail []byte) {
	if nc.carry == nil {
		nc.carry = make([]byte, 0, nc.p.maxHead+1)
	}
	nc.carry = append(nc.carry[:0], tail...)
}

// complete accounts one response on nc; it reports false if nc stops taking
// responses (failed or closing).
func (c *nclient) complete(nc *nconn) bool {
	s := c.acct
	if c.seqOff >= 0 {
		if !nc.p.hasSeq || nc.p.seq != nc.seqWant {
			c.fail(nc, errMismatch)
			return false
		}
		nc.seqWant++
	}
	s.record(s.now - nc.pop())
	s.cnt.Responses++
	if nc.p.status < 200 || nc.p.status > 299 {
		s.cnt.Errors[errNon2xx]++
	}
	s.finish()
	switch {
	case nc.p.close:
		// The server closes: wait for its FIN (TIME-WAIT stays on its
		// side), then close ours; requests behind this one are given back.
		nc.state, nc.since = cDraining, s.now
		return true
	case !c.cfg.KeepAlive:
		// One-shot with a server that keeps the connection: close it.
		nc.state, nc.since = cDraining, s.now
		c.closeSlot(nc)
		return true
	}
	if nc.n == 0 || s.rate {
		s.saturated = false
		c.fill(nc)
		c.offer(nc)
	}
	return true
}

// PeerClosed implements netstack.TCPApp: the server's FIN, after every byte
// before it was fed.
func (nc *nconn) PeerClosed(now time.Time) {
	c := nc.cl
	if nc.tls != nil {
		nc.tls.PeerClosed()
	}
	switch {
	case nc.failed:
		return // its reset is queued
	case nc.state == cHandshake:
		return // the handshake fails: its helper reports
	case nc.state == cDraining:
	case nc.p.st == psUntilClose && nc.n > 0:
		nc.p.st = psHead
		nc.p.close = true
		c.complete(nc)
	case nc.n > 0 || nc.p.midResponse(len(nc.carry)):
		c.fail(nc, errClosed)
		return
	}
	c.closeSlot(nc) // answer with our FIN; the slot reconnects on release
}

// closeSlot makes TCP send FIN after any output; the slot reconnects when
// TCP releases it.
func (c *nclient) closeSlot(nc *nconn) {
	if nc.closing {
		return
	}
	if nc.tls != nil {
		nc.tls.CloseNotify()
	}
	nc.closing = true
	nc.since = c.acct.now
	c.wake(nc.h)
}

// fail counts an error of class cls against the oldest request in flight
// (the others are given back at release) and resets the connection.
func (c *nclient) fail(nc *nconn, cls errClass) {
	s := c.acct
	if nc.failed {
		return
	}
	s.cnt.Errors[cls]++
	if nc.n > 0 {
		nc.pop()
		s.finish()
	}
	nc.failed = true
	c.aborts = append(c.aborts, nc.idx)
}

// runAborts resets the connections of failed slots.
func (c *nclient) runAborts() { runAborts(&c.stackSide, c.conns, (*nconn).tcb) }

// tcb is the slot's TCP connection: its handle, and whether a TCB holds it.
func (nc *nconn) tcb() (netstack.TCPHandle, bool) { return nc.h, nc.live }

// fail marks the slot failed at the end of the run and returns its TCB.
func (nc *nconn) fail() (netstack.TCPHandle, bool) {
	if nc.live {
		nc.failed = true
	}
	return nc.tcb()
}

// released is TCP's Release of slot nc's connection: closed, reset, timed
// out or in TIME-WAIT. A connection that ends unasked is counted (a reset
// with requests in flight, or a handshake that failed); the slot gives back
// its requests and reconnects.
func (c *nclient) released(nc *nconn) {
	s := c.acct
	nc.live = false
	switch {
	case nc.failed, nc.closing, nc.state == cDraining:
	case nc.state == cConnecting || nc.state == cHandshake:
		c.connectFailed(nc)
		return
	case nc.n > 0 || nc.p.midResponse(len(nc.carry)):
		s.cnt.Errors[errReset]++
		if nc.n > 0 {
			nc.pop()
			s.finish()
		}
	}
	c.drop(nc)
	c.queueRetry(nc)
}

// drop forgets the slot's connection and gives back its requests in flight.
func (c *nclient) drop(nc *nconn) {
	for nc.n > 0 {
		c.acct.giveBack(nc.pop())
	}
	nc.state = cIdle
	c.acct.saturated = false
	nc.head, nc.una, nc.pend = 0, 0, 0
	nc.carry = nc.carry[:0]
	nc.closing, nc.failed = false, false
	if nc.tls != nil {
		nc.tls.Release() // a handshake in progress fails; its helper ends
		nc.tls = nil
	}
}

func (c *nclient) queueRetry(nc *nconn) {
	if !nc.queued {
		nc.queued = true
		c.retry = append(c.retry, nc.idx)
	}
}

// tick enforces timeouts and back-offs (every shard tick). A connection
// that timed out is reset.
func (c *nclient) tick() {
	s := c.acct
	c.nowT = at(s.now)
	timeout := int64(c.cfg.Timeout)
	from, n := sweepRange(len(c.conns), &c.swept)
	for k := range n {
		nc := &c.conns[(from+k)%len(c.conns)]
		switch {
		case nc.state == cWait:
			if s.now >= nc.wakeAt {
				nc.state = cIdle
				c.queueRetry(nc)
			}
		case !nc.live || nc.failed:
		case nc.state == cConnecting && s.now-nc.since > timeout:
			c.stack.AbortTCP(c.nowT, c.link, nc.h) // released: counted as a failed connect
		case nc.state == cHandshake && s.now-nc.since > timeout:
			s.tls.failed++
			c.stack.AbortTCP(c.nowT, c.link, nc.h) // released: counted as a failed connect
		case nc.state == cOpen && nc.n > 0 && s.now-nc.sent[nc.head] > timeout:
			c.fail(nc, errTimeout)
		case (nc.state == cDraining || nc.closing) && s.now-nc.since > timeout:
			nc.failed = true // the server never finished the close: reset it, nothing to count
			c.aborts = append(c.aborts, nc.idx)
		}
	}
	c.runAborts()
}

// shutdown resets every connection still open (the run is over) and
// flushes the resets. Once.
func (c *nclient) shutdown(now time.Time) { resetAll(&c.stackSide, now, c.conns, (*nconn).fail) }
