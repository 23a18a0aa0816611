package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"time"

	"percore/httpd"
	"percore/internal/shardtls"
	"percore/shard"
)

// TLS on a shard, the same for both stacks: the handshake off the shard, the
// record layer on it (the mechanics: package shardtls).
//
// A handshake costs about a millisecond of CPU, so it runs on a helper
// goroutine per connection, at most TLSMaxHandshakes at a time per shard, on
// the Go scheduler's threads other than the shards' (a busy shard keeps its
// own). The shard stays the connection's only reader of the network: it
// feeds the helper the bytes that arrive. The helper hands its flights and
// its verdict to the shard through the shard's mailbox (a list under a lock
// and an eventfd in the shard's epoll: control traffic, a message per
// flight); on the posix stack it writes its flights to the socket itself
// while the socket takes them whole, and posts only its verdict.
//
// Once the handshake is done the shard takes the tls.Conn over and drives
// its record layer itself, over an in-memory net.Conn: reads
// return what the stack fed (and a temporary error when it is used up, which
// crypto/tls tolerates), writes append to a ciphertext buffer the stack
// sends from, or on posix go to the socket (below). The shard never blocks
// and no goroutine stays behind.
//
// Copies of a static response. crypto/tls seals each record in its own
// buffer, which it reuses for the next: TLS 1.3 copies the plaintext there
// and seals it in place, TLS 1.2 seals from the plaintext into it (headers
// and small files are gathered into one record first: one more copy of
// those small slices). Then:
//   - posix: records are copied into the connection's ciphertext buffer, except
//     the last one sealed before a write: that one goes from crypto/tls's
//     buffer straight into the socket, after the buffer, in one writev (a
//     record per write would cost more in system calls than its copy). So a
//     response of one record, up to 16 KiB, takes the one copy into the
//     socket that cleartext takes too, and a large one a copy more for 3 of
//     every 4 records.
//   - native: TCP sends from the app's buffers and resends from them until
//     they are acknowledged, so the record is copied out of crypto/tls's
//     buffer into the connection's, which TCP copies into transmit frames as it
//     does cleartext.

// TLSMaxHandshakes bounds the handshakes in progress on one shard (one
// helper goroutine each): beyond it the posix stack leaves connections in
// the listen backlog and the native stack refuses them.
const TLSMaxHandshakes = 1024

// TLSHandshakeTimeout bounds a TLS handshake, so that a client stopping in the
// middle of one holds a helper no longer.
const TLSHandshakeTimeout = 10 * time.Second

const (
	tlsOutMax  = 64 << 10 // ciphertext queued per connection before encrypting more waits
	tlsRecord  = 16 << 10 // plaintext handed to crypto/tls at a time: one record (RFC 8446 5.1)
	tlsBigHunk = 4 << 10  // output slices this large are encrypted where they lie
)

// TLSStats are one shard's TLS counters, kept by the shard.
type TLSStats struct {
	Accepted    uint64 `stat:"count"` // TLS connections accepted
	Handshakes  uint64 `stat:"count"` // handshakes completed
	Resumed     uint64 `stat:"count"` // of those, resumed from a session ticket
	Failed      uint64 `stat:"drop"`  // handshakes failed: bad records, no shared protocol, a peer that closed (crypto/tls sent the alert)
	TimedOut    uint64 `stat:"drop"`  // handshakes cut by the handshake timeout
	Cut         uint64 `stat:"drop"`  // connections cut after the handshake: a bad, truncated or oversized record, a renegotiation attempt, a reset
	Stalled     uint64 `stat:"drop"`  // connections cut after their last response: the peer did not take the records left within the idle timeout
	Refused     uint64 `stat:"drop"`  // connections refused: TLSMaxHandshakes in progress (native; posix leaves them in the backlog)
	Handshaking uint64 `stat:"gauge"` // handshakes in progress (helper goroutines)
	QueuedBytes uint64 `stat:"count"` // ciphertext copied into connections' queues (on posix, what did not go from crypto/tls's buffer to the socket straight)
}

