package server

import (
	"io"
	"time"

	"percore/netstack"
)

// TLS on the native stack: a TLS connection is a nativeConn with a tlsConn.
// TCP feeds it segments and takes its output as for cleartext; while the
// handshake runs on its helper, Feed hands the bytes to the helper and
// Output returns the flights the helper posted; afterwards Feed decrypts
// into httpd and Output is the ciphertext of httpd's responses, kept until
// acknowledged. The nativeConn methods branch here when c.tls is set.

// nativeTLS is the TLS side of a nativeConn, made with its tlsConn: a
// cleartext connection carries none of it.
type nativeTLS struct {
	*tlsConn
	outv   [1][]byte // Output's answer
	now    time.Time // the latest time TCP gave (Advance has none)
	broken bool      // TLS failed: FIN after the alert
}

// tlsFeed is Feed for a TLS connection.
func (c *nativeConn) tlsFeed(p []byte, now time.Time) int {
	t := c.tls
	if c.tls.broken || (!t.Established() && t.Failed()) {
		return len(p) // the connection is ending: discard
	}
	if !t.Established() {
		if !t.FeedHandshake(p) {
			c.tls.broken = true
		}
		return len(p)
	}
	k, err := t.feed(c.hc, p, now)
	if err != nil {
		c.tlsFailed(err)
		return len(p)
	}
	if err := t.encrypt(c.hc); err != nil {
		c.tls.broken = true
	}
	if c.hc.Closing() {
		return len(p)
	}
	return k
}

// tlsFailed handles an error of the record layer: io.EOF is the peer's
// close_notify (httpd answers what it has, then FIN); anything else broke
// the connection: the alert crypto/tls queued goes out, then FIN. So does
// an answer crypto/tls will not seal (close_notify went first, in a
// drain): left pending, it would hold the connection open for good.
func (c *nativeConn) tlsFailed(err error) {
	if err != io.EOF || c.tls.encrypt(c.hc) != nil {
		c.tls.broken = true
	}
}

// tlsOutput is Output for a TLS connection: the ciphertext not yet
// acknowledged.
func (c *nativeConn) tlsOutput() [][]byte {
	p := c.tls.Pending()
	if len(p) == 0 {
		return nil
	}
	c.tls.outv[0] = p
	return c.tls.outv[:]
}

// tlsAdvance is Advance for a TLS connection: the acknowledged ciphertext
// is done with, and httpd's output waiting for room is encrypted.
func (c *nativeConn) tlsAdvance(n int) {
	t := c.tls
	t.Sent(n)
	if t.Established() && !c.tls.broken {
		if err := t.pump(c.hc, c.tls.now); err != nil {
			c.tlsFailed(err)
		}
	}
}

// tlsClosing is Closing for a TLS connection: TCP sends FIN after the last
// record (close_notify, or an alert), or at once for a handshake that
// failed or that a drain cuts short.
func (c *nativeConn) tlsClosing() bool {
	t := c.tls
	if c.tls.broken {
		return true
	}
	if !t.Established() {
		return c.n.drain || t.Failed()
	}
	return t.notified && c.hc.Pending() == 0
}

// tlsPeerClosed is PeerClosed for a TLS connection.
func (c *nativeConn) tlsPeerClosed(now time.Time) {
	t := c.tls
	if !t.Established() {
		t.PeerClosed()
		return
	}
	if c.tls.broken {
		return
	}
	// crypto/tls tells a close at a record boundary from a truncated record.
	t.PeerClosed()
	if _, err := t.feed(c.hc, nil, now); err != nil && err != io.EOF {
		c.tlsFailed(err)
		return
	}
	c.hc.PeerClosed(now)
	if err := t.encrypt(c.hc); err != nil {
		c.tls.broken = true
	}
}

// TLSReady: the helper posted a flight or finished (on the shard). TCP
// sends it in the next Poll.
func (c *nativeConn) TLSReady(now time.Time) {
	if c.hc == nil {
		return
	}
	if c.tls.Established() {
		// What the client sent after its Finished, if anything, then the
		// responses.
		if err := c.tls.pump(c.hc, now); err != nil {
			c.tlsFailed(err)
		}
	}
	c.n.stack.WakeTCP(c.h)
}

// tlsDrain: the shard drains; close_notify follows the last response.
func (c *nativeConn) tlsDrain() {
	t := c.tls
	if t.Established() && !c.tls.broken {
		t.finish = true
		t.encrypt(c.hc)
	}
}

var _ netstack.TCPApp = (*nativeConn)(nil)
