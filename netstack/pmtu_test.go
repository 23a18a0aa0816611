package netstack

import (
	"testing"
	"time"
)

// fragNeededFrame is ICMP "fragmentation needed" from the on-link router C
// to A's address, with next-hop MTU mtu, quoting the IPv4 header and first
// 8 TCP bytes of seg (an IPv4 packet that stack sent).
func fragNeededFrame(dstMAC MAC, seg IPv4, mtu uint16) []byte {
	quote := seg[:seg.HeaderLen()+8]
	b := make([]byte, txPayloadOff+ICMPv4HeaderLen+len(quote))
	(&EthernetFields{Dst: dstMAC, Src: macC, Type: EtherTypeIPv4}).Encode(b)
	(&IPv4Fields{TotalLen: uint16(len(b) - EthernetHeaderLen), TTL: 64, Protocol: ProtoICMP, Src: ipC, Dst: ipA}).Encode(b[txIPv4Off:])
	m := b[txPayloadOff:]
	copy(m[ICMPv4HeaderLen:], quote)
	(&ICMPv4Fields{Type: ICMPv4Unreachable, Code: ICMPv4FragNeeded, Seq: mtu}).Encode(m)
	return b
}

// inFlight makes the server A of p send a response and holds it back: the
// IPv4 packets A sent, B not having seen them.
func inFlight(t *testing.T, p *stackPair) []IPv4 {
	t.Helper()
	p.b.Poll(p.now, p.lb) // B takes the last response and asks again
	p.lb.ForwardTo(p.la)
	p.a.Poll(p.now, p.la)
	var pkts []IPv4
	for {
		b, ok := p.la.Take()
		if !ok {
			break
		}
		pkts = append(pkts, IPv4(append([]byte(nil), Ethernet(b).Payload()...)))
	}
	if len(pkts) < 2 || len(TCP(pkts[0].Payload()).Payload()) == 0 {
		t.Fatalf("A sent %d packets, no data in flight", len(pkts))
	}
	return pkts
}

// sentSizes returns the total lengths of the IPv4 packets A sent since the
// last call, and whether any was too big for mtu; it forwards them to B.
func (p *stackPair) sentSizes(mtu int) (n int, tooBig bool) {
	for p.la.Sent() > 0 {
		b, _ := p.la.Take()
		ip := IPv4(Ethernet(b).Payload())
		n++
		if ip.TotalLen() > mtu {
			tooBig = true
		}
		p.lb.Inject(b)
	}
	return n, tooBig
}

// A "fragmentation needed" whose quote is a segment in flight lowers the
// connection's MSS and sends what is in flight again at the new size; the
// exchange then completes.
func TestPMTUFragNeeded(t *testing.T) {
	p := newStackPair(t, 8000)
	pkts := inFlight(t, p)
	before := p.a.TCPStats()
	p.la.Inject(fragNeededFrame(macA, pkts[1], 1000))
	p.a.Poll(p.now, p.la)
	st, tcp := p.a.Stats(), p.a.TCPStats()
	if st.ICMPFragNeeded != 1 || tcp.PMTUDecreases != 1 || tcp.Retransmits == before.Retransmits {
		t.Fatalf("stats %+v\ntcp %+v", st, tcp)
	}
	n, tooBig := p.sentSizes(1000)
	if n == 0 || tooBig {
		t.Fatalf("%d packets sent again, some above the MTU: %v", n, tooBig)
	}
	done := p.cl.done
	for i := 0; i < 200 && p.cl.done == done; i++ {
		p.now = p.now.Add(10e3)
		p.b.Poll(p.now, p.lb)
		p.lb.ForwardTo(p.la)
		p.a.Poll(p.now, p.la)
		if _, tooBig := p.sentSizes(1000); tooBig {
			t.Fatal("a packet above the path MTU")
		}
	}
	if p.cl.done == done {
		t.Fatalf("the exchange did not complete: A %+v", p.a.TCPStats())
	}
	if st := p.a.Stats(); st.RxOutcomes() != st.RxFrames {
		t.Fatalf("rx outcomes %d of %d frames", st.RxOutcomes(), st.RxFrames)
	}
}

