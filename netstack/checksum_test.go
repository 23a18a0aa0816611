package netstack

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// refSum is the textbook RFC 1071 loop over 16-bit words, the reference that
// the fast ChecksumAdd is checked against.
func refSum(b []byte) uint32 {
	var s uint32
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return s
}

func TestChecksumRFC1071Example(t *testing.T) {
	// RFC 1071 section 3: the bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
	b := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	if got := ChecksumAdd(0, b); got != 0xddf2 {
		t.Fatalf("sum = %#04x, want 0xddf2", got)
	}
	if got := Checksum(b); got != 0x220d {
		t.Fatalf("checksum = %#04x, want 0x220d", got)
	}
}

func TestChecksumMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	// All-0xff data drives the carry chain hardest.
	ones := make([]byte, 4096)
	for i := range ones {
		ones[i] = 0xff
	}
	for _, data := range [][]byte{buf, ones} {
		for n := 0; n <= 300; n++ {
			for _, off := range []int{0, 1, 3} {
				b := data[off : off+n]
				if got, want := ChecksumAdd(0, b), refSum(b); got != want {
					t.Fatalf("len %d off %d: sum %#x, want %#x", n, off, got, want)
				}
			}
		}
		for i := 0; i < 200; i++ {
			n := r.IntN(len(data))
			if got, want := ChecksumAdd(0, data[:n]), refSum(data[:n]); got != want {
				t.Fatalf("len %d: sum %#x, want %#x", n, got, want)
			}
		}
	}
}

func TestChecksumInitialAndCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 1501)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	whole := ChecksumAdd(0, b)
	for i := 0; i < 100; i++ {
		cut := 2 * r.IntN(len(b)/2) // pieces before the last must be even
		a, c := ChecksumAdd(0, b[:cut]), ChecksumAdd(0, b[cut:])
		if got := ChecksumCombine(a, c); got != whole {
			t.Fatalf("cut %d: combine %#x, want %#x", cut, got, whole)
		}
		if got := ChecksumAdd(a, b[cut:]); got != whole {
			t.Fatalf("cut %d: add with initial %#x, want %#x", cut, got, whole)
		}
	}
	// A message carrying its own checksum finishes to zero.
	hdr := append([]byte(nil), b[:20]...)
	hdr[10], hdr[11] = 0, 0
	binary.BigEndian.PutUint16(hdr[10:], Checksum(hdr))
	if got := Checksum(hdr); got != 0 {
		t.Fatalf("verify = %#x, want 0", got)
	}
}

func TestChecksumUpdate(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	b := make([]byte, 40)
	for i := 0; i < 2000; i++ {
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		if i%7 == 0 { // words of 0x0000 / 0xffff are the RFC 1624 corner cases
			b[4], b[5] = 0, 0
		}
		b[10], b[11] = 0, 0
		check := Checksum(b)
		binary.BigEndian.PutUint16(b[10:], check)

		old := binary.BigEndian.Uint16(b[4:])
		nw := uint16(r.Uint32())
		if i%5 == 0 {
			nw = 0xffff
		}
		binary.BigEndian.PutUint16(b[4:], nw)
		upd := ChecksumUpdate16(check, old, nw)
		binary.BigEndian.PutUint16(b[10:], upd)
		if Checksum(b) != 0 {
			t.Fatalf("iteration %d: updated checksum %#x does not verify", i, upd)
		}

		old32 := binary.BigEndian.Uint32(b[12:])
		nw32 := r.Uint32()
		binary.BigEndian.PutUint32(b[12:], nw32)
		upd = ChecksumUpdate32(upd, old32, nw32)
		binary.BigEndian.PutUint16(b[10:], upd)
		if Checksum(b) != 0 {
			t.Fatalf("iteration %d: 32-bit update %#x does not verify", i, upd)
		}
	}
}

