package netstack

import "encoding/binary"

// IPv4 for one stack: receive checks and dispatch, and the transmit API that
// ICMP and TCP build packets with.
//
// Transmit API (for transports, during Poll):
//
//	f, payload, ok := s.allocIPv4()       // payload: after Ethernet+IPv4 headers
//	n := writeSegment(payload)            // header + data, checksum with PseudoHeaderSum
//	s.sendIPv4(f, dst, ProtoTCP, n)       // fills IPv4+Ethernet, batches, or parks for ARP
//
// Frames go to the link in batches of Config.Batch (TxSubmit), and Poll
// flushes once at its end. The MSS for our MTU is s.mtu-40.

// ipv4Input checks one IPv4 packet and hands it to ICMP or TCP.
func (s *Stack) ipv4Input(e Ethernet) {
	ip := IPv4(e.Payload())
	switch ip.Check() {
	case IPv4OK:
	case IPv4Truncated:
		s.stats.IPv4Truncated++
		return
	case IPv4BadVersion:
		s.stats.IPv4BadVersion++
		return
	case IPv4BadHeaderLen:
		s.stats.IPv4BadHeaderLen++
		return
	default:
		s.stats.IPv4BadTotalLen++
		return
	}
	ip = ip[:ip.TotalLen()] // cut link padding
	if !s.cfg.TrustRxChecksums && !ip.HeaderChecksumOK() {
		s.stats.IPv4BadChecksum++
		return
	}
	if ip.HeaderLen() > IPv4MinHeaderLen {
		// Options are skipped: we neither forward nor record routes, and
		// RFC 1122 3.2.1.8 lets a host ignore the ones it does not implement.
		if !IPv4OptionsValid(ip.Options()) {
			s.stats.IPv4BadOptions++
			return
		}
		s.stats.IPv4Options++
	}
	if ip.IsFragment() {
		// No reassembly: our peers send with DF (TCP with MSS, small pings).
		s.stats.IPv4Fragments++
		return
	}
	src, dst := ip.Src(), ip.Dst()
	if s.martian(src) || s.ours(src) || src == s.subnetBcast {
		s.stats.IPv4BadSrc++
		return
	}
	if !s.ours(dst) {
		if dst == IPv4Broadcast || dst == s.subnetBcast {
			s.stats.IPv4Broadcast++
		} else {
			s.stats.IPv4WrongDst++
		}
		return
	}
	if e.Dst() == MACBroadcast {
		// RFC 1122 3.3.6: a unicast datagram in a link-layer broadcast is
		// silently discarded.
		s.stats.IPv4LinkBcast++
		return
	}
	// A valid packet for us: its sender is a live neighbour (or, off-link,
	// reached through the gateway, whose entry gleaning cannot refresh).
	if s.unicastOnLink(src) {
		s.arpGlean(src, e.Src())
	}
	switch ip.Protocol() {
	case ProtoICMP:
		s.icmpInput(ip)
	case ProtoTCP:
		s.tcpInput(ip) // TCP verifies its own checksum and counts its own drops
	default:
		s.stats.IPv4UnknownProto++
	}
}

// route returns the next hop for dst: dst itself on-link, the gateway
// otherwise. ok is false when dst is off-link and there is no gateway.
func (s *Stack) route(dst IPv4Addr) (hop IPv4Addr, ok bool) {
	if s.onLink(dst) {
		return dst, true
	}
	if s.cfg.Gateway == IPv4Zero {
		return IPv4Addr{}, false
	}
	return s.cfg.Gateway, true
}

// Offsets of the IPv4 header and its payload in a tx frame.
const (
	txIPv4Off    = EthernetHeaderLen
	txPayloadOff = EthernetHeaderLen + IPv4MinHeaderLen
)

// allocIPv4 lends a tx frame for one IPv4 packet without options. The caller
// writes the transport header and data into payload (len(payload) is the most
// the MTU allows: MTU-20 bytes, and never more than the frame holds) and then
// passes f to sendIPv4, or to freeTx to give it back unsent.
//
// Lifetime: f and payload belong to the caller until that call and must not
// be touched after it. Valid only during Poll (inside input handlers, timer
// and transmit hooks); ok is false (TxNoFrame counted) when the link has no
// free frame.
func (s *Stack) allocIPv4() (f Frame, payload []byte, ok bool) {
	f, ok = s.allocTx()
	if !ok {
		return Frame{}, nil, false
	}
	end := min(len(f.Buf), EthernetHeaderLen+s.mtu)
	if end < txPayloadOff { // a link whose frames cannot hold headers
		s.freeTx(f)
		s.stats.TxNoFrame++
		return Frame{}, nil, false
	}
	return f, f.Buf[txPayloadOff:end], true
}

