package wreck

import (
	"crypto/tls"
	"io"
	"time"
)

// --tls on the native client: once TCP connects, a slot shakes hands on a
// helper goroutine (shardtls.Conn, tls_shard.go) in state cHandshake, TCP
// carrying the flights both ways; then it runs the same request flow as
// cleartext with its requests encrypted into the ciphertext buffer TCP
// sends from, and what TCP feeds decrypted before the parser sees it. The
// nconn methods branch here when nc.tls is set. Closed loop only (as on
// kernel sockets): a batch of requests is encrypted whole when written.

// tlsCounts are a shard's handshakes, for TLSResult.
type tlsCounts struct {
	handshakes, resumed, failed uint64
}

// useTLS makes c's connections shake hands with conf, through box.
func (c *nclient) useTLS(box *tlsBox, conf *tls.Config) {
	c.box, c.tconf = box, conf
}

// startTLS begins a connected slot's handshake.
func (c *nclient) startTLS(nc *nconn) {
	nc.state = cHandshake
	nc.tls = c.box.start(nc, handshakeConf(c.tconf, c.cfg.TLS.Resume, &nc.tconf))
}

// TLSReady implements shardtls.Owner: the helper posted a flight (TCP sends it)
// or finished. A slot whose handshake succeeded starts its requests, one
// whose handshake failed is reset and backs off as after a failed connect.
func (nc *nconn) TLSReady(now time.Time) {
	c, s := nc.cl, nc.cl.acct
	s.setNow(now)
	c.nowT = now
	t := nc.tls
	switch {
	case nc.state != cHandshake:
	case t.Established():
		s.tls.handshakes++
		if t.Resumed() {
			s.tls.resumed++
		}
		c.connected(nc)
		if rest := t.Rest(); len(rest) > 0 {
			nc.feedTLS(rest)
		}
	case t.Failed():
		s.tls.failed++
		c.stack.AbortTCP(now, c.link, nc.h) // released: counted as a failed connect
		return
	}
	c.wake(nc.h)
}

// writeTLS encrypts k requests into the connection's output.
func (c *nclient) writeTLS(nc *nconn, k int) {
	if _, err := nc.tls.Write(nc.req[:k*c.reqLen]); err != nil {
		c.fail(nc, errMalformed)
	}
}

// tlsOutput is Output under --tls: the flights, then the ciphertext, not
// yet acknowledged.
func (nc *nconn) tlsOutput() [][]byte {
	p := nc.tls.Pending()
	if len(p) == 0 {
		return nc.outv[:0]
	}
	nc.outv[0] = p
	return nc.outv[:1]
}

// feedTLS is Feed under --tls: bytes for the handshake go to its helper;
// records are decrypted and their plaintext parsed.
func (nc *nconn) feedTLS(p []byte) {
	c := nc.cl
	switch {
	case nc.failed:
		return
	case nc.state == cHandshake:
		nc.tls.FeedHandshake(p)
		return
	}
	t := nc.tls
	t.Feed(p)
	for !nc.failed {
		b, err := c.box.read(t)
		if len(b) > 0 {
			nc.feedPlain(b)
		}
		switch {
		case err == io.EOF:
			return // close_notify: the server's FIN follows (PeerClosed)
		case err != nil:
			c.fail(nc, errMalformed) // a bad record or an alert
			return
		case len(b) == 0:
			return
		}
	}
}
