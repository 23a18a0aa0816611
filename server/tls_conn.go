package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"percore/httpd"
	"percore/shard"
)

// TLS on a shard, the same for both stacks: the handshake off the shard, the
// record layer on it.
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
// its record layer itself, over tlsConn as an in-memory net.Conn: reads
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
//   - posix: records are copied into tlsConn's ciphertext buffer, except
//     the last one sealed before a write: that one goes from crypto/tls's
//     buffer straight into the socket, after the buffer, in one writev (a
//     record per write would cost more in system calls than its copy). So a
//     response of one record, up to 16 KiB, takes the one copy into the
//     socket that cleartext takes too, and a large one a copy more for 3 of
//     every 4 records.
//   - native: TCP sends from the app's buffers and resends from them until
//     they are acknowledged, so the record is copied out of crypto/tls's
//     buffer into tlsConn's, which TCP copies into transmit frames as it
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
	Refused     uint64 `stat:"drop"`  // connections refused: TLSMaxHandshakes in progress (native; posix leaves them in the backlog)
	Handshaking uint64 `stat:"gauge"` // handshakes in progress (helper goroutines)
	QueuedBytes uint64 `stat:"count"` // ciphertext copied into connections' queues (on posix, what did not go from crypto/tls's buffer to the socket straight)
}

// tlsOwner is the stack's side of a TLS connection: told on the shard when
// the helper wrote a flight or finished.
type tlsOwner interface {
	tlsReady(now time.Time)
}

// tlsShard is one shard's TLS state: the configuration, the mailbox the
// helpers post to, and the counters. Owned by the shard, except mailbox.
type tlsShard struct {
	conf    *tls.Config
	timeout time.Duration
	ctx     context.Context // cancelled at close: ends handshakes in progress
	cancel  context.CancelFunc
	running int // handshakes in progress
	stats   TLSStats
	box     struct {
		sync.Mutex
		ready  []*tlsConn
		efd    int // written when ready turns non-empty (never read: edge-triggered); -1 once closed
		queued bool
	}
	taken []*tlsConn // the shard's copy of box.ready
	stage []byte     // small plaintext slices gathered into one record (encrypt)
	bufs  [][]byte   // free ciphertext buffers
	// slotFree, if set, is called when a handshake ends and another may start.
	slotFree func()
}

