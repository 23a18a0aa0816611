package netstack

import (
	"errors"
	"net/netip"
	"reflect"
	"time"
)

// TCPApp is the application end of one TCP connection: the HTTP connection of
// the native httpd (httpd.Conn has exactly these methods) or a load generator's
// client. The TCP layer calls it once per segment batch of a connection, not
// per byte; an interface call there costs a few ns against a segment's
// hundreds, and it lets server and client sit on the same TCP code.
//
// Bytes in: Feed copies from p (the frame, or the reassembly buffer) and
// returns how many it took; fewer means back-pressure, and TCP keeps the rest
// and shrinks the advertised window. Bytes out: Output returns the unsent and
// unacknowledged bytes as immutable slices whose offset 0 is SND.UNA; TCP cuts
// segments from them (one copy, into the tx frame), keeps them for
// retransmission and calls Advance with the bytes newly acknowledged. Closing
// makes TCP send FIN once Output is fully sent; PeerClosed reports the peer's
// FIN after every byte before it was fed.
type TCPApp interface {
	Feed(p []byte, now time.Time) int
	Output() [][]byte
	Advance(n int)
	Closing() bool
	PeerClosed(now time.Time)
}

// TCPAppTimer is optional for a TCPApp: an app with timeouts of its own
// (httpd's header and idle timeouts; httpd.Conn has these methods). TCP reads
// Deadline after each segment batch it handles for the connection and calls
// Expire once it has passed. An app that expired reports Closing and has
// dropped its output (httpd's contract): TCP sends FIN when nothing was in
// flight, and aborts with RST otherwise. After Expire reported true, TCP
// calls neither method again.
type TCPAppTimer interface {
	Deadline() time.Time
	Expire(now time.Time) bool
}

// TCPEndpoint creates and releases the apps of a listener (or of the
// connections a client opens). It is set up once, not called per segment.
type TCPEndpoint interface {
	// Accept returns the app for a connection that just completed its
	// handshake, or nil to refuse it (the peer gets a RST). h is the
	// connection's handle, for WakeTCP and AbortTCP outside a segment.
	Accept(remote netip.AddrPort, h TCPHandle, now time.Time) TCPApp
	// Release is called once when the connection is gone (closed, reset or
	// timed out, or in TIME_WAIT); app is not used by TCP afterwards.
	Release(app TCPApp, now time.Time)
}

// tcpSink is where the layer's segments go: the IPv4 tx path of a Stack, a
// collector in tests. The layer asks for a buffer, writes the finished
// segment (checksum included) into it and hands it back, so payload bytes are
// copied once, from the app's output into the frame.
type tcpSink interface {
	// tcpBuf returns a buffer of at least n bytes for a segment from laddr to
	// raddr, or nil when no tx frame is free (the segment is dropped and
	// counted; retransmission covers it).
	tcpBuf(raddr, laddr uint32, n int) []byte
	// tcpSend submits the first n bytes of the buffer tcpBuf last returned.
	tcpSend(n int)
}

// TCPConfig sets up one shard's TCP layer. Zero fields take the defaults noted.
type TCPConfig struct {
	Addr       IPv4Addr   // our IPv4 address (source of active opens)
	Aliases    []IPv4Addr // more sources of active opens, each taken when the one before has no port free
	MaxConns   int        // connections in all states; default 4096. Beyond it the oldest TIME-WAIT is recycled, else the SYN is dropped and counted
	SynBacklog int        // SYN_RECEIVED entries before SYN cookies; default MaxConns/4
	MSS        uint16     // MSS we announce (MTU-40); default 1460
	RcvBuf     int        // receive window and reassembly buffer per connection; default 64 KiB, at most 1 GiB
	RcvBufs    int        // buffers in the shard's pool (lent only while a connection holds bytes); default MaxConns
	Seed       uint64     // keys the ISN, SYN cookies and table hash; random in production, fixed in tests

	TrustChecksum bool // skip verifying the TCP checksum (the NIC did)
	NoTimestamps  bool // do not negotiate RFC 7323 timestamps
	NoSACK        bool // do not negotiate SACK
	NoWScale      bool // do not negotiate window scaling

	CC CongestionControl // congestion control of every connection; default CUBIC

	// Budget is the shard's memory budget that receive buffers are charged
	// to, shared with the shard's other stacks and its apps; nil: none
	// (tcp_mem.go says what pressure changes).
	Budget *MemBudget

	RTOInitial   time.Duration // default 1 s (RFC 6298 2.1)
	RTOMin       time.Duration // default 200 ms (Linux; RFC 6298 says 1 s)
	RTOMax       time.Duration // default 60 s
	Retries      int           // RTOs in a row before abort; default 8
	SynRetries   int           // SYN / SYN-ACK retransmissions; default 5
	DelayedAck   time.Duration // default 40 ms
	TimeWait     time.Duration // 2MSL; default 60 s
	FinWait2     time.Duration // orphaned FIN_WAIT_2 timeout; default 60 s
	KeepIdle     time.Duration // keep-alive after this much silence; 0: off
	KeepInterval time.Duration // between keep-alive probes; default 10 s
	KeepCount    int           // unanswered probes before abort; default 5

	// Ephemeral port range for Connect (default 32768-60999) and a filter that
	// keeps only ports whose RSS queue is this shard's (nil: all).
	PortLo, PortHi uint16
	PortFilter     func(port uint16) bool
}

