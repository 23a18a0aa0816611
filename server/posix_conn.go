package server

import (
	"time"

	"golang.org/x/sys/unix"

	"percore/httpd"
	"percore/shard"
)

// posixConn is one kernel TCP connection of a shard's posix stack. Its struct,
// timer and callback are made once per slot and reused for every connection the
// slot carries; gen tells a reused slot's events from its previous owner's.
type posixConn struct {
	p         *Posix
	idx       int32
	gen       uint32
	fd        int // -1: slot free
	hc        *httpd.Conn
	tls       *tlsConn // nil: cleartext
	timer     shard.Timer
	events    uint32 // current epoll interest
	blocked   bool   // reading stopped: the input buffer is full until output drains
	eof       bool   // the peer closed its side
	broken    bool   // a read or write failed: close without lingering
	lingering bool   // our side is shut down; reading and discarding until close
	lingered  int    // bytes discarded while lingering
}

func (c *posixConn) token() uint64 { return uint64(c.gen)<<32 | uint64(c.idx+1) }

// event handles one epoll event.
func (c *posixConn) event(ev uint32, now time.Time) {
	if c.lingering {
		c.linger(now)
		return
	}
	// On an error or hangup the write surfaces the cause (EPIPE, ECONNRESET)
	// and the connection closes, instead of epoll reporting it again forever.
	if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		c.flush()
	}
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 || c.blocked {
		c.read(now)
	}
	c.settle(now)
}

// Wake implements httpd.Waker: a file job gave the connection output. Send
// it, read on if reading stopped while the job was out, and settle.
func (c *posixConn) Wake(now time.Time) {
	if c.fd < 0 || c.lingering {
		return
	}
	c.flush()
	if c.blocked {
		c.read(now)
	}
	c.settle(now)
}

// read moves bytes from the socket into httpd, flushing responses after each
// read, until the socket is empty, httpd applies back-pressure, or the per-event
// read budget is spent (level-triggered epoll calls again).
func (c *posixConn) read(now time.Time) {
	if c.p.drain || c.eof || c.broken || c.hc.Closing() {
		return
	}
	c.blocked = false
	if c.tls != nil {
		c.readTLS(now)
		return
	}
	for i := 0; i < readsPerEvent; i++ {
		buf := c.hc.ReadBuf()
		if len(buf) == 0 {
			c.flush()
			if buf = c.hc.ReadBuf(); len(buf) == 0 {
				c.blocked = true
				c.p.stats.Backpressure++
				return
			}
		}
		n, err := read(c.fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		case err != nil:
			c.p.stats.ReadErrors++
			c.broken = true
			return
		case n == 0:
			c.eof = true
			c.hc.PeerClosed(now)
			c.flush()
			return
		}
		c.p.stats.BytesIn += uint64(n)
		c.hc.Received(n, now)
		c.flush()
		if n < len(buf) || c.broken || c.hc.Closing() {
			return
		}
	}
}

// flush writes as much pending output as the socket takes, with one writev over
// httpd's immutable response slices, and tells httpd how far it got.
func (c *posixConn) flush() {
	if c.tls != nil {
		c.flushTLS()
		return
	}
	for !c.broken {
		if c.hc.Pending() == 0 {
			return
		}
		out := c.hc.Output()
		iov := c.p.iov[:0]
		total := 0
		for _, b := range out {
			if len(b) == 0 {
				continue
			}
			if len(iov) == maxIov {
				break
			}
			iov = append(iov, unix.Iovec{Base: &b[0]})
			iov[len(iov)-1].SetLen(len(b))
			total += len(b)
		}
		n, err := writev(c.fd, iov)
		if n > 0 {
			c.hc.Advance(n)
		}
		if !c.wrote(n, total, err) {
			return
		}
	}
}

// wrote counts a write of n of want bytes and says whether to write again:
// after EINTR or a full write. EAGAIN or a short write (the socket buffer is
// full) waits for EPOLLOUT; any other error breaks the connection.
func (c *posixConn) wrote(n, want int, err error) bool {
	if n > 0 {
		c.p.stats.BytesOut += uint64(n)
	}
	switch {
	case err == unix.EINTR:
		return true
	case err == unix.EAGAIN:
		return false
	case err != nil:
		c.p.stats.WriteErrors++
		c.broken = true
		return false
	}
	return n == want
}