// A quote whose sequence number is not in flight is ignored and counted
// (RFC 5927 §5.2), as is one no smaller than the MSS and one not from us;
// the floor holds for an absurdly small MTU.
func TestPMTUValidation(t *testing.T) {
	p := newStackPair(t, 8000)
	pkts := inFlight(t, p)
	stale := append(IPv4(nil), pkts[1]...)
	seqAt := stale.HeaderLen() + tcpSeq
	stale[seqAt] ^= 0x80 // 2^31 away: far outside the window
	notOurs := append(IPv4(nil), pkts[1]...)
	notOurs[ipSrc+3]++
	p.la.Inject(fragNeededFrame(macA, stale, 1000))
	p.la.Inject(fragNeededFrame(macA, pkts[1], 1500))
	p.la.Inject(fragNeededFrame(macA, notOurs, 1000))
	p.a.Poll(p.now, p.la)
	st, tcp := p.a.Stats(), p.a.TCPStats()
	if st.ICMPFragNeeded != 3 || st.ICMPBadQuote != 1 || tcp.PMTUOutOfWindow != 1 || tcp.PMTUIgnored != 1 || tcp.PMTUDecreases != 0 {
		t.Fatalf("stats %+v\ntcp %+v", st, tcp)
	}
	if p.la.Sent() != 0 {
		t.Fatalf("%d packets sent", p.la.Sent())
	}
	p.la.Inject(fragNeededFrame(macA, pkts[1], 68))
	p.a.Poll(p.now, p.la)
	if tcp := p.a.TCPStats(); tcp.PMTUDecreases != 1 {
		t.Fatalf("tcp %+v", tcp)
	}
	for p.la.Sent() > 0 {
		b, _ := p.la.Take()
		if n := len(TCP(IPv4(Ethernet(b).Payload()).Payload()).Payload()); n > tcpMinSndMSS {
			t.Fatalf("a segment of %d bytes, above the floor %d", n, tcpMinSndMSS)
		}
	}
}

// A quote of a flow this stack does not hold goes to the forwarder; the
// stack that holds it applies it (HandleFragNeeded). Without a forwarder,
// or at the stack of last resort, it is counted and dropped.
func TestPMTUOtherFlow(t *testing.T) {
	p := newStackPair(t, 8000)
	pkts := inFlight(t, p)
	other := append(IPv4(nil), pkts[1]...)
	other[other.HeaderLen()+1]++ // another source port
	p.la.Inject(fragNeededFrame(macA, other, 1000))
	p.a.Poll(p.now, p.la)
	if tcp := p.a.TCPStats(); tcp.PMTUNoConn != 1 {
		t.Fatalf("tcp %+v", tcp)
	}

	var got []FragNeeded
	p.a.ForwardFragNeeded(func(e FragNeeded) { got = append(got, e) })
	p.la.Inject(fragNeededFrame(macA, pkts[1], 0)) // no MTU given: the plateau below the packet
	p.a.Poll(p.now, p.la)
	want := FragNeeded{Remote: ipB, LocalPort: 80, RemotePort: TCP(pkts[1].Payload()).DstPort(), Seq: TCP(pkts[1].Payload()).Seq(), MTU: 1006}
	if tcp := p.a.TCPStats(); tcp.PMTUDecreases != 1 || len(got) != 0 {
		t.Fatalf("own flow forwarded %v, tcp %+v", got, tcp)
	}
	p.sentSizes(1006)
	p.la.Inject(fragNeededFrame(macA, other, 1000))
	p.a.Poll(p.now, p.la)
	if st := p.a.Stats(); st.ICMPForwarded != 1 || len(got) != 1 {
		t.Fatalf("forwarded %v, stats %+v", got, st)
	}
	if e := got[0]; e.Remote != want.Remote || e.LocalPort != want.LocalPort+1 || e.RemotePort != want.RemotePort || e.Seq != want.Seq || e.MTU != 1000 {
		t.Fatalf("forwarded %+v", e)
	}
	p.a.HandleFragNeeded(p.now, p.la, got[0])
	if tcp := p.a.TCPStats(); tcp.PMTUNoConn != 2 {
		t.Fatalf("tcp %+v", tcp)
	}
	want.MTU = 900
	p.a.HandleFragNeeded(p.now, p.la, want)
	p.la.Flush()
	if tcp := p.a.TCPStats(); tcp.PMTUDecreases != 2 {
		t.Fatalf("tcp %+v", tcp)
	}
	if n, tooBig := p.sentSizes(900); n == 0 || tooBig {
		t.Fatalf("%d packets sent again, some above the MTU: %v", n, tooBig)
	}
}

// The path MTU cache: a lower MTU replaces a higher one, a higher one does
// not until the entry expires, ten minutes after it was learned (Linux's
// mtu_expires); an entry is gone at its expiry.
func TestPMTUCacheExpiry(t *testing.T) {
	var c pmtuCache
	const b = 0xc6120002
	now := int64(1)
	c.record(b, 1200, now)
	c.record(b, 1000, now+1)
	c.record(b, 1400, now+2) // not lower: ignored
	if mtu, ok := c.lookup(b, now+int64(pmtuExpires)); !ok || mtu != 1000 {
		t.Fatalf("lookup %d %v, want 1000", mtu, ok)
	}
	if _, ok := c.lookup(b, now+1+int64(pmtuExpires)); ok {
		t.Fatal("entry used past its expiry")
	}
	if _, ok := c.lookup(b+1, now); ok {
		t.Fatal("lookup of an unknown address")
	}
	c.record(b, 1400, now+1+int64(pmtuExpires)) // expired: learned anew
	if mtu, ok := c.lookup(b, now+1+int64(pmtuExpires)); !ok || mtu != 1400 {
		t.Fatalf("lookup %d %v, want 1400", mtu, ok)
	}
	c.record(b, 68, now+2+int64(pmtuExpires)) // a forged tiny MTU: kept at the floor
	if mtu, ok := c.lookup(b, now+2+int64(pmtuExpires)); !ok || mtu != pmtuCacheMin {
		t.Fatalf("lookup %d %v after a 68-byte report, want %d", mtu, ok, pmtuCacheMin)
	}
}

