package netstack

import "time"

// Path MTU discovery (RFC 1191): every segment we send has DF set, and a
// router whose next hop cannot carry it answers with ICMP "fragmentation
// needed", quoting our IPv4 header and the first 8 bytes of the segment.
// The quote names the connection and one of its sequence numbers; the
// connection lowers its MSS only when that number lies in what it has in
// flight (RFC 5927 §5.2), so that an off-path attacker must guess the
// sequence space, not just the 4-tuple, to shrink its segments.
//
// The NIC hashes an ICMP message by its outer header, so it may reach a
// stack that does not hold the connection: that stack hands it to the
// forwarder its owner set (ForwardFragNeeded), which carries it to the
// stack that does (HandleFragNeeded). The stack itself knows nothing of
// shards.

// FragNeeded is a "fragmentation needed" message reduced to what finds and
// checks its connection: a small value, to pass between shards by copy.
type FragNeeded struct {
	Remote     IPv4Addr // the quoted packet's destination: the peer
	LocalPort  uint16   // the quoted segment's source port
	RemotePort uint16   // the quoted segment's destination port
	Seq        uint32   // the quoted segment's sequence number
	MTU        uint16   // the next-hop MTU, estimated when the router gave 0
}

// rfc1191Plateaus are the MTU plateaus of RFC 1191 §7, for a router that
// reports no next-hop MTU: the next one below the quoted packet's length.
var rfc1191Plateaus = [...]uint16{32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68}

// fragNeeded takes a checked "fragmentation needed" message: to our own
// connection, or to the forwarder when no connection here matches.
func (s *Stack) fragNeeded(m ICMPv4) {
	e, ok := s.parseFragNeeded(m)
	if !ok {
		s.stats.ICMPBadQuote++
		return
	}
	if s.tcp == nil {
		return
	}
	s.tcp.setNow(s.epoch.Add(time.Duration(s.now)))
	if s.tcp.fragNeeded(&e, s.forward == nil) {
		return
	}
	s.stats.ICMPForwarded++
	s.forward(e)
}

// parseFragNeeded reads the quoted IPv4 header and TCP ports and sequence
// number. The quote must be a TCP segment from our address: ours to send.
func (s *Stack) parseFragNeeded(m ICMPv4) (FragNeeded, bool) {
	q := IPv4(m.Payload())
	if len(q) < IPv4MinHeaderLen || q[ipVerIHL]>>4 != 4 || q.HeaderLen() < IPv4MinHeaderLen ||
		len(q) < q.HeaderLen()+8 || q.Protocol() != ProtoTCP || q.Src() != s.cfg.Addr {
		return FragNeeded{}, false
	}
	t := TCP(q[q.HeaderLen():])
	e := FragNeeded{Remote: q.Dst(), LocalPort: t.SrcPort(), RemotePort: t.DstPort(), Seq: t.Seq(), MTU: m.NextHopMTU()}
	if e.MTU == 0 {
		e.MTU = 68
		for _, p := range rfc1191Plateaus {
			if int(p) < q.TotalLen() {
				e.MTU = p
				break
			}
		}
	}
	return e, true
}

// ForwardFragNeeded sets fn to receive the "fragmentation needed" messages
// that match no connection of this stack, so that its owner can hand them
// to the stack that holds the connection (HandleFragNeeded); nil: count
// them (TCPStats.PMTUNoConn) and drop them. Set it once, before polling;
// fn runs inside Poll, on the stack's goroutine, and must not call the
// stack.
func (s *Stack) ForwardFragNeeded(fn func(FragNeeded)) { s.forward = fn }

// HandleFragNeeded applies a message another stack forwarded: the matching
// connection, if its sequence space holds e.Seq, lowers its MSS and sends
// again what it has in flight. It transmits on link as Poll does; the next
// Poll flushes. A message that matches nothing here is counted and dropped,
// never forwarded again.
func (s *Stack) HandleFragNeeded(now time.Time, link Link, e FragNeeded) {
	if s.tcp == nil {
		return
	}
	s.enter(now, link)
	s.tcp.setNow(s.epoch.Add(time.Duration(s.now)))
	s.tcp.fragNeeded(&e, true)
	s.leave()
}

// fragNeeded applies e to its connection and reports whether it was ours
// to deal with: false only when no connection matches and last is false
// (another stack may hold it).
func (l *tcpLayer) fragNeeded(e *FragNeeded, last bool) bool {
	k := tcpKey{raddr: ip4(e.Remote), laddr: ip4(l.cfg.Addr), rport: e.RemotePort, lport: e.LocalPort}
	i := l.table.lookup(k)
	if i < 0 {
		if last {
			l.stats.PMTUNoConn++
		}
		return last
	}
	c := l.conns[i]
	// RFC 5927 §5.2: the quoted sequence number must be one we sent and
	// that is not yet acknowledged.
	if seq := seqnum(e.Seq); seq.lt(c.sndUna) || !seq.lt(c.sndMax) {
		l.stats.PMTUOutOfWindow++
		return true
	}
	switch c.state {
	case tcpEstablished, tcpCloseWait, tcpFinWait1, tcpClosing, tcpLastAck:
	default:
		l.stats.PMTUIgnored++ // no data sent yet: the handshake's MSS stands
		return true
	}
	l.pmtu.record(k.raddr, e.MTU, l.now)
	mss := pathMSS(e.MTU, c.tsOK)
	if mss >= int(c.mss) {
		l.stats.PMTUIgnored++ // not smaller: a stale or a bogus report
		return true
	}
	l.stats.PMTUDecreases++
	c.mss = uint16(mss)
	// What is in flight was cut to the old size and will not arrive:
	// send it again at the new one, from SND.UNA, past what the peer
	// SACKed. It was lost to the path, not to congestion, so the window
	// stays (Linux's tcp_simple_retransmit).
	c.sndNxt = c.sndUna
	c.rttOn = false // Karn
	l.output(c)
	if c.state != tcpClosed {
		l.schedule(c)
	}
	return true
}

