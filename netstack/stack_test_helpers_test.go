package netstack

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"percore/internal/testutil"
)

// The test network: the stack is host A (198.18.0.1/24); peers B and C are
// on-link; GW is the gateway; far is off-link.
var (
	macC  = MAC{0x02, 0, 0, 0, 0, 0x03}
	macGW = MAC{0x02, 0, 0, 0, 0, 0xfe}
	ipC   = IPv4Addr{198, 18, 0, 3}
	ipGW  = IPv4Addr{198, 18, 0, 254}
	ipFar = IPv4Addr{198, 19, 7, 7}
	mask  = IPv4Addr{255, 255, 255, 0}
)

// testCtx is a stack on a ChanLink with a fake clock, in the style of
// gVisor's test context: send injects a frame and polls, expect asserts the
// exact frames the stack transmitted and that nothing else was.
type testCtx struct {
	t    testing.TB
	link *ChanLink
	s    *Stack
	now  time.Time
	next time.Time // the last deadline Poll returned
}

func testConfig() Config {
	return Config{MAC: macA, Addr: ipA, Netmask: mask, Gateway: ipGW}
}

// newTestCtx builds a stack from testConfig, changed by mod if not nil.
func newTestCtx(t testing.TB, mod func(*Config)) *testCtx {
	t.Helper()
	cfg := testConfig()
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewStack(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &testCtx{t: t, link: NewChanLink(1500, 256), s: s, now: time.Unix(1_000_000, 0)}
}

// poll runs the stack once at the current fake time.
func (c *testCtx) poll() {
	c.next = c.s.Poll(c.now, c.link)
	c.checkLent()
}

// checkLent asserts the stack holds no rx frame and exactly its pending tx
// frames after Poll.
func (c *testCtx) checkLent() {
	c.t.Helper()
	rx, tx := c.link.Lent()
	if rx != 0 || tx != c.s.HeldTx() {
		c.t.Fatalf("after Poll: %d rx frames and %d tx frames lent, stack holds %d", rx, tx, c.s.HeldTx())
	}
}

// advance moves the fake clock and polls.
func (c *testCtx) advance(d time.Duration) {
	c.now = c.now.Add(d)
	c.poll()
}

// send injects frames and polls once.
func (c *testCtx) send(frames ...[]byte) {
	c.t.Helper()
	for _, f := range frames {
		if !c.link.Inject(f) {
			c.t.Fatal("inject refused")
		}
	}
	c.poll()
}

// expect asserts that the stack transmitted exactly want, in order.
func (c *testCtx) expect(want ...[]byte) {
	c.t.Helper()
	for i, w := range want {
		got, ok := c.link.Take()
		if !ok {
			c.t.Fatalf("frame %d of %d not sent; want:\n%s", i+1, len(want), dump(w))
		}
		if !bytes.Equal(got, w) {
			c.t.Fatalf("frame %d differs\ngot:  % x\n%s\nwant: % x\n%s", i+1, got, dump(got), w, dump(w))
		}
	}
	c.expectNone()
}

// expectNone asserts that nothing (more) was transmitted.
func (c *testCtx) expectNone() {
	c.t.Helper()
	if got, ok := c.link.Take(); ok {
		c.t.Fatalf("unexpected frame sent: % x\n%s", got, dump(got))
	}
}

// stats returns the stack's counters after checking their accounting.
func (c *testCtx) stats() Stats {
	c.t.Helper()
	st := c.s.Stats()
	if st.RxOutcomes() != st.RxFrames {
		c.t.Fatalf("rx outcomes %d != rx frames %d: %+v", st.RxOutcomes(), st.RxFrames, st)
	}
	return st
}

func dump(b []byte) string {
	return gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default).Dump()
}

// Frames below are built with gopacket, independently of the package's own
// encoders.

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	// gopacket pads to the 60-byte Ethernet minimum; the stack does not
	// (the NIC does), so cut the padding for byte comparisons.
	b := testutil.Serialize(t, ls...)
	if e := (Ethernet(b)); e.Valid() && e.Type() == EtherTypeIPv4 && len(b) > 14+20 {
		b = b[:14+IPv4(b[14:]).TotalLen()]
	} else if e.Valid() && e.Type() == EtherTypeARP && len(b) > 14+ARPLen {
		b = b[:14+ARPLen]
	}
	return append([]byte(nil), b...)
}

func ethLayer(src, dst MAC, typ layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: net.HardwareAddr(src[:]), DstMAC: net.HardwareAddr(dst[:]), EthernetType: typ}
}

func arpFrame(t testing.TB, ethSrc, ethDst MAC, op uint16, sha MAC, spa IPv4Addr, tha MAC, tpa IPv4Addr) []byte {
	return serialize(t, ethLayer(ethSrc, ethDst, layers.EthernetTypeARP), &layers.ARP{
		AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: op, SourceHwAddress: sha[:], SourceProtAddress: spa[:], DstHwAddress: tha[:], DstProtAddress: tpa[:],
	})
}

// ipOpts tweaks an IPv4 header built by ipv4Frame.
type ipOpts struct {
	id    uint16
	ttl   uint8 // 0 means 64
	flags layers.IPv4Flag
	frag  uint16 // in 8-byte units
}

func ipv4Layer(src, dst IPv4Addr, proto layers.IPProtocol, o ipOpts) *layers.IPv4 {
	ttl := o.ttl
	if ttl == 0 {
		ttl = 64
	}
	return &layers.IPv4{Version: 4, Id: o.id, TTL: ttl, Flags: o.flags, FragOffset: o.frag, Protocol: proto,
		SrcIP: net.IP(src[:]), DstIP: net.IP(dst[:])}
}

// echoFrame is an ICMP echo request (or reply, with reply true) frame.
func echoFrame(t testing.TB, ethSrc, ethDst MAC, src, dst IPv4Addr, o ipOpts, reply bool, id, seq uint16, data []byte) []byte {
	typ := uint8(layers.ICMPv4TypeEchoRequest)
	if reply {
		typ = layers.ICMPv4TypeEchoReply
	}
	return serialize(t, ethLayer(ethSrc, ethDst, layers.EthernetTypeIPv4), ipv4Layer(src, dst, layers.IPProtocolICMPv4, o),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(typ, 0), Id: id, Seq: seq}, gopacket.Payload(data))
}

// pingFromB is an echo request from B to us with the usual fields.
func pingFromB(t testing.TB, seq uint16, data string) []byte {
	return echoFrame(t, macB, macA, ipB, ipA, ipOpts{id: 0x100 + seq, flags: layers.IPv4DontFragment}, false, 0x4242, seq, []byte(data))
}

// replyToB is the stack's reply to pingFromB, the stack's ipID being id.
func replyToB(t testing.TB, id, seq uint16, data string) []byte {
	return echoFrame(t, macA, macB, ipA, ipB, ipOpts{id: id, flags: layers.IPv4DontFragment}, true, 0x4242, seq, []byte(data))
}

// during runs fn as if inside Poll, the way TCP's hooks run (the link set),
// then submits and flushes as Poll's end does. Tests of the transmit API
// (allocIPv4, sendIPv4) use it.
func (c *testCtx) during(fn func()) {
	c.s.enter(c.now, c.link)
	fn()
	c.s.leave()
	c.link.Flush()
	c.checkLent()
}
