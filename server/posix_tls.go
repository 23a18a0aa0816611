package server

import (
	"crypto/tls"
	"errors"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"percore/shard"
)

// TLS on the posix stack: a TLS connection is a posixConn with a tlsConn.
// The shard reads the socket as for cleartext; while the handshake runs on
// its helper the bytes go to the helper and its flights come back through
// the mailbox; afterwards the shard decrypts each read into httpd and
// encrypts httpd's output into records it writes to the socket.

// tlsListener is a shard's TLS listening socket: a second source of the shard
// beside its Posix, whose connections it serves as TLS posixConns.
type tlsListener struct {
	p      *Posix
	lfd    int
	src    shard.SourceID
	ts     *tlsShard
	resume shard.Timer // re-enables accepting after EMFILE
	full   bool        // not accepting: TLSMaxHandshakes in progress
}

func newTLSListener(p *Posix, lfd int, conf *tls.Config, timeout time.Duration) (*tlsListener, error) {
	t := &tlsListener{p: p, lfd: lfd}
	ts, err := newTLSShard(p.sh, conf, timeout)
	if err != nil {
		unix.Close(lfd)
		return nil, err
	}
	t.ts = ts
	ts.slotFree = t.onSlotFree
	t.resume.Init(t.onResume)
	t.src = p.sh.AddSource(t)
	if err := p.sh.AddFD(lfd, unix.EPOLLIN, t.src, 0); err != nil {
		unix.Close(lfd)
		t.lfd = -1
		return nil, err
	}
	return t, nil
}

// Events accepts a batch of TLS connections.
func (t *tlsListener) Events(_ []shard.Event, now time.Time) {
	p := t.p
	if p.drain || t.lfd < 0 {
		return
	}
	for i := 0; i < acceptBatch; i++ {
		if t.ts.full() {
			// Handshakes wait in the listen backlog until a helper is free.
			t.full = true
			p.sh.ModifyFD(t.lfd, 0, t.src, 0)
			return
		}
		fd, err := accept4(t.lfd, &p.rsa, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			switch err {
			case unix.EAGAIN, unix.EINTR:
			case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
				// As for cleartext: stop watching the listener a while
				// instead of spinning on it.
				p.stats.AcceptErrors++
				p.sh.ModifyFD(t.lfd, 0, t.src, 0)
				p.wheel.Start(&t.resume, now.Add(acceptPauseTime))
			default:
				p.stats.AcceptErrors++
			}
			return
		}
		p.stats.Accepted++
		p.serve(fd, rawAddrPort(&p.rsa), t.ts, now)
	}
}

func (t *tlsListener) onSlotFree() {
	if t.full && !t.ts.full() {
		t.full = false
		t.onResume(time.Time{})
	}
}

func (t *tlsListener) onResume(time.Time) {
	if !t.p.drain && t.lfd >= 0 && !t.full {
		t.p.sh.ModifyFD(t.lfd, unix.EPOLLIN, t.src, 0)
	}
}

// closeListener stops accepting (drain).
func (t *tlsListener) closeListener() {
	if t.lfd >= 0 {
		unix.Close(t.lfd)
		t.lfd = -1
	}
}

// close stops accepting and ends the handshakes in progress.
func (t *tlsListener) close() {
	t.closeListener()
	t.p.wheel.Stop(&t.resume)
	t.ts.close()
}

// TLSReady: the helper wrote a flight or finished (on the shard).
func (c *posixConn) TLSReady(now time.Time) {
	if c.fd < 0 {
		return
	}
	switch t := c.tls; {
	case t.Established() && c.eof:
		// The peer closed during the handshake: what it sent after its
		// Finished is all there is (crypto/tls tells a truncated record).
		if _, err := t.feed(c.hc, nil, now); err != nil {
			c.tlsFailed(err)
		} else {
			c.hc.PeerClosed(now)
		}
	case t.Established() && !c.p.drain && !c.broken && !c.hc.Closing():
		// What the client sent after its Finished, if anything: the
		// shard read it already; what came later epoll reports.
		c.decryptHeld(now)
	}
	c.flush()
	c.settle(now)
}

