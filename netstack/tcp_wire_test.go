package netstack

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// A Linux-style SYN: MSS 1460, SACK permitted, timestamps, NOP, window scale 7.
var tcpSynLiteral = []byte{
	0x9c, 0x40, 0x00, 0x50, // src 40000, dst 80
	0x00, 0x00, 0x13, 0x88, // seq 5000
	0x00, 0x00, 0x00, 0x00, // ack 0
	0xa0, 0x02, 0xfa, 0xf0, // data offset 10 (40 bytes), SYN, window 64240
	0x00, 0x00, 0x00, 0x00, // checksum (zero from Encode), urgent 0
	0x02, 0x04, 0x05, 0xb4, // MSS 1460
	0x04, 0x02, // SACK permitted
	0x08, 0x0a, 0x00, 0x00, 0x03, 0x09, 0x00, 0x00, 0x00, 0x00, // TS 777/0
	0x01, 0x03, 0x03, 0x07, // NOP, window scale 7
}

func TestTCPEncodeLiteral(t *testing.T) {
	f := TCPFields{SrcPort: 40000, DstPort: 80, Seq: 5000, Flags: TCPFlagSYN, Window: 64240,
		MSS: 1460, SACKPermitted: true, HasTimestamp: true, TSVal: 777, HasWScale: true, WScale: 7}
	b := filled(64)
	if n := f.Encode(b); n != 40 || f.HeaderLen() != 40 {
		t.Fatalf("header length %d / %d, want 40", n, f.HeaderLen())
	}
	if !bytes.Equal(b[:40], tcpSynLiteral) {
		t.Fatalf("encoded\n% x\nwant\n% x", b[:40], tcpSynLiteral)
	}
	if b[40] != 0xa5 {
		t.Fatal("Encode wrote past the header")
	}
	var g TCPFields
	v := TCP(tcpSynLiteral)
	if !v.Valid() || !g.Decode(v) || g != f {
		t.Fatalf("decoded %+v\nwant %+v", g, f)
	}
	if v.SrcPort() != 40000 || v.DstPort() != 80 || v.Seq() != 5000 || v.HeaderLen() != 40 || len(v.Payload()) != 0 {
		t.Fatal("accessors")
	}
}

func TestTCPValid(t *testing.T) {
	for n := 0; n < 40; n++ {
		if TCP(tcpSynLiteral[:n]).Valid() {
			t.Fatalf("%d bytes of a 40-byte header valid", n)
		}
	}
	b := bytes.Clone(tcpSynLiteral)
	b[12] = 4 << 4
	if TCP(b).Valid() {
		t.Fatal("data offset 4 valid")
	}
	// Malformed options: zero length, length past the header.
	for _, opt := range [][]byte{{2, 0, 0, 0}, {2, 9, 0, 0}, {8, 3, 0, 0}, {5, 2, 1, 1}, {2}} {
		h := make([]byte, 24)
		h[12] = 6 << 4
		copy(h[20:], opt)
		if len(opt) == 1 {
			h = h[:21]
			h[12] = 5 << 4
		}
		var f TCPFields
		if len(opt) > 1 && f.Decode(TCP(h)) {
			t.Errorf("options % x decoded", opt)
		}
	}
}