// tlsShard is one shard's TLS state: the configuration, the mailbox the
// helpers post to, and the counters. Owned by the shard.
type tlsShard struct {
	conf    *tls.Config
	box     *shardtls.Box
	running int // handshakes in progress
	stats   TLSStats
	stage   []byte // small plaintext slices gathered into one record (encrypt)
	// slotFree, if set, is called when a handshake ends and another may start.
	slotFree func()
}

// newTLSShard registers the TLS of shard sh (nil: a test plays the shard).
func newTLSShard(sh *shard.Shard, conf *tls.Config, timeout time.Duration) (*tlsShard, error) {
	if timeout <= 0 {
		timeout = TLSHandshakeTimeout
	}
	s := &tlsShard{conf: conf, stage: make([]byte, 0, tlsRecord)}
	box, err := shardtls.NewBox(sh, shardtls.Options{
		Server:       true,
		Timeout:      timeout,
		HandshakeMax: tlsHandshakeMax,
		WholeRecords: true, // feed hands crypto/tls whole records
		OutBuf:       tlsOutMax + tlsOutMax/2,
		Done:         s.handshakeDone,
	})
	if err != nil {
		return nil, err
	}
	s.box = box
	return s, nil
}

// full reports that no handshake may start now.
func (s *tlsShard) full() bool { return s.running >= TLSMaxHandshakes }

// start begins the handshake of a new connection on a helper goroutine.
// sock is the posix connection, whose socket the helper writes its flights
// to and the shard its records; nil on the native stack.
func (s *tlsShard) start(owner shardtls.Owner, sock *posixConn) *tlsConn {
	fd := -1
	if sock != nil {
		fd = sock.fd
	}
	s.running++
	s.stats.Accepted++
	return &tlsConn{Conn: s.box.Start(owner, s.conf, fd), s: s, sock: sock}
}

// handshakeDone counts a handshake that ended, and frees its slot.
func (s *tlsShard) handshakeDone(c *shardtls.Conn) {
	s.running--
	if s.slotFree != nil {
		s.slotFree()
	}
	switch err := c.Err(); {
	case err == nil:
		s.stats.Handshakes++
		if c.Resumed() {
			s.stats.Resumed++
		}
	case errors.Is(err, context.DeadlineExceeded):
		s.stats.TimedOut++
	default:
		s.stats.Failed++
	}
}

// close ends the handshakes in progress and closes the mailbox: helpers
// still running post to nothing.
func (s *tlsShard) close() { s.box.Close() }

func (s *tlsShard) report() TLSStats {
	st := s.stats
	st.Handshaking = uint64(s.running)
	st.QueuedBytes = s.box.Copied()
	return st
}

// tlsConn is the TLS side of one connection on a shard: the handshake and
// the in-memory net.Conn beneath crypto/tls (shardtls.Conn), and the
// record layer's state between httpd and crypto/tls. Owned by the shard.
type tlsConn struct {
	*shardtls.Conn
	s *tlsShard

	sock     *posixConn // posix: the last record of a batch goes to its socket straight; nil: native
	held     []byte     // ciphertext fed but not yet decrypted (hc pushed back)
	more     bool       // crypto/tls may hold plaintext of the last record
	blocked  bool       // feed stopped because hc pushed back
	notified bool       // close_notify written
	finish   bool       // write close_notify once hc's output is sealed, though hc is not closing (a drain)
	closeBy  time.Time  // the records left after hc finished must be taken by then (deadline); zero: not yet asked
}