func (c *TCPConfig) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 4096
	}
	if c.SynBacklog <= 0 {
		c.SynBacklog = max(c.MaxConns/4, 1)
	}
	if c.MSS == 0 {
		c.MSS = 1460
	}
	if c.RcvBuf <= 0 {
		c.RcvBuf = 64 << 10
	}
	c.RcvBuf = min(c.RcvBuf, 1<<30)
	if c.RcvBufs <= 0 {
		c.RcvBufs = c.MaxConns
	}
	def(&c.RTOInitial, time.Second)
	def(&c.RTOMin, 200*time.Millisecond)
	def(&c.RTOMax, 60*time.Second)
	def(&c.DelayedAck, 40*time.Millisecond)
	def(&c.TimeWait, 60*time.Second)
	def(&c.FinWait2, 60*time.Second)
	def(&c.KeepInterval, 10*time.Second)
	if c.Retries <= 0 {
		c.Retries = 8
	}
	if c.SynRetries <= 0 {
		c.SynRetries = 5
	}
	if c.KeepCount <= 0 {
		c.KeepCount = 5
	}
	if c.PortLo == 0 || c.PortHi < c.PortLo {
		c.PortLo, c.PortHi = 32768, 60999
	}
}

// TCPStats are one shard's TCP counters. Every dropped segment is counted in
// exactly one of the *Drop counters or answered by a counted RST or ACK. Each
// field's stat tag says what it counts (count, drop, error or gauge) for reports.
type TCPStats struct {
	InSegs, OutSegs uint64 `stat:"count"`
	Retransmits     uint64 `stat:"count"` // data, SYN, SYN-ACK or FIN segments sent again

	HeaderDrop   uint64 `stat:"drop"` // truncated header or bad data offset
	ChecksumDrop uint64 `stat:"drop"`
	OptionDrop   uint64 `stat:"drop"`  // malformed options
	NoPortRST    uint64 `stat:"count"` // segment to a port nobody listens on, answered by RST
	NoConnDrop   uint64 `stat:"drop"`  // segment for no connection that gets no RST (a RST itself, or a stray SYN-ACK)
	TableFull    uint64 `stat:"drop"`  // SYN dropped: MaxConns reached
	SynShed      uint64 `stat:"drop"`  // SYN dropped while the link ran short of frames (ShedSYNs): the client sends it again
	TxNoBuf      uint64 `stat:"drop"`  // segment not sent: no tx frame
	TxRetries    uint64 `stat:"count"` // connections queued to send again at the next poll after TxNoBuf
	FlightsHeld  uint64 `stat:"count"` // connections that waited for flight credit before sending new data (Stack.FlightCredit)
	HeldPolls    uint64 `stat:"count"` // polls that left connections waiting for flight credit
	HeldOverdue  uint64 `stat:"count"` // held connections let go without credit after maxHold

	PassiveOpens, ActiveOpens uint64 `stat:"count"`
	AcceptRefused             uint64 `stat:"count"` // Accept returned nil: RST
	SynCookiesSent            uint64 `stat:"count"`
	SynCookiesOK              uint64 `stat:"count"`
	SynCookiesBad             uint64 `stat:"count"` // ACK to a listener with no valid cookie: RST
	SynCookiesNoOverflow      uint64 `stat:"count"` // ACK to a listener while no cookie can be valid (no recent backlog overflow): RST
	MSSClamped                uint64 `stat:"count"` // peer MSS option below tcpMinSndMSS, raised to it
	PMTUDecreases             uint64 `stat:"count"` // "fragmentation needed" that lowered a connection's MSS (RFC 1191)
	PMTUOutOfWindow           uint64 `stat:"drop"`  // ... whose quoted sequence number is not in flight (RFC 5927 §5.2): ignored
	PMTUIgnored               uint64 `stat:"count"` // ... for a connection in the handshake, or no lower than its MSS
	PMTUNoConn                uint64 `stat:"drop"`  // ... for no connection of the shard's stacks
	PMTUCached                uint64 `stat:"count"` // connections that opened at a path MTU learned by an earlier one (pmtu.go)
	SynRcvdTimeout            uint64 `stat:"count"` // SYN-ACK retries exhausted
	SynSentTimeout            uint64 `stat:"count"` // SYN retries exhausted

	OutOfWindow    uint64 `stat:"count"` // unacceptable segment, answered by ACK (RFC 9293 3.10.7.4)
	ChallengeACKs  uint64 `stat:"count"` // RFC 5961 challenge ACKs sent
	ChallengeLimit uint64 `stat:"drop"`  // challenge ACKs suppressed by the rate limit
	OOWAckLimit    uint64 `stat:"drop"`  // ACKs for unacceptable segments without data suppressed (500 ms per connection)
	AckTooNew      uint64 `stat:"count"` // ACK for data not sent: ACK back, drop
	AckTooOld      uint64 `stat:"count"` // ACK older than SND.UNA-MAX.SND.WND: challenge, drop
	ResetsIn       uint64 `stat:"count"` // acceptable RSTs that closed a connection
	TimeWaitRST    uint64 `stat:"drop"`  // RSTs in TIME-WAIT, ignored (RFC 1337)
	ResetsOut      uint64 `stat:"count"`
	PAWSDrop       uint64 `stat:"drop"`  // RFC 7323 PAWS rejected
	DisorderedAcks uint64 `stat:"count"` // pure duplicate ACKs that failed PAWS only by arriving late, taken (Linux tcp_disordered_ack)
	NoAckDrop      uint64 `stat:"drop"`  // segment without ACK in a synchronized state

	OOOSegs         uint64 `stat:"count"` // out-of-order segments queued
	OOODrop         uint64 `stat:"drop"`  // out-of-order segments not queued (range table or buffer pool full)
	OOOFull         uint64 `stat:"count"` // of OOODrop: the range table was full and the segment joined no range
	FinBeyondWindow uint64 `stat:"drop"`  // FINs of segments trimmed at the window's right edge, not taken
	RcvBufEmpty     uint64 `stat:"count"` // bytes refused because the buffer pool was empty
	DupSegs         uint64 `stat:"count"` // segments entirely duplicate
	AfterFinDrop    uint64 `stat:"drop"`  // text beyond the peer's FIN, ignored (RFC 9293 step seven)

	// Memory pressure (tcp_mem.go)
	MemWindowClamped uint64 `stat:"count"` // windows advertised smaller than the buffer allows: the budget is under pressure or frames are short
	MemRcvBufRefused uint64 `stat:"drop"`  // receive buffers refused at the budget's limit: the segment was dropped (never SACKed)
	MemRcvBufDropped uint64 `stat:"count"` // receive buffers given back to the budget instead of pooled, under pressure
	MemSynCookies    uint64 `stat:"count"` // SYNs answered with a cookie under pressure, the backlog not full
	MemSynShed       uint64 `stat:"drop"`  // SYNs dropped with the budget spent

	RTOTimeouts      uint64 `stat:"count"`
	RTOAborts        uint64 `stat:"count"` // Retries exhausted: RST
	FastRetransmits  uint64 `stat:"count"`
	LostRetransmits  uint64 `stat:"count"` // retransmissions found lost by SACK and sent again without an RTO
	TailLossProbes   uint64 `stat:"count"` // RFC 8985 probes sent
	RecoveryProbes   uint64 `stat:"count"` // SND.UNA's retransmission sent again after 2*SRTT without an ACK in recovery
	SACKSkipped      uint64 `stat:"count"` // bytes not retransmitted because SACKed
	SACKCleared      uint64 `stat:"count"` // RTOs that cleared a SACK scoreboard (RFC 6675 §5.1)
	RACKLost         uint64 `stat:"count"` // segments RACK found lost by time (RFC 8985 §6.2)
	RACKRecoveries   uint64 `stat:"count"` // recoveries RACK entered before a duplicate-ACK threshold
	HyStartCSS       uint64 `stat:"count"` // slow starts slowed to Conservative Slow Start by a rising RTT (RFC 9406)
	HyStartExits     uint64 `stat:"count"` // slow starts HyStart++ ended before any loss
	ReorderTimeouts  uint64 `stat:"count"` // RACK reorder timer expiries (RFC 8985 §6.3)
	DSACKsIn         uint64 `stat:"count"` // D-SACK blocks received (RFC 2883)
	DSACKsOut        uint64 `stat:"count"` // D-SACK blocks sent for duplicate data (RFC 2883)
	Reductions       uint64 `stat:"count"` // congestion window reductions that can be undone: recoveries and first RTOs
	SpuriousUndos    uint64 `stat:"count"` // reductions undone: every retransmission of the episode D-SACKed (RFC 3708) or, of these, EifelUndos
	EifelUndos       uint64 `stat:"count"` // of SpuriousUndos: the ACK echoed a timestamp from before the first retransmission (RFC 3522)
	PartialUndos     uint64 `stat:"count"` // of SpuriousUndos: a partial ACK in recovery answered originals and no retransmission was out (Linux's TCPPartialUndo)
	FRTOUndos        uint64 `stat:"count"` // of SpuriousUndos: timeouts F-RTO found spurious (RFC 5682), for peers without timestamps
	PersistProbes    uint64 `stat:"count"`
	KeepProbes       uint64 `stat:"count"`
	KeepAborts       uint64 `stat:"count"`
	FinWait2Timeout  uint64 `stat:"count"`
	DelayedAcks      uint64 `stat:"count"` // ACKs sent by the delayed-ACK timer
	AppTimeouts      uint64 `stat:"count"` // TCPAppTimer expiries: FIN when idle, else RST
	TimeWaitDone     uint64 `stat:"count"`
	TimeWaitReopened uint64 `stat:"count"` // of TimeWaitDone: a new SYN on the 4-tuple ended it and opened a connection (RFC 6191)
	TimeWaitRecycled uint64 `stat:"count"` // TIME-WAIT connections closed early: table full, or the port reused by Connect

	Conns, SynRcvd, TimeWaits int `stat:"gauge"` // connections now: all, in SYN-RCVD, in TIME-WAIT
	RcvBufsUsed               int `stat:"gauge"` // reassembly buffers lent to connections
	RcvBufBytes               int `stat:"gauge"` // bytes of the reassembly buffers made, lent or pooled
	TxRingsUsed               int `stat:"gauge"` // RACK transmit-time rings lent to connections with data in flight
}