// TestChecksumUpdateZero pins the incremental update at ones' complement's
// two zeros, on literal bytes.
func TestChecksumUpdateZero(t *testing.T) {
	word := func(b []byte, i int) uint16 { return binary.BigEndian.Uint16(b[i:]) }
	for _, tc := range []struct {
		name          string
		before, after []byte // with their checksum fields
		at, ck        int    // offsets of the changed word and the checksum
		exact         bool   // after's checksum is what a full computation gives
	}{
		// An ICMP echo request with identifier, sequence number and no
		// data, and its reply: all zero but for the checksum, which must
		// be 0xffff (equation 3 alone gives 0x0000).
		{"echo all zero", []byte{0x08, 0x00, 0xf7, 0xff, 0, 0, 0, 0}, []byte{0, 0, 0xff, 0xff, 0, 0, 0, 0}, 0, 2, true},
		// RFC 1624 section 4: the other words sum to 0xcd7a, m = 0x5555
		// becomes m' = 0x3285; the new checksum is 0x0000.
		{"RFC 1624", []byte{0xcd, 0x7a, 0x55, 0x55, 0xdd, 0x2f}, []byte{0xcd, 0x7a, 0x32, 0x85, 0x00, 0x00}, 2, 4, true},
		// A word becomes zero, the rest adds up to 0xffff: a full
		// computation gives 0x0000, the update 0xffff; both verify.
		{"new zero, rest 0xffff", []byte{0xff, 0xff, 0x12, 0x34, 0xed, 0xcb}, []byte{0xff, 0xff, 0, 0, 0xff, 0xff}, 2, 4, false},
	} {
		if Checksum(tc.before) != 0 || Checksum(tc.after) != 0 {
			t.Fatalf("%s: the literal bytes do not verify", tc.name)
		}
		got := ChecksumUpdate16(word(tc.before, tc.ck), word(tc.before, tc.at), word(tc.after, tc.at))
		if want := word(tc.after, tc.ck); got != want {
			t.Fatalf("%s: ChecksumUpdate16 = %#04x, want %#04x", tc.name, got, want)
		}
		zeroed := append([]byte(nil), tc.after...)
		zeroed[tc.ck], zeroed[tc.ck+1] = 0, 0
		full := Checksum(zeroed)
		if (full == got) != tc.exact {
			t.Fatalf("%s: full computation %#04x, update %#04x", tc.name, full, got)
		}
	}
	// The same for a 32-bit field: 00 00 00 01 becomes all zero.
	if got := ChecksumUpdate32(0xfffe, 1, 0); got != 0xffff {
		t.Fatalf("ChecksumUpdate32 to all zero = %#04x, want 0xffff", got)
	}
	if got := Checksum([]byte{0, 0, 0, 0, 0, 0}); got != 0xffff {
		t.Fatalf("full computation over zeros = %#04x, want 0xffff", got)
	}
}

// TestPseudoHeaderSumGopacket checks the pseudo-header sum against the TCP
// checksum gopacket computes for the same segment.
func TestPseudoHeaderSumGopacket(t *testing.T) {
	ip := &layers.IPv4{
		Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP,
		SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 0, 2},
	}
	tcp := &layers.TCP{SrcPort: 80, DstPort: 40000, Seq: 12345, Ack: 678, ACK: true, PSH: true, Window: 65535}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	for _, payload := range []string{"", "x", "hello, world", "GET / HTTP/1.1\r\n\r\n"} {
		sb := gopacket.NewSerializeBuffer()
		err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true},
			ip, tcp, gopacket.Payload(payload))
		if err != nil {
			t.Fatal(err)
		}
		pkt := sb.Bytes()
		hdr, seg := pkt[:20], pkt[20:]
		if got := Checksum(hdr); got != 0 {
			t.Fatalf("gopacket IPv4 header does not verify: %#x", got)
		}
		want := binary.BigEndian.Uint16(seg[16:])
		cp := append([]byte(nil), seg...)
		cp[16], cp[17] = 0, 0
		s := PseudoHeaderSum(IPv4Addr{198, 18, 0, 1}, IPv4Addr{198, 18, 0, 2}, 6, uint16(len(seg)))
		if got := FinishChecksum(ChecksumAdd(s, cp)); got != want {
			t.Fatalf("payload %q: tcp checksum %#x, gopacket %#x", payload, got, want)
		}
		if got := FinishChecksum(ChecksumAdd(s, seg)); got != 0 {
			t.Fatalf("payload %q: verify = %#x, want 0", payload, got)
		}
	}
}

func TestChecksumNoAlloc(t *testing.T) {
	b := make([]byte, 1500)
	if n := testing.AllocsPerRun(100, func() { _ = Checksum(b) }); n != 0 {
		t.Fatalf("Checksum allocates %v per run", n)
	}
}

func benchChecksum(b *testing.B, n int, f func([]byte) uint32) {
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	var sink uint32
	start := cpuTime()
	for b.Loop() {
		sink += f(buf)
	}
	_ = sink
	if cpu := cpuTime() - start; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(n)*float64(b.N)/cpu.Seconds()/1e6, "cpu-MB/s")
	}
}

func fast(b []byte) uint32 { return ChecksumAdd(0, b) }

func BenchmarkChecksum(b *testing.B) {
	for _, n := range []int{20, 64, 1500, 9000} {
		b.Run("fast/"+itoa(n), func(b *testing.B) { benchChecksum(b, n, fast) })
		b.Run("ref16/"+itoa(n), func(b *testing.B) { benchChecksum(b, n, refSum) })
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
