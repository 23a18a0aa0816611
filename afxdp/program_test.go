package afxdp

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"
)

var (
	ourIP   = netip.MustParseAddr("198.18.0.1")
	peerIP  = netip.MustParseAddr("198.18.0.2")
	otherIP = netip.MustParseAddr("198.18.0.3")
)

type progCase struct {
	name  string
	frame []byte
	ours  bool // should be redirected when a socket is bound
}

func progCases(t *testing.T) []progCase {
	syn := tcpSYN(t, peerIP, ourIP, 40000, 80)
	ipOpts := func() []byte { // IHL 6: one option word moves the TCP header
		ip := ipv4(peerIP, ourIP, layers.IPProtocolTCP)
		ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
		tcp := &layers.TCP{SrcPort: 1, DstPort: 80, SYN: true}
		tcp.SetNetworkLayerForChecksum(ip)
		return serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}, ip, tcp)
	}
	frag := func(off uint16) []byte {
		ip := ipv4(peerIP, ourIP, layers.IPProtocolTCP)
		ip.FragOffset = off
		return serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}, ip, gopacket.Payload("0123456789abcdef"))
	}
	ipv6 := serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv6},
		&layers.IPv6{Version: 6, NextHeader: layers.IPProtocolNoNextHeader, HopLimit: 1,
			SrcIP: netip.MustParseAddr("2001:db8::1").AsSlice(), DstIP: netip.MustParseAddr("2001:db8::2").AsSlice()})
	arpIPv6Proto := arpRequest(t, peerIP, ourIP)
	arpIPv6Proto[16], arpIPv6Proto[17] = 0x86, 0xdd
	return []progCase{
		{"arp for us", arpRequest(t, peerIP, ourIP), true},
		{"arp for other", arpRequest(t, peerIP, otherIP), false},
		{"arp non-ipv4 protocol", arpIPv6Proto, false},
		{"arp truncated", arpRequest(t, peerIP, ourIP)[:14+27], false},
		{"icmp echo for us", icmpEcho(t, peerIP, ourIP, 1, 1), true},
		{"icmp echo for other", icmpEcho(t, peerIP, otherIP, 1, 1), false},
		{"tcp to listen port", syn, true},
		{"tcp to other port", tcpSYN(t, peerIP, ourIP, 40000, 81), false},
		{"tcp to port of other ip", tcpSYN(t, peerIP, otherIP, 40000, 80), false},
		{"tcp with ip options", ipOpts(), true},
		{"tcp ports truncated", syn[:14+20+3], false},
		{"ipv4 header truncated", syn[:14+19], false},
		{"tcp non-first fragment", frag(8), true},
		{"udp for us", udp(t, peerIP, ourIP, 80), false},
		{"ipv6", ipv6, false},
		{"ethernet only", syn[:14], false},
	}
}