// The cache holds at most pmtuSets*pmtuWays entries: past that a new
// destination evicts the entry of its set that expires first, so each set
// holds its pmtuWays most recent destinations.
func TestPMTUCacheBound(t *testing.T) {
	var c pmtuCache
	const n = 4 * pmtuSets * pmtuWays
	addr := func(i int) uint32 { return 0xc6120000 + uint32(i)*7919 }
	for i := range n {
		c.record(addr(i), 1000, int64(1+i))
	}
	newer := map[*[pmtuWays]pmtuEntry]int{} // per set: destinations recorded after i
	live := 0
	for i := n - 1; i >= 0; i-- {
		set := c.set(addr(i))
		_, ok := c.lookup(addr(i), n)
		if want := newer[set] < pmtuWays; ok != want {
			t.Fatalf("destination %d: cached %v, want %v (%d newer in its set)", i, ok, want, newer[set])
		}
		newer[set]++
		if ok {
			live++
		}
	}
	if live > pmtuSets*pmtuWays {
		t.Fatalf("%d live entries, bound %d", live, pmtuSets*pmtuWays)
	}
	if a := testing.AllocsPerRun(100, func() {
		c.record(0xc6130001, 900, n)
		c.lookup(0xc6130001, n)
	}); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}

// A connection opened after a "fragmentation needed" to the same peer
// starts at the path's MSS, without a new ICMP round; once the entry
// expires the next one starts at the full MSS again.
func TestPMTUCachedForNewConnection(t *testing.T) {
	p := newStackPair(t, 8000)
	pkts := inFlight(t, p)
	p.la.Inject(fragNeededFrame(macA, pkts[1], 1000))
	p.a.Poll(p.now, p.la)
	p.sentSizes(1000)
	for i := 0; i < 200 && p.cl.done < 3; i++ {
		p.step()
	}

	open := func() (biggest int) {
		t.Helper()
		cl := &rrClient{req: p.cl.req, respLen: 8000}
		cl.out = append(cl.base[:0], cl.req)
		if _, err := p.b.ConnectTCP(p.now, ipA, 80, cl, &rrServerEP{}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 200 && cl.done == 0; i++ {
			p.now = p.now.Add(10e3)
			p.b.Poll(p.now, p.lb)
			p.lb.ForwardTo(p.la)
			p.a.Poll(p.now, p.la)
			for p.la.Sent() > 0 {
				b, _ := p.la.Take()
				ip := IPv4(Ethernet(b).Payload())
				if TCP(ip.Payload()).DstPort() == TCP(pkts[1].Payload()).DstPort() {
					continue // the first connection's
				}
				biggest = max(biggest, ip.TotalLen())
				p.lb.Inject(b)
			}
		}
		if cl.done == 0 {
			t.Fatalf("no exchange: A %+v", p.a.TCPStats())
		}
		return biggest
	}
	if got := open(); got > 1000 {
		t.Fatalf("new connection sent %d-byte packets over a 1000-byte path", got)
	}
	if tcp := p.a.TCPStats(); tcp.PMTUCached != 1 || tcp.PMTUDecreases != 1 {
		t.Fatalf("tcp %+v", tcp)
	}
	p.now = p.now.Add(pmtuExpires)
	if got := open(); got != 1500 {
		t.Fatalf("after expiry the largest packet was %d bytes, want 1500", got)
	}
}

// Both ends of an open consult the cache through negotiate: the SYN-ACK of
// an active open and the SYN of a passive one.
func TestPMTUCachedNegotiate(t *testing.T) {
	l := newTCPLayer(TCPConfig{MaxConns: 4, Seed: 1}, nil, time.Unix(1_000_000, 0))
	l.pmtu.record(ip4(ipB), 1000, l.now)
	for _, ts := range []bool{false, true} {
		c := l.newConn(tcpKey{raddr: ip4(ipB), laddr: ip4(ipA), rport: 1, lport: 80})
		l.negotiate(c, &TCPFields{MSS: 1460, HasTimestamp: ts})
		want := uint16(960)
		if ts {
			want -= 12
		}
		if c.mss != want {
			t.Fatalf("timestamps %v: mss %d, want %d", ts, c.mss, want)
		}
	}
	c := l.newConn(tcpKey{raddr: ip4(ipC), laddr: ip4(ipA), rport: 1, lport: 80})
	l.negotiate(c, &TCPFields{MSS: 1460})
	if c.mss != 1460 {
		t.Fatalf("another peer: mss %d", c.mss)
	}
}