// settle decides what happens next after an event: close, linger, or update
// the epoll interest (EPOLLOUT only while output is pending) and the timer.
func (c *posixConn) settle(now time.Time) {
	if c.broken {
		c.close()
		return
	}
	if c.tls != nil && !c.tls.Established() {
		c.settleHandshake()
		return
	}
	pending := c.pending() > 0
	if !pending && !c.hc.Waiting() && (c.hc.Closing() || c.eof || c.p.drain) && c.tls != nil && !c.tls.notified {
		// TLS ends with close_notify before the FIN.
		c.tls.notified = true
		c.tls.CloseNotify()
		c.flush()
		if c.broken {
			c.close()
			return
		}
		pending = c.pending() > 0
	}
	if !pending && !c.hc.Waiting() && (c.hc.Closing() || c.eof || c.p.drain) {
		c.startLinger(now)
		return
	}
	want := uint32(unix.EPOLLIN | unix.EPOLLRDHUP)
	if c.eof || c.p.drain || c.blocked || c.hc.Closing() {
		want = 0 // nothing more to read now; level-triggered EPOLLIN would spin
	}
	if pending {
		want |= unix.EPOLLOUT
	}
	if want != c.events {
		c.events = want
		if err := c.p.sh.ModifyFD(c.fd, want, c.p.src, c.token()); err != nil {
			c.p.stats.WriteErrors++
			c.close()
			return
		}
	}
	c.armTimer(now)
}

// pending is the output not yet written: httpd's, and TLS records.
func (c *posixConn) pending() int {
	if c.tls != nil {
		return c.hc.Pending() + c.tls.queued()
	}
	return c.hc.Pending()
}

// armTimer makes sure the timer fires no later than httpd's deadline (or
// TLS's, for the records left after httpd finished). A later deadline (each
// request pushes the idle deadline out) leaves the timer where it is; when it
// fires early, expire re-arms it, so a busy connection costs no timer work
// per request.
func (c *posixConn) armTimer(now time.Time) {
	d := c.hc.Deadline()
	if c.tls != nil {
		if !c.tls.Established() {
			return // the helper times the handshake out
		}
		d = c.tls.deadline(c.hc, c.p.srv, now)
	}
	if d.IsZero() {
		return
	}
	if !c.timer.Armed() || d.Before(c.timer.When()) {
		c.p.wheel.Start(&c.timer, d)
	}
}

// expire is the connection's timer callback.
func (c *posixConn) expire(now time.Time) {
	if c.fd < 0 {
		return
	}
	if c.lingering {
		c.p.stats.LingerDrops++
		c.close()
		return
	}
	if c.hc.Expire(now) {
		c.p.stats.Timeouts++
		c.flush()
		c.settle(now)
		return
	}
	if c.tls != nil && c.tls.expire(c.hc, now) {
		c.close()
		return
	}
	c.armTimer(now)
}

// startLinger shuts down our side (the peer reads EOF after the last response)
// and reads and discards until the peer closes, Linger passes, or
// lingerMaxBytes arrive.
func (c *posixConn) startLinger(now time.Time) {
	if err := unix.Shutdown(c.fd, unix.SHUT_WR); err != nil || c.eof {
		// the peer already closed: nothing it sends can be lost
		c.close()
		return
	}
	c.lingering = true
	c.events = unix.EPOLLIN | unix.EPOLLRDHUP
	if err := c.p.sh.ModifyFD(c.fd, c.events, c.p.src, c.token()); err != nil {
		c.close()
		return
	}
	c.p.wheel.Start(&c.timer, now.Add(c.p.cfg.Linger))
	c.linger(now)
}

func (c *posixConn) linger(now time.Time) {
	for {
		n, err := read(c.fd, c.p.scrap)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		case err != nil || n == 0:
			c.p.stats.Lingered++
			c.close()
			return
		}
		if c.lingered += n; c.lingered > lingerMaxBytes {
			c.p.stats.LingerDrops++
			c.close()
			return
		}
	}
}

// close closes the socket (which takes it out of epoll), returns the httpd
// connection to its pool and frees the slot.
func (c *posixConn) close() {
	p := c.p
	p.wheel.Stop(&c.timer)
	if c.tls != nil {
		c.tls.release() // first: a helper may be writing to fd
		c.tls = nil
	}
	unix.Close(c.fd)
	p.srv.Release(c.hc)
	p.stats.Closed++
	p.open--
	c.fd = -1
	c.hc = nil
	c.gen++
	c.events = 0
	c.blocked, c.eof, c.broken, c.lingering, c.lingered = false, false, false, false, 0
	p.free = append(p.free, c.idx)
}