// deadline is hc's deadline while hc has one. Once hc has finished
// (closing with all its output sealed, it times nothing more) while records
// still wait for the peer, it is the idle timeout from the first time
// asked: a peer that stops reading must not hold the connection by its last
// records.
func (t *tlsConn) deadline(hc *httpd.Conn, srv *httpd.Server, now time.Time) time.Time {
	if d := hc.Deadline(); !d.IsZero() || t.queued() == 0 {
		return d
	}
	if t.closeBy.IsZero() {
		t.closeBy = now.Add(srv.Site().Config().IdleTimeout)
	}
	return t.closeBy
}

// expire reports, and counts, that the peer did not take the records left
// after hc finished by their deadline: the stack cuts the connection.
func (t *tlsConn) expire(hc *httpd.Conn, now time.Time) bool {
	if t.closeBy.IsZero() || now.Before(t.closeBy) || t.queued() == 0 || !hc.Deadline().IsZero() {
		return false
	}
	t.s.stats.Stalled++
	return true
}

// handshaking reports that the handshake has not finished (as far as the
// shard knows).
func (t *tlsConn) handshaking() bool { return !t.Established() && !t.Failed() }

// tlsHandshakeMax bounds what a peer may send during the handshake before
// the handshake reads it: a few records.
const tlsHandshakeMax = 256 << 10

// release: the stack is done with the connection. A handshake in progress
// fails at its next read and the helper's post is ignored.
func (t *tlsConn) release() {
	t.Release()
	t.held = nil
}

// feed decrypts the records in held and then in p into hc and returns how
// many bytes of p it took: all of them (a partial record waits in held), or
// fewer when hc pushes back (blocked). p nil: only what is buffered. Once
// the peer closed its side (eof), a partial record is a truncation.
//
// crypto/tls is handed one whole record at a time, so that it never asks
// its conn for bytes that are not there: each ask allocates a reader
// (readFromUntil), and one per record is the least it does.
//
// io.EOF: the peer sent close_notify, or closed at a record boundary;
// other errors: the connection is broken (crypto/tls queued its alert in
// out).
func (t *tlsConn) feed(hc *httpd.Conn, p []byte, now time.Time) (taken int, err error) {
	defer t.Feed(nil)
	if rest := t.Rest(); len(rest) > 0 {
		t.held = append(t.held, rest...) // sent after the peer's Finished
	}
	t.blocked = false
	for !hc.Closing() {
		if t.more { // plaintext of the last record that did not fit
			if err := t.read(hc, now); err != nil || t.blocked {
				return taken, err
			}
			continue
		}
		fromHeld := len(t.held) > 0
		rec, used := t.next(p[taken:])
		if fromHeld {
			taken += used // copied into held
			used = 0
		}
		if rec == nil {
			// No whole record: keep the rest of p.
			t.held = append(t.held, p[taken:]...)
			taken = len(p)
			if t.EOF() {
				t.Feed(t.held) // crypto/tls reports the truncation, or EOF
				return taken, t.read(hc, now)
			}
			return taken, nil
		}
		if len(hc.ReadBuf()) == 0 {
			t.blocked = true
			return taken, nil
		}
		taken += used
		t.Feed(rec)
		t.more = true
		err := t.read(hc, now)
		if len(t.held) > 0 {
			t.held = t.held[len(rec)-t.Unread():]
			if len(t.held) == 0 {
				t.held = t.held[:0:0] // nothing held: the array may go
			}
		}
		if err != nil || t.blocked {
			return taken, err
		}
	}
	taken = len(p) // closing: the rest is discarded
	return taken, nil
}

// tlsMaxRecord is the largest record crypto/tls accepts (RFC 8446 5.2:
// 2^14 plus 256 of expansion; TLS 1.2 allows 2048). A larger one is handed
// over at its header, for crypto/tls to refuse.
const tlsMaxRecord = 5 + 16384 + 2048

