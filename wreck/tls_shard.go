package wreck

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"percore/shard"
)

// TLS on a client shard (the native client and the SPECweb99 client): the
// handshake off the shard, the record layer on it, as percore's server does
// it.
//
// Go's crypto/tls is written for blocking connections. Each connection's
// handshake runs on a helper goroutine over shardTLS, an in-memory net.Conn:
// the shard stays the connection's only reader and writer of the network,
// feeds the helper the bytes that arrive, and sends the flights the helper
// posts to the shard's mailbox (a list under a lock and an eventfd in the
// shard's epoll: a few messages per handshake). Once the handshake is done
// the shard drives the tls.Conn's record layer itself: reads return what the
// shard fed (and a temporary error when it is used up, which crypto/tls
// tolerates, keeping a partial record for the next feed), writes append to a
// ciphertext buffer the shard sends from. No goroutine stays behind a
// handshake.

// tlsOwner is a connection's side of its TLS: told on the shard when the
// helper posted a flight or finished.
type tlsOwner interface {
	tlsReady(now time.Time)
}

// tlsBox is one client shard's TLS: the mailbox the helpers post to, the
// scratch buffer records are decrypted into, and the helpers' lifetime.
// Owned by the shard, except box.
type tlsBox struct {
	ctx    context.Context // cancelled at close: ends handshakes in progress
	cancel context.CancelFunc
	wg     sync.WaitGroup // the helpers
	box    struct {
		sync.Mutex
		ready  []*shardTLS
		efd    int // written when ready turns non-empty; -1 once closed
		queued bool
	}
	taken []*shardTLS // the shard's copy of box.ready
	plain []byte      // decrypted bytes, valid until the next read
}

// tlsPlainBuf is the plaintext read out of crypto/tls at a time: a record's.
const tlsPlainBuf = 16 << 10

// newTLSBox registers a mailbox on sh.
func newTLSBox(sh *shard.Shard) (*tlsBox, error) {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	b := &tlsBox{plain: make([]byte, tlsPlainBuf)}
	b.box.efd = efd
	b.ctx, b.cancel = context.WithCancel(context.Background())
	if err := sh.AddFD(efd, unix.EPOLLIN, sh.AddSource(b), 0); err != nil {
		unix.Close(efd)
		return nil, err
	}
	return b, nil
}

// start begins the client handshake of a new connection on a helper
// goroutine.
func (b *tlsBox) start(owner tlsOwner, conf *tls.Config) *shardTLS {
	t := &shardTLS{b: b, owner: owner}
	t.cond.L = &t.mu
	t.tc = tls.Client(t, conf)
	b.wg.Add(1)
	go t.handshake()
	return t
}

// post queues t for the shard (from a helper) and wakes it.
func (b *tlsBox) post(t *shardTLS) {
	b.box.Lock()
	defer b.box.Unlock()
	if t.posted {
		return
	}
	t.posted = true
	b.box.ready = append(b.box.ready, t)
	if !b.box.queued && b.box.efd >= 0 {
		b.box.queued = true
		one := [8]byte{1}
		unix.Write(b.box.efd, one[:]) // EAGAIN: the counter is full, the shard wakes anyway
	}
}

// Events implements shard.Source: the mailbox is taken, each connection's
// flight moved to its output, each finished handshake taken over, and the
// owners told.
func (b *tlsBox) Events(_ []shard.Event, now time.Time) {
	var buf [8]byte
	unix.Read(b.box.efd, buf[:])
	b.box.Lock()
	b.taken, b.box.ready = b.box.ready, b.taken[:0]
	for _, t := range b.taken {
		t.posted = false
	}
	b.box.queued = false
	b.box.Unlock()
	for i, t := range b.taken {
		b.taken[i] = nil
		t.collect(now)
	}
}

// close ends the handshakes still in progress, waits for their helpers
// and closes the mailbox. The shard calls it last, once its connections
// are released.
func (b *tlsBox) close() {
	b.cancel()
	b.wg.Wait()
	b.box.Lock()
	if b.box.efd >= 0 {
		unix.Close(b.box.efd)
		b.box.efd = -1
	}
	b.box.Unlock()
}

// shardTLS is the TLS of one client connection on a shard: the tls.Conn
// and the in-memory net.Conn beneath it. Until the shard takes it over
// (est), the fields under mu are shared with the helper; after that,
// everything is the shard's.
type shardTLS struct {
	b     *tlsBox
	owner tlsOwner // nil once the connection let go
	tc    *tls.Conn

	mu     sync.Mutex
	cond   sync.Cond
	hsIn   []byte // bytes from the peer the handshake has not read
	hsOut  []byte // flights the handshake wrote that the shard has not taken
	eof    bool   // the peer closed its side (the shard's alone once est)
	shut   bool   // the connection let go: the handshake's reads fail
	done   bool   // the handshake returned, with err
	err    error
	posted bool // in the mailbox (under the mailbox's lock)

	est     bool   // the handshake succeeded and the shard took over
	rest    []byte // bytes the peer sent after the handshake's last, to read first
	in      []byte // the ciphertext read is feeding crypto/tls
	out     []byte // ciphertext written, out[outHead:] not yet sent
	outHead int
}

// handshake runs on the helper goroutine.
func (t *shardTLS) handshake() {
	defer t.b.wg.Done()
	err := t.tc.HandshakeContext(t.b.ctx)
	t.mu.Lock()
	t.done, t.err = true, err
	t.mu.Unlock()
	t.b.post(t)
}

