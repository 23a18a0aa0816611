package server

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"percore/httpd"
)

// memTLS is a Go TLS client and a tlsConn joined in memory, the test
// playing the shard: the client's handshake bytes are fed to the helper and
// the flights it posts are handed to the client. Once the handshake is done
// the client's records are kept (records) for the test to feed.
type memTLS struct {
	s      *tlsShard
	t      *tlsConn
	client *tls.Conn
	peer   *memPeer
}

// newMemTLS completes a handshake of TLS version v and returns the tlsConn
// taken over, with no owner.
func newMemTLS(tb testing.TB, v uint16) *memTLS {
	tb.Helper()
	dir := tb.TempDir()
	certPath, keyPath, pool := testCertTB(tb, dir)
	conf, err := LoadTLS(TLSFiles{Cert: certPath, Key: keyPath})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := newTLSShard(nil, conf, 10*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.close)
	m := &memTLS{s: s, t: s.start(nil, nil)}
	pipe, other := net.Pipe()
	tb.Cleanup(func() { pipe.Close(); other.Close() })
	m.peer = &memPeer{Conn: pipe, t: m.t}
	m.peer.cond.L = &m.peer.mu
	m.client = tls.Client(m.peer, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: v, MaxVersion: v})
	done := make(chan error, 1)
	go func() { done <- m.client.Handshake() }()
	var clientErr error
	clientDone := false
	for deadline := time.Now().Add(10 * time.Second); !clientDone || m.t.handshaking(); {
		if time.Now().After(deadline) {
			tb.Fatal("handshake did not finish")
		}
		s.box.Events(nil, time.Now()) // collects what the helper posted
		if p := m.t.Pending(); len(p) > 0 {
			m.peer.give(p)
			m.t.Sent(len(p))
		}
		select {
		case clientErr = <-done:
			clientDone = true
		case <-time.After(time.Millisecond):
		}
	}
	if clientErr != nil || m.t.Failed() {
		tb.Fatalf("handshake: client %v, server %v", clientErr, m.t.Err())
	}
	m.peer.keep = true
	return m
}

// seal returns the records the client writes for p.
func (m *memTLS) seal(tb testing.TB, p []byte) []byte {
	m.peer.records = m.peer.records[:0]
	if _, err := m.client.Write(p); err != nil {
		tb.Fatal(err)
	}
	return m.peer.recorded()
}

// memPeer is the client's net.Conn: reads return what the shard gave it,
// writes go to the handshake, or, once keep is set, into records. The rest
// of net.Conn (deadlines, addresses) is a pipe's that carries nothing.
type memPeer struct {
	net.Conn
	t       *tlsConn
	mu      sync.Mutex
	cond    sync.Cond
	in      []byte
	keep    bool
	records []byte
}

func (p *memPeer) give(b []byte) {
	p.mu.Lock()
	p.in = append(p.in, b...)
	p.mu.Unlock()
	p.cond.Signal()
}

func (p *memPeer) recorded() []byte { return append([]byte(nil), p.records...) }

func (p *memPeer) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.in) == 0 {
		p.cond.Wait()
	}
	n := copy(b, p.in)
	p.in = p.in[n:]
	return n, nil
}

func (p *memPeer) Write(b []byte) (int, error) {
	if p.keep {
		p.records = append(p.records, b...)
		return len(b), nil
	}
	p.t.FeedHandshake(append([]byte(nil), b...))
	return len(b), nil
}