// tcpListener is one listening port.
type tcpListener struct {
	port uint16
	ep   TCPEndpoint
}

// tcpLayer is one shard's TCP: listeners, the connection table, timers and
// buffers. Owned by one shard; not safe for concurrent use. It reads no
// clock: every entry point takes now.
type tcpLayer struct {
	cfg   TCPConfig
	sec   tcpSecrets
	sink  tcpSink
	epoch time.Time // time 0 of the layer's int64 nanosecond clock
	now   int64     // ns since epoch, of the current entry point
	// rxAt is when the segment being handled arrived, on the same
	// clock: its link's receive time, if any, else now. RACK asks it
	// which transmission an ACK answers (rackDelivered); everything else
	// keeps now.
	rxAt int64
	nowT time.Time // the same as a time.Time, for apps

	listeners []tcpListener
	table     tcpTable
	twHead    int32 // oldest TIME-WAIT conn id, -1 if none
	twTail    int32
	conns     []*tcpConn // every conn ever made, index = conn.id
	free      []*tcpConn
	gen       int32       // generation of the last conn handed out (TCPHandle)
	woken     []TCPHandle // conns to run output for at the next poll
	wokenNext []TCPHandle // the other list runWoken swaps in
	timers    tcpTimers
	held      tcpHeld      // connections waiting for flight credit (tcp_hold.go)
	rbufs     []*rcvBuffer // free receive buffers
	rbufsMade int
	txRings   []*tcpTxRingBuf // free RACK rings
	txMade    int
	nextPort  uint16
	nextAddr  int  // the source address (index into Addr, Aliases) the next active open tries first
	mtuSeen   bool // a Stack has fitted cfg.MSS to its link (tcp_stack.go)

	// Memory (tcp_mem.go): rbufs holds buffers of RcvBuf bytes.
	rbufsSmall []*rcvBuffer // free small receive buffers
	noRcvBuf   rcvBuffer    // what a conn without a buffer points at: empty, never written
	rbufBytes  int          // of the buffers made, lent or pooled, with their range tables

	synOverflowAt int64 // when the SYN backlog last overflowed and a cookie went out; 0: never
	shedSYNs      bool  // drop new SYNs: the link is short of frames (Stack.ShedSYNs)
	framesShort   bool  // the link is short of frames: memory pressure (Stack.FramesShort)

	rnd uint64 // xorshift state for the randomised challenge-ACK budget

	pmtu    pmtuCache    // path MTUs learned from "fragmentation needed" (pmtu.go)
	rackDue []tcpRackDue // conns whose ACKs of this batch RACK judges at its end (rackBatch)

	stats TCPStats
}