// maxSegment is the most bytes of TCP header and data one segment of c may
// carry: our MTU's, or less where the peer's MSS or the path's is lower
// (RFC 6691: options count against the MSS, so SACK blocks yield to data).
func (c *tcpConn) maxSegment(ourMSS uint16) int {
	mss := int(c.mss)
	if c.tsOK {
		mss += 12
	}
	return min(mss, int(ourMSS)) + TCPMinHeaderLen
}

// The path MTU cache: what "fragmentation needed" taught one connection,
// the next connection to the same peer starts with (RFC 1191 §5: the
// estimate belongs to the path, not to a connection), as Linux keeps it in
// the route's next-hop exceptions. One cache per layer (per shard); it is
// read when a connection opens and written by a validated message, never
// per packet.

// pmtuExpires is how long a learned path MTU is used: Linux's
// net.ipv4.route.mtu_expires default (600 s). After it, a new connection
// tries the full MSS again (RFC 1191 §6.3: the path may have grown).
const pmtuExpires = 10 * time.Minute

// pmtuCacheMin is the lowest path MTU the cache keeps: Linux's
// net.ipv4.route.min_pmtu default (552). The connection that got a lower
// figure still uses it, but a forged report that passed the sequence check
// cannot hold every later connection to that peer at tiny segments for
// pmtuExpires.
const pmtuCacheMin = 552

// The cache is set-associative: an address maps to one set of pmtuWays
// entries, so its size is fixed (pmtuSets*pmtuWays entries, 4 KiB) and a
// lookup reads one cache line's worth.
const (
	pmtuSetBits = 6
	pmtuSets    = 1 << pmtuSetBits
	pmtuWays    = 4
)

type pmtuEntry struct {
	addr    uint32 // the peer, as ip4 gives it
	mtu     uint16
	expires int64 // on the layer's clock; 0: free
}

// pmtuCache maps a peer to its path MTU. The zero value is empty; key
// salts the set choice so that a peer cannot aim many entries at one set.
type pmtuCache struct {
	key  uint32
	sets [pmtuSets][pmtuWays]pmtuEntry
}

// set returns addr's set (Fibonacci hashing of the salted address).
func (p *pmtuCache) set(addr uint32) *[pmtuWays]pmtuEntry {
	return &p.sets[((addr^p.key)*0x9e3779b1)>>(32-pmtuSetBits)]
}

// lookup returns addr's path MTU if one is known and not expired at now.
func (p *pmtuCache) lookup(addr uint32, now int64) (uint16, bool) {
	set := p.set(addr)
	for i := range set {
		if e := &set[i]; e.addr == addr && e.expires > now {
			return e.mtu, true
		}
	}
	return 0, false
}

// record learns that the path to addr carries at most mtu bytes from now
// on (pmtuCacheMin at least). A live entry only ever goes down, as Linux's __ip_rt_update_pmtu:
// a higher figure waits for the entry to expire. A new peer takes a free
// or expired entry of its set, else the one that expires first.
func (p *pmtuCache) record(addr uint32, mtu uint16, now int64) {
	mtu = max(mtu, pmtuCacheMin)
	set := p.set(addr)
	victim := &set[0]
	for i := range set {
		e := &set[i]
		if e.addr == addr && e.expires > now {
			if mtu < e.mtu {
				e.mtu, e.expires = mtu, now+int64(pmtuExpires)
			}
			return
		}
		if e.expires < victim.expires {
			victim = e
		}
	}
	*victim = pmtuEntry{addr: addr, mtu: mtu, expires: now + int64(pmtuExpires)}
}

// pathMSS returns the send MSS that fits an mtu-byte path: no less than
// tcpMinSndMSS, 12 bytes less with timestamps (RFC 6691).
func pathMSS(mtu uint16, tsOK bool) int {
	mss := int(mtu) - IPv4MinHeaderLen - TCPMinHeaderLen
	if tsOK {
		mss -= 12
	}
	return max(mss, tcpMinSndMSS)
}

// clampToPath lowers the MSS of c, a connection opening, to the path MTU
// cached for its peer.
func (l *tcpLayer) clampToPath(c *tcpConn) {
	mtu, ok := l.pmtu.lookup(c.key.raddr, l.now)
	if !ok {
		return
	}
	if mss := pathMSS(mtu, c.tsOK); mss < int(c.mss) {
		c.mss = uint16(mss)
		l.stats.PMTUCached++
	}
}