func newTLSShard(sh *shard.Shard, conf *tls.Config, timeout time.Duration) (*tlsShard, error) {
	if timeout <= 0 {
		timeout = TLSHandshakeTimeout
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	s := &tlsShard{conf: conf, timeout: timeout, stage: make([]byte, 0, tlsRecord)}
	s.box.efd = efd
	s.ctx, s.cancel = context.WithCancel(context.Background())
	// Edge-triggered: each write wakes the shard once, and the shard need
	// not read the counter back (2^64 writes would fill it).
	if err := sh.AddFD(efd, unix.EPOLLIN|unix.EPOLLET, sh.AddSource(s), 0); err != nil {
		unix.Close(efd)
		return nil, err
	}
	return s, nil
}

// full reports that no handshake may start now.
func (s *tlsShard) full() bool { return s.running >= TLSMaxHandshakes }

// start begins the handshake of a new connection on a helper goroutine.
// sock is the posix connection, whose socket the helper writes its flights
// to and the shard its records; nil on the native stack.
func (s *tlsShard) start(owner tlsOwner, sock *posixConn) *tlsConn {
	t := &tlsConn{s: s, owner: owner, fd: -1, sock: sock}
	if sock != nil {
		t.fd = sock.fd
	}
	t.cond.L = &t.mu
	t.tc = tls.Server(t, s.conf)
	s.running++
	s.stats.Accepted++
	go t.handshake()
	return t
}

// post queues t for the shard (from a helper) and wakes it.
func (s *tlsShard) post(t *tlsConn) {
	s.box.Lock()
	defer s.box.Unlock()
	if t.posted {
		return
	}
	t.posted = true
	s.box.ready = append(s.box.ready, t)
	if !s.box.queued && s.box.efd >= 0 {
		s.box.queued = true
		one := [8]byte{1}
		write(s.box.efd, one[:])
	}
}

// Events takes the mailbox: each connection's flight goes out, each finished
// handshake is taken over or closed.
func (s *tlsShard) Events(_ []shard.Event, now time.Time) {
	s.box.Lock()
	s.taken, s.box.ready = s.box.ready, s.taken[:0]
	for _, t := range s.taken {
		t.posted = false
	}
	s.box.queued = false
	s.box.Unlock()
	for i, t := range s.taken {
		s.taken[i] = nil
		t.collect(now)
	}
}

// close ends the handshakes in progress and closes the mailbox: helpers
// still running post to nothing.
func (s *tlsShard) close() {
	s.cancel()
	s.box.Lock()
	if s.box.efd >= 0 {
		unix.Close(s.box.efd)
		s.box.efd = -1
	}
	s.box.Unlock()
}

func (s *tlsShard) report() TLSStats {
	st := s.stats
	st.Handshaking = uint64(s.running)
	return st
}

// tlsConn is the TLS side of one connection on a shard: the tls.Conn and the
// in-memory net.Conn beneath it. Until the shard takes it over (est), the
// fields under mu are shared with the helper; after that, everything is the
// shard's.
type tlsConn struct {
	s     *tlsShard
	owner tlsOwner // nil once the stack let go of the connection
	tc    *tls.Conn

	mu     sync.Mutex
	cond   sync.Cond
	hsIn   []byte // bytes from the peer the handshake has not read
	hsOut  []byte // flights the handshake wrote that the shard has not taken
	eof    bool   // the peer closed its side (the shard's alone once est)
	shut   bool   // the stack let go, or the handshake timed out: reads fail
	done   bool   // the handshake returned, with err
	err    error
	posted bool // in the mailbox (under the mailbox's lock)
	fd     int  // the socket, for the handshake's own writes (posix; -1: none)
	relay  bool // a flight went through the shard: the rest follow it
	hsHdr  [5]byte
	hsHdrN int // bytes of the current record's header read
	hsLeft int // bytes of the current record's body not yet read

	est      bool       // the shard took the connection over
	sock     *posixConn // posix: the last record of a batch goes to its socket straight; nil: native
	last     bool       // the record crypto/tls is sealing ends encrypt's batch
	in       []byte     // what decrypt is feeding crypto/tls
	held     []byte     // ciphertext fed but not yet decrypted (hc pushed back)
	out      []byte     // ciphertext written, out[outHead:] not yet sent (posix) or acknowledged (native)
	outHead  int
	more     bool // crypto/tls may hold plaintext of the last record
	blocked  bool // feed stopped because hc pushed back
	notified bool // close_notify written
	finish   bool // write close_notify once hc's output is sealed, though hc is not closing (a drain)
}

// handshake runs on the helper goroutine.
func (t *tlsConn) handshake() {
	ctx, cancel := context.WithTimeout(t.s.ctx, t.s.timeout)
	err := t.tc.HandshakeContext(ctx)
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		err = context.DeadlineExceeded
	}
	cancel()
	t.mu.Lock()
	t.done, t.err = true, err
	t.mu.Unlock()
	t.s.post(t)
}

