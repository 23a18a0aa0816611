package netstack

import (
	"testing"
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
