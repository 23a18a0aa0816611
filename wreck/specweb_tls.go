package wreck

import (
	"crypto/tls"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"percore/shard"
)

// SPECweb99_SSL: the SPECweb99 users over TLS (--workload specweb99 --tls),
// on kernel sockets. The user's socket carries ciphertext: once TCP
// connects, the user shakes hands on a helper goroutine (shardtls.Conn,
// tls_shard.go) in state cHandshake, the shard moving the flights between
// socket and helper; then its requests are encrypted before they are
// written and what it reads is decrypted before the parser sees it. The
// swclient methods branch here when u.tls is set; the rest of the user's
// life (pacing, checks, keep-alive runs, timeouts) is cleartext's.

// useTLS makes s's users speak TLS with conf (on s's shard).
func (s *swclient) useTLS(sh *shard.Shard, conf *tls.Config) error {
	box, err := newTLSBox(sh)
	if err != nil {
		return err
	}
	s.box, s.tconf = box, conf
	s.cbuf = make([]byte, readBuf)
	return nil
}

// startTLS begins a connected user's handshake; its drawn request waits.
func (s *swclient) startTLS(u *swUser) {
	u.state = cHandshake
	u.tls = s.box.start(u, handshakeConf(s.tconf, s.cfg.TLS.Resume, &u.tconf))
}

// TLSReady implements shardtls.Owner: the helper posted a flight (written now)
// or finished; a user whose handshake succeeded sends its request, one
// whose handshake failed backs off as after a failed connect.
func (u *swUser) TLSReady(now time.Time) {
	s, t := u.sw, u.tls
	s.setNow(now)
	switch {
	case u.state != cHandshake || u.fd < 0:
		return
	case t.Established():
		s.tls.handshakes++
		if t.Resumed() {
			s.tls.resumed++
		}
		recordNs(s.conn, s.now-u.since)
		gen := u.gen
		s.connected(u)
		if rest := t.Rest(); len(rest) > 0 && u.gen == gen && u.fd >= 0 {
			t.Feed(rest)
			s.decrypt(u)
		}
		return
	case t.Failed():
		s.tls.failed++
		s.fail(u, errConnect)
		return
	}
	s.flushTLS(u)
}

// sendTLS encrypts u's request and writes it.
func (s *swclient) sendTLS(u *swUser) {
	if _, err := u.tls.Write(u.req); err != nil {
		s.fail(u, errMalformed)
		return
	}
	s.flushTLS(u)
}

// flushTLS writes u's ciphertext (a flight, or records) to its socket.
func (s *swclient) flushTLS(u *swUser) {
	m, err := writeOut(u.fd, u.tls.Pending())
	u.tls.Sent(m)
	if err != nil {
		s.fail(u, errReset)
	} // else all written, or EPOLLOUT resumes
}

// readableTLS reads ciphertext until the socket is drained or closed: to
// the handshake's helper, or decrypted and parsed.
func (s *swclient) readableTLS(u *swUser, hup bool) {
	gen := u.gen
	for u.gen == gen && u.fd >= 0 {
		m, err := sysRead(u.fd, s.cbuf)
		switch {
		case err == unix.EAGAIN:
			return
		case err == unix.EINTR:
			continue
		case err != nil:
			s.fail(u, errReset)
			return
		case m == 0:
			u.tls.PeerClosed() // a handshake fails; records end
			if u.state != cHandshake {
				u.tls.Feed(nil)
				s.decrypt(u)
			}
			return
		case u.state == cHandshake:
			u.tls.FeedHandshake(s.cbuf[:m])
		default:
			u.tls.Feed(s.cbuf[:m])
			if !s.decrypt(u) {
				return
			}
		}
		if m < len(s.cbuf) && !hup {
			return // drained: edge-triggered epoll reports the next arrival
		}
	}
}

// decrypt parses the plaintext of what was fed, behind u's carry; it
// reports false if u's socket was closed.
func (s *swclient) decrypt(u *swUser) bool {
	gen := u.gen
	for u.gen == gen && u.fd >= 0 {
		k := copy(s.rbuf, u.carry)
		n, err := u.tls.Read(s.rbuf[k:])
		if n > 0 {
			u.bytes += int64(n)
			s.cnt.Bytes += uint64(n)
			u.carry = u.carry[:0]
			if !s.parse(u, s.rbuf[:k+n]) {
				return false
			}
		}
		switch {
		case err == io.EOF:
			s.eof(u)
			return false
		case err != nil:
			s.fail(u, errMalformed) // a bad record or an alert
			return false
		case n == 0:
			return true
		}
	}
	return false
}
