package shardtls

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"percore/shard"
)

// The tests play both shards of a connection: a client box and a server
// box, each on a detached shard whose eventfd the test polls, moving the
// ciphertext one side queues (Pending) to the other (FeedHandshake or
// Feed).

// confs returns a server configuration with a fresh self-signed Ed25519
// certificate for "shard.test", and a client configuration that trusts it,
// both of TLS version v.
func confs(t testing.TB, v uint16) (server, client *tls.Config) {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "shard.test"},
		DNSNames:     []string{"shard.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: v, MaxVersion: v}
	client = &tls.Config{RootCAs: pool, ServerName: "shard.test", MinVersion: v, MaxVersion: v}
	return server, client
}

// owner counts what its connection told it.
type owner struct{ ready int }

func (o *owner) TLSReady(time.Time) { o.ready++ }

// box is a box on a detached shard of its own.
func box(t testing.TB, o Options) *Box {
	t.Helper()
	sh, err := shard.NewDetached(shard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBox(sh, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		b.Wait()
		sh.Close()
	})
	return b
}

// await blocks until a helper posted to one of boxes (the eventfd the
// shard's epoll watches turns readable), then collects every box's mailbox
// as the shard does.
func await(t testing.TB, boxes ...*Box) {
	t.Helper()
	fds := make([]unix.PollFd, len(boxes))
	for i, b := range boxes {
		fds[i] = unix.PollFd{Fd: int32(b.box.efd), Events: unix.POLLIN}
	}
	for {
		n, err := unix.Poll(fds, 10_000)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("no post reached a shard: %v", err)
		}
		break
	}
	var buf [8]byte
	for i, b := range boxes {
		if fds[i].Revents != 0 {
			unix.Read(b.box.efd, buf[:]) // the test's poll is level-triggered
		}
		b.Events(nil, time.Now())
	}
}

// carry moves what from queued to to, for its handshake or its record
// layer; it reports whether there was anything.
func carry(from, to *Conn) bool {
	p := from.Pending()
	if len(p) == 0 {
		return false
	}
	if to.Established() {
		to.rest = append(to.rest, p...) // read after what the handshake left
	} else {
		to.FeedHandshake(p)
	}
	from.Sent(len(p))
	return true
}

// pair shakes hands between a client and a server connection, each on its
// box, and returns them established.
func pair(t testing.TB, cb, sb *Box, cconf, sconf *tls.Config) (c, s *Conn, co, so *owner) {
	t.Helper()
	co, so = new(owner), new(owner)
	c, s = cb.Start(co, cconf, -1), sb.Start(so, sconf, -1)
	for !c.Established() || !s.Established() {
		if c.Failed() || s.Failed() {
			t.Fatalf("handshake: client %v, server %v", c.Err(), s.Err())
		}
		if !carry(c, s) && !carry(s, c) {
			await(t, cb, sb)
		}
	}
	return c, s, co, so
}

// drain reads what c's peer sent after the handshake (TLS 1.3 session
// tickets), which must come before any later record.
func drain(t testing.TB, c *Conn) {
	t.Helper()
	c.Feed(c.Rest())
	if got := readAll(t, c); len(got) != 0 {
		t.Fatalf("read %q before any was sent", got)
	}
}

// readAll reads what was fed to c, to the end of the plaintext there is.
func readAll(t testing.TB, c *Conn) []byte {
	t.Helper()
	var got []byte
	buf := make([]byte, 100)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if n == 0 {
			return got
		}
	}
}

// TestHandshake: the helpers' flights and verdicts reach the shards
// through their mailboxes, both sides take the connection over, the owners
// are told, and the server's Done counts the handshake once.
func TestHandshake(t *testing.T) {
	for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		t.Run(tls.VersionName(v), func(t *testing.T) {
			sconf, cconf := confs(t, v)
			var done []error
			sb := box(t, Options{Server: true, WholeRecords: true, Done: func(c *Conn) { done = append(done, c.Err()) }})
			cb := box(t, Options{})
			c, s, co, so := pair(t, cb, sb, cconf, sconf)
			if co.ready == 0 || so.ready == 0 {
				t.Errorf("owners told %d (client) and %d (server) times, want each at least once", co.ready, so.ready)
			}
			if len(done) != 1 || done[0] != nil {
				t.Errorf("Done saw %v, want one nil error", done)
			}
			if c.Resumed() || s.Resumed() {
				t.Error("a first handshake resumed")
			}
		})
	}
}

