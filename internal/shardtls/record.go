package shardtls

// The record layer, driven by the shard once the handshake is done.

// Sink takes records straight from crypto/tls's buffer (WriteLast): a posix
// connection's socket, saving their copy into the queue.
type Sink interface {
	// SendRecord writes the connection's Pending ciphertext, marking what
	// went as Sent, and then rec; it returns how much of rec it took (the
	// connection queues the rest). An error breaks the connection.
	SendRecord(rec []byte) (int, error)
}

// Feed makes p the ciphertext the next reads decrypt; p must stay valid
// until Read reports it needs more, or the next Feed.
func (c *Conn) Feed(p []byte) { c.in = p }

// Unread is how much of what Feed gave crypto/tls has not read.
func (c *Conn) Unread() int { return len(c.in) }

// Read decrypts into p the next plaintext of what was fed: the bytes read,
// 0 with a nil error when it needs more ciphertext (crypto/tls keeps a
// partial record for the next Feed). io.EOF: the peer's close_notify, or
// its close (PeerClosed) at a record boundary; other errors: the connection
// is broken (a bad or truncated record, an alert, which crypto/tls queued
// in Pending).
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.tc.Read(p)
	if err == ErrWouldBlock {
		err = nil
	}
	if n == 0 && err == nil {
		c.in = nil
	}
	return n, err
}

// Write encrypts p into records in the queue (Pending) and returns how much
// of p crypto/tls took.
func (c *Conn) Write(p []byte) (int, error) { return c.tc.Write(p) }

// WriteLast is Write for the last plaintext of a batch: the records sealed
// go to s straight from crypto/tls's buffer, behind what is queued; only
// what s does not take is copied into the queue.
func (c *Conn) WriteLast(p []byte, s Sink) (int, error) {
	c.sink = s
	n, err := c.tc.Write(p)
	c.sink = nil
	return n, err
}

// CloseNotify queues close_notify behind the output (established only):
// crypto/tls seals nothing after it.
func (c *Conn) CloseNotify() {
	if c.est {
		c.tc.CloseWrite()
	}
}

// Pending is the ciphertext queued and not yet sent (or acknowledged): the
// handshake's flights, then records. Valid until the next Write or Sent.
func (c *Conn) Pending() []byte { return c.out[c.outHead:] }

// Sent marks n bytes of Pending as sent (or acknowledged).
func (c *Conn) Sent(n int) {
	c.outHead += n
	if c.outHead < len(c.out) {
		return
	}
	c.outHead = 0
	switch {
	case c.b.opt.OutBuf == 0:
		c.out = c.out[:0]
	case c.out != nil:
		c.b.bufs = append(c.b.bufs, c.out[:0]) // an idle connection holds none
		c.out = nil
	}
}

// queue appends ciphertext to out, taking a free buffer if out has none.
func (c *Conn) queue(p []byte) {
	b := c.b
	if c.out == nil && b.opt.OutBuf > 0 {
		if k := len(b.bufs); k > 0 {
			c.out, b.bufs = b.bufs[k-1], b.bufs[:k-1]
		} else {
			c.out = make([]byte, 0, b.opt.OutBuf)
		}
	}
	if c.outHead > 0 && len(c.out)+len(p) > cap(c.out) {
		c.out = c.out[:copy(c.out, c.out[c.outHead:])]
		c.outHead = 0
	}
	c.out = append(c.out, p...)
	b.copied += uint64(len(p))
}
