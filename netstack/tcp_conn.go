package netstack

// tcpState is a connection state of RFC 9293 §3.3.2.
type tcpState uint8

const (
	tcpClosed tcpState = iota
	tcpSynSent
	tcpSynRcvd
	tcpEstablished
	tcpFinWait1
	tcpFinWait2
	tcpClosing
	tcpTimeWait
	tcpCloseWait
	tcpLastAck
)

var tcpStateNames = [...]string{"CLOSED", "SYN-SENT", "SYN-RECEIVED", "ESTABLISHED",
	"FIN-WAIT-1", "FIN-WAIT-2", "CLOSING", "TIME-WAIT", "CLOSE-WAIT", "LAST-ACK"}

func (s tcpState) String() string { return tcpStateNames[s] }

// tcpRange is a byte range [l, r) of sequence space.
type tcpRange struct{ l, r seqnum }

const (
	tcpMaxSacked = 64 // peer's SACKed ranges remembered per connection with data in flight (in its tcpTxRingBuf)
	tcpSACKHist  = 4  // out-of-order ranges remembered in order of arrival, for SACK blocks
	tcpTxRing    = 16 // ranges of sequence space in flight with their transmit time (RACK)

	// tcpOOOBytesPerRange sizes the table of out-of-order ranges that comes
	// with a receive buffer: one range per this many bytes of buffer. A
	// segment of at least this size (every MSS in practice: 536 at the
	// least) makes a range of its own with a hole before it, so a buffer
	// full of such segments never needs more ranges than that.
	tcpOOOBytesPerRange = 512
	// tcpMaxOOORanges caps the table for buffers above 512 KiB, where
	// each range costs an insertion its share of a copy (8 KiB at most);
	// past it new ranges are refused, never held ones dropped.
	tcpMaxOOORanges = 1024
)

// oooRanges is the size of the out-of-order range table of a receive
// buffer of n bytes.
func oooRanges(n int) int {
	return min(max(n/tcpOOOBytesPerRange, tcpSACKHist), tcpMaxOOORanges)
}

// tcpConn is one connection (TCB, RFC 9293 §3.3.1). Conns come from the
// layer's pool and are reused; a conn belongs to one shard. Memory per idle
// established connection is this struct plus the app's own state: the
// receive buffer (with the out-of-order state that needs one) and the RACK
// ring are lent from pools only while in use, and the send queue is the
// app's Output. TIME_WAIT keeps only this struct.
type tcpConn struct {
	key       tcpKey
	id        int32 // index in layer.conns
	twPrev    int32 // TIME-WAIT list (oldest first), conn ids; -1 at the ends
	twNext    int32
	gen       int32 // generation, for TCPHandle; changes on every reuse
	state     tcpState
	passive   bool // opened by a listener (SYN-RECEIVED goes back to LISTEN)
	cookie    bool // established from a SYN cookie
	tsOK      bool // timestamps negotiated
	sackOK    bool // SACK negotiated
	wsOK      bool // window scaling negotiated
	finPend   bool // peer FIN at rcvFin seen beyond a hole
	ackNow    bool // send an ACK at the end of this input
	finSent   bool // our FIN is in sequence space (finSeq)
	finRcvd   bool // peer's FIN seen at rcvFin (maybe beyond a hole)
	peerFed   bool // PeerClosed called
	persist   bool // rtxAt is the persist timer
	woken     bool // queued in layer.woken, or waiting in layer.held for flight credit
	rackDue   bool // queued in layer.rackDue: RACK judges this batch's ACKs at its end
	tlp       bool // rtxAt is the tail loss probe timeout
	tlpDone   bool // a probe went out since the last new ACK
	rttOn     bool // rttSeq is being timed
	recovery  bool // in fast recovery (RFC 6582)
	rtxUna    bool // SND.UNA's segment was retransmitted at rtxMark (lost-retransmission check)
	cubicOn   bool // a CUBIC congestion avoidance stage is running (from cubic.epoch)
	cubicNew  bool // the stage began with no window to come back to (tcp_cc.go, cubicAck)
	dsackOn   bool // dsack is to be reported in the next segment (RFC 2883)
	undoOn    bool // a reduction may still be undone (undoCwnd...)
	rackOn    bool // rackXmit... describe a delivered segment
	reordSeen bool // RACK.reordering_seen
	undoTSOn  bool // undoTS holds the TSval of the episode's first retransmission
	prrOn     bool // the recovery runs PRR (tcp_prr.go) instead of NewReno's inflation
	rackHold  bool // the batch's last ACK answered originals while retransmissions are out: RACK deems nothing more lost (partialUndo)
	frto      bool // F-RTO (RFC 5682) sent new data after a timeout; the next ACK tells whether it was spurious (frtoNxt)

	cc                   CongestionControl
	sndWScale, rcvWScale uint8
	dupAcks              uint8
	retries              uint8 // RTOs / SYN retransmits / probes in a row
	keepProbes           uint8
	segsUnacked          uint8 // in-order data segments not yet ACKed

	mss uint16 // send MSS (peer's MSS option, capped by ours)

	// Send sequence space (RFC 9293 §3.3.1, figure 4).
	iss, sndUna, sndNxt, sndMax seqnum // sndMax: highest sequence sent + 1
	sndWl1, sndWl2              seqnum
	finSeq                      seqnum
	recover                     seqnum // RFC 6582 recover
	rtxHigh                     seqnum // highest retransmitted in this recovery
	rtxMark                     seqnum // SND.MAX when SND.UNA's segment was last retransmitted
	rttSeq                      seqnum
	sndWnd, maxSndWnd           uint32
	cwnd, ssthresh              uint32
	caAcked                     uint32 // towards the next cwnd step in congestion avoidance: NewReno's bytes ACKed (RFC 3465), CUBIC's remainder
	cubic                       cubicState
	hystart                     hystartState

	// RACK (RFC 8985): when each range in flight was last sent, sorted by
	// sequence; the most recently sent segment delivered; the reordering
	// window's multiplier and the reorder timer (rackAt). The ring is lent
	// from the layer only while data is in flight, so an idle conn stays small.
	tx         *tcpTxRingBuf // nil when ntx is 0
	ntx        uint8
	reoMult    uint8  // RACK.reo_wnd_mult
	rackEnd    seqnum // RACK.end_seq
	rackFack   seqnum // RACK.fack: the highest byte delivered + 1
	dsackRound seqnum // RACK.dsack_round: SND.MAX when reo_wnd last grew
	rackXmit   int64  // RACK.xmit_ts
	rackRTT    int64  // RACK.rtt
	minRTT     int64

	// PRR (RFC 6937): RecoverFS, prr_delivered, prr_out, and sndcnt less
	// what was sent since it was set.
	recoverFS, prrDelivered, prrOut uint32
	prrLeft                         int32

	// Undo (RFC 3708): the window before the reduction, and how many of
	// the episode's retransmissions were not yet D-SACKed.
	undoCwnd, undoSsthresh uint32
	undoRtx                uint32
	undoMarker             seqnum // SND.UNA when the episode began
	frtoNxt                seqnum // where the timeout's go-back-N stood when F-RTO sent new data
	undoTS                 uint32 // TSval of the episode's first retransmission (Eifel, RFC 3522)
	reoPersist             uint8  // recoveries left before reoMult goes back to 1
	undoEpisodes           uint8  // reductions the undo covers (saveUndo)
	undoAt                 int64  // when the first of them began
	undoCubic              cubicState

	// Receive sequence space.
	irs, rcvNxt seqnum
	appSeq      seqnum // first byte not yet fed to the app; rcvNxt-appSeq bytes are held in rb
	rcvAdv      seqnum // right edge of the window last advertised
	lastAck     seqnum // Last.ACK.sent (RFC 7323 §4.3): the ACK field of the last segment sent
	rcvFin      seqnum
	tsRecent    uint32
	tsOff       uint32
	dsack       tcpRange // duplicate data received, for a D-SACK block
	nsacked     uint8    // ranges in tx.sacked

	// The receive buffer with its out-of-order ranges (tcp_mem.go), lent
	// while bytes are held; otherwise the layer's empty one, never
	// written, so that its fields read as empty without a check.
	*rcvBuffer

	// RTT (RFC 6298), nanoseconds.
	srtt, rttvar, rto int64
	rttTime           int64

	// Timers: absolute ns on the layer clock, 0 when off; deadline is the
	// earliest, the key of the timer heap.
	rtxAt, ackAt, kaAt, appAt, deadline int64
	rackAt                              int64 // RACK reorder timer
	oowAckAt                            int64 // last ACK for an unacceptable segment without data
	challengeAt                         int64 // start of the current second of challenge ACKs
	challengeLeft                       uint16

	app      TCPApp
	appTimer TCPAppTimer // app as a TCPAppTimer, nil if it is not one
	ep       TCPEndpoint
}

// newConn takes a conn from the pool, sets its key and puts it in the table.
// The caller checked the table has room.
func (l *tcpLayer) newConn(k tcpKey) *tcpConn {
	var c *tcpConn
	if n := len(l.free); n > 0 {
		c = l.free[n-1]
		l.free = l.free[:n-1]
		id := c.id
		*c = tcpConn{}
		c.id = id
	} else {
		c = &tcpConn{id: int32(len(l.conns))}
		l.conns = append(l.conns, c)
	}
	c.key = k
	c.rcvBuffer = &l.noRcvBuf
	c.twPrev, c.twNext = -1, -1
	l.gen++
	if l.gen <= 0 {
		l.gen = 1
	}
	c.gen = l.gen
	c.rto = int64(l.cfg.RTOInitial)
	c.ssthresh = ^uint32(0)
	c.cc = l.cfg.CC
	l.table.insert(k, c.id)
	l.stats.Conns++
	return c
}

// setState moves c to s, keeping the gauges.
func (l *tcpLayer) setState(c *tcpConn, s tcpState) {
	if c.state == tcpSynRcvd {
		l.stats.SynRcvd--
	}
	if c.state == tcpTimeWait {
		l.stats.TimeWaits--
		l.twUnlink(c)
	}
	c.state = s
	if s == tcpSynRcvd {
		l.stats.SynRcvd++
	}
	if s == tcpTimeWait {
		l.stats.TimeWaits++
		l.twAppend(c)
		// TIME-WAIT keeps only the TCB: app and buffers go now.
		l.releaseApp(c)
		l.freeRcvBuf(c)
		l.freeTxRing(c)
	}
}

func (l *tcpLayer) releaseApp(c *tcpConn) {
	if c.app != nil && c.ep != nil {
		c.ep.Release(c.app, l.nowT)
	}
	c.app, c.ep, c.appTimer = nil, nil, nil
	c.appAt = 0
}

// closeConn deletes c: app released, buffers and timers returned, out of the
// table, back in the pool.
func (l *tcpLayer) closeConn(c *tcpConn) {
	l.setState(c, tcpClosed)
	l.releaseApp(c)
	l.freeRcvBuf(c)
	l.freeTxRing(c)
	l.timers.remove(c.id)
	l.table.remove(c.key)
	l.stats.Conns--
	l.free = append(l.free, c)
}

// The TIME-WAIT list, oldest first, so that a full table can recycle the
// oldest TIME-WAIT connection instead of refusing a new one (Linux's
// tcp_max_tw_buckets does the same by not keeping them at all).
func (l *tcpLayer) twAppend(c *tcpConn) {
	c.twPrev, c.twNext = l.twTail, -1
	if l.twTail >= 0 {
		l.conns[l.twTail].twNext = c.id
	} else {
		l.twHead = c.id
	}
	l.twTail = c.id
}

func (l *tcpLayer) twUnlink(c *tcpConn) {
	if c.twPrev >= 0 {
		l.conns[c.twPrev].twNext = c.twNext
	} else {
		l.twHead = c.twNext
	}
	if c.twNext >= 0 {
		l.conns[c.twNext].twPrev = c.twPrev
	} else {
		l.twTail = c.twPrev
	}
	c.twPrev, c.twNext = -1, -1
}

// roomForConn makes room in a full table by recycling the oldest TIME-WAIT
// connection; false when the table is full of live connections.
func (l *tcpLayer) roomForConn() bool {
	if l.table.n < l.cfg.MaxConns {
		return true
	}
	if l.twHead < 0 {
		return false
	}
	l.stats.TimeWaitRecycled++
	l.closeConn(l.conns[l.twHead])
	return true
}