// collect runs on the shard when t was posted: the flight the helper wrote
// moves into out, and a finished handshake is taken over. Then the owner
// acts.
func (t *shardTLS) collect(now time.Time) {
	if t.est || t.owner == nil {
		return
	}
	t.mu.Lock()
	t.out = append(t.out, t.hsOut...)
	t.hsOut = t.hsOut[:0]
	if t.done && t.err == nil {
		t.est = true
		t.rest, t.hsIn = t.hsIn, nil
	}
	t.mu.Unlock()
	t.owner.tlsReady(now)
}

// failed reports a handshake that ended in error (on the shard).
func (t *shardTLS) failed() bool {
	if t.est {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done && t.err != nil
}

// resumed reports that the handshake resumed a session.
func (t *shardTLS) resumed() bool { return t.tc.ConnectionState().DidResume }

// feedHandshake gives the helper bytes from the peer (copied).
func (t *shardTLS) feedHandshake(p []byte) {
	t.mu.Lock()
	t.hsIn = append(t.hsIn, p...)
	t.mu.Unlock()
	t.cond.Signal()
}

// peerClosed tells the connection the peer closed its side: the handshake
// fails, the record layer reports what it has then EOF.
func (t *shardTLS) peerClosed() {
	if t.est {
		t.eof = true
		return
	}
	t.mu.Lock()
	t.eof = true
	t.mu.Unlock()
	t.cond.Signal()
}

// release: the connection is done with t. A handshake in progress fails at
// its next read and the helper's post is ignored.
func (t *shardTLS) release() {
	t.owner = nil
	if !t.est {
		t.mu.Lock()
		t.shut = true
		t.mu.Unlock()
		t.cond.Signal()
	}
	t.in, t.rest, t.out, t.outHead = nil, nil, nil, 0
}

// takeRest returns what the peer sent after the handshake's last byte:
// the owner feeds it first.
func (t *shardTLS) takeRest() []byte {
	p := t.rest
	t.rest = nil
	return p
}

// feed makes p the ciphertext the next reads decrypt (p must stay valid
// until read reports it needs more).
func (t *shardTLS) feed(p []byte) { t.in = p }

// read returns the next plaintext decrypted from what was fed, valid until
// the next read; nil with a nil error when it needs more ciphertext. io.EOF:
// the peer's close_notify, or its close at a record boundary; other errors:
// the connection is broken (a bad or truncated record, an alert).
func (t *shardTLS) read() ([]byte, error) {
	n, err := t.readInto(t.b.plain)
	if n == 0 && err == nil {
		return nil, nil
	}
	return t.b.plain[:n], err
}

// readInto is read into p: the bytes read, 0 with a nil error when it needs
// more ciphertext.
func (t *shardTLS) readInto(p []byte) (int, error) {
	n, err := t.tc.Read(p)
	if err == errWouldBlock {
		err = nil
	}
	if n == 0 && err == nil {
		t.in = nil
	}
	return n, err
}

// write encrypts p into out.
func (t *shardTLS) write(p []byte) error {
	_, err := t.tc.Write(p)
	return err
}

// closeNotify queues close_notify after the output (established only).
func (t *shardTLS) closeNotify() {
	if t.est {
		t.tc.CloseWrite()
	}
}

// pending is the ciphertext in out not yet sent.
func (t *shardTLS) pending() []byte { return t.out[t.outHead:] }

// sent marks n bytes of pending as sent (or acknowledged).
func (t *shardTLS) sent(n int) {
	t.outHead += n
	if t.outHead == len(t.out) {
		t.out, t.outHead = t.out[:0], 0
	}
}

// The in-memory net.Conn beneath tls.Conn.

func (t *shardTLS) Read(p []byte) (int, error) {
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
	n := copy(p, t.hsIn)
	t.hsIn = t.hsIn[:copy(t.hsIn, t.hsIn[n:])]
	return n, nil
}

func (t *shardTLS) Write(p []byte) (int, error) {
	if t.est {
		if t.outHead > 0 && len(t.out)+len(p) > cap(t.out) {
			t.out = t.out[:copy(t.out, t.out[t.outHead:])]
			t.outHead = 0
		}
		t.out = append(t.out, p...)
		return len(p), nil
	}
	t.mu.Lock()
	t.hsOut = append(t.hsOut, p...)
	t.mu.Unlock()
	t.b.post(t)
	return len(p), nil
}

// Close is crypto/tls cutting a handshake short (its context ended).
func (t *shardTLS) Close() error {
	t.mu.Lock()
	t.shut = true
	t.mu.Unlock()
	t.cond.Signal()
	return nil
}

func (t *shardTLS) LocalAddr() net.Addr              { return tlsAddr{} }
func (t *shardTLS) RemoteAddr() net.Addr             { return tlsAddr{} }
func (t *shardTLS) SetDeadline(time.Time) error      { return nil }
func (t *shardTLS) SetReadDeadline(time.Time) error  { return nil }
func (t *shardTLS) SetWriteDeadline(time.Time) error { return nil }

type tlsAddr struct{}

func (tlsAddr) Network() string { return "tcp" }
func (tlsAddr) String() string  { return "shard" }

// errWouldBlock is temporary, so crypto/tls keeps its connection usable.
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "would block" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }
