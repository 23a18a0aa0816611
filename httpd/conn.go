package httpd

import (
	"net/netip"
	"time"
)

// Conn is one HTTP connection: its input buffer, parser state and queue of
// pending response bytes. Owned by one shard; made by Server.NewConn and given
// back with Server.Release.
//
// Input: the stack writes into ReadBuf and calls Received, or calls Feed. Every
// complete request is parsed, served and its response queued in request order.
// While much output waits (back-pressure) parsing stops and ReadBuf is empty;
// Advance resumes parsing the requests already buffered.
//
// Output: Output returns the pending bytes as slices that stay valid until
// Advance passes them. They point into shared prepared responses (hello, static
// files, Date prefixes) or into the connection's arenas, which are only
// rewritten after every slice into them has been advanced. A stack that keeps
// slices for retransmission advances only what the peer acknowledged, and
// releases the Conn only once it holds no slice any more.
type Conn struct {
	srv    *Server
	remote netip.AddrPort

	// input: bytes [r, w) of in are buffered and not yet consumed.
	in    []byte
	inMem int // bytes of in charged to the server's Memory
	r, w  int

	// The exchange under way: lent from the server while the connection
	// has input, a request or output, nil while it is idle (an idle
	// keep-alive connection is most of what a server holds at scale).
	*exchange
	outBytes int // bytes in out[outHead:]

	// file I/O: the request at r waits for wait to resolve its path, and is
	// then served with the exchange's ready; st streams a file too large for
	// the cache. While either is pending, the connection is blocked
	// (pipelined requests wait, in order).
	wait  *FileJob
	st    *stream
	waker Waker

	now        time.Time
	lastActive time.Time

	gen        uint32 // bumped on reset and cancelIO: jobs of an older one are dropped
	state      parseState
	again      bool // Offload ran its job inline: call the handler again
	shedIO     bool // a job was due with the FileIO full: answer 503
	closing    bool // no more requests: close once Output is empty
	peerClosed bool
	inReq      bool // some bytes of the next request have arrived
	progressed bool // Advance happened since the last deadline check
}

// exchange is the state of a connection's requests and responses in
// progress, pooled by the server: the parser's, the request's and the
// output queue with its arenas.
type exchange struct {
	h         head        // the request starting at r; offsets are relative to r
	req       Request     // the request being served
	path      []byte      // decoded path scratch, reused
	headStart time.Time   // first byte of the current request
	bodyStart time.Time   // end of the current request's header, when it has a body
	ready     *cacheEntry // the resolved path the request waited for
	done      Job         // the handler's job, run (Offloaded)

	// output: out[outHead:] is pending; outAr tags each slice with the arena
	// it points into (-1: a shared prepared response).
	out     [][]byte
	outAr   []int8
	outHead int
	arenas  [2][]byte
	arMem   [2]int // bytes of each arena charged to the server's Memory
	arRefs  [2]int
	cur     int8
	rw      ResponseWriter
}

type parseState uint8

const (
	stHead  parseState = iota // reading the request line and header fields
	stBody                    // reading a Content-Length body
	stChunk                   // reading a chunked body
)

func (c *Conn) init(s *Server, remote netip.AddrPort, now time.Time) {
	c.srv = s
	c.remote = remote
	c.now = now
	c.lastActive = now
}

// lend gives c an exchange from the server, when it has none.
func (c *Conn) lend() {
	if c.exchange == nil {
		c.exchange = c.srv.takeExchange()
		c.rw.c = c
	}
}

// idle reports that nothing is under way on c: no input buffered, no
// request begun, no output pending, no arena held, no file job due.
func (c *Conn) idle() bool {
	return c.in == nil && !c.inReq && c.outBytes == 0 && c.arenas[0] == nil && c.arenas[1] == nil && !c.Waiting()
}

// reset clears c for the pool: its buffers and exchange go back to the
// server (the stack holds no slice of its output any more), buffers that
// grew unusually large are dropped.
func (c *Conn) reset() {
	c.giveChunks()
	c.cancelIO()
	gen, st := c.gen, c.st
	c.r, c.w, c.inReq = 0, 0, false
	c.dropOutput()
	c.shed()
	if c.exchange != nil {
		c.srv.giveExchange(c.exchange)
	}
	*c = Conn{gen: gen, st: st}
}

