package netstack

// icmpInput answers echo requests (RFC 792, RFC 1122 3.2.2.6), takes
// "fragmentation needed" to TCP (pmtu.go) and counts everything else. ip is a checked packet for our address.
func (s *Stack) icmpInput(ip IPv4) {
	m := ICMPv4(ip.Payload())
	if !m.Valid() {
		s.stats.ICMPTruncated++
		return
	}
	if !s.cfg.TrustRxChecksums && !m.ChecksumOK() {
		s.stats.ICMPBadChecksum++
		return
	}
	if m.Type() == ICMPv4Unreachable && m.Code() == ICMPv4FragNeeded {
		s.stats.ICMPFragNeeded++
		s.fragNeeded(m)
		return
	}
	if m.Type() != ICMPv4EchoRequest {
		s.stats.ICMPOther++
		return
	}
	s.stats.ICMPEchoRequests++
	f, payload, ok := s.allocIPv4()
	if !ok {
		return
	}
	if len(m) > len(payload) {
		s.stats.ICMPEchoTooBig++
		s.freeTx(f)
		return
	}
	// The reply is the request with type 0: identifier, sequence number and
	// data come back unchanged, and the checksum is updated for the one
	// changed word (RFC 1624) instead of summing the data again.
	r := ICMPv4(payload[:len(m)])
	copy(r, m)
	code := uint16(m.Code())
	r[icmpType] = ICMPv4EchoReply
	check := ChecksumUpdate16(m.Checksum(), ICMPv4EchoRequest<<8|code, ICMPv4EchoReply<<8|code)
	r[icmpChecksum], r[icmpChecksum+1] = byte(check>>8), byte(check)
	s.stats.ICMPEchoReplies++
	s.sendIPv4From(f, ip.Dst(), ip.Src(), ProtoICMP, len(r)) // from the address asked
}