// sendIPv4 completes a frame from allocIPv4 whose first payloadLen payload
// bytes are written: it fills the IPv4 header (our source, a fresh ID, DF,
// TTL 64, checksum) and the Ethernet header, and queues the frame for
// transmission in this Poll's batch. When dst's next hop is not resolved yet
// the frame waits in the pending queue (bounded; dropped and counted when
// full or when resolution fails) and an ARP request goes out. The frame is
// the stack's after this call in every case.
func (s *Stack) sendIPv4(f Frame, dst IPv4Addr, proto uint8, payloadLen int) {
	s.sendIPv4From(f, s.cfg.Addr, dst, proto, payloadLen)
}

// sendIPv4From is sendIPv4 from src, Addr or one of its aliases.
func (s *Stack) sendIPv4From(f Frame, src, dst IPv4Addr, proto uint8, payloadLen int) {
	if payloadLen < 0 || payloadLen > s.mtu-IPv4MinHeaderLen || txPayloadOff+payloadLen > len(f.Buf) {
		s.stats.TxTooBig++
		s.freeTx(f)
		return
	}
	bcast := dst == IPv4Broadcast || dst == s.subnetBcast
	hop, ok := s.route(dst)
	if !ok && !bcast {
		s.stats.TxNoRoute++
		s.freeTx(f)
		return
	}
	n := txPayloadOff + payloadLen
	s.writeHeaders(f.Buf, dst, proto, uint16(IPv4MinHeaderLen+payloadLen))
	if src != s.cfg.Addr {
		setIPv4Src(f.Buf[txIPv4Off:txPayloadOff], src)
	}
	if bcast {
		Ethernet(f.Buf).SetDst(MACBroadcast)
		s.queueTx(f, n)
		return
	}
	if mac, ok := s.resolve(hop); ok {
		Ethernet(f.Buf).SetDst(mac)
		s.queueTx(f, n)
		return
	}
	s.enqueuePending(f, n, hop)
}

// txTemplate holds the constant part of every frame we send: Ethernet source
// and type, and an IPv4 header with version/IHL, DF, TTL 64 and our source
// (Ethernet destination, total length, ID, protocol, destination and
// checksum zero). templateSum is the partial checksum of its IPv4 part.
type txTemplate struct {
	b   [txPayloadOff]byte
	sum uint32
}

func (t *txTemplate) init(mac MAC, src IPv4Addr) {
	(&EthernetFields{Src: mac, Type: EtherTypeIPv4}).Encode(t.b[:])
	(&IPv4Fields{Flags: IPv4FlagDF, TTL: 64, Src: src}).Encode(t.b[txIPv4Off:])
	t.b[txIPv4Off+ipChecksum], t.b[txIPv4Off+ipChecksum+1] = 0, 0
	t.sum = ChecksumAdd(0, t.b[txIPv4Off:])
}

// setIPv4Src puts src into the option-less IPv4 header ip, which holds the
// template's, and sums the header again (only an alias's packets pay it).
func setIPv4Src(ip []byte, src IPv4Addr) {
	copy(ip[ipSrc:], src[:])
	ip[ipChecksum], ip[ipChecksum+1] = 0, 0
	binary.BigEndian.PutUint16(ip[ipChecksum:], Checksum(ip))
}

// writeHeaders writes the Ethernet (destination left zero) and IPv4 headers
// of a frame we send: the template, then the per-packet fields, with the
// header checksum from the template's sum plus those fields' words instead
// of a pass over the header. It gives the same bytes as EthernetFields and
// IPv4Fields (TestWriteHeadersMatchesEncode) at a fraction of the cost.
func (s *Stack) writeHeaders(b []byte, dst IPv4Addr, proto uint8, totalLen uint16) {
	copy(b[:txPayloadOff], s.tmpl.b[:])
	ip := b[txIPv4Off:txPayloadOff]
	id := s.ipID
	s.ipID++
	binary.BigEndian.PutUint16(ip[ipTotalLen:], totalLen)
	binary.BigEndian.PutUint16(ip[ipID:], id)
	ip[ipProto] = proto
	copy(ip[ipDst:], dst[:])
	sum := uint64(s.tmpl.sum) + uint64(totalLen) + uint64(id) + uint64(proto) +
		uint64(binary.BigEndian.Uint16(dst[0:2])) + uint64(binary.BigEndian.Uint16(dst[2:4]))
	binary.BigEndian.PutUint16(ip[ipChecksum:], ^uint16(fold64(sum)))
}