// next returns the next whole record (from held, completed from p, or from
// p itself) and how many bytes of p it took; nil when there is none yet.
func (t *tlsConn) next(p []byte) (rec []byte, used int) {
	if len(t.held) == 0 {
		if n := recordLen(p); n > 0 && len(p) >= n {
			return p[:n], n
		}
		return nil, 0
	}
	for {
		n := recordLen(t.held)
		if n > 0 && len(t.held) >= n {
			return t.held[:n], used
		}
		want := 5
		if n > 0 {
			want = n
		}
		k := min(want-len(t.held), len(p)-used)
		if k == 0 {
			return nil, used
		}
		t.held = append(t.held, p[used:used+k]...)
		used += k
	}
}

// recordLen is the length of the record b starts with, header included
// (capped at tlsMaxRecord+1), or 0 when b holds no whole header.
func recordLen(b []byte) int {
	if len(b) < 5 {
		return 0
	}
	return min(5+(int(b[3])<<8|int(b[4])), tlsMaxRecord+1)
}

// read reads plaintext out of crypto/tls into hc until the record in t.in
// is used up (more false) or hc pushes back (blocked).
func (t *tlsConn) read(hc *httpd.Conn, now time.Time) error {
	for !hc.Closing() {
		buf := hc.ReadBuf()
		if len(buf) == 0 {
			t.blocked = true
			return nil
		}
		n, err := t.Read(buf)
		if n > 0 {
			hc.Received(n, now)
		}
		switch {
		case err == nil && n == len(buf):
			continue // the record may hold more
		case err == nil:
			t.more = false
			return nil
		case err == io.EOF:
			t.more = false
			hc.PeerClosed(now)
			return err
		default:
			t.more = false
			t.s.stats.Cut++
			return err
		}
	}
	t.more = false
	return nil
}

// pump decrypts what is buffered and encrypts hc's output, for as long as
// hc was pushing back and encrypting its output lets it take more.
func (t *tlsConn) pump(hc *httpd.Conn, now time.Time) error {
	for {
		if _, err := t.feed(hc, nil, now); err != nil {
			return err
		}
		before := hc.Pending()
		if err := t.encrypt(hc); err != nil {
			return err
		}
		if !t.blocked || hc.Pending() == before {
			return nil
		}
	}
}

// encrypt seals hc's output into records in out, while out holds less than
// tlsOutMax; the plaintext is then done for hc (Advance). On posix the last
// record of the batch goes to the socket with out (Write). When hc is
// finished it writes close_notify after the last record.
func (t *tlsConn) encrypt(hc *httpd.Conn) error {
	for hc.Pending() > 0 && t.queued() < tlsOutMax {
		// A large slice is sealed where it lies, in whole records after
		// its odd start; small ones (headers, small files), and that
		// start if it is small, are gathered first, so that a response
		// takes few records and ends with a whole one.
		var p []byte
		stage := t.s.stage[:0]
		for _, b := range hc.Output() {
			if len(b) >= tlsBigHunk {
				odd := len(b) % tlsRecord
				switch {
				case len(stage) == 0 && odd == 0:
					p = b[:tlsRecord]
				case len(stage) == 0:
					p = b[:odd]
				case odd < tlsBigHunk && len(stage)+odd <= tlsRecord:
					stage = append(stage, b[:odd]...)
				}
				break
			}
			if len(stage)+len(b) > tlsRecord {
				break
			}
			stage = append(stage, b...)
		}
		if p == nil {
			p = stage
		}
		n, err := 0, error(nil)
		if t.sock != nil && (len(p) == hc.Pending() || t.queued()+len(p) >= tlsOutMax) {
			n, err = t.WriteLast(p, t.sock) // the batch's last record
		} else {
			n, err = t.Write(p)
		}
		hc.Advance(n)
		if err != nil {
			return err
		}
	}
	if (hc.Closing() || t.finish) && hc.Pending() == 0 && !t.notified {
		t.notified = true
		t.CloseNotify()
	}
	return nil
}

// queued is the ciphertext not yet sent or acknowledged.
func (t *tlsConn) queued() int { return len(t.Pending()) }