// tcpChallengeLimit is the mean number of challenge ACKs one connection
// sends per second (RFC 5961 §7). The limit is per connection and each
// second's budget is drawn at random in [limit/2, 3*limit/2): a counter
// shared by all connections, or a fixed one, lets an off-path attacker
// count a victim connection's challenge ACKs in its own (CVE-2016-5696).
const tcpChallengeLimit = 10

// random returns a pseudo-random number (xorshift64*), for what only needs
// to be unpredictable to a peer that cannot see the seed.
func (l *tcpLayer) random() uint32 {
	l.rnd ^= l.rnd >> 12
	l.rnd ^= l.rnd << 25
	l.rnd ^= l.rnd >> 27
	return uint32((l.rnd * 2685821657736338717) >> 32)
}

// Errors of the setup and active-open API.
var (
	ErrTCPPortInUse = errors.New("tcp: port already has a listener")
	ErrTCPNoPort    = errors.New("tcp: no free ephemeral port (widen PortLo-PortHi or the port filter)")
	ErrTCPTableFull = errors.New("tcp: connection table full (raise MaxConns)")
)

func newTCPLayer(cfg TCPConfig, sink tcpSink, now time.Time) *tcpLayer {
	cfg.setDefaults()
	l := &tcpLayer{
		cfg:      cfg,
		sec:      newTCPSecrets(cfg.Seed),
		sink:     sink,
		nowT:     now,
		nextPort: cfg.PortLo,
		twHead:   -1,
		twTail:   -1,
		held:     tcpHeld{credit: -1},
	}
	if !now.IsZero() {
		l.setNow(now)
	}
	l.rnd = l.sec.isn[0] ^ l.sec.cookie[1] | 1
	l.pmtu.key = uint32(l.sec.table[1] >> 32)
	l.table.init(cfg.MaxConns, l.sec.table)
	l.timers.init(cfg.MaxConns)
	return l
}