// memHTTP is an httpd connection serving files from a fresh docroot.
func memHTTP(tb testing.TB, files map[string][]byte) *httpd.Conn {
	tb.Helper()
	dir := tb.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	site, err := httpd.NewSite(httpd.Config{Docroot: dir, MaxBody: 1 << 20, HeaderTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httpd.NewServer(site, nil)
	now := time.Now()
	srv.Tick(now)
	return srv.NewConn(netip.MustParseAddrPort("198.18.0.2:40000"), now)
}

// TestNativeTLSShutdownCloses: while the shard drains, close_notify follows
// the last response; a request that arrives after it, with the client's
// close_notify, can no longer be answered (crypto/tls refuses to seal after
// close_notify), so the connection must close rather than wait forever for
// its response to be sent.
func TestNativeTLSShutdownCloses(t *testing.T) {
	m := newMemTLS(t, tls.VersionTLS13)
	c := &nativeConn{hc: memHTTP(t, map[string][]byte{"f.txt": []byte("file\n")}), tls: &nativeTLS{tlsConn: m.t}}
	c.tlsDrain()
	if !m.t.notified {
		t.Fatal("drain: no close_notify")
	}
	in := m.seal(t, []byte("GET /f.txt HTTP/1.1\r\nHost: x\r\n\r\n"))
	m.peer.records = m.peer.records[:0]
	if err := m.client.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	in = append(in, m.peer.recorded()...)
	now := time.Now()
	if n := c.Feed(in, now); n != len(in) {
		t.Fatalf("fed %d of %d bytes", n, len(in))
	}
	if !c.Closing() {
		t.Fatalf("not closing: %d bytes of response that can never be sealed, broken %v", c.hc.Pending(), c.tls.broken)
	}
}

// TestTLSPosixRecords sends static responses of many sizes, one record
// and many, through the posix record layer into a socket whose buffer is
// small, so that writes come back short and records wait in the queue
// behind others, and checks that the client decrypts every response whole
// and in order, for TLS 1.3 and 1.2.
func TestTLSPosixRecords(t *testing.T) {
	sizes := []int{0, 1, 1000, 4095, 4096, 16384, 16385, 16384 + 4095, 16384 + 4096, 65536 + 157, 3 << 18}
	files := map[string][]byte{}
	for i, n := range sizes {
		files[fmt.Sprintf("%d.bin", n)] = bytes.Repeat([]byte{byte('a' + i)}, n)
	}
	for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		t.Run(tls.VersionName(v), func(t *testing.T) {
			m := newMemTLS(t, v)
			m.peer.give(m.t.Pending()) // the session tickets, if any
			m.t.Sent(len(m.t.Pending()))
			hc := memHTTP(t, files)
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			must(t, err)
			defer unix.Close(fds[0])
			defer unix.Close(fds[1])
			must(t, unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 8<<10))
			c := &posixConn{p: &Posix{iov: make([]unix.Iovec, maxIov)}, fd: fds[0], hc: hc, tls: m.t}
			m.t.sock = c
			br := bufio.NewReader(m.client)
			buf := make([]byte, 64<<10)
			for round := 0; round < 2; round++ {
				for _, n := range sizes {
					hc.Feed([]byte(fmt.Sprintf("GET /%d.bin HTTP/1.1\r\nHost: x\r\n\r\n", n)), time.Now())
					// The shard's loop: flush, and flush again once the
					// peer read (EPOLLOUT), until all is written.
					got := make(chan error, 1)
					go func() {
						resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
						if err == nil {
							var body []byte
							body, err = io.ReadAll(resp.Body)
							if err == nil && !bytes.Equal(body, files[fmt.Sprintf("%d.bin", n)]) {
								err = fmt.Errorf("body of %d bytes differs", len(body))
							}
						}
						got <- err
					}()
					for deadline := time.Now().Add(10 * time.Second); hc.Pending()+c.pending() > 0; {
						if time.Now().After(deadline) {
							t.Fatalf("%d bytes: %d left to write", n, hc.Pending()+c.pending())
						}
						c.flushTLS()
						if c.broken {
							t.Fatalf("%d bytes: broken", n)
						}
						for {
							k, err := read(fds[1], buf)
							if err != nil {
								break
							}
							m.peer.give(buf[:k])
						}
					}
					select {
					case err := <-got:
						if err != nil {
							t.Fatalf("%d bytes, round %d: %v", n, round, err)
						}
					case <-time.After(10 * time.Second):
						t.Fatalf("%d bytes, round %d: the client read no whole response", n, round)
					}
				}
			}
			if m.s.report().QueuedBytes == 0 {
				t.Fatal("no record waited in the queue: the socket took everything, the test shows nothing")
			}
		})
	}
}
