package shardtls

import (
	"io"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// wire is the in-memory net.Conn beneath a connection's tls.Conn: the same
// fields as Conn, the ciphertext side. During the handshake the helper
// reads what the shard fed and its flights go to the mailbox (or its
// socket); afterwards the shard reads what it fed and writes into the
// queue.
type wire Conn

func (w *wire) Read(p []byte) (int, error) {
	c := (*Conn)(w)
	if c.est {
		if len(c.in) == 0 {
			if c.eof {
				return 0, io.EOF
			}
			return 0, ErrWouldBlock
		}
		n := copy(p, c.in)
		c.in = c.in[n:]
		return n, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.hsIn) == 0 && !c.eof && !c.shut {
		c.cond.Wait()
	}
	if c.shut {
		return 0, net.ErrClosed
	}
	if len(c.hsIn) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.hsIn))
	if c.b.opt.WholeRecords {
		n = c.toRecordEnd(n)
	}
	copy(p, c.hsIn[:n])
	c.hsIn = c.hsIn[:copy(c.hsIn, c.hsIn[n:])]
	return n, nil
}

// toRecordEnd cuts a handshake read of n bytes at the end of the current
// record (its header, or its body) and follows the records it passes.
func (c *Conn) toRecordEnd(n int) int {
	if c.hsLeft > 0 {
		n = min(n, c.hsLeft)
		c.hsLeft -= n
		return n
	}
	n = min(n, 5-c.hsHdrN)
	c.hsHdrN += copy(c.hsHdr[c.hsHdrN:], c.hsIn[:n])
	if c.hsHdrN == 5 {
		c.hsHdrN, c.hsLeft = 0, int(c.hsHdr[3])<<8|int(c.hsHdr[4])
	}
	return n
}

func (w *wire) Write(p []byte) (int, error) {
	c := (*Conn)(w)
	n := len(p)
	if c.est {
		if c.sink != nil { // after what is queued, in one write
			k, err := c.sink.SendRecord(p)
			if err != nil {
				return k, err
			}
			p = p[k:]
		}
		if len(p) > 0 {
			c.queue(p)
		}
		return n, nil
	}
	c.mu.Lock()
	if c.fd >= 0 && !c.relay && !c.shut {
		// Straight to the socket; under mu, so that the owner (Release)
		// cannot close fd meanwhile.
		k, _ := unix.Write(c.fd, p)
		if k == len(p) {
			c.mu.Unlock()
			return n, nil
		}
		p = p[max(k, 0):]
		c.relay = true // the rest, and every later flight, through the shard: in order
	}
	c.hsOut = append(c.hsOut, p...)
	c.mu.Unlock()
	c.b.post(c)
	return n, nil
}

// Close is crypto/tls cutting a handshake short (its context ended).
func (w *wire) Close() error {
	w.mu.Lock()
	w.shut = true
	w.mu.Unlock()
	w.cond.Signal()
	return nil
}

func (w *wire) LocalAddr() net.Addr              { return addr{} }
func (w *wire) RemoteAddr() net.Addr             { return addr{} }
func (w *wire) SetDeadline(time.Time) error      { return nil }
func (w *wire) SetReadDeadline(time.Time) error  { return nil }
func (w *wire) SetWriteDeadline(time.Time) error { return nil }

// addr is both ends' address: the shard knows the real ones.
type addr struct{}

func (addr) Network() string { return "tcp" }
func (addr) String() string  { return "shard" }

// ErrWouldBlock is what the record layer's reads get when what was fed is
// used up: temporary, so crypto/tls keeps its connection usable.
var ErrWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "would block" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }
