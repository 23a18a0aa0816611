package netstack

import (
	"errors"
	"fmt"
	"math/bits"
	"time"
)

// Config is a stack's fixed configuration. Zero limits take the defaults.
type Config struct {
	MAC  MAC      // our Ethernet address
	Addr IPv4Addr // our IPv4 address
	// Aliases are more addresses of ours on the same link, answered as
	// Addr is (ARP, ICMP, TCP), and the sources of TCP's active opens once
	// Addr's ports are taken: a load generator holds more connections to
	// one server than one address has ports. Few: each received packet
	// whose destination is not Addr is checked against each.
	Aliases []IPv4Addr
	Netmask IPv4Addr // on-link prefix, e.g. 255.255.0.0
	Gateway IPv4Addr // next hop for off-link destinations; zero: none (off-link is TxNoRoute)

	// TrustRxChecksums skips verifying received IPv4, ICMP (and TCP) checksums,
	// for links whose hardware has verified them. Off by default: AF_XDP on
	// veth delivers whatever the peer sent, partial checksums included.
	TrustRxChecksums bool

	ARPCacheSize     int           // entries, rounded up to a power of two; default 256
	ARPLifetime      time.Duration // how long a learned entry is used; default 60s
	ARPRetryInterval time.Duration // first request retry; doubles after each; default 1s
	ARPMaxRequests   int           // requests per resolution before giving up; default 3
	PendingMax       int           // frames waiting for ARP resolution; default 64
	Batch            int           // frames per rx and tx batch; default 64
	MaxRxBatches     int           // rx batches per Poll before timers and tx; default 4
}

func (c *Config) setDefaults() {
	if c.ARPCacheSize <= 0 {
		c.ARPCacheSize = 256
	}
	if c.ARPLifetime <= 0 {
		c.ARPLifetime = 60 * time.Second
	}
	if c.ARPRetryInterval <= 0 {
		c.ARPRetryInterval = time.Second
	}
	if c.ARPMaxRequests <= 0 {
		c.ARPMaxRequests = 3
	}
	if c.PendingMax <= 0 {
		c.PendingMax = 64
	}
	if c.Batch <= 0 {
		c.Batch = 64
	}
	if c.MaxRxBatches <= 0 {
		c.MaxRxBatches = 4
	}
}

// Stack is one shard's userspace network stack: Ethernet, ARP, IPv4, ICMP
// (and TCP, wired in by the tcp files). It is owned by one shard and not safe
// for concurrent use; it never reads a clock, starts a goroutine or
// allocates after NewStack.
//
// The shard calls Poll in its loop with the current time and its link; Poll
// returns when it wants to be called again. Always pass the same link. Rx
// frames are given back within the Poll that received them; tx frames are
// submitted or freed within the Poll, except those HeldTx counts, which
// Close returns.
type Stack struct {
	cfg         Config
	mask        uint32   // netmask as an integer
	net         uint32   // our network (Addr & mask)
	subnetBcast IPv4Addr // directed broadcast of our subnet

	// Valid only during Poll: the link and its MTU.
	link Link
	mtu  int

	// Time: the stack counts int64 nanoseconds since epoch (the first
	// Poll's now, monotonic). now is the current Poll's time on that scale;
	// timers (ARP, and TCP's) are deadlines on it, noDeadline when unarmed.
	epoch   time.Time
	started bool
	now     int64
	drained int64 // the now of the last Poll that emptied the link: what came later arrived after it
	rxAge   int64 // how long before now the frame being handled arrived (rxAgeOf)

	rx     []Frame // rx batch, lent by the link during one RxBatch..RxDone
	rxAt   []int64 // when each frame of rx arrived, as the link says (ns since its RxClock; 0: not known)
	txPool []Frame // tx frames allocated from the link, not yet used
	txOut  []Frame // tx frames filled and waiting for TxSubmit
	txDrop []Frame // tx frames to give back with TxFree at the end of Poll

	ipID uint16     // IPv4 identification of the next packet we send
	tmpl txTemplate // constant header bytes of the frames we send

	arp           arpCache
	arpIncomplete bool           // an incomplete entry may exist: arpTimers scans the cache
	pending       []pendingFrame // frames waiting for ARP resolution, oldest first

	stats Stats

	tcp     *tcpLayer        // nil until EnableTCP (tcp_stack.go)
	forward func(FragNeeded) // where messages for no connection of ours go (pmtu.go); nil: dropped
}

// NewStack checks cfg and builds a stack with all its memory allocated.
func NewStack(cfg Config) (*Stack, error) {
	cfg.setDefaults()
	mask := cfg.Netmask.Uint32()
	if mask == 0 || bits.OnesCount32(mask) != bits.LeadingZeros32(^mask) {
		return nil, fmt.Errorf("netstack: netmask %v is not a contiguous prefix: use e.g. 255.255.255.0", cfg.Netmask)
	}
	s := &Stack{cfg: cfg, mask: mask, net: cfg.Addr.Uint32() & mask}
	s.subnetBcast = IPv4AddrFromUint32(s.net | ^mask)
	if bits.OnesCount32(mask) >= 31 { // RFC 3021 /31 and host routes: no broadcast address
		s.subnetBcast = IPv4Broadcast
	}
	if cfg.MAC.IsMulticast() || cfg.MAC == MACZero {
		return nil, fmt.Errorf("netstack: MAC %v is not a unicast address", cfg.MAC)
	}
	if s.martian(cfg.Addr) || cfg.Addr == s.subnetBcast || (bits.OnesCount32(mask) < 31 && cfg.Addr.Uint32()&^mask == 0) {
		return nil, fmt.Errorf("netstack: address %v/%d is not a usable host address", cfg.Addr, bits.OnesCount32(mask))
	}
	for _, a := range cfg.Aliases {
		if !s.onLink(a) || a == cfg.Addr || s.martian(a) || a == s.subnetBcast || a.Uint32() == s.net {
			return nil, fmt.Errorf("netstack: alias %v is not another usable host address of %v/%d", a, cfg.Addr, bits.OnesCount32(mask))
		}
	}
	s.cfg.Aliases = append([]IPv4Addr(nil), cfg.Aliases...)
	if cfg.Gateway != IPv4Zero && (!s.onLink(cfg.Gateway) || s.ours(cfg.Gateway) || cfg.Gateway == s.subnetBcast) {
		return nil, errors.New("netstack: gateway " + cfg.Gateway.String() + " is not in our subnet: pick an on-link gateway")
	}
	if cfg.Batch > 1024 || cfg.PendingMax > 1<<16 || cfg.ARPCacheSize > 1<<20 {
		return nil, errors.New("netstack: Batch (max 1024), PendingMax (max 65536) or ARPCacheSize (max 1M) too large")
	}
	s.cfg.ARPCacheSize = s.arp.init(cfg.ARPCacheSize)
	s.tmpl.init(cfg.MAC, cfg.Addr)
	s.rx = make([]Frame, cfg.Batch)
	s.rxAt = make([]int64, cfg.Batch)
	s.txPool = make([]Frame, 0, cfg.Batch)
	s.txOut = make([]Frame, 0, cfg.Batch)
	s.pending = make([]pendingFrame, 0, cfg.PendingMax)
	s.txDrop = make([]Frame, 0, cfg.PendingMax)
	return s, nil
}

// Config returns the stack's configuration, defaults filled in.
func (s *Stack) Config() Config { return s.cfg }

// Stats returns a copy of the stack's counters.
func (s *Stack) Stats() Stats { return s.stats }

// Frames returns the frames received and sent so far: a cheap progress
// check for a poller deciding whether a Poll did work.
func (s *Stack) Frames() (rx, tx uint64) { return s.stats.RxFrames, s.stats.TxFrames }

// Pending returns how many frames wait for ARP resolution.
func (s *Stack) Pending() int { return len(s.pending) }

// HeldTx returns how many of the link's tx frames the stack holds between
// Polls: the pending frames and up to Batch unused frames kept for the next
// Poll. Close gives them back.
func (s *Stack) HeldTx() int { return len(s.pending) + len(s.txPool) }

// Close gives every tx frame the stack holds back to link (TxFree), dropping
// the frames that wait for resolution. Call it when the shard stops, before
// the link is closed; the stack must not be polled afterwards.
func (s *Stack) Close(link Link) {
	for _, p := range s.pending {
		s.txDrop = append(s.txDrop, p.f)
	}
	clear(s.pending)
	s.pending = s.pending[:0]
	s.txDrop = append(s.txDrop, s.txPool...)
	clear(s.txPool)
	s.txPool = s.txPool[:0]
	if len(s.txDrop) > 0 {
		link.TxFree(s.txDrop)
	}
	clear(s.txDrop)
	s.txDrop = s.txDrop[:0]
}

// Poll runs the stack once: it takes up to MaxRxBatches batches of received
// frames from link and handles them, runs the timers that are due, submits
// every frame produced in one or a few TxSubmit batches and calls link.Flush
// once. now is the caller's clock (monotonic; never goes back).
//
// It returns when it wants to be called again even if no frame arrives: now
// when it stopped with frames still queued on the link, the zero Time when no
// timer is armed.
func (s *Stack) Poll(now time.Time, link Link) time.Time {
	s.enter(now, link)
	s.stats.Polls++
	floor := s.drained

	more := false
	for i := 0; i < s.cfg.MaxRxBatches; i++ {
		n := link.RxBatch(s.rx, s.rxAt)
		if n > len(s.rx) { // a link bug; never index past the batch
			n = len(s.rx)
		}
		var off int64
		if n > 0 { // an empty Poll (most, in poll mode) needs no clock
			off = s.rxOffset(link)
		}
		for j := range n {
			s.stats.RxFrames++
			s.rxAge = s.rxAgeOf(s.rxAt[j], off, floor)
			s.input(s.rx[j].Buf)
		}
		s.rxAge = 0
		if n > 0 {
			link.RxDone(s.rx[:n])
		}
		if n < len(s.rx) {
			break
		}
		more = i == s.cfg.MaxRxBatches-1
	}
	if !more {
		s.drained = s.now
	}

	next := s.arpTimers()
	next = minDeadline(next, s.tcpPoll(now))

	s.leave()
	link.Flush()

	if more {
		return now
	}
	if next == noDeadline {
		return time.Time{}
	}
	return s.epoch.Add(time.Duration(next))
}

// rxOffset is where link's receive clock (RxClock) reads zero on the
// stack's: a receive time t from link is t+off since epoch. One Sub a
// batch, so that each frame costs an addition.
func (s *Stack) rxOffset(link Link) int64 {
	return int64(link.RxClock().Sub(s.epoch))
}

// rxAgeOf returns how long before now a frame that arrived at at (the
// link's receive time, off its rxOffset) came: at+off clamped to [floor,
// now], floor being the now of the last Poll that emptied the link (a
// frame it left there, past MaxRxBatches, still counts from the Poll
// before; a time out of that range is wrong, even one whose sum wraps). A
// frame without a receive time (0) came now.
func (s *Stack) rxAgeOf(at, off, floor int64) int64 {
	if at == 0 {
		return 0
	}
	return s.now - min(max(at+off, floor), s.now)
}

// enter advances the stack's clock to now (never backwards) and opens the
// transmit path on link. Poll starts with it; code that transmits outside
// Poll (a send from the shard between Polls) brackets itself with enter and
// leave, and the next Poll flushes.
func (s *Stack) enter(now time.Time, link Link) {
	if !s.started {
		s.epoch, s.started = now, true
	}
	if t := now.Sub(s.epoch).Nanoseconds(); t > s.now {
		s.now = t
	}
	s.link, s.mtu = link, link.MTU()
}

// leave submits the frames produced since enter, gives back the ones
// dropped, and closes the transmit path. It does not Flush. Unused frames of
// txPool stay with the stack: one TxAlloc per Batch frames sent, not one per
// Poll.
func (s *Stack) leave() {
	s.submitTx()
	if len(s.txDrop) > 0 {
		s.link.TxFree(s.txDrop)
		clear(s.txDrop)
		s.txDrop = s.txDrop[:0]
	}
	s.link = nil
}

// withTx runs fn on the TCP layer with the transmit path open on link, as
// inside Poll (enter and leave), for TCP work outside a segment batch
// (AbortTCP). The next Poll flushes.
func (s *Stack) withTx(now time.Time, link Link, fn func(l *tcpLayer)) {
	if s.tcp == nil {
		return
	}
	s.enter(now, link)
	s.tcp.setNow(s.epoch.Add(time.Duration(s.now)))
	fn(s.tcp)
	s.leave()
}

// noDeadline is the internal "no timer armed" deadline.
const noDeadline = int64(1<<63 - 1)

// minDeadline returns the earlier of two internal deadlines.
func minDeadline(a, b int64) int64 { return min(a, b) }

// input handles one received frame. b is valid only for this call.
func (s *Stack) input(b []byte) {
	e := Ethernet(b)
	if !e.Valid() {
		s.stats.EthTruncated++
		return
	}
	if d := e.Dst(); d != s.cfg.MAC && d != MACBroadcast {
		s.stats.EthNotForUs++
		return
	}
	if e.Src().IsMulticast() {
		s.stats.EthBadSrc++
		return
	}
	switch e.Type() {
	case EtherTypeARP:
		s.arpInput(e)
	case EtherTypeIPv4:
		s.ipv4Input(e)
	default:
		s.stats.EthUnknownType++
	}
}

// onLink reports whether a is in our subnet.
func (s *Stack) onLink(a IPv4Addr) bool { return a.Uint32()&s.mask == s.net }

// martian reports whether a can never be a unicast peer's source address:
// 0.0.0.0/8, 127.0.0.0/8, multicast 224.0.0.0/4, class E 240.0.0.0/4 and
// limited broadcast.
func (s *Stack) martian(a IPv4Addr) bool {
	return a[0] == 0 || a[0] == 127 || a[0] >= 224
}

// allocTx takes one tx frame from the pool, refilling the pool from the link
// in one batch when it is empty. Valid only during Poll.
func (s *Stack) allocTx() (Frame, bool) {
	if len(s.txPool) == 0 {
		s.submitTx() // frames in flight may be what the link is short of
		n := s.link.TxAlloc(s.txPool[:cap(s.txPool)])
		if n <= 0 {
			s.stats.TxNoFrame++
			return Frame{}, false
		}
		s.txPool = s.txPool[:min(n, cap(s.txPool))]
	}
	f := s.txPool[len(s.txPool)-1]
	s.txPool = s.txPool[:len(s.txPool)-1]
	return f, true
}

// freeTx gives back a frame from allocTx that will not be sent.
func (s *Stack) freeTx(f Frame) {
	if len(s.txPool) < cap(s.txPool) {
		s.txPool = append(s.txPool, f)
		return
	}
	// A frame lent in an earlier Poll (a pending one) when the pool is full.
	s.txDrop = append(s.txDrop, f)
}

// queueTx queues a filled frame of n bytes for TxSubmit.
func (s *Stack) queueTx(f Frame, n int) {
	f.Buf = f.Buf[:n]
	s.txOut = append(s.txOut, f)
	if len(s.txOut) == cap(s.txOut) {
		s.submitTx()
	}
}

// submitTx hands the queued frames to the link in one batch.
func (s *Stack) submitTx() {
	if len(s.txOut) == 0 {
		return
	}
	s.link.TxSubmit(s.txOut)
	s.stats.TxFrames += uint64(len(s.txOut))
	clear(s.txOut) // drop references to link buffers
	s.txOut = s.txOut[:0]
}

// ours reports whether a is one of our addresses: Addr or an alias.
func (s *Stack) ours(a IPv4Addr) bool {
	if a == s.cfg.Addr {
		return true
	}
	for _, b := range s.cfg.Aliases {
		if a == b {
			return true
		}
	}
	return false
}