// testProgram loads the steering program with c, closed when the test ends.
func testProgram(t *testing.T, c ProgramConfig) *Program {
	t.Helper()
	p, err := NewProgram(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestProgramNoSocketPasses(t *testing.T) {
	needRoot(t)
	p := testProgram(t, ProgramConfig{IP: ourIP, Ports: []uint16{80}})
	// With no socket in the XSKMAP every frame, ours or not, goes to the
	// kernel: bpf_redirect_map falls back to XDP_PASS.
	for _, c := range progCases(t) {
		act, err := p.Run(c.frame)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if act != xdpPass {
			t.Errorf("%s: action %d, want XDP_PASS (%d)", c.name, act, xdpPass)
		}
	}
}

func TestProgramSteers(t *testing.T) {
	s := labSocket(t, "pt")
	p := testProgram(t, ProgramConfig{IP: ourIP, Ports: []uint16{80}})
	if err := p.Register(s); err != nil {
		t.Fatal(err)
	}
	for _, c := range progCases(t) {
		act, err := p.Run(c.frame)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := uint32(xdpPass)
		if c.ours {
			want = xdpRedirect
		}
		if act != want {
			t.Errorf("%s: action %d, want %d", c.name, act, want)
		}
	}
	checkMutations(t, p, false)

	// Ports are live: remove 80, add 81.
	if err := p.RemovePort(80); err != nil {
		t.Fatal(err)
	}
	if err := p.AllowPort(81); err != nil {
		t.Fatal(err)
	}
	if act, _ := p.Run(tcpSYN(t, peerIP, ourIP, 1, 80)); act != xdpPass {
		t.Errorf("removed port 80: action %d", act)
	}
	if act, _ := p.Run(tcpSYN(t, peerIP, ourIP, 1, 81)); act != xdpRedirect {
		t.Errorf("added port 81: action %d", act)
	}
	// The IP is live too.
	if err := p.SetIP(otherIP); err != nil {
		t.Fatal(err)
	}
	if act, _ := p.Run(icmpEcho(t, peerIP, ourIP, 1, 1)); act != xdpPass {
		t.Errorf("old ip after SetIP: action %d", act)
	}
	if act, _ := p.Run(icmpEcho(t, peerIP, otherIP, 1, 1)); act != xdpRedirect {
		t.Errorf("new ip after SetIP: action %d", act)
	}
	// Closing the socket empties its XSKMAP slot: back to XDP_PASS.
	s.Close()
	if act, _ := p.Run(icmpEcho(t, peerIP, otherIP, 1, 1)); act != xdpPass {
		t.Errorf("after socket close: action %d", act)
	}
}

// checkMutations runs seeded mutations of good frames through p and checks
// each action against a Go model of the rules.
func checkMutations(t *testing.T, p *Program, allTCP bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	seeds := [][]byte{arpRequest(t, peerIP, ourIP), icmpEcho(t, peerIP, ourIP, 1, 1), tcpSYN(t, peerIP, ourIP, 1, 80), progCases(t)[9].frame}
	hot := []int{12, 13, 14, 16, 17, 20, 21, 23, 30, 33, 38, 41, 36, 37, 40}
	vals := []byte{0, 1, 4, 5, 6, 8, 0x45, 0x46, 0x50, 0x06, 0x08, 0x86, 0xdd, 0x20, 0xff, 198, 18}
	steered := 0
	for i := 0; i < 3000; i++ {
		f := append([]byte(nil), seeds[rng.IntN(len(seeds))]...)
		for k := rng.IntN(3); k > 0; k-- {
			if o := hot[rng.IntN(len(hot))]; o < len(f) {
				f[o] = vals[rng.IntN(len(vals))]
			}
		}
		if rng.IntN(4) == 0 {
			f = f[:14+rng.IntN(len(f)-13)]
		}
		act, err := p.Run(f)
		if err != nil {
			t.Fatal(err)
		}
		if want := steerModel(f, ourIP.As4(), 80, allTCP); (act == xdpRedirect) != want || (act != xdpRedirect && act != xdpPass) {
			t.Fatalf("frame % x: action %d, model says steer=%v", f, act, want)
		}
		if act == xdpRedirect {
			steered++
		}
	}
	if steered < 300 || steered > 2700 {
		t.Errorf("mutations steered %d of 3000: the mix does not exercise both outcomes", steered)
	}
}

func TestProgramAllTCP(t *testing.T) {
	s := labSocket(t, "pz")
	p := testProgram(t, ProgramConfig{IP: ourIP, Ports: []uint16{80}, AllTCP: true})
	if err := p.Register(s); err != nil {
		t.Fatal(err)
	}
	// Every TCP segment to our IP is ours, whatever its port or length;
	// the rest of the rules stand.
	allTCP := map[string]bool{"tcp to other port": true, "tcp ports truncated": true}
	for _, c := range progCases(t) {
		act, err := p.Run(c.frame)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := uint32(xdpPass)
		if c.ours || allTCP[c.name] {
			want = xdpRedirect
		}
		if act != want {
			t.Errorf("%s: action %d, want %d", c.name, act, want)
		}
	}
	checkMutations(t, p, true)
}

// steerModel is the program's rules written plainly in Go.
func steerModel(f []byte, ip [4]byte, port uint16, allTCP bool) bool {
	be := binary.BigEndian
	if len(f) < 14 {
		return false
	}
	switch be.Uint16(f[12:]) {
	case 0x0806:
		return len(f) >= 42 && be.Uint16(f[16:]) == 0x0800 && [4]byte(f[38:42]) == ip
	case 0x0800:
		if len(f) < 34 || f[14]>>4 != 4 || f[14]&0xf < 5 || [4]byte(f[30:34]) != ip {
			return false
		}
		switch f[23] {
		case 1:
			return true
		case 6:
			if allTCP || be.Uint16(f[20:])&0x1fff != 0 {
				return true
			}
			l4 := 14 + int(f[14]&0xf)*4
			return len(f) >= l4+4 && be.Uint16(f[l4+2:]) == port
		}
	}
	return false
}

// TestProgramSteersAliases: an alias is steered as the address is (ARP,
// ICMP, TCP to an allowed port); other addresses are not.
func TestProgramSteersAliases(t *testing.T) {
	s := labSocket(t, "pa")
	p := testProgram(t, ProgramConfig{IP: ourIP, Aliases: []netip.Addr{otherIP}, Ports: []uint16{80}})
	if err := p.Register(s); err != nil {
		t.Fatal(err)
	}
	third := netip.MustParseAddr("198.18.0.4")
	for _, c := range []struct {
		name  string
		frame []byte
		want  uint32
	}{
		{"arp for the alias", arpRequest(t, peerIP, otherIP), xdpRedirect},
		{"icmp to the alias", icmpEcho(t, peerIP, otherIP, 1, 1), xdpRedirect},
		{"tcp to the alias", tcpSYN(t, peerIP, otherIP, 40000, 80), xdpRedirect},
		{"tcp to the address", tcpSYN(t, peerIP, ourIP, 40000, 80), xdpRedirect},
		{"tcp to the alias, other port", tcpSYN(t, peerIP, otherIP, 40000, 81), xdpPass},
		{"arp for another", arpRequest(t, peerIP, third), xdpPass},
		{"tcp to another", tcpSYN(t, peerIP, third, 40000, 80), xdpPass},
	} {
		if act, err := p.Run(c.frame); err != nil || act != c.want {
			t.Errorf("%s: action %d (%v), want %d", c.name, act, err, c.want)
		}
	}
}

// TestProgramStamps: a frame the program steers leaves with its receive
// time (CLOCK_MONOTONIC) as 8 bytes of metadata in front of it; one it
// passes leaves as it came. BPF_PROG_TEST_RUN returns the metadata with
// the data.
func TestProgramStamps(t *testing.T) {
	needRoot(t)
	p := testProgram(t, ProgramConfig{IP: ourIP, Ports: []uint16{80}})
	for _, c := range progCases(t) {
		out := make([]byte, len(c.frame)+64)
		before := monoNow()
		_, err := p.prog.Run(&ebpf.RunOptions{Data: c.frame, DataOut: out})
		after := monoNow()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !c.ours {
			if !bytes.Equal(out[:len(c.frame)], c.frame) {
				t.Errorf("%s: passed frame changed: % x", c.name, out[:len(c.frame)])
			}
			continue
		}
		stamp := int64(binary.NativeEndian.Uint64(out))
		if stamp < before || stamp > after {
			t.Errorf("%s: stamp %d outside [%d, %d]", c.name, stamp, before, after)
		}
		if !bytes.Equal(out[rxStampLen:rxStampLen+len(c.frame)], c.frame) {
			t.Errorf("%s: stamped frame changed: % x", c.name, out[rxStampLen:])
		}
	}
}

func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
