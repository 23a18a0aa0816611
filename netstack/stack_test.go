package netstack

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

func TestNewStackRejectsBadConfig(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"hole in mask":     func(c *Config) { c.Netmask = IPv4Addr{255, 0, 255, 0} },
		"zero mask":        func(c *Config) { c.Netmask = IPv4Addr{} },
		"multicast mac":    func(c *Config) { c.MAC = MAC{1, 0, 0x5e, 0, 0, 1} },
		"zero mac":         func(c *Config) { c.MAC = MAC{} },
		"zero addr":        func(c *Config) { c.Addr = IPv4Addr{} },
		"network addr":     func(c *Config) { c.Addr = IPv4Addr{198, 18, 0, 0} },
		"broadcast addr":   func(c *Config) { c.Addr = IPv4Addr{198, 18, 0, 255} },
		"loopback":         func(c *Config) { c.Addr = IPv4Addr{127, 0, 0, 1} },
		"off-link gateway": func(c *Config) { c.Gateway = IPv4Addr{198, 19, 0, 1} },
		"gateway is us":    func(c *Config) { c.Gateway = ipA },
	} {
		cfg := testConfig()
		mod(&cfg)
		if _, err := NewStack(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	cfg := testConfig()
	cfg.Netmask, cfg.Gateway = IPv4Addr{255, 255, 255, 255}, IPv4Zero
	if _, err := NewStack(cfg); err != nil {
		t.Errorf("/32: %v", err)
	}
}

func TestARPRequestAnswered(t *testing.T) {
	c := newTestCtx(t, nil)
	c.send(arpFrame(t, macB, MACBroadcast, ARPRequest, macB, ipB, MACZero, ipA))
	c.expect(arpFrame(t, macA, macB, ARPReply, macA, ipA, macB, ipB))
	st := c.stats()
	if st.ARPRequestsRx != 1 || st.ARPRepliesTx != 1 || st.TxFrames != 1 {
		t.Fatalf("stats %+v", st)
	}
	// The requester was learned: a ping from it is answered without ARP.
	c.send(pingFromB(t, 1, "x"))
	c.expect(replyToB(t, 0, 1, "x"))
	if st := c.stats(); st.ARPRequestsTx != 0 {
		t.Fatalf("sent %d ARP requests", st.ARPRequestsTx)
	}
}

func TestARPNotForUs(t *testing.T) {
	c := newTestCtx(t, nil)
	c.send(
		arpFrame(t, macB, MACBroadcast, ARPRequest, macB, ipB, MACZero, ipC), // who-has C
		arpFrame(t, macB, MACBroadcast, ARPRequest, macB, ipB, MACZero, ipB), // gratuitous
	)
	c.expectNone()
	if st := c.stats(); st.ARPNotForUs != 2 || st.ARPRepliesTx != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Not for us, so B was not added to the cache.
	if e := c.s.arp.find(ipB); e != nil {
		t.Fatalf("B cached: %+v", e)
	}
	// Nor does a gratuitous ARP move a known B to a new MAC: only B's
	// request to us, or its reply to ours, does (TestARPPoisoning).
	knowB(c)
	c.send(arpFrame(t, macC, MACBroadcast, ARPRequest, macC, ipB, MACZero, ipB))
	if e := c.s.arp.find(ipB); e == nil || e.mac != macB || e.state != arpReachable {
		t.Fatalf("B changed: %+v", e)
	}
	c.expectNone()
}

// TestARPUnsolicitedReply: a reply we did not ask for neither adds an
// entry (it would let anyone plant one) nor updates one.
func TestARPUnsolicitedReply(t *testing.T) {
	c := newTestCtx(t, nil)
	c.send(arpFrame(t, macB, macA, ARPReply, macB, ipB, macA, ipA))
	if e := c.s.arp.find(ipB); e != nil {
		t.Fatalf("unsolicited reply created %+v", e)
	}
	c.send(pingFromB(t, 1, "")) // gleaned
	c.link.Discard()
	c.send(arpFrame(t, macC, macA, ARPReply, macC, ipB, macA, ipA))
	if e := c.s.arp.find(ipB); e == nil || e.mac != macB {
		t.Fatalf("reply changed the entry: %+v", e)
	}
	if st := c.stats(); st.ARPRepliesRx != 0 || st.ARPUnsolicited != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestARPBadPackets(t *testing.T) {
	c := newTestCtx(t, nil)
	good := arpFrame(t, macB, MACBroadcast, ARPRequest, macB, ipB, MACZero, ipA)
	mod := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	c.send(
		good[:14+27],                                      // truncated
		mod(func(b []byte) { b[15] = 6 }),                 // hardware type 6
		mod(func(b []byte) { b[21] = 3 }),                 // RARP operation
		mod(func(b []byte) { b[22] = 1 }),                 // multicast sender MAC
		mod(func(b []byte) { copy(b[28:], ipA[:]) }),      // sender claims our address
		mod(func(b []byte) { b[28], b[29] = 127, 0 }),     // martian sender
		mod(func(b []byte) { b[0] = 0x02; b[5] = 0x09 }),  // Ethernet dst not ours
		mod(func(b []byte) { b[6] = 0x01 }),               // multicast Ethernet src
		mod(func(b []byte) { b[12], b[13] = 0x86, 0xdd }), // IPv6 EtherType
		good[:10],
	)
	c.expectNone()
	st := c.stats()
	want := Stats{RxFrames: 10, ARPTruncated: 1, ARPUnsupported: 1, ARPBadOp: 1, ARPBadSender: 2, ARPConflict: 1,
		EthNotForUs: 1, EthBadSrc: 1, EthUnknownType: 1, EthTruncated: 1, Polls: 1}
	if st != want {
		t.Fatalf("stats\n got %+v\nwant %+v", st, want)
	}
}

func TestEchoReply(t *testing.T) {
	c := newTestCtx(t, nil)
	c.send(pingFromB(t, 1, "abcdefgh"), pingFromB(t, 2, ""), pingFromB(t, 3, string(make([]byte, 1472))))
	c.expect(replyToB(t, 0, 1, "abcdefgh"), replyToB(t, 1, 2, ""), replyToB(t, 2, 3, string(make([]byte, 1472))))
	st := c.stats()
	if st.ICMPEchoRequests != 3 || st.ICMPEchoReplies != 3 || st.TxFrames != 3 || st.ARPRequestsTx != 0 {
		t.Fatalf("stats %+v", st)
	}
	if c.link.Stats.Flushes != 1 || c.link.Stats.TxSubmitted != 3 {
		t.Fatalf("link stats %+v: want one flush of one batch", c.link.Stats)
	}
}

// TestEchoChecksumCorner uses data that makes the request checksum 0xffff
// or 0x0000 after the type change, the RFC 1624 corner cases.
func TestEchoChecksumCorner(t *testing.T) {
	c := newTestCtx(t, nil)
	for i := 0; i < 512; i++ {
		data := string([]byte{byte(i >> 8), byte(i)})
		c.send(pingFromB(t, uint16(i), data))
		c.expect(replyToB(t, uint16(i), uint16(i), data))
	}
}

// TestEchoReplyAllZero: a request with identifier, sequence number and data
// all zero gets a reply that is all zero but for its checksum, which must be
// 0xffff (RFC 1624's incremental update alone gives 0x0000 there).
func TestEchoReplyAllZero(t *testing.T) {
	c := newTestCtx(t, nil)
	c.send(echoFrame(t, macB, macA, ipB, ipA, ipOpts{id: 1, flags: layers.IPv4DontFragment}, false, 0, 0, nil))
	want := echoFrame(t, macA, macB, ipA, ipB, ipOpts{flags: layers.IPv4DontFragment}, true, 0, 0, nil)
	if icmp := want[len(want)-ICMPv4HeaderLen:]; !bytes.Equal(icmp, []byte{0, 0, 0xff, 0xff, 0, 0, 0, 0}) {
		t.Fatalf("gopacket's reply % x", icmp)
	}
	c.expect(want)
}

func TestEchoDrops(t *testing.T) {
	c := newTestCtx(t, nil)
	good := pingFromB(t, 1, "abcd")
	mod := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	df := layers.IPv4DontFragment
	c.send(
		mod(func(b []byte) { b[len(b)-1] ^= 1 }),                                                      // ICMP checksum
		echoFrame(t, macB, macA, ipB, ipA, ipOpts{flags: df}, true, 1, 1, nil),                        // echo reply: ignored
		echoFrame(t, macB, MACBroadcast, ipB, IPv4Broadcast, ipOpts{flags: df}, false, 1, 1, nil),     // broadcast ping
		echoFrame(t, macB, MACBroadcast, ipB, IPv4Addr{198, 18, 0, 255}, ipOpts{}, false, 1, 1, nil),  // subnet broadcast
		echoFrame(t, macB, macA, ipB, ipC, ipOpts{}, false, 1, 1, nil),                                // not our address
		echoFrame(t, macB, macA, ipB, ipA, ipOpts{flags: layers.IPv4MoreFragments}, false, 1, 1, nil), // fragment
		echoFrame(t, macB, macA, ipB, ipA, ipOpts{frag: 100}, false, 1, 1, nil),                       // later fragment
		echoFrame(t, macB, macA, IPv4Addr{127, 0, 0, 1}, ipA, ipOpts{}, false, 1, 1, nil),             // martian
		echoFrame(t, macB, macA, ipA, ipA, ipOpts{}, false, 1, 1, nil),                                // our own source
		mod(func(b []byte) { b[24] ^= 0x10 }),                                                         // IP header checksum
		mod(func(b []byte) { b[14] = 0x65 }),                                                          // version
		mod(func(b []byte) { b[14] = 0x44 }),                                                          // IHL 4
		mod(func(b []byte) { b[16], b[17] = 0, 19 }),                                                  // total length < IHL
		mod(func(b []byte) { b[16], b[17] = 0x05, 0xdc }),                                             // total length > frame
		good[:14+19],
		mod(func(b []byte) { b[23] = 17 }),               // protocol byte changed: header checksum fails
		mod(func(b []byte) { copy(b, MACBroadcast[:]) }), // unicast IP in a link broadcast
	)
	c.expectNone()
	st := c.stats()
	want := Stats{RxFrames: 17, Polls: 1, IPv4LinkBcast: 1, ICMPBadChecksum: 1, ICMPOther: 1, IPv4Broadcast: 2, IPv4WrongDst: 1,
		IPv4Fragments: 2, IPv4BadSrc: 2, IPv4BadChecksum: 2, IPv4BadVersion: 1, IPv4BadHeaderLen: 1,
		IPv4BadTotalLen: 1, IPv4Truncated: 2}
	if st != want {
		t.Fatalf("stats\n got %+v\nwant %+v", st, want)
	}
}

func TestIPv4ProtocolsAndOptions(t *testing.T) {
	c := newTestCtx(t, nil)
	udpIP := ipv4Layer(ipB, ipA, layers.IPProtocolUDP, ipOpts{})
	udpL := &layers.UDP{SrcPort: 1, DstPort: 2}
	if err := udpL.SetNetworkLayerForChecksum(udpIP); err != nil {
		t.Fatal(err)
	}
	udp := serialize(t, ethLayer(macB, macA, layers.EthernetTypeIPv4), udpIP, udpL)
	tcpIP := ipv4Layer(ipB, ipA, layers.IPProtocolTCP, ipOpts{})
	tcpL := &layers.TCP{SrcPort: 1, DstPort: 80, SYN: true, Window: 100}
	if err := tcpL.SetNetworkLayerForChecksum(tcpIP); err != nil {
		t.Fatal(err)
	}
	tcp := serialize(t, ethLayer(macB, macA, layers.EthernetTypeIPv4), tcpIP, tcpL)
	// A ping with a router-alert option: answered, options skipped.
	ipl := ipv4Layer(ipB, ipA, layers.IPProtocolICMPv4, ipOpts{id: 5})
	ipl.Options = []layers.IPv4Option{{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}}}
	withOpt := serialize(t, ethLayer(macB, macA, layers.EthernetTypeIPv4), ipl,
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 0x4242, Seq: 9})
	// A malformed option list (length runs past the header).
	bad := append([]byte(nil), withOpt...)
	bad[14+21] = 9
	bad[14+10], bad[14+11] = 0, 0
	ck := Checksum(bad[14 : 14+24])
	bad[14+10], bad[14+11] = byte(ck>>8), byte(ck)

	c.send(udp, tcp, withOpt, bad)
	c.expect(replyToB(t, 0, 9, ""))
	st := c.stats()
	if st.IPv4UnknownProto != 1 || st.NoTCP != 1 || st.IPv4Options != 1 || st.IPv4BadOptions != 1 || st.ICMPEchoReplies != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestEthernetPaddingIgnored(t *testing.T) {
	c := newTestCtx(t, nil)
	f := append(pingFromB(t, 1, ""), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) // padded to 60
	c.send(f)
	c.expect(replyToB(t, 0, 1, ""))
}

func TestTrustRxChecksums(t *testing.T) {
	c := newTestCtx(t, func(c *Config) { c.TrustRxChecksums = true })
	b := pingFromB(t, 1, "ab")
	b[24] ^= 0xff // IP checksum wrong: trusted anyway
	c.send(b)
	if got := c.link.Discard(); got != 1 {
		t.Fatalf("%d replies, want 1", got)
	}
	if st := c.stats(); st.IPv4BadChecksum != 0 || st.ICMPEchoReplies != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestResolveThenSend: a ping from an unknown off-link address via the
// gateway. The reply waits for the gateway's MAC; the ARP request is retried
// with backoff; when the reply comes the frame goes out.
func TestResolveThenSend(t *testing.T) {
	c := newTestCtx(t, nil)
	ping := echoFrame(t, macGW, macA, ipFar, ipA, ipOpts{}, false, 7, 1, []byte("hi"))
	c.send(ping)
	req := arpFrame(t, macA, MACBroadcast, ARPRequest, macA, ipA, MACZero, ipGW)
	c.expect(req)
	if c.s.Pending() != 1 {
		t.Fatalf("pending %d", c.s.Pending())
	}
	if want := c.now.Add(time.Second); !c.next.Equal(want) {
		t.Fatalf("next deadline %v, want %v", c.next, want)
	}
	c.advance(999 * time.Millisecond)
	c.expectNone()
	c.advance(time.Millisecond)
	c.expect(req) // first retry at 1s, next at 1s+2s
	if want := c.now.Add(2 * time.Second); !c.next.Equal(want) {
		t.Fatalf("next deadline %v, want %v", c.next, want)
	}
	c.send(arpFrame(t, macGW, macA, ARPReply, macGW, ipGW, macA, ipA))
	c.expect(echoFrame(t, macA, macGW, ipA, ipFar, ipOpts{flags: layers.IPv4DontFragment}, true, 7, 1, []byte("hi")))
	st := c.stats()
	if c.s.Pending() != 0 || st.ARPRequestsTx != 2 || st.ARPRepliesRx != 1 || !c.next.IsZero() {
		t.Fatalf("pending %d next %v stats %+v", c.s.Pending(), c.next, st)
	}
	// The gateway is cached now.
	c.send(ping)
	if c.link.Discard() != 1 {
		t.Fatal("second reply not sent at once")
	}
}

func TestResolveFails(t *testing.T) {
	c := newTestCtx(t, nil)
	c.send(echoFrame(t, macGW, macA, ipFar, ipA, ipOpts{}, false, 7, 1, nil),
		echoFrame(t, macGW, macA, ipFar, ipA, ipOpts{}, false, 7, 2, nil))
	req := arpFrame(t, macA, MACBroadcast, ARPRequest, macA, ipA, MACZero, ipGW)
	c.expect(req) // one request for both
	c.advance(time.Second)
	c.expect(req)
	c.advance(2 * time.Second)
	c.expect(req)
	c.advance(4*time.Second - 1)
	c.expectNone()
	if c.s.Pending() != 2 {
		t.Fatalf("pending %d", c.s.Pending())
	}
	c.advance(1)
	c.expectNone()
	st := c.stats()
	if c.s.Pending() != 0 || st.ARPResolveFailed != 1 || st.PendingDropFail != 2 || st.ARPRequestsTx != 3 || !c.next.IsZero() {
		t.Fatalf("pending %d next %v stats %+v", c.s.Pending(), c.next, st)
	}
	c.s.Close(c.link)
	if rx, tx := c.link.Lent(); rx != 0 || tx != 0 {
		t.Fatalf("frames leaked after Close: rx %d tx %d", rx, tx)
	}
}

func TestPendingQueueBounded(t *testing.T) {
	c := newTestCtx(t, func(c *Config) { c.PendingMax = 4 })
	for i := range 6 {
		c.link.Inject(echoFrame(t, macGW, macA, ipFar, ipA, ipOpts{}, false, 7, uint16(i), nil))
	}
	c.poll()
	c.expect(arpFrame(t, macA, MACBroadcast, ARPRequest, macA, ipA, MACZero, ipGW))
	if st := c.stats(); c.s.Pending() != 4 || st.PendingDropFull != 2 {
		t.Fatalf("pending %d stats %+v", c.s.Pending(), st)
	}
	c.send(arpFrame(t, macGW, macA, ARPReply, macGW, ipGW, macA, ipA))
	for i := range 4 { // the four oldest, in order
		c.expect1(echoFrame(t, macA, macGW, ipA, ipFar, ipOpts{id: uint16(i), flags: layers.IPv4DontFragment}, true, 7, uint16(i), nil))
	}
	c.expectNone()
}

// expect1 asserts the next transmitted frame only.
func (c *testCtx) expect1(want []byte) {
	c.t.Helper()
	got, ok := c.link.Take()
	if !ok || string(got) != string(want) {
		c.t.Fatalf("got % x\nwant % x\n%s", got, want, dump(want))
	}
}

func TestGleaning(t *testing.T) {
	c := newTestCtx(t, func(c *Config) { c.ARPLifetime = 10 * time.Second })
	c.send(pingFromB(t, 1, "")) // B learned from its ping
	c.expect(replyToB(t, 0, 1, ""))
	c.advance(9 * time.Second)
	c.send(pingFromB(t, 2, "")) // refreshed
	c.expect(replyToB(t, 1, 2, ""))
	c.advance(9 * time.Second)
	c.send(pingFromB(t, 3, "")) // still cached: 9s after the refresh
	c.expect(replyToB(t, 2, 3, ""))
	if st := c.stats(); st.ARPRequestsTx != 0 {
		t.Fatalf("ARP requests %d", st.ARPRequestsTx)
	}
	// A frame from a new MAC for B does not move the entry (no checksum
	// covers the Ethernet source; TestARPGleanKeepsMAC): if B really moved,
	// its request to us, or our request once the entry expires, tells.
	c.send(echoFrame(t, macC, macA, ipB, ipA, ipOpts{flags: layers.IPv4DontFragment}, false, 1, 1, nil))
	c.expect(echoFrame(t, macA, macB, ipA, ipB, ipOpts{id: 3, flags: layers.IPv4DontFragment}, true, 1, 1, nil))
}

// TestGleanNeverEvicts: a flood of pings from many on-link sources fills
// the cache but does not evict the gateway's entry: traffic through the
// gateway flows on without an ARP request.
func TestGleanNeverEvicts(t *testing.T) {
	c := newTestCtx(t, func(c *Config) { c.ARPCacheSize = 8; c.Netmask = IPv4Addr{255, 255, 0, 0} })
	c.send(arpFrame(t, macGW, MACBroadcast, ARPRequest, macGW, ipGW, MACZero, ipA))
	c.link.Discard()
	for i := range 200 {
		src := IPv4Addr{198, 18, byte(1 + i/200), byte(1 + i%200)}
		c.send(echoFrame(t, MAC{2, 0, 0, 1, 0, byte(i)}, macA, src, ipA, ipOpts{}, false, 1, uint16(i), nil))
		c.link.Discard()
	}
	if e := c.s.arp.find(ipGW); e == nil || e.mac != macGW {
		t.Fatalf("gateway entry evicted by gleaning: %+v", e)
	}
	before := c.stats()
	if before.ARPEvictions == 0 {
		t.Fatal("no evictions: the cache was never under pressure")
	}
	c.send(echoFrame(t, macGW, macA, ipFar, ipA, ipOpts{}, false, 7, 1, nil))
	c.expect(echoFrame(t, macA, macGW, ipA, ipFar, ipOpts{id: 200, flags: layers.IPv4DontFragment}, true, 7, 1, nil))
}

func TestARPEntryExpires(t *testing.T) {
	c := newTestCtx(t, func(c *Config) { c.ARPLifetime = 10 * time.Second })
	c.send(arpFrame(t, macB, MACBroadcast, ARPRequest, macB, ipB, MACZero, ipA))
	c.link.Discard()
	c.advance(10 * time.Second)
	// Sending to B now needs a new resolution.
	c.during(func() {
		f, _, ok := c.s.allocIPv4()
		if !ok {
			t.Fatal("no frame")
		}
		c.s.sendIPv4(f, ipB, ProtoUDP, 0)
	})
	c.expect(arpFrame(t, macA, MACBroadcast, ARPRequest, macA, ipA, MACZero, ipB))
	if c.s.Pending() != 1 {
		t.Fatalf("pending %d", c.s.Pending())
	}
}

func TestCloseReturnsFrames(t *testing.T) {
	c := newTestCtx(t, nil)
	c.send(echoFrame(t, macGW, macA, ipFar, ipA, ipOpts{}, false, 7, 1, nil), pingFromB(t, 1, ""))
	if c.link.Discard() != 2 || c.s.Pending() != 1 || c.s.HeldTx() < 2 {
		t.Fatalf("pending %d held %d", c.s.Pending(), c.s.HeldTx())
	}
	c.s.Close(c.link)
	if rx, tx := c.link.Lent(); rx != 0 || tx != 0 || c.s.HeldTx() != 0 {
		t.Fatalf("after Close: rx %d tx %d held %d", rx, tx, c.s.HeldTx())
	}
}

// TestARPRefresh: traffic through the gateway (which gleaning cannot
// refresh) sends one unicast ARP request in the entry's last quarter of life;
// the answer extends the entry, so replies never wait for resolution.
func TestARPRefresh(t *testing.T) {
	c := newTestCtx(t, func(c *Config) { c.ARPLifetime = 40 * time.Second })
	ping := echoFrame(t, macGW, macA, ipFar, ipA, ipOpts{}, false, 7, 1, nil)
	c.send(arpFrame(t, macGW, MACBroadcast, ARPRequest, macGW, ipGW, MACZero, ipA))
	c.link.Discard()
	c.advance(29 * time.Second)
	c.send(ping)
	c.expect(echoFrame(t, macA, macGW, ipA, ipFar, ipOpts{flags: layers.IPv4DontFragment}, true, 7, 1, nil))
	c.advance(2 * time.Second) // 31s: 9s of life left
	c.send(ping)
	c.expect(
		arpFrame(t, macA, macGW, ARPRequest, macA, ipA, MACZero, ipGW), // unicast refresh
		echoFrame(t, macA, macGW, ipA, ipFar, ipOpts{id: 1, flags: layers.IPv4DontFragment}, true, 7, 1, nil),
	)
	c.send(ping) // one refresh only
	if c.link.Discard() != 1 {
		t.Fatal("want only the echo reply")
	}
	c.send(arpFrame(t, macGW, macA, ARPReply, macGW, ipGW, macA, ipA))
	c.advance(30 * time.Second) // past the first lifetime, within the refreshed one
	c.send(ping)
	if got := c.link.Discard(); got != 1 || c.s.Pending() != 0 {
		t.Fatalf("sent %d, pending %d: the refreshed entry should still be in use", got, c.s.Pending())
	}
}

// TestTransmitAPI drives allocIPv4/sendIPv4 the way TCP will: a UDP
// datagram (checked by gopacket) to a known neighbour, a full-MTU payload, an
// oversized one, and one to the broadcast address.
func TestTransmitAPI(t *testing.T) {
	c := newTestCtx(t, nil)
	c.send(arpFrame(t, macB, MACBroadcast, ARPRequest, macB, ipB, MACZero, ipA))
	c.link.Discard()

	udpIP := ipv4Layer(ipA, ipB, layers.IPProtocolUDP, ipOpts{flags: layers.IPv4DontFragment})
	udpL := &layers.UDP{SrcPort: 9, DstPort: 9}
	if err := udpL.SetNetworkLayerForChecksum(udpIP); err != nil {
		t.Fatal(err)
	}
	want := serialize(t, ethLayer(macA, macB, layers.EthernetTypeIPv4), udpIP, udpL, gopacket.Payload("hello"))
	c.during(func() {
		f, payload, ok := c.s.allocIPv4()
		if !ok || len(payload) != 1500-20 {
			t.Fatalf("ok %v, payload %d bytes", ok, len(payload))
		}
		n := copy(payload, want[34:])
		c.s.sendIPv4(f, ipB, ProtoUDP, n)
	})
	c.expect(want)

	c.during(func() {
		f, payload, _ := c.s.allocIPv4()
		c.s.sendIPv4(f, ipB, 253, len(payload)) // exactly the MTU
		f, payload, _ = c.s.allocIPv4()
		c.s.sendIPv4(f, ipB, 253, len(payload)+1) // too big: dropped
		f, _, _ = c.s.allocIPv4()
		c.s.sendIPv4(f, IPv4Broadcast, 253, 0)
	})
	full, _ := c.link.Take()
	if len(full) != 1514 || IPv4(full[14:]).TotalLen() != 1500 || IPv4(full[14:]).ID() != 1 {
		t.Fatalf("full frame: %d bytes", len(full))
	}
	bc, _ := c.link.Take()
	if e := Ethernet(bc); e.Dst() != MACBroadcast || IPv4(e.Payload()).Dst() != IPv4Broadcast || len(bc) != 34 {
		t.Fatalf("broadcast frame % x", bc)
	}
	c.expectNone()
	if st := c.stats(); st.TxTooBig != 1 || st.TxFrames != 3+1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestEchoReplyTTL: a request that arrives with TTL 1 (or 0: we do not
// forward, so TTL does not matter on delivery) gets a reply with TTL 64.
func TestEchoReplyTTL(t *testing.T) {
	c := newTestCtx(t, nil)
	for _, ttl := range []uint8{1, 255} {
		c.send(echoFrame(t, macB, macA, ipB, ipA, ipOpts{ttl: ttl}, false, 1, 1, nil))
		b, ok := c.link.Take()
		if !ok || IPv4(b[14:]).TTL() != 64 {
			t.Fatalf("ttl %d: reply % x", ttl, b)
		}
	}
	b := echoFrame(t, macB, macA, ipB, ipA, ipOpts{ttl: 1}, false, 1, 1, nil)
	b[14+8] = 0 // TTL 0 (gopacket's 0 means 64 in ipOpts)
	fixChecksums(b, true, false)
	c.send(b)
	if rb, ok := c.link.Take(); !ok || IPv4(rb[14:]).TTL() != 64 {
		t.Fatalf("ttl 0: reply % x", rb)
	}
}

func TestNoRoute(t *testing.T) {
	c := newTestCtx(t, func(c *Config) { c.Gateway = IPv4Zero })
	c.send(echoFrame(t, macB, macA, ipFar, ipA, ipOpts{}, false, 7, 1, nil))
	c.expectNone()
	if st := c.stats(); st.TxNoRoute != 1 || st.ICMPEchoRequests != 1 {
		t.Fatalf("stats %+v", st)
	}
	if _, tx := c.link.Lent(); tx != c.s.HeldTx() {
		t.Fatalf("%d tx frames lent, stack holds %d", tx, c.s.HeldTx())
	}
}

func TestTxNoFrame(t *testing.T) {
	c := newTestCtx(t, nil)
	c.link = NewChanLink(1500, 2) // two tx frames only
	c.send(pingFromB(t, 1, ""), pingFromB(t, 2, ""))
	c.link.Inject(pingFromB(t, 3, ""))
	c.poll()
	if got := c.link.Discard(); got != 2 {
		t.Fatalf("sent %d", got)
	}
	if st := c.stats(); st.TxNoFrame != 1 || st.ICMPEchoRequests != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPollBoundsRxWork(t *testing.T) {
	c := newTestCtx(t, func(c *Config) { c.Batch = 4; c.MaxRxBatches = 2 })
	for i := range 9 {
		c.link.Inject(arpFrame(t, macB, MACBroadcast, ARPRequest, macB, ipB, MACZero, ipC))
		_ = i
	}
	c.poll()
	if !c.next.Equal(c.now) || c.s.Stats().RxFrames != 8 {
		t.Fatalf("next %v rx %d: want an immediate deadline after 8 frames", c.next, c.s.Stats().RxFrames)
	}
	c.poll()
	if !c.next.IsZero() || c.s.Stats().RxFrames != 9 {
		t.Fatalf("next %v rx %d", c.next, c.s.Stats().RxFrames)
	}
}

// TestWriteHeadersMatchesEncode: the template fast path writes the same bytes
// as the fields structs, for random destinations, protocols, lengths and IDs.
func TestWriteHeadersMatchesEncode(t *testing.T) {
	c := newTestCtx(t, nil)
	r := rand.New(rand.NewPCG(11, 12))
	got, want := filled(40), filled(40)
	for i := 0; i < 20000; i++ {
		var dst IPv4Addr
		binary.BigEndian.PutUint32(dst[:], r.Uint32())
		proto, tl, id := uint8(r.Uint32()), uint16(r.Uint32()), uint16(r.Uint32())
		c.s.ipID = id
		c.s.writeHeaders(got, dst, proto, tl)
		(&EthernetFields{Src: macA, Type: EtherTypeIPv4}).Encode(want)
		(&IPv4Fields{TotalLen: tl, ID: id, Flags: IPv4FlagDF, TTL: 64, Protocol: proto, Src: ipA, Dst: dst}).Encode(want[14:])
		if !bytes.Equal(got, want) {
			t.Fatalf("dst %v proto %d len %d id %d\ngot  % x\nwant % x", dst, proto, tl, id, got, want)
		}
		if c.s.ipID != id+1 {
			t.Fatal("ID not advanced")
		}
	}
}
