package netstack

import (
	"bytes"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// echoRequestFrame is a hand-assembled ping from 198.18.0.2 (02:00:00:00:00:02)
// to 198.18.0.1 (02:00:00:00:00:01) with 8 bytes of data; the checksums were
// computed independently of this package.
var echoRequestFrame = []byte{
	// Ethernet
	0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // dst
	0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // src
	0x08, 0x00, // IPv4
	// IPv4
	0x45, 0x00, 0x00, 0x24, // v4, IHL 5, TOS 0, total length 36
	0x1c, 0x46, 0x40, 0x00, // ID 0x1c46, DF
	0x40, 0x01, 0x92, 0x6b, // TTL 64, ICMP, checksum
	198, 18, 0, 2, // src
	198, 18, 0, 1, // dst
	// ICMP
	0x08, 0x00, 0x54, 0x35, // echo request, code 0, checksum
	0x12, 0x34, 0x00, 0x01, // ident 0x1234, seq 1
	'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h',
}

var (
	macA = MAC{0x02, 0, 0, 0, 0, 0x01}
	macB = MAC{0x02, 0, 0, 0, 0, 0x02}
	ipA  = IPv4Addr{198, 18, 0, 1}
	ipB  = IPv4Addr{198, 18, 0, 2}
)

func filled(n int) []byte { return bytes.Repeat([]byte{0xa5}, n) }

func TestEthernetParse(t *testing.T) {
	e := Ethernet(echoRequestFrame)
	if !e.Valid() {
		t.Fatal("not valid")
	}
	if e.Dst() != macA || e.Src() != macB || e.Type() != EtherTypeIPv4 {
		t.Fatalf("dst %v src %v type %#x", e.Dst(), e.Src(), e.Type())
	}
	if len(e.Payload()) != len(echoRequestFrame)-14 {
		t.Fatalf("payload %d bytes", len(e.Payload()))
	}
	for n := 0; n < EthernetHeaderLen; n++ {
		if Ethernet(echoRequestFrame[:n]).Valid() {
			t.Fatalf("%d bytes valid", n)
		}
	}
}

func TestEthernetEncode(t *testing.T) {
	b := filled(16)
	f := EthernetFields{Dst: macA, Src: macB, Type: EtherTypeARP}
	f.Encode(b)
	want := []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x06, 0xa5, 0xa5}
	if !bytes.Equal(b, want) {
		t.Fatalf("got  % x\nwant % x", b, want)
	}
}

func TestIPv4Parse(t *testing.T) {
	ip := IPv4(echoRequestFrame[14:])
	if st := ip.Check(); st != IPv4OK {
		t.Fatalf("check = %d", st)
	}
	if ip.HeaderLen() != 20 || ip.TotalLen() != 36 || ip.ID() != 0x1c46 ||
		ip.Flags() != IPv4FlagDF || ip.FragOffset() != 0 || ip.IsFragment() ||
		ip.TTL() != 64 || ip.Protocol() != ProtoICMP || ip.Checksum() != 0x926b ||
		ip.Src() != ipB || ip.Dst() != ipA || len(ip.Options()) != 0 || len(ip.Payload()) != 16 {
		t.Fatalf("fields wrong: % x", []byte(ip))
	}
	if !ip.HeaderChecksumOK() {
		t.Fatal("checksum does not verify")
	}
	// Link padding after Total Length is not payload.
	padded := append(append([]byte(nil), ip...), 0, 0, 0, 0)
	if got := len(IPv4(padded).Payload()); got != 16 {
		t.Fatalf("padded payload %d bytes", got)
	}
}

func TestIPv4CheckRejects(t *testing.T) {
	base := echoRequestFrame[14:]
	mod := func(f func(b []byte)) IPv4 {
		b := append([]byte(nil), base...)
		f(b)
		return b
	}
	cases := []struct {
		name string
		ip   IPv4
		want IPv4Status
	}{
		{"short", IPv4(base[:19]), IPv4Truncated},
		{"total beyond buffer", IPv4(base[:35]), IPv4Truncated},
		{"version 6", mod(func(b []byte) { b[0] = 0x65 }), IPv4BadVersion},
		{"ihl 4", mod(func(b []byte) { b[0] = 0x44 }), IPv4BadHeaderLen},
		{"ihl beyond buffer", mod(func(b []byte) { b[0] = 0x4f; b[3] = 60 }), IPv4Truncated},
		{"total < ihl", mod(func(b []byte) { b[3] = 19 }), IPv4BadTotalLen},
	}
	for _, c := range cases {
		if got := c.ip.Check(); got != c.want {
			t.Errorf("%s: check = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestIPv4Fragment(t *testing.T) {
	b := append([]byte(nil), echoRequestFrame[14:]...)
	ip := IPv4(b)
	b[6], b[7] = 0x20, 0 // MF
	if !ip.IsFragment() {
		t.Fatal("MF not a fragment")
	}
	b[6], b[7] = 0x00, 0x03 // offset 24
	if !ip.IsFragment() || ip.FragOffset() != 24 {
		t.Fatalf("offset %d", ip.FragOffset())
	}
	b[6], b[7] = 0x40, 0 // DF only
	if ip.IsFragment() {
		t.Fatal("DF is a fragment")
	}
}

func TestIPv4OptionsValid(t *testing.T) {
	for _, c := range []struct {
		opts []byte
		ok   bool
	}{
		{nil, true},
		{[]byte{1, 1, 1, 0}, true},
		{[]byte{0, 99, 99, 99}, true},             // padding after EOL is ignored
		{[]byte{0x94, 4, 0, 0}, true},             // router alert
		{[]byte{0x07, 7, 4, 0, 0, 0, 0, 0}, true}, // record route + EOL
		{[]byte{0x94}, false},                     // no length byte
		{[]byte{0x94, 1, 0, 0}, false},            // length below 2
		{[]byte{0x94, 5, 0, 0}, false},            // runs past the header
	} {
		if got := IPv4OptionsValid(c.opts); got != c.ok {
			t.Errorf("% x: valid = %v, want %v", c.opts, got, c.ok)
		}
	}
}

func TestIPv4Encode(t *testing.T) {
	b := filled(22)
	f := IPv4Fields{TotalLen: 36, ID: 0x1c46, Flags: IPv4FlagDF, TTL: 64, Protocol: ProtoICMP, Src: ipB, Dst: ipA}
	f.Encode(b)
	want := append(append([]byte(nil), echoRequestFrame[14:34]...), 0xa5, 0xa5)
	if !bytes.Equal(b, want) {
		t.Fatalf("got  % x\nwant % x", b, want)
	}
	// A fragment offset lands in 8-byte units.
	f = IPv4Fields{TotalLen: 20, FragOff: 1480, Flags: IPv4FlagMF, TTL: 1, Protocol: ProtoUDP, Src: ipA, Dst: ipB}
	f.Encode(b)
	if ip := IPv4(b[:20]); ip.FragOffset() != 1480 || ip.Flags() != IPv4FlagMF || !ip.HeaderChecksumOK() {
		t.Fatalf("frag header % x", b[:20])
	}
}

func TestICMPv4ParseEncode(t *testing.T) {
	m := ICMPv4(echoRequestFrame[34:])
	if !m.Valid() || m.Type() != ICMPv4EchoRequest || m.Code() != 0 || m.Checksum() != 0x5435 ||
		m.Ident() != 0x1234 || m.Seq() != 1 || string(m.Payload()) != "abcdefgh" || !m.ChecksumOK() {
		t.Fatalf("fields wrong: % x", []byte(m))
	}
	if ICMPv4(echoRequestFrame[34:41]).Valid() {
		t.Fatal("7 bytes valid")
	}
	b := filled(16)
	copy(b[8:], "abcdefgh")
	f := ICMPv4Fields{Type: ICMPv4EchoReply, Ident: 0x1234, Seq: 1}
	f.Encode(b)
	want := []byte{0, 0, 0x5c, 0x35, 0x12, 0x34, 0, 1, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
	if !bytes.Equal(b, want) {
		t.Fatalf("got  % x\nwant % x", b, want)
	}
}

// arpRequestFrame: who-has 198.18.0.1? tell 198.18.0.2 (02:00:00:00:00:02).
var arpRequestFrame = []byte{
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 2, 0x08, 0x06,
	0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01, // Ethernet, IPv4, 6, 4, request
	2, 0, 0, 0, 0, 2, 198, 18, 0, 2, // sender
	0, 0, 0, 0, 0, 0, 198, 18, 0, 1, // target
}

func TestARPParseEncode(t *testing.T) {
	a := ARP(arpRequestFrame[14:])
	if !a.Valid() || a.Op() != ARPRequest || a.SenderMAC() != macB || a.SenderIP() != ipB ||
		a.TargetMAC() != MACZero || a.TargetIP() != ipA {
		t.Fatalf("fields wrong: % x", []byte(a))
	}
	for i, v := range map[int]byte{1: 6, 3: 0xdd, 4: 8, 5: 16} { // htype, ptype, hlen, plen
		b := append([]byte(nil), a...)
		b[i] = v
		if ARP(b).Valid() {
			t.Errorf("byte %d = %#x still valid", i, v)
		}
	}
	if ARP(a[:27]).Valid() {
		t.Fatal("27 bytes valid")
	}
	b := filled(30)
	f := ARPFields{Op: ARPRequest, SenderMAC: macB, SenderIP: ipB, TargetIP: ipA}
	f.Encode(b)
	want := append(append([]byte(nil), arpRequestFrame[14:]...), 0xa5, 0xa5)
	if !bytes.Equal(b, want) {
		t.Fatalf("got  % x\nwant % x", b, want)
	}
}

// TestWireAgainstGopacket decodes the literal frames with gopacket and checks
// that it sees the same fields as the views.
func TestWireAgainstGopacket(t *testing.T) {
	p := gopacket.NewPacket(echoRequestFrame, layers.LayerTypeEthernet, gopacket.Default)
	eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	icmp := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	e := Ethernet(echoRequestFrame)
	v := IPv4(e.Payload())
	m := ICMPv4(v.Payload())
	if MAC(eth.DstMAC) != e.Dst() || MAC(eth.SrcMAC) != e.Src() || uint16(eth.EthernetType) != e.Type() {
		t.Fatalf("ethernet differs: %+v", eth)
	}
	if int(ip.IHL)*4 != v.HeaderLen() || int(ip.Length) != v.TotalLen() || ip.Id != v.ID() ||
		ip.TTL != v.TTL() || uint8(ip.Protocol) != v.Protocol() || ip.Checksum != v.Checksum() ||
		!ip.SrcIP.Equal(net.IP(v.Src().AsNetip().AsSlice())) || !ip.DstIP.Equal(net.IP(v.Dst().AsNetip().AsSlice())) ||
		ip.Flags != layers.IPv4DontFragment {
		t.Fatalf("ipv4 differs: %+v", ip)
	}
	if icmp.TypeCode.Type() != m.Type() || icmp.TypeCode.Code() != m.Code() || icmp.Checksum != m.Checksum() ||
		icmp.Id != m.Ident() || icmp.Seq != m.Seq() || !bytes.Equal(icmp.Payload, m.Payload()) {
		t.Fatalf("icmp differs: %+v", icmp)
	}

	p = gopacket.NewPacket(arpRequestFrame, layers.LayerTypeEthernet, gopacket.Default)
	arp := p.Layer(layers.LayerTypeARP).(*layers.ARP)
	a := ARP(arpRequestFrame[14:])
	if arp.Operation != a.Op() || MAC(arp.SourceHwAddress) != a.SenderMAC() ||
		IPv4Addr(arp.SourceProtAddress) != a.SenderIP() || IPv4Addr(arp.DstProtAddress) != a.TargetIP() {
		t.Fatalf("arp differs: %+v", arp)
	}
}

// TestWireParsesGopacketPackets builds random packets with gopacket and parses
// them with the views, and encodes the same fields with the fields structs
// and compares bytes.
func TestWireParsesGopacketPackets(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	opts := gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}
	for i := 0; i < 300; i++ {
		var src, dst IPv4Addr
		var smac, dmac MAC
		for j := range src {
			src[j], dst[j] = byte(r.Uint32()), byte(r.Uint32())
		}
		for j := range smac {
			smac[j], dmac[j] = byte(r.Uint32()), byte(r.Uint32())
		}
		payload := make([]byte, r.IntN(200))
		for j := range payload {
			payload[j] = byte(r.Uint32())
		}
		eth := &layers.Ethernet{SrcMAC: smac[:], DstMAC: dmac[:], EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{
			Version: 4, TOS: uint8(r.Uint32()), Id: uint16(r.Uint32()), TTL: uint8(r.Uint32()),
			Flags: layers.IPv4Flag(r.IntN(4)), FragOffset: uint16(r.IntN(0x2000)), Protocol: layers.IPProtocolICMPv4,
			SrcIP: net.IP(src[:]), DstIP: net.IP(dst[:]),
		}
		icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(uint8(r.IntN(2)*8), 0), Id: uint16(r.Uint32()), Seq: uint16(r.Uint32())}
		sb := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(sb, opts, eth, ip, icmp, gopacket.Payload(payload)); err != nil {
			t.Fatal(err)
		}
		frame := sb.Bytes()

		e := Ethernet(frame)
		v := IPv4(e.Payload())
		if !e.Valid() || e.Src() != smac || e.Dst() != dmac || !v.Valid() || !v.HeaderChecksumOK() ||
			v.Src() != src || v.Dst() != dst || v.ID() != ip.Id || v.TOS() != ip.TOS || v.TTL() != ip.TTL ||
			v.Flags()>>13 != uint16(ip.Flags) || v.FragOffset() != int(ip.FragOffset)*8 {
			t.Fatalf("packet %d: views disagree with gopacket: % x", i, frame)
		}
		m := ICMPv4(v.Payload())
		if !m.Valid() || !m.ChecksumOK() || m.Ident() != icmp.Id || m.Seq() != icmp.Seq || !bytes.Equal(m.Payload(), payload) {
			t.Fatalf("packet %d: icmp disagrees: % x", i, []byte(m))
		}

		// Encode the same packet with the fields structs.
		out := filled(len(frame))
		(&EthernetFields{Dst: dmac, Src: smac, Type: EtherTypeIPv4}).Encode(out)
		(&IPv4Fields{TOS: ip.TOS, TotalLen: uint16(v.TotalLen()), ID: ip.Id, Flags: uint16(ip.Flags) << 13,
			FragOff: ip.FragOffset * 8, TTL: ip.TTL, Protocol: ProtoICMP, Src: src, Dst: dst}).Encode(out[14:])
		copy(out[42:], payload)
		end := 14 + v.TotalLen() // gopacket pads the frame to 60 bytes
		(&ICMPv4Fields{Type: m.Type(), Ident: icmp.Id, Seq: icmp.Seq}).Encode(out[34:end])
		if !bytes.Equal(out[:end], frame[:end]) {
			t.Fatalf("packet %d: encode differs\ngot  % x\nwant % x", i, out, frame)
		}
	}
}
