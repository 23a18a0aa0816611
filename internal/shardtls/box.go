// Package shardtls runs crypto/tls over a shard's connections: the
// handshake off the shard, the record layer on it. percore's server and its
// load generator both use it, each on its own stacks.
//
// Go's crypto/tls is written for blocking connections. Each connection's
// handshake runs on a helper goroutine over an in-memory net.Conn: the shard
// stays the connection's only reader of the network and feeds the helper the
// bytes that arrive (FeedHandshake); the helper hands its flights and its
// verdict to the shard through the shard's mailbox (Box: a list under a
// lock and an eventfd in the shard's epoll, a message per flight). Once the
// handshake is done the shard drives the tls.Conn's record layer itself:
// reads return what the shard fed (and a temporary error when it is used
// up, which crypto/tls tolerates, keeping a partial record for the next
// feed), writes append to a ciphertext queue the shard sends from (Pending,
// Sent). The shard never blocks and no goroutine stays behind a handshake.
//
// The package knows no network stack and no protocol above TLS: it imports
// no percore package but shard.
package shardtls

import (
	"context"
	"crypto/tls"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"percore/shard"
)

// Owner is a connection's side of its TLS: told on the shard when the helper
// posted a flight or finished (the flight is then in Pending).
type Owner interface {
	TLSReady(now time.Time)
}

// Options are the role of a box's connections.
type Options struct {
	// Server: the handshakes are a server's; else a client's.
	Server bool
	// Timeout bounds each handshake, whose error is then
	// context.DeadlineExceeded; 0: no bound but Close.
	Timeout time.Duration
	// HandshakeMax bounds the peer's bytes waiting for the handshake to
	// read them: FeedHandshake refuses more. 0: no bound.
	HandshakeMax int
	// WholeRecords stops the handshake's reads at the end of each record,
	// so that crypto/tls ends the handshake holding no byte of the records
	// after it: all of them are in Rest, for a shard that hands crypto/tls
	// one whole record at a time.
	WholeRecords bool
	// OutBuf, if set, is the capacity of the ciphertext buffers the box
	// lends its connections: a connection whose queue empties gives its
	// buffer back, so an idle one holds none. 0: each connection keeps its
	// own, grown as it needs.
	OutBuf int
	// Done, if set, is called on the shard once per handshake, when the
	// shard collects its verdict (Conn.Err), before the owner is told and
	// even if the owner let go.
	Done func(c *Conn)
}

// Box is one shard's TLS: the mailbox the helpers post to, the helpers'
// lifetime, and the free ciphertext buffers. Owned by the shard, except
// box.
type Box struct {
	opt    Options
	ctx    context.Context // cancelled at Close: ends the handshakes in progress
	cancel context.CancelFunc
	wg     sync.WaitGroup // the helpers
	box    struct {
		sync.Mutex
		ready  []*Conn
		efd    int // written when ready turns non-empty (never read: edge-triggered); -1: none, or closed
		queued bool
	}
	taken  []*Conn  // the shard's copy of box.ready
	bufs   [][]byte // free ciphertext buffers (OutBuf)
	copied uint64   // ciphertext copied into the connections' queues
}

// NewBox makes a shard's mailbox and registers it on sh, whose loop then
// hands each connection what its helper posted. With sh nil the box has no
// eventfd and the caller calls Events itself (a test playing the shard).
func NewBox(sh *shard.Shard, o Options) (*Box, error) {
	b := &Box{opt: o}
	b.box.efd = -1
	if sh != nil {
		efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			return nil, err
		}
		// Edge-triggered: each write wakes the shard once, and the shard
		// need not read the counter back (2^64 writes would fill it).
		if err := sh.AddFD(efd, unix.EPOLLIN|unix.EPOLLET, sh.AddSource(b), 0); err != nil {
			unix.Close(efd)
			return nil, err
		}
		b.box.efd = efd
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

// Start begins the handshake of a new connection on a helper goroutine.
// fd, unless -1, is the connection's socket: the helper writes its flights
// to it itself while the socket takes them whole, saving the shard a
// wake-up and a write, and posts only its verdict; the owner must Release
// the connection before it closes fd.
func (b *Box) Start(owner Owner, conf *tls.Config, fd int) *Conn {
	c := &Conn{b: b, owner: owner, fd: fd}
	c.cond.L = &c.mu
	if b.opt.Server {
		c.tc = tls.Server((*wire)(c), conf)
	} else {
		c.tc = tls.Client((*wire)(c), conf)
	}
	b.wg.Add(1)
	go c.handshake()
	return c
}

// post queues c for the shard (from a helper) and wakes it.
func (b *Box) post(c *Conn) {
	b.box.Lock()
	defer b.box.Unlock()
	if c.posted {
		return
	}
	c.posted = true
	b.box.ready = append(b.box.ready, c)
	if !b.box.queued && b.box.efd >= 0 {
		b.box.queued = true
		one := [8]byte{1}
		unix.Write(b.box.efd, one[:])
	}
}

// Events implements shard.Source: the mailbox is taken, each connection's
// flight moved to its output, each finished handshake taken over, and the
// owners told.
func (b *Box) Events(_ []shard.Event, now time.Time) {
	b.box.Lock()
	b.taken, b.box.ready = b.box.ready, b.taken[:0]
	for _, c := range b.taken {
		c.posted = false
	}
	b.box.queued = false
	b.box.Unlock()
	for i, c := range b.taken {
		b.taken[i] = nil
		c.collect(now)
	}
}

// Close ends the handshakes in progress and closes the mailbox: helpers
// still running post to nothing. The shard calls it last, once its
// connections are released.
func (b *Box) Close() {
	b.cancel()
	b.box.Lock()
	if b.box.efd >= 0 {
		unix.Close(b.box.efd)
		b.box.efd = -1
	}
	b.box.Unlock()
}

// Wait waits for the helpers to end (after Close, they end soon).
func (b *Box) Wait() { b.wg.Wait() }

// Copied is the ciphertext copied into the connections' queues so far: what
// did not go from crypto/tls's buffer to a Sink straight.
func (b *Box) Copied() uint64 { return b.copied }