// Stats returns the layer's counters.
func (l *tcpLayer) Stats() TCPStats { return l.stats }

// Add adds o's counters and gauges to s, for merging shards at report time.
func (s *TCPStats) Add(o *TCPStats) {
	sv, ov := reflect.ValueOf(s).Elem(), reflect.ValueOf(o).Elem()
	for i := 0; i < sv.NumField(); i++ {
		switch f := sv.Field(i); f.Kind() {
		case reflect.Uint64:
			f.SetUint(f.Uint() + ov.Field(i).Uint())
		case reflect.Int:
			f.SetInt(f.Int() + ov.Field(i).Int())
		}
	}
}

func (l *tcpLayer) setNow(now time.Time) {
	if l.epoch.IsZero() {
		l.epoch = now.Add(-1) // the clock starts at 1: a timer at 0 means off
	}
	l.nowT = now
	l.now = int64(now.Sub(l.epoch))
	l.rxAt = l.now
}

// listen starts accepting connections on port.
func (l *tcpLayer) listen(port uint16, ep TCPEndpoint) error {
	if l.listener(port) != nil {
		return ErrTCPPortInUse
	}
	l.listeners = append(l.listeners, tcpListener{port: port, ep: ep})
	return nil
}

// unlisten stops accepting connections on port.
func (l *tcpLayer) unlisten(port uint16) {
	for i := range l.listeners {
		if l.listeners[i].port == port {
			l.listeners = append(l.listeners[:i], l.listeners[i+1:]...)
			return
		}
	}
}

func (l *tcpLayer) listener(port uint16) *tcpListener {
	for i := range l.listeners {
		if l.listeners[i].port == port {
			return &l.listeners[i]
		}
	}
	return nil
}

func ip4(a [4]byte) uint32 {
	return uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
}

// connect opens a connection to raddr:rport from an ephemeral port that
// passes the port filter; app gets the bytes and ep.Release is called when
// it is gone.
func (l *tcpLayer) connect(now time.Time, raddr IPv4Addr, rport uint16, app TCPApp, ep TCPEndpoint) (TCPHandle, error) {
	l.setNow(now)
	if !l.roomForConn() {
		return TCPHandle{}, ErrTCPTableFull
	}
	k := tcpKey{raddr: ip4(raddr), rport: rport}
	span := int(l.cfg.PortHi-l.cfg.PortLo) + 1
	addrs := 1 + len(l.cfg.Aliases)
	for i := 0; i < span*addrs; i++ {
		p := l.nextPort
		k.laddr = l.source(l.nextAddr)
		l.nextPort++
		if l.nextPort > l.cfg.PortHi || l.nextPort < l.cfg.PortLo {
			// Every port of this address tried: on to the next.
			l.nextPort = l.cfg.PortLo
			if l.nextAddr++; l.nextAddr == addrs {
				l.nextAddr = 0
			}
		}
		if l.cfg.PortFilter != nil && !l.cfg.PortFilter(p) {
			continue
		}
		k.lport = p
		if i := l.table.lookup(k); i >= 0 {
			if l.conns[i].state != tcpTimeWait {
				continue
			}
			// Reuse a port in TIME-WAIT: our new ISN is clock-driven
			// and above the old connection's (RFC 6191 in spirit, and
			// Linux's tcp_tw_reuse).
			l.stats.TimeWaitRecycled++
			l.closeConn(l.conns[i])
		}
		c := l.newConn(k)
		c.app, c.ep = app, ep
		c.appTimer, _ = app.(TCPAppTimer)
		c.state = tcpSynSent
		c.iss = l.sec.isnFor(k, l.now)
		c.sndUna, c.sndNxt, c.sndMax = c.iss, c.iss, c.iss
		c.recover = c.iss
		c.tsOff = l.sec.tsOffFor(k)
		c.mss = l.cfg.MSS
		// What we offer; synSent keeps what the SYN-ACK agrees to.
		c.wsOK, c.sackOK, c.tsOK = !l.cfg.NoWScale, !l.cfg.NoSACK, !l.cfg.NoTimestamps
		for c.wsOK && uint32(l.cfg.RcvBuf)>>c.rcvWScale > 65535 {
			c.rcvWScale++
		}
		c.appSeq, c.rcvAdv = 0, 0
		l.stats.ActiveOpens++
		// The SYN goes out from the timer at the next poll: a Stack can
		// only transmit inside Poll.
		c.rtxAt = l.now
		l.schedule(c)
		return TCPHandle{id: c.id, gen: c.gen}, nil
	}
	return TCPHandle{}, ErrTCPNoPort
}

// source is active open source address i: Addr, then the aliases.
func (l *tcpLayer) source(i int) uint32 {
	if i == 0 {
		return ip4(l.cfg.Addr)
	}
	return ip4(l.cfg.Aliases[i-1])
}

// input takes one TCP segment (the IPv4 payload) from src to dst, which
// arrived age ns before now (0: now, or not known).
func (l *tcpLayer) input(now time.Time, age int64, src, dst IPv4Addr, seg []byte) {
	l.setNow(now)
	// rxAt stays in the layer's own time, [1, now] (its clock starts at
	// 1), whatever age the caller passes; 0 does not mean unset (nothing
	// reads rxAt so). Through a Stack the 1 never binds, since TCP is
	// enabled before the first Poll and the stack's floor is at or after
	// the layer's start; it holds a stack given TCP after it has polled,
	// and a test that drives the layer with an age longer than its life.
	l.rxAt = max(l.now-max(age, 0), 1)
	l.stats.InSegs++
	t := TCP(seg)
	if !t.Valid() {
		l.stats.HeaderDrop++
		return
	}
	s, d := ip4(src), ip4(dst)
	if !l.cfg.TrustChecksum && tcpChecksum(s, d, seg) != 0 {
		l.stats.ChecksumDrop++
		return
	}
	var f TCPFields
	if !f.Decode(t) {
		l.stats.OptionDrop++
		return
	}
	k := tcpKey{raddr: s, laddr: d, rport: f.SrcPort, lport: f.DstPort}
	if i := l.table.lookup(k); i >= 0 {
		c := l.conns[i]
		l.segment(c, &f, t.Payload())
		if c.state != tcpClosed {
			l.appDeadline(c)
			l.schedule(c)
		}
		return
	}
	l.noConn(k, &f, t.Payload())
}

// poll runs woken connections and the timers that are due, and returns the
// next deadline: now when a send found no tx frame and waits for the next
// poll, zero when nothing is armed.
func (l *tcpLayer) poll(now time.Time) time.Time {
	l.setNow(now)
	l.rackBatch()
	if len(l.woken) > 0 {
		l.runWoken()
	}
	if l.held.n > 0 {
		l.releaseHeld()
	}
	for len(l.timers.h) > 0 && l.timers.h[0].at <= l.now {
		c := l.conns[l.timers.h[0].id]
		l.fire(c)
		if c.state != tcpClosed {
			l.schedule(c)
		}
	}
	switch {
	case len(l.woken) > 0 || l.held.n > 0:
		return now
	case len(l.timers.h) > 0:
		return l.epoch.Add(time.Duration(l.timers.h[0].at))
	}
	return time.Time{}
}

// appDeadline arms the app timer from the app's own deadline.
func (l *tcpLayer) appDeadline(c *tcpConn) {
	if c.appTimer == nil || c.app == nil {
		c.appAt = 0
		return
	}
	d := c.appTimer.Deadline()
	if d.IsZero() {
		c.appAt = 0
		return
	}
	c.appAt = int64(d.Sub(l.epoch))
	if c.appAt <= l.now {
		// A deadline already past that Expire declined: look again
		// in a millisecond rather than spin in poll.
		c.appAt = l.now + int64(time.Millisecond)
	}
}

// TCPHandle names one connection for calls from outside a segment batch
// (Wake). It stays safe to use after the connection is gone: the
// generation no longer matches and the call does nothing.
type TCPHandle struct {
	id, gen int32
}

// wake queues h's connection for output at the next poll: for an app that
// queued output or started closing outside Feed/Advance (a load generator
// on a timer).
func (l *tcpLayer) wake(h TCPHandle) {
	if h.gen == 0 || int(h.id) >= len(l.conns) {
		return
	}
	c := l.conns[h.id]
	if c.gen != h.gen || c.state == tcpClosed || c.woken {
		return
	}
	c.woken = true
	l.woken = append(l.woken, h)
}

// runWoken feeds woken connections' apps the input they held back, and
// sends what they have to send. A connection whose
// send finds no tx frame wakes itself again, into a fresh list for the
// next poll.
func (l *tcpLayer) runWoken() {
	woken := l.woken
	l.woken = l.wokenNext[:0]
	for _, h := range woken {
		l.rerun(h)
	}
	clear(woken)
	l.wokenNext = woken[:0]
}

// rerun runs h's connection, queued to run again (woken or held for
// flight credit), and reports whether it still was there: it feeds the
// app the input it held back and sends what it has to send.
func (l *tcpLayer) rerun(h TCPHandle) bool {
	c := l.conns[h.id]
	if c.gen != h.gen || c.state == tcpClosed {
		return false
	}
	c.woken = false
	if c.appSeq != c.rcvDataEnd() {
		// The app may take the input it pushed back on: a peer that
		// sent all it had sends no ACK to bring it otherwise.
		l.deliver(c, true)
	}
	l.output(c)
	if c.state != tcpClosed {
		l.schedule(c)
	}
	return true
}
