package afxdp

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"percore/internal/testutil"
	"percore/lab"
)

// needRoot skips t unless the process is root and the kernel has AF_XDP.
func needRoot(t testing.TB) {
	t.Helper()
	testutil.SkipUnless(t, Supported())
}

// newLab skips t unless the process is root and the kernel has AF_XDP
// (needRoot), then builds a lab with c; t.Cleanup removes it.
func newLab(t testing.TB, c lab.Config) *lab.Lab {
	t.Helper()
	needRoot(t)
	l, err := lab.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// labSocket builds a 1-queue lab and opens a socket (64 frames) on its
// server end with no program attached: for tests that run the program with
// BPF_PROG_TEST_RUN and need a socket to register.
func labSocket(t *testing.T, prefix string) *Socket {
	t.Helper()
	l := newLab(t, lab.Config{Prefix: prefix})
	var s *Socket
	if err := l.ServerNS.Do(func() (err error) {
		s, err = Open(Config{Interface: l.ServerIf, FrameCount: 64, Logf: t.Logf})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// attachLab attaches a program for pc to the lab's server end (native mode)
// and opens and registers one socket per queue with c (Interface and Queue
// filled in), all inside the server namespace; t.Cleanup closes them.
func attachLab(t testing.TB, l *lab.Lab, pc ProgramConfig, c Config, queues int) (*Program, []*Socket) {
	t.Helper()
	var (
		p     *Program
		socks []*Socket
	)
	err := l.ServerNS.Do(func() (err error) {
		if p, err = NewProgram(pc); err != nil {
			return err
		}
		if err = p.Attach(l.ServerIf, Native); err != nil {
			return err
		}
		c.Interface = l.ServerIf
		for q := range queues {
			c.Queue = q
			s, err := Open(c)
			if err != nil {
				return err
			}
			socks = append(socks, s)
			if err = p.Register(s); err != nil {
				return err
			}
		}
		return nil
	})
	t.Cleanup(func() {
		for _, s := range socks {
			s.Close()
		}
		if p != nil {
			p.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, socks
}

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xb}
)

var serialize = testutil.Serialize

func arpRequest(t testing.TB, src, target netip.Addr) []byte {
	return serialize(t,
		&layers.Ethernet{SrcMAC: macA, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: macA, SourceProtAddress: src.AsSlice(),
			DstHwAddress: make([]byte, 6), DstProtAddress: target.AsSlice()})
}

func ipv4(src, dst netip.Addr, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
}

func tcpSYN(t testing.TB, src, dst netip.Addr, sport, dport uint16) []byte {
	ip := ipv4(src, dst, layers.IPProtocolTCP)
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), SYN: true, Seq: 1, Window: 65535}
	tcp.SetNetworkLayerForChecksum(ip)
	return serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}, ip, tcp)
}

func icmpEcho(t testing.TB, src, dst netip.Addr, id, seq uint16) []byte {
	return serialize(t,
		&layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4},
		ipv4(src, dst, layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: id, Seq: seq},
		gopacket.Payload("percore"))
}

func udp(t testing.TB, src, dst netip.Addr, dport uint16) []byte {
	ip := ipv4(src, dst, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 1234, DstPort: layers.UDPPort(dport)}
	u.SetNetworkLayerForChecksum(ip)
	return serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}, ip, u, gopacket.Payload("x"))
}

func netInterface(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}