// ReadBuf returns free space to receive into. An empty slice means back-pressure:
// stop reading until Output drains (call ReadBuf again after Advance). Once the
// connection is closing, further input is accepted and discarded, so a stack can
// drain the socket before closing it.
func (c *Conn) ReadBuf() []byte {
	c.lend()
	if c.in == nil {
		c.in = c.srv.takeIn()
		c.inMem = cap(c.in)
	}
	if c.closing {
		c.r, c.w = 0, 0
		return c.in
	}
	if c.blocked() {
		return nil
	}
	if c.w == len(c.in) {
		if c.r > 0 {
			n := copy(c.in, c.in[c.r:c.w])
			c.r, c.w = 0, n
		} else if len(c.in) < c.srv.site.maxIn {
			// The request at r needs more room than the buffer has; limits on
			// head and body size bound this growth.
			n := min(max(2*len(c.in), inInitial), c.srv.site.maxIn)
			if m := c.srv.mem; m != nil && !m.TryTake(n) {
				// The shard's memory is spent: shed this request
				// rather than let one connection starve the others.
				c.srv.stats.MemoryShed++
				c.fail(503)
				return c.in
			}
			in := make([]byte, n)
			copy(in, c.in[:c.w])
			c.srv.give(c.inMem)
			c.in, c.inMem = in, n
		} else {
			// Unreachable while the parser enforces its limits; if it ever is
			// reached, answer rather than leave the connection hanging.
			c.fail(431)
			return c.in
		}
	}
	return c.in[c.w:]
}

// Received tells c that n bytes were written into ReadBuf; it parses every complete
// request and queues the responses in request order.
func (c *Conn) Received(n int, now time.Time) {
	c.now = now
	if c.closing {
		return
	}
	if n > 0 {
		c.w = min(c.w+n, len(c.in)) // never past what ReadBuf lent
		c.lastActive = now
	}
	c.process()
}

// Feed copies p into the input buffer and parses, for stacks that own their own
// receive buffers; it returns how many bytes it took (fewer under back-pressure:
// offer the rest again after Advance).
func (c *Conn) Feed(p []byte, now time.Time) int {
	c.now = now
	if c.closing {
		return len(p)
	}
	taken := 0
	for len(p) > 0 {
		buf := c.ReadBuf()
		if len(buf) == 0 {
			break
		}
		k := copy(buf, p)
		p = p[k:]
		taken += k
		c.Received(k, now)
		if c.closing {
			return taken + len(p)
		}
	}
	return taken
}

// Output returns the pending response bytes, in order, as immutable slices. They
// stay valid until Advance passes them, so a stack may send them without copying
// and keep them for retransmission until acknowledged. The returned [][]byte
// itself is only valid until the next call on c.
func (c *Conn) Output() [][]byte {
	if c.exchange == nil {
		return nil
	}
	return c.out[c.outHead:]
}

// Pending returns the number of bytes in Output.
func (c *Conn) Pending() int { return c.outBytes }

// Advance marks the first n bytes of Output as done (written or acknowledged).
// When back-pressure lifts it parses the requests already buffered, which may
// queue more output.
func (c *Conn) Advance(n int) {
	if n <= 0 || c.exchange == nil {
		return
	}
	// The peer is taking our output: activity as of the latest time we know.
	c.progressed = true
	if c.now.After(c.lastActive) {
		c.lastActive = c.now
	}
	chunks := 0
	for n > 0 && c.outHead < len(c.out) {
		s := c.out[c.outHead]
		if n < len(s) {
			c.out[c.outHead] = s[n:]
			c.outBytes -= n
			break
		}
		n -= len(s)
		c.outBytes -= len(s)
		if a := c.outAr[c.outHead]; a >= 0 {
			c.arRefs[a]--
		} else if a == outChunk {
			chunks++
		}
		c.out[c.outHead] = nil
		c.outHead++
	}
	if c.outHead == len(c.out) {
		c.out, c.outAr, c.outHead = c.out[:0], c.outAr[:0], 0
	}
	if chunks > 0 && c.st != nil {
		c.st.done += chunks
		c.readChunk()
	}
	if !c.closing && c.r < c.w && !c.blocked() {
		c.process()
	} else if c.outBytes == 0 {
		c.shed()
	}
	c.checkPeerClosed()
}

// PeerClosed records that the peer sent FIN / EOF. Requests already buffered
// are still answered; Closing turns true once they are.
func (c *Conn) PeerClosed(now time.Time) {
	c.now = now
	c.peerClosed = true
	if !c.closing {
		c.process()
	}
	c.checkPeerClosed()
}

func (c *Conn) checkPeerClosed() {
	if c.peerClosed && !c.blocked() {
		c.closing = true // a partial request left over is dropped
	}
}

// Closing reports that the connection is finished: close it once Output is
// empty. It waits for a file job still to give output (Waiting).
func (c *Conn) Closing() bool { return c.closing && !c.Waiting() }

// Waiting reports that a file job will still give output (a path being
// resolved, a file streaming): a stack that drains must not close on an
// empty Output meanwhile.
func (c *Conn) Waiting() bool { return c.wait != nil || c.st != nil && c.st.active }

// Deadline is when the connection times out (header, body or idle timeout),
// zero if none. The header and body timeouts run from the first byte of the
// header and from its end, whatever arrives meanwhile, so that a trickle of
// bytes cannot hold a connection and its buffer. The stack calls Expire when
// it passes.
//
// Once the connection is closing, input is discarded and only the output
// left is timed: by the idle timeout, which the peer taking output pushes
// out, while Output or a file job (Waiting) remains. After that httpd has
// nothing left to time and Deadline is zero: the close is normal, never a
// timeout, however long the peer takes to close its side. The stack's own
// timers bound it (TCP's retransmission limit and FIN-WAIT-2 timeout, the
// posix stack's linger), and so does a stack that holds output of its own
// beyond Output (TLS records) until the peer takes it.
func (c *Conn) Deadline() time.Time {
	switch {
	case c.srv == nil:
		return time.Time{}
	case c.closing:
		if c.outBytes == 0 && !c.Waiting() {
			return time.Time{}
		}
	case c.inReq && c.state == stHead:
		return c.headStart.Add(c.srv.site.cfg.HeaderTimeout)
	case c.inReq:
		return c.bodyStart.Add(c.srv.site.cfg.BodyTimeout)
	}
	return c.lastActive.Add(c.srv.site.cfg.IdleTimeout)
}

// Expire closes the connection for a timeout if its deadline has passed; it
// reports whether it did. Output still pending then is dropped: the stack
// should close (abort) the connection at once.
func (c *Conn) Expire(now time.Time) bool {
	c.now = now
	d := c.Deadline()
	if d.IsZero() || now.Before(d) {
		return false
	}
	if c.progressed && c.outBytes > 0 && (c.closing || !c.inReq) {
		// A slow reader still taking output: activity, not idleness. Advance
		// cannot know the time, so the check happens here.
		c.progressed = false
		c.lastActive = now
		return false
	}
	c.closing = true
	c.srv.stats.Timeouts++
	c.cancelIO()
	c.dropOutput()
	return true
}

func (c *Conn) dropOutput() {
	if c.exchange == nil {
		return
	}
	for i := c.outHead; i < len(c.out); i++ {
		c.out[i] = nil
	}
	c.out, c.outAr, c.outHead, c.outBytes = c.out[:0], c.outAr[:0], 0, 0
	c.arRefs = [2]int{}
}

// blocked reports back-pressure: enough output is queued that parsing more
// pipelined requests should wait, or the response being made waits for a
// file job.
func (c *Conn) blocked() bool {
	return c.outBytes >= maxOutBytes || c.exchange != nil && len(c.out)-c.outHead >= maxOutSlices || c.Waiting()
}

// process parses and serves every complete request buffered, until input runs
// out, the connection closes, or back-pressure stops it.
func (c *Conn) process() {
	for !c.closing && c.r < c.w && !c.blocked() {
		if !c.inReq {
			c.inReq = true
			c.headStart = c.now
		}
		done, status := c.parse()
		if status != 0 {
			c.fail(status)
			return
		}
		if !done {
			break
		}
		c.serve()
		if c.wait != nil {
			break // served when its path resolves (resume)
		}
		c.endRequest()
	}
	if c.exchange != nil && c.r == c.w && c.state == stHead && c.h.lineEnd == 0 {
		c.r, c.w = 0, 0 // nothing of a request is buffered: rewind
		c.shed()
	}
}

// shed gives the input buffer, the output arenas and then the exchange
// back to the shard's server while nothing is buffered in them and no
// pending slice points into them: an idle keep-alive connection holds
// none of them, and the next request takes them from the server (no
// allocation once warm).
func (c *Conn) shed() {
	if c.r == c.w && c.in != nil {
		if cap(c.in) <= inRetain && c.srv.keep() {
			c.srv.ins = append(c.srv.ins, c.in[:cap(c.in)]) // its charge with it
		} else {
			c.srv.give(c.inMem)
		}
		c.in, c.inMem, c.r, c.w = nil, 0, 0, 0
	}
	if c.outBytes != 0 || c.exchange == nil {
		return
	}
	for i, a := range c.arenas {
		if a != nil && c.arRefs[i] == 0 {
			if cap(a) <= 4*arenaLimit && c.srv.keep() {
				c.srv.arenas = append(c.srv.arenas, a[:0])
			} else {
				c.srv.give(c.arMem[i])
			}
			c.arenas[i], c.arMem[i] = nil, 0
		}
	}
	if c.idle() {
		c.srv.giveExchange(c.exchange)
		c.exchange = nil
	}
}

// endRequest consumes the served request's bytes and readies the parser.
func (c *Conn) endRequest() {
	c.r += c.h.consumed
	c.h = head{contentLength: -1}
	c.state = stHead
	c.inReq = false
	c.req = Request{}
	c.ready, c.done = nil, nil // a handler that did not ask for them again
}