// Cross-check with gopacket: random segments we encode decode the same in
// layers.TCP, and gopacket re-serialises them to the same bytes, checksum
// included.
func TestTCPGopacketCrossCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	src, dst := net.IP{198, 18, 0, 2}, net.IP{198, 18, 0, 1}
	for i := 0; i < 500; i++ {
		f := TCPFields{
			SrcPort: uint16(rng.Uint32()), DstPort: uint16(rng.Uint32()),
			Seq: rng.Uint32(), Ack: rng.Uint32(), Flags: uint8(rng.Uint32()),
			Window: uint16(rng.Uint32()), Urgent: uint16(rng.Uint32()),
		}
		if rng.IntN(2) == 0 {
			f.MSS = uint16(rng.Uint32()) | 1
		}
		f.HasWScale, f.WScale = rng.IntN(2) == 0, uint8(rng.IntN(15))
		if !f.HasWScale {
			f.WScale = 0
		}
		f.SACKPermitted = rng.IntN(2) == 0
		if f.HasTimestamp = rng.IntN(2) == 0; f.HasTimestamp {
			f.TSVal, f.TSEcr = rng.Uint32(), rng.Uint32()
		}
		max := 4
		if f.HasTimestamp {
			max = 3
		}
		if f.MSS != 0 || f.HasWScale || f.SACKPermitted {
			max = 2
		}
		f.NSACK = rng.IntN(max + 1)
		for j := 0; j < f.NSACK; j++ {
			f.SACK[j] = TCPSACKBlock{rng.Uint32(), rng.Uint32()}
		}
		payload := make([]byte, rng.IntN(100))
		for j := range payload {
			payload[j] = byte(rng.Uint32())
		}
		hl := f.HeaderLen()
		if hl > TCPMaxHeaderLen {
			t.Fatalf("header %d bytes", hl)
		}
		b := make([]byte, hl+len(payload))
		f.Encode(b)
		copy(b[hl:], payload)
		TCP(b).SetChecksum(tcpChecksum(binary.BigEndian.Uint32(src), binary.BigEndian.Uint32(dst), b))

		p := gopacket.NewPacket(b, layers.LayerTypeTCP, gopacket.Default)
		g, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok {
			t.Fatalf("gopacket did not decode % x: %v", b, p.ErrorLayer())
		}
		if uint16(g.SrcPort) != f.SrcPort || uint16(g.DstPort) != f.DstPort || g.Seq != f.Seq || g.Ack != f.Ack ||
			g.Window != f.Window || g.Urgent != f.Urgent || g.FIN != (f.Flags&TCPFlagFIN != 0) ||
			g.SYN != (f.Flags&TCPFlagSYN != 0) || g.RST != (f.Flags&TCPFlagRST != 0) || g.PSH != (f.Flags&TCPFlagPSH != 0) ||
			g.ACK != (f.Flags&TCPFlagACK != 0) || g.URG != (f.Flags&TCPFlagURG != 0) || g.ECE != (f.Flags&TCPFlagECE != 0) ||
			g.CWR != (f.Flags&TCPFlagCWR != 0) || int(g.DataOffset)*4 != hl || !bytes.Equal(g.Payload, payload) {
			t.Fatalf("gopacket decoded %+v from %+v", g, f)
		}
		var back TCPFields
		back.SrcPort, back.DstPort, back.Seq, back.Ack, back.Window, back.Urgent = f.SrcPort, f.DstPort, f.Seq, f.Ack, f.Window, f.Urgent
		back.Flags = f.Flags
		for _, o := range g.Options {
			switch o.OptionType {
			case layers.TCPOptionKindMSS:
				back.MSS = binary.BigEndian.Uint16(o.OptionData)
			case layers.TCPOptionKindWindowScale:
				back.HasWScale, back.WScale = true, o.OptionData[0]
			case layers.TCPOptionKindSACKPermitted:
				back.SACKPermitted = true
			case layers.TCPOptionKindTimestamps:
				back.HasTimestamp = true
				back.TSVal, back.TSEcr = binary.BigEndian.Uint32(o.OptionData), binary.BigEndian.Uint32(o.OptionData[4:])
			case layers.TCPOptionKindSACK:
				for j := 0; j+8 <= len(o.OptionData); j += 8 {
					back.SACK[back.NSACK] = TCPSACKBlock{binary.BigEndian.Uint32(o.OptionData[j:]), binary.BigEndian.Uint32(o.OptionData[j+4:])}
					back.NSACK++
				}
			}
		}
		if back != f {
			t.Fatalf("gopacket options %+v\nwant %+v", back, f)
		}
		// gopacket's checksum over the same bytes.
		ip := &layers.IPv4{SrcIP: src, DstIP: dst, Protocol: layers.IPProtocolTCP, Version: 4, TTL: 64}
		g.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, g, gopacket.Payload(payload)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), b) {
			t.Fatalf("gopacket serialised\n% x\nwe sent\n% x", buf.Bytes(), b)
		}
		var ours TCPFields
		if !ours.Decode(TCP(buf.Bytes())) || ours != f {
			t.Fatalf("our decode of gopacket's bytes %+v\nwant %+v", ours, f)
		}
	}
}

// Encode never writes a header longer than the data offset can say.
func TestTCPEncodeSACKLimit(t *testing.T) {
	f := TCPFields{Flags: TCPFlagACK, MSS: 1460, HasWScale: true, SACKPermitted: true, HasTimestamp: true, NSACK: 4}
	b := make([]byte, 80)
	hl := f.Encode(b)
	if hl > TCPMaxHeaderLen || TCP(b[:hl]).HeaderLen() != hl || f.NSACK != 2 {
		t.Fatalf("header %d bytes, data offset says %d, %d SACK blocks", hl, TCP(b[:hl]).HeaderLen(), f.NSACK)
	}
}