// collect runs on the shard when t was posted: the flight the helper wrote
// moves into out, and a finished handshake is counted and, if it succeeded,
// taken over. Then the owner acts.
func (t *tlsConn) collect(now time.Time) {
	if t.est {
		return
	}
	t.mu.Lock()
	t.out = append(t.out, t.hsOut...)
	t.hsOut = t.hsOut[:0]
	done, err := t.done, t.err
	if done && len(t.hsIn) > 0 {
		t.held = append(t.held, t.hsIn...) // sent after the client's Finished
	}
	t.mu.Unlock()
	if done {
		t.s.running--
		if t.s.slotFree != nil {
			t.s.slotFree()
		}
		switch {
		case err == nil:
			t.s.stats.Handshakes++
			if t.tc.ConnectionState().DidResume {
				t.s.stats.Resumed++
			}
			t.est = true
		case errors.Is(err, context.DeadlineExceeded):
			t.s.stats.TimedOut++
		default:
			t.s.stats.Failed++
		}
	}
	if t.owner != nil {
		t.owner.tlsReady(now)
	}
}

// handshaking reports that the handshake has not finished (as far as the
// shard knows).
func (t *tlsConn) handshaking() bool { return !t.est && !t.failed() }

// failed reports a handshake that ended in error; the stack sends what is
// left in out (the alert) and closes.
func (t *tlsConn) failed() bool {
	if t.est {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done && t.err != nil
}

// tlsHandshakeMax bounds what a peer may send during the handshake before
// the handshake reads it: a few records.
const tlsHandshakeMax = 256 << 10

// feedHandshake gives the helper bytes from the peer (copied); false: the
// peer sent far more than a handshake needs.
func (t *tlsConn) feedHandshake(p []byte) bool {
	t.mu.Lock()
	ok := len(t.hsIn)+len(p) <= tlsHandshakeMax
	if ok {
		t.hsIn = append(t.hsIn, p...)
	}
	t.mu.Unlock()
	t.cond.Signal()
	return ok
}

// peerClosed tells the handshake the peer closed its side.
func (t *tlsConn) peerClosed() {
	t.mu.Lock()
	t.eof = true
	t.mu.Unlock()
	t.cond.Signal()
}

// release: the stack is done with the connection. A handshake in progress
// fails at its next read and the helper's post is ignored.
func (t *tlsConn) release() {
	t.owner = nil
	if !t.est {
		t.mu.Lock()
		t.shut = true
		t.mu.Unlock()
		t.cond.Signal()
	}
	if t.out != nil {
		t.s.bufs = append(t.s.bufs, t.out[:0])
	}
	t.in, t.held, t.out, t.outHead = nil, nil, nil, 0
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
	defer func() { t.in = nil }()
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
			if t.eof {
				t.in = t.held // crypto/tls reports the truncation, or EOF
				return taken, t.read(hc, now)
			}
			return taken, nil
		}
		if len(hc.ReadBuf()) == 0 {
			t.blocked = true
			return taken, nil
		}
		taken += used
		t.in = rec
		t.more = true
		err := t.read(hc, now)
		if len(t.held) > 0 {
			t.held = t.held[len(rec)-len(t.in):]
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
		n, err := t.tc.Read(buf)
		if n > 0 {
			hc.Received(n, now)
		}
		switch {
		case err == nil && n == len(buf):
			continue // the record may hold more
		case err == nil || err == errWouldBlock:
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
		t.last = len(p) == hc.Pending() || t.queued()+len(p) >= tlsOutMax
		n, err := t.tc.Write(p)
		t.last = false
		hc.Advance(n)
		if err != nil {
			return err
		}
	}
	if (hc.Closing() || t.finish) && hc.Pending() == 0 && !t.notified {
		t.notified = true
		t.tc.CloseWrite()
	}
	return nil
}

// queued is the ciphertext in out not yet sent or acknowledged.
func (t *tlsConn) queued() int { return len(t.out) - t.outHead }

// pending is the ciphertext in out not yet sent or acknowledged.
func (t *tlsConn) pending() []byte { return t.out[t.outHead:] }

// sent marks n bytes of pending as sent (posix) or acknowledged (native).
func (t *tlsConn) sent(n int) {
	t.outHead += n
	if t.outHead == len(t.out) && t.out != nil {
		t.s.bufs = append(t.s.bufs, t.out[:0]) // an idle connection holds none
		t.out, t.outHead = nil, 0
	}
}

// The in-memory net.Conn beneath tls.Conn.

func (t *tlsConn) Read(p []byte) (int, error) {
	if t.est {
		if len(t.in) == 0 {
			if t.eof {
				return 0, io.EOF
			}
			return 0, errWouldBlock
		}
		n := copy(p, t.in)
		t.in = t.in[n:]
		return n, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.hsIn) == 0 && !t.eof && !t.shut {
		t.cond.Wait()
	}
	if t.shut {
		return 0, net.ErrClosed
	}
	if len(t.hsIn) == 0 {
		return 0, io.EOF
	}
	// Never past the end of the current record: crypto/tls then ends the
	// handshake holding no bytes of the records after it, which the shard
	// hands over one whole record at a time (feed).
	n := min(len(p), len(t.hsIn))
	if t.hsLeft > 0 {
		n = min(n, t.hsLeft)
		t.hsLeft -= n
	} else {
		n = min(n, 5-t.hsHdrN)
		t.hsHdrN += copy(t.hsHdr[t.hsHdrN:], t.hsIn[:n])
		if t.hsHdrN == 5 {
			t.hsHdrN, t.hsLeft = 0, int(t.hsHdr[3])<<8|int(t.hsHdr[4])
		}
	}
	copy(p, t.hsIn[:n])
	t.hsIn = t.hsIn[:copy(t.hsIn, t.hsIn[n:])]
	return n, nil
}

func (t *tlsConn) Write(p []byte) (int, error) {
	if t.est {
		n := len(p)
		if t.last && t.sock != nil { // after what is queued, in one writev
			k, err := t.sock.sendRecord(p)
			if err != nil {
				return k, err
			}
			p = p[k:]
		}
		if len(p) > 0 {
			t.queue(p)
		}
		return n, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd >= 0 && !t.relay && !t.shut {
		// Straight to the socket, saving the shard a wake-up and a write;
		// under mu, so that the shard (release) cannot close fd meanwhile.
		n, _ := write(t.fd, p)
		if n == len(p) {
			return n, nil
		}
		p = p[max(n, 0):]
		t.relay = true // the rest, and every later flight, through the shard: in order
	}
	t.hsOut = append(t.hsOut, p...)
	t.s.post(t)
	return len(p), nil
}

// queue appends ciphertext to out, taking a free buffer if out has none.
func (t *tlsConn) queue(p []byte) {
	if t.out == nil {
		if k := len(t.s.bufs); k > 0 {
			t.out, t.s.bufs = t.s.bufs[k-1], t.s.bufs[:k-1]
		} else {
			t.out = make([]byte, 0, tlsOutMax+tlsOutMax/2)
		}
	}
	if t.outHead > 0 && len(t.out)+len(p) > cap(t.out) {
		t.out = t.out[:copy(t.out, t.out[t.outHead:])]
		t.outHead = 0
	}
	t.out = append(t.out, p...)
	t.s.stats.QueuedBytes += uint64(len(p))
}

// Close is crypto/tls cutting a handshake short (its context ended).
func (t *tlsConn) Close() error {
	t.mu.Lock()
	t.shut = true
	t.mu.Unlock()
	t.cond.Signal()
	return nil
}

func (t *tlsConn) LocalAddr() net.Addr              { return tlsAddr{} }
func (t *tlsConn) RemoteAddr() net.Addr             { return tlsAddr{} }
func (t *tlsConn) SetDeadline(time.Time) error      { return nil }
func (t *tlsConn) SetReadDeadline(time.Time) error  { return nil }
func (t *tlsConn) SetWriteDeadline(time.Time) error { return nil }

type tlsAddr struct{}

func (tlsAddr) Network() string { return "tcp" }
func (tlsAddr) String() string  { return "shard" }

// errWouldBlock is temporary, so crypto/tls keeps its connection usable.
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "would block" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }
