package server

import (
	"crypto/tls"
	"io"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"percore/httpd"
	"percore/shard"
)

// PosixConfig configures one shard's posix stack.
type PosixConfig struct {
	Site *httpd.Site // shared, read-only
	Log  io.Writer   // access log (nil: none); receives whole batches from httpd
	// Linger is how long a finished connection, after its last response and a
	// shutdown of our side, keeps reading and discarding what the peer still
	// sends before it is closed. Closing at once with unread input would make
	// the kernel send a RST that can destroy the response in the peer's buffer.
	Linger time.Duration
	// TLS, when set, is the configuration for connections accepted on
	// TLSListener, a second listening socket (from ListenPosix; Posix owns it).
	TLS                 *tls.Config
	TLSListener         int
	TLSHandshakeTimeout time.Duration // 0: TLSHandshakeTimeout
}

const (
	maxIov          = 1024 // IOV_MAX
	acceptBatch     = 64   // accepts per listener event, so connections do not starve
	readsPerEvent   = 4    // reads per readable event, for the same reason
	lingerMaxBytes  = 64 << 10
	acceptPauseTime = 100 * time.Millisecond // after EMFILE/ENFILE
	listenerToken   = 0
)

// PosixStats are one shard's posix stack counters. Every drop has one.
type PosixStats struct {
	Accepted     uint64 `stat:"count"` // connections accepted
	Closed       uint64 `stat:"count"` // connections closed, any reason
	AcceptErrors uint64 `stat:"error"` // accept4 failures other than EAGAIN (EMFILE pauses accepting)
	ReadErrors   uint64 `stat:"error"` // connections dropped on a read error (ECONNRESET ...)
	WriteErrors  uint64 `stat:"error"` // connections dropped on a write error (EPIPE ...)
	Timeouts     uint64 `stat:"count"` // connections closed by the header or idle timeout
	Lingered     uint64 `stat:"count"` // connections closed after a lingering close
	LingerDrops  uint64 `stat:"drop"`  // lingering connections cut at the time or byte limit
	Forced       uint64 `stat:"count"` // connections force-closed at shutdown
	StaleEvents  uint64 `stat:"count"` // events for a connection already closed in the same batch
	Backpressure uint64 `stat:"count"` // times reading stopped because output was not draining
	BytesIn      uint64 `stat:"count"`
	BytesOut     uint64 `stat:"count"`
}

// Posix is one shard's posix stack: its SO_REUSEPORT listener, its connections
// and its httpd.Server, all driven by events from the shard's epoll. Owned by
// the shard; every method runs on the shard's goroutine.
type Posix struct {
	sh     *shard.Shard
	wheel  *shard.Wheel
	src    shard.SourceID
	lfd    int
	srv    *httpd.Server
	cfg    PosixConfig
	conns  []*posixConn // by slot; a slot's conn struct is reused
	free   []int32      // free slots
	open   int
	iov    []unix.Iovec // reused for every writev
	rsa    unix.RawSockaddrAny
	scrap  []byte // lingering reads land here
	tick   shard.Timer
	resume shard.Timer // re-enables accepting after EMFILE
	drain  bool
	now    time.Time // the time of the last event, for Close
	stats  PosixStats
	tls    *tlsListener // nil: no TLS listener
}

// NewPosix builds the posix stack for shard sh around the listening socket lfd
// (from ListenPosix; Posix owns it from now on; -1: none, TLS only) and
// registers it with the shard as a source, a stopper and a reporter. Call from
// the shard's setup.
func NewPosix(sh *shard.Shard, lfd int, cfg PosixConfig, now time.Time) (*Posix, error) {
	if cfg.Linger == 0 {
		cfg.Linger = time.Second
	}
	p := &Posix{
		sh:    sh,
		wheel: sh.Wheel(),
		lfd:   lfd,
		cfg:   cfg,
		srv:   httpd.NewServer(cfg.Site, cfg.Log),
		iov:   make([]unix.Iovec, maxIov),
		scrap: make([]byte, 16<<10),
		now:   now,
	}
	p.src = sh.AddSource(p)
	if lfd >= 0 {
		if err := sh.AddFD(lfd, unix.EPOLLIN, p.src, listenerToken); err != nil {
			return nil, err
		}
	}
	if cfg.TLS != nil {
		t, err := newTLSListener(p, cfg.TLSListener, cfg.TLS, cfg.TLSHandshakeTimeout)
		if err != nil {
			return nil, err
		}
		p.tls = t
	}
	sh.AddStopper(p)
	sh.AddReporter(p)
	// httpd's Date header and access-log flush, on whole seconds.
	p.tick.Init(p.onTick)
	p.srv.Tick(now)
	p.wheel.Start(&p.tick, now.Truncate(time.Second).Add(time.Second))
	p.resume.Init(p.onResume)
	return p, nil
}

func (p *Posix) onTick(now time.Time) {
	p.srv.Tick(now)
	p.wheel.Start(&p.tick, now.Truncate(time.Second).Add(time.Second))
}

// Server is the shard's HTTP responder (for its stats).
func (p *Posix) Server() *httpd.Server { return p.srv }

// Stats returns the stack's counters.
func (p *Posix) Stats() PosixStats { return p.stats }

// Open is the number of open connections.
func (p *Posix) Open() int { return p.open }

// Events handles one batch of the shard's epoll events for this stack.
func (p *Posix) Events(evs []shard.Event, now time.Time) {
	p.now = now
	for _, ev := range evs {
		if ev.Token == listenerToken {
			p.accept(now)
			continue
		}
		idx := int(uint32(ev.Token)) - 1
		c := p.conns[idx]
		if c.fd < 0 || c.gen != uint32(ev.Token>>32) {
			p.stats.StaleEvents++
			continue
		}
		c.event(ev.Events, now)
	}
}

func (p *Posix) accept(now time.Time) {
	if p.drain {
		return
	}
	for i := 0; i < acceptBatch; i++ {
		fd, err := accept4(p.lfd, &p.rsa, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			switch err {
			case unix.EAGAIN, unix.EINTR:
			case unix.ECONNABORTED:
				p.stats.AcceptErrors++
				continue
			case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
				// Out of descriptors or memory: the listener stays readable, so
				// stop watching it for a while instead of spinning on it.
				p.stats.AcceptErrors++
				p.sh.ModifyFD(p.lfd, 0, p.src, listenerToken)
				p.wheel.Start(&p.resume, now.Add(acceptPauseTime))
			default:
				p.stats.AcceptErrors++
			}
			return
		}
		p.stats.Accepted++
		p.serve(fd, rawAddrPort(&p.rsa), nil, now)
	}
}

// serve gives the connected socket fd, whose peer is remote, a connection slot
// and starts reading it; with ts set the connection is TLS, and its handshake
// starts on a helper.
func (p *Posix) serve(fd int, remote netip.AddrPort, ts *tlsShard, now time.Time) {
	c := p.slot()
	c.fd = fd
	c.hc = p.srv.NewConn(remote, now)
	c.hc.SetWaker(c)
	if ts != nil {
		c.tls = ts.start(c, c)
	}
	c.events = unix.EPOLLIN | unix.EPOLLRDHUP
	p.open++
	if err := p.sh.AddFD(fd, c.events, p.src, c.token()); err != nil {
		p.stats.AcceptErrors++
		c.close()
		return
	}
	c.armTimer(now)
}

func (p *Posix) onResume(time.Time) {
	if !p.drain {
		p.sh.ModifyFD(p.lfd, unix.EPOLLIN, p.src, listenerToken)
	}
}

// slot returns a free connection struct, growing the table when none is free.
func (p *Posix) slot() *posixConn {
	if n := len(p.free); n > 0 {
		idx := p.free[n-1]
		p.free = p.free[:n-1]
		return p.conns[idx]
	}
	c := &posixConn{p: p, idx: int32(len(p.conns)), fd: -1}
	c.timer.Init(c.expire)
	p.conns = append(p.conns, c)
	return c
}

// Drain stops accepting and lets every connection finish the responses it has
// queued; idle connections are closed now.
func (p *Posix) Drain(now time.Time) {
	p.drain = true
	if p.lfd >= 0 {
		unix.Close(p.lfd)
		p.lfd = -1
	}
	if p.tls != nil {
		p.tls.closeListener()
	}
	for _, c := range p.conns {
		if c.fd >= 0 && !c.lingering {
			c.settle(now)
		}
	}
}

// Drained reports that every connection is closed.
func (p *Posix) Drained() bool { return p.open == 0 }

// Close force-closes everything left and flushes the access log.
func (p *Posix) Close() {
	if p.lfd >= 0 {
		unix.Close(p.lfd)
		p.lfd = -1
	}
	if p.tls != nil {
		p.tls.close()
	}
	for _, c := range p.conns {
		if c.fd >= 0 {
			p.stats.Forced++
			c.close()
		}
	}
	p.wheel.Stop(&p.tick)
	p.wheel.Stop(&p.resume)
	p.srv.Tick(p.now)
}

// Report adds the stack's and its HTTP server's counters.
func (p *Posix) Report(r *shard.Report) {
	r.AddKind("posix.open", shard.Gauge, uint64(p.open))
	r.AddFields("posix.", p.stats)
	if p.tls != nil {
		r.AddFields("tls.", p.tls.ts.report())
	}
	addHTTP(r, p.srv.Stats())
}