// readTLS is read for a TLS connection: into the handshake while it runs,
// through the record layer into httpd after.
func (c *posixConn) readTLS(now time.Time) {
	t := c.tls
	buf := c.p.scrap
	for i := 0; i < readsPerEvent; {
		est := t.Established()
		if est && !c.decryptHeld(now) {
			return
		}
		i++
		n, err := read(c.fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		case err != nil:
			c.p.stats.ReadErrors++
			if est {
				t.s.stats.Cut++
			}
			c.broken = true
			return
		case n == 0:
			c.eof = true
			if !est {
				t.PeerClosed()
				return
			}
			// crypto/tls tells a close at a record boundary from a
			// truncated record.
			t.PeerClosed()
			if _, err := t.feed(c.hc, nil, now); err != nil {
				c.tlsFailed(err)
				return
			}
			c.hc.PeerClosed(now)
			c.flush()
			return
		}
		c.p.stats.BytesIn += uint64(n)
		if !est {
			if !t.FeedHandshake(buf[:n]) {
				c.broken = true
				return
			}
			if n < len(buf) {
				return // drained: epoll reports what comes next
			}
			continue
		}
		k, err := t.feed(c.hc, buf[:n], now)
		if k < n && err == nil {
			t.held = append(t.held, buf[k:n]...) // hc pushed back
		}
		if err != nil {
			c.tlsFailed(err)
			return
		}
		c.flush()
		if t.blocked {
			continue // the top decrypts the rest, or waits for output to drain
		}
		if n < len(buf) || c.broken || c.hc.Closing() {
			return
		}
	}
}

// decryptHeld decrypts what crypto/tls and held keep (hc may have pushed
// back) and sends the answers; false: read no further now, because the
// connection ends or hc is full until its output drains (then read is
// called again).
func (c *posixConn) decryptHeld(now time.Time) bool {
	t := c.tls
	for {
		if _, err := t.feed(c.hc, nil, now); err != nil {
			c.tlsFailed(err)
			return false
		}
		c.flush()
		if c.broken || c.hc.Closing() {
			return false
		}
		if !t.blocked {
			return true
		}
		if len(c.hc.ReadBuf()) == 0 {
			c.blocked = true
			c.p.stats.Backpressure++
			return false
		}
		// The flush made room: decrypt more of what is held.
	}
}

// tlsFailed handles an error of the record layer: io.EOF is the peer's
// close_notify (httpd answers what it has, then we close); anything else
// broke the connection: send the alert crypto/tls queued and close without
// lingering.
func (c *posixConn) tlsFailed(err error) {
	c.flushTLS()
	if err == io.EOF {
		c.eof = true
		return
	}
	c.broken = true
}

// flushTLS encrypts httpd's output and writes the records to the socket.
func (c *posixConn) flushTLS() {
	t := c.tls
	for !c.broken {
		if t.Established() {
			if err := t.encrypt(c.hc); err != nil {
				c.broken = true
				return
			}
		}
		out := t.Pending()
		if len(out) == 0 {
			return
		}
		n, err := write(c.fd, out)
		if n > 0 {
			t.Sent(n)
		}
		if !c.wrote(n, len(out), err) {
			return
		}
	}
}

// errSocketWrite is what crypto/tls gets when the socket failed a record
// (the connection is broken; wrote counted the error).
var errSocketWrite = errors.New("socket write failed")

// SendRecord implements shardtls.Sink: it writes what the connection
// queued and then rec, the record crypto/tls just sealed in its own buffer,
// in one writev, and returns how much of rec the socket took (the rest is
// queued).
func (c *posixConn) SendRecord(rec []byte) (int, error) {
	t := c.tls
	took := 0
	for !c.broken {
		q, r := t.Pending(), rec[took:]
		iov := c.p.iov[:0]
		if len(q) > 0 {
			iov = append(iov, unix.Iovec{Base: &q[0]})
			iov[0].SetLen(len(q))
		}
		iov = append(iov, unix.Iovec{Base: &r[0]})
		iov[len(iov)-1].SetLen(len(r))
		n, err := writev(c.fd, iov)
		fromQ := min(n, len(q))
		if fromQ > 0 {
			t.Sent(fromQ)
		}
		took += n - fromQ
		if !c.wrote(n, len(q)+len(r), err) || took == len(rec) {
			break
		}
	}
	if c.broken {
		return took, errSocketWrite
	}
	return took, nil
}

// settleHandshake is settle while the handshake runs: read unless the peer
// closed, write while a flight is queued; a failed handshake (its alert
// sent) or a drain closes the connection.
func (c *posixConn) settleHandshake() {
	t := c.tls
	if t.Failed() || c.p.drain {
		c.close()
		return
	}
	want := uint32(unix.EPOLLIN | unix.EPOLLRDHUP)
	if c.eof {
		want = 0
	}
	if t.queued() > 0 {
		want |= unix.EPOLLOUT
	}
	if want != c.events {
		c.events = want
		if err := c.p.sh.ModifyFD(c.fd, want, c.p.src, c.token()); err != nil {
			c.p.stats.WriteErrors++
			c.close()
		}
	}
}
