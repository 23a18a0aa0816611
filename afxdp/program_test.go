package afxdp

import (
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"percore/lab"
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

func TestProgramNoSocketPasses(t *testing.T) {
	needRoot(t)
	p, err := NewProgram(ProgramConfig{IP: ourIP, Ports: []uint16{80}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
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
	needRoot(t)
	l, err := lab.New(lab.Config{Prefix: "pt"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p, err := NewProgram(ProgramConfig{IP: ourIP, Ports: []uint16{80}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	var s *Socket
	if err := l.ServerNS.Do(func() (err error) {
		s, err = Open(Config{Interface: l.ServerIf, FrameCount: 64, Logf: t.Logf})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
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