// TestRecords: records fed in pieces decrypt once whole, both ways, and
// close_notify reads as io.EOF.
func TestRecords(t *testing.T) {
	sconf, cconf := confs(t, tls.VersionTLS13)
	sb, cb := box(t, Options{Server: true, WholeRecords: true}), box(t, Options{})
	c, s, _, _ := pair(t, cb, sb, cconf, sconf)
	carry(s, c)
	drain(t, c)

	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	rec := append(s.Rest(), c.Pending()...)
	c.Sent(len(c.Pending()))
	half := len(rec) / 2
	s.Feed(rec[:half])
	if n, err := s.Read(make([]byte, 100)); n != 0 || err != nil || s.Unread() != 0 {
		t.Fatalf("half a record: read %d, %v, %d unread; want 0, nil, 0 (needs more)", n, err, s.Unread())
	}
	s.Feed(rec[half:])
	if got := readAll(t, s); string(got) != "hello" {
		t.Fatalf("server read %q, want hello", got)
	}

	if _, err := s.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	c.Feed(s.Pending())
	s.Sent(len(s.Pending()))
	if got := readAll(t, c); string(got) != "world" {
		t.Fatalf("client read %q, want world", got)
	}

	c.CloseNotify()
	s.Feed(c.Pending())
	if n, err := s.Read(make([]byte, 100)); n != 0 || err != io.EOF {
		t.Fatalf("after close_notify: read %d, %v; want 0, EOF", n, err)
	}
}

// TestWholeRecords: a record the client sends right behind its Finished is
// left whole in the server's Rest, not half read by crypto/tls.
func TestWholeRecords(t *testing.T) {
	sconf, cconf := confs(t, tls.VersionTLS13)
	sb, cb := box(t, Options{Server: true, WholeRecords: true}), box(t, Options{})
	co, so := new(owner), new(owner)
	c, s := cb.Start(co, cconf, -1), sb.Start(so, sconf, -1)
	for !carry(c, s) { // the ClientHello
		await(t, cb)
	}
	for !c.Established() { // the client's Finished stays queued
		if !carry(s, c) {
			await(t, cb, sb)
		}
	}
	if _, err := c.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	finished := append([]byte(nil), c.Pending()...) // the client's Finished, then the record
	c.Sent(len(c.Pending()))
	s.FeedHandshake(finished)
	for !s.Established() {
		if s.Failed() {
			t.Fatalf("server: %v", s.Err())
		}
		await(t, sb)
	}
	rest := s.Rest()
	if len(rest) < 5 || rest[0] != 23 || len(rest) != 5+(int(rest[3])<<8|int(rest[4])) {
		t.Fatalf("rest is %d bytes, want one whole application data record", len(rest))
	}
	s.Feed(rest)
	if got := readAll(t, s); string(got) != "request" {
		t.Fatalf("server read %q, want request", got)
	}
}

// TestWouldBlockAndEOF: the in-memory conn beneath an established
// connection reports would-block when what was fed is used up, io.EOF once
// the peer closed; a partial record then is a truncation.
func TestWouldBlockAndEOF(t *testing.T) {
	sconf, cconf := confs(t, tls.VersionTLS13)
	sb, cb := box(t, Options{Server: true, WholeRecords: true}), box(t, Options{})
	c, s, _, _ := pair(t, cb, sb, cconf, sconf)
	w := (*wire)(s)
	if _, err := w.Read(make([]byte, 10)); err != ErrWouldBlock {
		t.Fatalf("nothing fed: %v, want ErrWouldBlock", err)
	}
	var ne net.Error
	if !errors.As(ErrWouldBlock, &ne) || !ne.Timeout() {
		t.Fatal("ErrWouldBlock is not a temporary net.Error")
	}

	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	rec := append(s.Rest(), c.Pending()...)
	s.Feed(rec[:len(rec)-1])
	if n, err := s.Read(make([]byte, 10)); n != 0 || err != nil {
		t.Fatalf("a partial record: %d, %v; want 0, nil", n, err)
	}
	s.PeerClosed()
	if !s.EOF() {
		t.Fatal("EOF not reported after PeerClosed")
	}
	if _, err := s.Read(make([]byte, 10)); err == nil || err == io.EOF {
		t.Fatalf("a record cut by the peer's close: %v, want a truncation error", err)
	}

	// At a record boundary, the close is io.EOF.
	c2, s2, _, _ := pair(t, cb, sb, cconf, sconf)
	s2.Feed(s2.Rest())
	readAll(t, s2)
	s2.PeerClosed()
	if n, err := s2.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Fatalf("closed at a record boundary: %d, %v; want 0, EOF", n, err)
	}
	c2.Release()
}

