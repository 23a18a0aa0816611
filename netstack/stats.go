package netstack

// Stats are one stack's counters: plain integers owned by the shard that owns
// the stack, merged across shards at report time (Add). Every received frame
// ends in exactly one of the counters marked "rx outcome", so they sum to
// RxFrames; the rest annotate (IPv4Options) or count transmit-side events.
// Each field's stat tag says what it counts (count, drop, error or gauge) for
// reports.
type Stats struct {
	RxFrames uint64 `stat:"count"` // frames taken from the link
	TxFrames uint64 `stat:"count"` // frames submitted to the link
	Polls    uint64 `stat:"count"` // calls to Poll

	// Ethernet (rx outcomes)
	EthTruncated   uint64 `stat:"drop"`  // shorter than the 14-byte header
	EthNotForUs    uint64 `stat:"count"` // destination neither our MAC nor broadcast
	EthBadSrc      uint64 `stat:"drop"`  // multicast or broadcast source MAC
	EthUnknownType uint64 `stat:"count"` // EtherType other than IPv4 and ARP (VLAN tags included)

	// ARP (rx outcomes)
	ARPTruncated   uint64 `stat:"drop"`  // shorter than 28 bytes
	ARPUnsupported uint64 `stat:"drop"`  // not Ethernet/IPv4 ARP
	ARPBadOp       uint64 `stat:"drop"`  // operation neither request nor reply
	ARPBadSender   uint64 `stat:"drop"`  // sender MAC zero or multicast, or sender IP not a unicast address of our subnet
	ARPBadEthSrc   uint64 `stat:"drop"`  // Ethernet source is not the sender MAC (a bit flip, or a forger)
	ARPConflict    uint64 `stat:"count"` // another host claims our address
	ARPNotForUs    uint64 `stat:"count"` // target is not our address: ignored, the cache is not touched
	ARPRequestsRx  uint64 `stat:"count"` // requests for our address (each answered unless no tx frame)
	ARPRepliesRx   uint64 `stat:"count"` // replies to a request of ours, learned
	ARPUnsolicited uint64 `stat:"drop"`  // replies for our address to no request of ours, or not to our MAC

	// ARP (tx and cache)
	ARPRepliesTx     uint64 `stat:"count"` // replies sent
	ARPRequestsTx    uint64 `stat:"count"` // requests sent, retries included
	ARPResolveFailed uint64 `stat:"count"` // next hops that never answered (after ARPMaxRequests)
	ARPEvictions     uint64 `stat:"count"` // cache entries replaced because their probe window was full
	ARPGleanConflict uint64 `stat:"count"` // IPv4 packets from a known neighbour with another Ethernet source: the entry kept its MAC
	PendingDropFull  uint64 `stat:"drop"`  // frames dropped: the wait-for-resolution queue was full
	PendingDropFail  uint64 `stat:"drop"`  // frames dropped: their next hop did not resolve (or was evicted)

	// IPv4 (rx outcomes)
	IPv4Truncated    uint64 `stat:"drop"`  // shorter than 20 bytes, IHL or Total Length
	IPv4BadVersion   uint64 `stat:"drop"`  // version is not 4
	IPv4BadHeaderLen uint64 `stat:"drop"`  // IHL < 5
	IPv4BadTotalLen  uint64 `stat:"drop"`  // Total Length < IHL*4
	IPv4BadChecksum  uint64 `stat:"drop"`  // header checksum does not verify
	IPv4BadOptions   uint64 `stat:"drop"`  // malformed option list
	IPv4Fragments    uint64 `stat:"drop"`  // MF set or fragment offset non-zero: no reassembly
	IPv4BadSrc       uint64 `stat:"drop"`  // martian source: 0/8, 127/8, multicast, class E, broadcast, ours
	IPv4Broadcast    uint64 `stat:"count"` // to a broadcast address: nothing we serve answers broadcasts
	IPv4WrongDst     uint64 `stat:"count"` // not our address
	IPv4LinkBcast    uint64 `stat:"count"` // to our address but in a link-layer broadcast (RFC 1122 3.3.6)
	IPv4UnknownProto uint64 `stat:"count"` // neither ICMP nor TCP
	IPv4TCP          uint64 `stat:"count"` // handed to TCP
	NoTCP            uint64 `stat:"count"` // TCP segment, but no TCP wired into the stack

	// IPv4 (annotation, not an outcome)
	IPv4Options uint64 `stat:"count"` // packets that carried (valid, skipped) options

	// ICMP (rx outcomes)
	ICMPTruncated    uint64 `stat:"drop"`  // shorter than 8 bytes
	ICMPBadChecksum  uint64 `stat:"drop"`  // checksum does not verify
	ICMPEchoRequests uint64 `stat:"count"` // echo requests for us (each answered unless no tx frame)
	ICMPFragNeeded   uint64 `stat:"count"` // "fragmentation needed" (RFC 1191), taken to TCP's path MTU discovery
	ICMPOther        uint64 `stat:"count"` // other types: counted and ignored

	// ICMP (annotations of ICMPFragNeeded)
	ICMPBadQuote  uint64 `stat:"drop"`  // the quoted packet is not a TCP segment from our address
	ICMPForwarded uint64 `stat:"count"` // for no connection here: handed to the forwarder (Stack.ForwardFragNeeded)

	// ICMP (tx)
	ICMPEchoReplies uint64 `stat:"count"` // replies built (sent, or parked for ARP)
	ICMPEchoTooBig  uint64 `stat:"drop"`  // request larger than a tx frame can carry

	// Transmit
	TxNoFrame uint64 `stat:"drop"` // the link had no free tx frame: the packet was dropped
	TxNoRoute uint64 `stat:"drop"` // off-link destination and no gateway
	TxTooBig  uint64 `stat:"drop"` // payload larger than the MTU allows (a caller bug)
}

// Add adds o's counters to s (for merging shards).
func (s *Stats) Add(o *Stats) {
	s.RxFrames += o.RxFrames
	s.TxFrames += o.TxFrames
	s.Polls += o.Polls
	s.EthTruncated += o.EthTruncated
	s.EthNotForUs += o.EthNotForUs
	s.EthBadSrc += o.EthBadSrc
	s.EthUnknownType += o.EthUnknownType
	s.ARPTruncated += o.ARPTruncated
	s.ARPUnsupported += o.ARPUnsupported
	s.ARPBadOp += o.ARPBadOp
	s.ARPBadSender += o.ARPBadSender
	s.ARPBadEthSrc += o.ARPBadEthSrc
	s.ARPConflict += o.ARPConflict
	s.ARPNotForUs += o.ARPNotForUs
	s.ARPRequestsRx += o.ARPRequestsRx
	s.ARPRepliesRx += o.ARPRepliesRx
	s.ARPUnsolicited += o.ARPUnsolicited
	s.ARPRepliesTx += o.ARPRepliesTx
	s.ARPRequestsTx += o.ARPRequestsTx
	s.ARPResolveFailed += o.ARPResolveFailed
	s.ARPEvictions += o.ARPEvictions
	s.ARPGleanConflict += o.ARPGleanConflict
	s.PendingDropFull += o.PendingDropFull
	s.PendingDropFail += o.PendingDropFail
	s.IPv4Truncated += o.IPv4Truncated
	s.IPv4BadVersion += o.IPv4BadVersion
	s.IPv4BadHeaderLen += o.IPv4BadHeaderLen
	s.IPv4BadTotalLen += o.IPv4BadTotalLen
	s.IPv4BadChecksum += o.IPv4BadChecksum
	s.IPv4BadOptions += o.IPv4BadOptions
	s.IPv4Fragments += o.IPv4Fragments
	s.IPv4BadSrc += o.IPv4BadSrc
	s.IPv4Broadcast += o.IPv4Broadcast
	s.IPv4WrongDst += o.IPv4WrongDst
	s.IPv4LinkBcast += o.IPv4LinkBcast
	s.IPv4UnknownProto += o.IPv4UnknownProto
	s.IPv4TCP += o.IPv4TCP
	s.NoTCP += o.NoTCP
	s.IPv4Options += o.IPv4Options
	s.ICMPTruncated += o.ICMPTruncated
	s.ICMPBadChecksum += o.ICMPBadChecksum
	s.ICMPEchoRequests += o.ICMPEchoRequests
	s.ICMPFragNeeded += o.ICMPFragNeeded
	s.ICMPOther += o.ICMPOther
	s.ICMPBadQuote += o.ICMPBadQuote
	s.ICMPForwarded += o.ICMPForwarded
	s.ICMPEchoReplies += o.ICMPEchoReplies
	s.ICMPEchoTooBig += o.ICMPEchoTooBig
	s.TxNoFrame += o.TxNoFrame
	s.TxNoRoute += o.TxNoRoute
	s.TxTooBig += o.TxTooBig
}

// RxOutcomes is the sum of the rx-outcome counters; it equals RxFrames.
func (s *Stats) RxOutcomes() uint64 {
	return s.EthTruncated + s.EthNotForUs + s.EthBadSrc + s.EthUnknownType +
		s.ARPTruncated + s.ARPUnsupported + s.ARPBadOp + s.ARPBadSender + s.ARPBadEthSrc + s.ARPConflict +
		s.ARPNotForUs + s.ARPRequestsRx + s.ARPRepliesRx + s.ARPUnsolicited +
		s.IPv4Truncated + s.IPv4BadVersion + s.IPv4BadHeaderLen + s.IPv4BadTotalLen +
		s.IPv4BadChecksum + s.IPv4BadOptions + s.IPv4Fragments + s.IPv4BadSrc +
		s.IPv4Broadcast + s.IPv4WrongDst + s.IPv4LinkBcast + s.IPv4UnknownProto + s.IPv4TCP + s.NoTCP +
		s.ICMPTruncated + s.ICMPBadChecksum + s.ICMPEchoRequests + s.ICMPFragNeeded + s.ICMPOther
}
