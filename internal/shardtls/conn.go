package shardtls

import (
	"context"
	"crypto/tls"
	"sync"
	"time"
)

// Conn is the TLS of one connection on a shard: the tls.Conn and the
// in-memory net.Conn beneath it (wire). Until the shard takes it over
// (Established), the fields under mu are shared with the helper; after
// that, everything is the shard's.
type Conn struct {
	b     *Box
	owner Owner // nil once the connection let go
	tc    *tls.Conn

	mu      sync.Mutex
	cond    sync.Cond
	hsIn    []byte // bytes from the peer the handshake has not read
	hsOut   []byte // flights the handshake wrote that the shard has not taken
	eof     bool   // the peer closed its side (the shard's alone once est)
	shut    bool   // the connection let go, or the handshake was cut short: reads fail
	done    bool   // the handshake returned, with err
	err     error
	posted  bool // in the mailbox (under the mailbox's lock)
	fd      int  // the socket, for the handshake's own writes (-1: none)
	relay   bool // a flight went through the shard: the rest follow it
	hsHdr   [5]byte
	hsHdrN  int  // bytes of the current record's header read (WholeRecords)
	hsLeft  int  // bytes of the current record's body not yet read (WholeRecords)
	verdict bool // the shard collected the handshake's end (Done was called)

	est     bool   // the handshake succeeded and the shard took over
	rest    []byte // bytes the peer sent after the handshake's last, to feed first
	in      []byte // the ciphertext Feed gave crypto/tls, not yet read
	out     []byte // ciphertext written, out[outHead:] not yet sent
	outHead int
	sink    Sink // during WriteLast: where the records go
}

// handshake runs on the helper goroutine.
func (c *Conn) handshake() {
	defer c.b.wg.Done()
	ctx, cancel := c.b.ctx, context.CancelFunc(nil)
	if c.b.opt.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.b.opt.Timeout)
	}
	err := c.tc.HandshakeContext(ctx)
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		err = context.DeadlineExceeded
	}
	if cancel != nil {
		cancel()
	}
	c.mu.Lock()
	c.done, c.err = true, err
	c.mu.Unlock()
	c.b.post(c)
}

// collect runs on the shard when c was posted: the flight the helper wrote
// moves into out, and a finished handshake is taken over (if it succeeded)
// and reported to Done. Then the owner acts.
func (c *Conn) collect(now time.Time) {
	if c.est || c.verdict {
		return
	}
	c.mu.Lock()
	c.out = append(c.out, c.hsOut...)
	c.hsOut = c.hsOut[:0]
	done := c.done
	if done && c.err == nil {
		c.est = true
		c.rest, c.hsIn = c.hsIn, nil
	}
	c.mu.Unlock()
	if done {
		c.verdict = true
		if c.b.opt.Done != nil {
			c.b.opt.Done(c)
		}
	}
	if c.owner != nil {
		c.owner.TLSReady(now)
	}
}

// Established reports that the handshake succeeded and the shard took the
// record layer over.
func (c *Conn) Established() bool { return c.est }

// Failed reports a handshake that ended in error (on the shard): the owner
// sends what is left in Pending (the alert) and closes.
func (c *Conn) Failed() bool {
	if c.est {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done && c.err != nil
}

// Err is the handshake's error once it ended (context.DeadlineExceeded: the
// box's Timeout cut it); nil while it runs or when it succeeded.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Resumed reports that the handshake resumed a session.
func (c *Conn) Resumed() bool { return c.tc.ConnectionState().DidResume }

// FeedHandshake gives the helper bytes from the peer (copied); false: the
// peer sent more than the box's HandshakeMax, and nothing was taken.
func (c *Conn) FeedHandshake(p []byte) bool {
	c.mu.Lock()
	max := c.b.opt.HandshakeMax
	ok := max == 0 || len(c.hsIn)+len(p) <= max
	if ok {
		c.hsIn = append(c.hsIn, p...)
	}
	c.mu.Unlock()
	c.cond.Signal()
	return ok
}

// PeerClosed tells the connection the peer closed its side: a handshake in
// progress fails; the record layer reads what it was fed, then io.EOF (or
// the truncation of a partial record).
func (c *Conn) PeerClosed() {
	if c.est {
		c.eof = true
		return
	}
	c.mu.Lock()
	c.eof = true
	c.mu.Unlock()
	c.cond.Signal()
}

// Release: the owner is done with the connection. A handshake in progress
// fails at its next read, the helper's post is ignored, and the queue's
// buffer goes back to the box.
func (c *Conn) Release() {
	c.owner = nil
	if !c.est {
		c.mu.Lock()
		c.shut = true
		c.mu.Unlock()
		c.cond.Signal()
	}
	if c.out != nil && c.b.opt.OutBuf > 0 {
		c.b.bufs = append(c.b.bufs, c.out[:0])
	}
	c.in, c.rest, c.out, c.outHead = nil, nil, nil, 0
}

// Rest returns, once, what the peer sent after the handshake's last byte:
// the owner feeds it first.
func (c *Conn) Rest() []byte {
	p := c.rest
	c.rest = nil
	return p
}

// EOF reports that the peer closed its side (PeerClosed).
func (c *Conn) EOF() bool {
	if c.est {
		return c.eof
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.eof
}