// TestRelease: a connection let go mid-handshake fails its helper's next
// read, its owner is not told, and Done still counts it, once. A post
// collected after the verdict (the helper's last, racing the shard) counts
// nothing more.
func TestRelease(t *testing.T) {
	sconf, _ := confs(t, tls.VersionTLS13)
	done := 0
	sb := box(t, Options{Server: true, Done: func(*Conn) { done++ }})
	o := new(owner)
	s := sb.Start(o, sconf, -1)
	s.Release()
	for done == 0 {
		await(t, sb)
	}
	if o.ready != 0 || !errors.Is(s.Err(), net.ErrClosed) {
		t.Fatalf("owner told %d times, handshake error %v; want 0, net.ErrClosed", o.ready, s.Err())
	}
	sb.post(s)
	sb.Events(nil, time.Now())
	if done != 1 {
		t.Fatalf("Done called %d times, want once", done)
	}
}

// TestHandshakeLimits: FeedHandshake refuses input past HandshakeMax, and
// a handshake that outlasts Timeout fails with context.DeadlineExceeded.
func TestHandshakeLimits(t *testing.T) {
	sconf, _ := confs(t, tls.VersionTLS13)
	sb := box(t, Options{Server: true, HandshakeMax: 10, Timeout: time.Millisecond})
	s := sb.Start(new(owner), sconf, -1)
	if s.FeedHandshake(make([]byte, 11)) || !s.FeedHandshake([]byte{22, 3, 1}) {
		t.Fatal("HandshakeMax 10: took 11 bytes, or refused 3")
	}
	for !s.Failed() {
		await(t, sb)
	}
	if !errors.Is(s.Err(), context.DeadlineExceeded) {
		t.Fatalf("a handshake the client never finished: %v, want context.DeadlineExceeded", s.Err())
	}
}

// sink takes up to take bytes of each record.
type sink struct {
	c    *Conn
	take int
	got  []byte
}

func (k *sink) SendRecord(rec []byte) (int, error) {
	k.got = append(k.got, k.c.Pending()...)
	k.c.Sent(len(k.c.Pending()))
	n := min(k.take, len(rec))
	k.got = append(k.got, rec[:n]...)
	return n, nil
}

// TestQueue: with OutBuf, a connection whose queue empties gives its buffer
// back, and the next takes it; WriteLast sends records to a Sink straight
// and copies only what it did not take.
func TestQueue(t *testing.T) {
	sconf, cconf := confs(t, tls.VersionTLS13)
	const outBuf = 4 << 10
	sb, cb := box(t, Options{Server: true, OutBuf: outBuf}), box(t, Options{})
	c, s, _, _ := pair(t, cb, sb, cconf, sconf)
	carry(s, c)
	drain(t, c)
	free := len(sb.bufs)
	if s.out != nil || free == 0 {
		t.Fatalf("an idle connection holds a buffer (%d), the box has %d free", cap(s.out), free)
	}
	before := sb.Copied()
	if _, err := s.Write([]byte("queued")); err != nil {
		t.Fatal(err)
	}
	if len(sb.bufs) != free-1 || sb.Copied() == before {
		t.Fatalf("Write: %d free buffers of %d, %d copied; want a free one taken and the record counted", len(sb.bufs), free, sb.Copied()-before)
	}
	queued := append([]byte(nil), s.Pending()...)

	k := &sink{c: s, take: 1 << 20}
	before = sb.Copied()
	if _, err := s.WriteLast([]byte("direct"), k); err != nil {
		t.Fatal(err)
	}
	if sb.Copied() != before || len(s.Pending()) != 0 || !bytes.HasPrefix(k.got, queued) {
		t.Fatalf("a sink that takes everything: %d copied, %d pending", sb.Copied()-before, len(s.Pending()))
	}
	k.take = 3
	if _, err := s.WriteLast([]byte("partly"), k); err != nil {
		t.Fatal(err)
	}
	if len(s.Pending()) == 0 || sb.Copied()-before != uint64(len(s.Pending())) {
		t.Fatalf("a sink that takes 3 bytes: %d pending, %d copied; want the rest queued", len(s.Pending()), sb.Copied()-before)
	}
	c.Feed(append(k.got, s.Pending()...))
	if got := readAll(t, c); string(got) != "queueddirectpartly" {
		t.Fatalf("client read %q", got)
	}
	s.Release()
	if len(sb.bufs) != free {
		t.Fatalf("Release: %d free buffers, want the queue's back", len(sb.bufs))
	}
}
