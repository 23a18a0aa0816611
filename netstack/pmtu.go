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
	mss := int(e.MTU) - IPv4MinHeaderLen - TCPMinHeaderLen
	if c.tsOK {
		mss -= 12
	}
	mss = max(mss, tcpMinSndMSS)
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
