package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"percore/shard"
)

// TLS on the posix stack: one goroutine per TLS connection, off the shard.
//
// The shard accepts a TLS connection, makes a socketpair and serves its own end
// as an ordinary cleartext connection; a bridge goroutine owns the TCP socket
// and the other end, runs crypto/tls's handshake over the socket as a blocking
// net.Conn and then copies plaintext between the two. The kernel socketpair is
// both the in-memory pipe and the wakeup (its end sits in the shard's epoll), so
// the shard never blocks, never touches TLS state, and a flood of handshakes
// costs it one accept and one socketpair each: the handshake crypto runs on
// the Go scheduler's other threads.

// TLSStats are one shard's TLS counters. The bridge goroutines update them
// atomically (they are not on the shard); Report reads a snapshot.
type TLSStats struct {
	Accepted   uint64 `stat:"count"` // TLS connections accepted
	Handshakes uint64 `stat:"count"` // handshakes completed
	Resumed    uint64 `stat:"count"` // of those, resumed from a session ticket
	Failed     uint64 `stat:"drop"`  // handshakes failed: bad records, no shared protocol, a peer that closed (crypto/tls sent the alert)
	TimedOut   uint64 `stat:"drop"`  // handshakes cut by the handshake timeout
	Cut        uint64 `stat:"drop"`  // connections cut after the handshake: a bad, truncated or oversized record, a renegotiation attempt, a reset
	Errors     uint64 `stat:"error"` // connections not bridged: socketpair or descriptor failures
	Bridges    uint64 `stat:"gauge"` // bridge goroutines running
}

// TLSHandshakeTimeout bounds a TLS handshake, so that a client stopping in the
// middle of one holds a goroutine and two descriptors no longer.
const TLSHandshakeTimeout = 10 * time.Second

// tlsListener is a shard's TLS listening socket: a second source of the shard
// beside its Posix, whose connections it hands to the Posix after the bridge.
type tlsListener struct {
	p       *Posix
	lfd     int
	src     shard.SourceID
	conf    *tls.Config
	timeout time.Duration
	resume  shard.Timer     // re-enables accepting after EMFILE
	ctx     context.Context // cancelled at Close: ends handshakes in progress
	cancel  context.CancelFunc
	n       struct {
		accepted, handshakes, resumed, failed, timedOut, cut, errors, bridges atomic.Uint64
	}
}

func newTLSListener(p *Posix, lfd int, conf *tls.Config, timeout time.Duration) (*tlsListener, error) {
	if timeout <= 0 {
		timeout = TLSHandshakeTimeout
	}
	t := &tlsListener{p: p, lfd: lfd, conf: conf, timeout: timeout}
	t.ctx, t.cancel = context.WithCancel(context.Background())
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
		t.n.accepted.Add(1)
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.n.errors.Add(1)
			unix.Close(fd)
			continue
		}
		tcp, err1 := fileConn(fd)
		plain, err2 := fileConn(pair[1])
		if err1 != nil || err2 != nil {
			t.n.errors.Add(1)
			closeConns(tcp, plain)
			unix.Close(pair[0])
			continue
		}
		t.n.bridges.Add(1)
		go t.bridge(tcp.(*net.TCPConn), plain.(*net.UnixConn))
		p.serve(pair[0], rawAddrPort(&p.rsa), now)
	}
}

// fileConn makes a net.Conn of fd (the Go poller's, non-blocking underneath)
// and closes fd, which net.FileConn has duplicated.
func fileConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	return net.FileConn(f)
}

func closeConns(cs ...net.Conn) {
	for _, c := range cs {
		if c != nil {
			c.Close()
		}
	}
}

// bridge runs one TLS connection: the handshake, then plaintext both ways
// between tcp (through crypto/tls) and plain, the shard's socketpair end.
func (t *tlsListener) bridge(tcp *net.TCPConn, plain *net.UnixConn) {
	defer t.n.bridges.Add(^uint64(0))
	defer closeConns(tcp, plain)
	tc := tls.Server(tcp, t.conf)
	ctx, cancel := context.WithTimeout(t.ctx, t.timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			t.n.timedOut.Add(1)
		} else {
			t.n.failed.Add(1)
		}
		return
	}
	t.n.handshakes.Add(1)
	if tc.ConnectionState().DidResume {
		t.n.resumed.Add(1)
	}
	up := make(chan struct{})
	go func() { // requests: client -> shard
		defer close(up)
		_, err := io.Copy(plain, tc)
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, net.ErrClosed) {
			t.n.cut.Add(1) // crypto/tls sent the alert, if any
		}
		plain.CloseWrite() // the shard reads EOF
	}()
	// Responses: shard -> client. EOF means the shard shut its side down after
	// its last response: send close_notify and FIN, then give the client the
	// shard's linger time to close before cutting the upward copy.
	if _, err := io.Copy(tc, plain); err == nil {
		tc.CloseWrite()
		tcp.CloseWrite()
		tcp.SetReadDeadline(time.Now().Add(t.p.cfg.Linger))
	} else {
		tcp.Close()
		plain.Close()
	}
	<-up
}

func (t *tlsListener) onResume(time.Time) {
	if !t.p.drain && t.lfd >= 0 {
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

// close stops accepting and ends handshakes in progress; bridges past their
// handshake end when the shard closes its socketpair ends.
func (t *tlsListener) close() {
	t.closeListener()
	t.p.wheel.Stop(&t.resume)
	t.cancel()
}

func (t *tlsListener) stats() TLSStats {
	return TLSStats{
		Accepted:   t.n.accepted.Load(),
		Handshakes: t.n.handshakes.Load(),
		Resumed:    t.n.resumed.Load(),
		Failed:     t.n.failed.Load(),
		TimedOut:   t.n.timedOut.Load(),
		Cut:        t.n.cut.Load(),
		Errors:     t.n.errors.Load(),
		Bridges:    t.n.bridges.Load(),
	}
}
