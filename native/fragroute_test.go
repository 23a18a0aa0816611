package native

import (
	"net/netip"
	"testing"
	"time"

	"percore/netstack"
)

// sendApp sends its bytes once and takes whatever it is fed.
type sendApp struct{ out [][]byte }

func (a *sendApp) Feed(p []byte, now time.Time) int { return len(p) }
func (a *sendApp) Output() [][]byte                 { return a.out }
func (a *sendApp) Advance(n int) {
	for n > 0 && len(a.out) > 0 {
		k := min(n, len(a.out[0]))
		a.out[0], n = a.out[0][k:], n-k
		if len(a.out[0]) == 0 {
			a.out = a.out[1:]
		}
	}
}
func (a *sendApp) Closing() bool            { return false }
func (a *sendApp) PeerClosed(now time.Time) {}

type sendEP struct{ size int }

func (e sendEP) Accept(netip.AddrPort, netstack.TCPHandle, time.Time) netstack.TCPApp {
	return &sendApp{out: [][]byte{make([]byte, e.size)}}
}
func (e sendEP) Release(netstack.TCPApp, time.Time) {}

var (
	fragServerMAC = netstack.MAC{2, 0, 0, 0, 0, 1}
	fragClientMAC = netstack.MAC{2, 0, 0, 0, 0, 2}
	fragRouterMAC = netstack.MAC{2, 0, 0, 0, 0, 3}
	fragServerIP  = netstack.IPv4Addr{198, 18, 0, 1}
	fragClientIP  = netstack.IPv4Addr{198, 18, 0, 2}
	fragRouterIP  = netstack.IPv4Addr{198, 18, 0, 3}
)

func newFragStack(t *testing.T, mac netstack.MAC, ip netstack.IPv4Addr) *netstack.Stack {
	t.Helper()
	s, err := netstack.NewStack(netstack.Config{MAC: mac, Addr: ip, Netmask: netstack.IPv4Addr{255, 255, 255, 0}})
	if err != nil {
		t.Fatal(err)
	}
	s.EnableTCP(netstack.TCPConfig{MaxConns: 16, Seed: 7})
	return s
}

// fragNeeded is the router's ICMP "fragmentation needed" to the server
// address, quoting pkt (an IPv4 packet the server sent).
func fragNeeded(pkt netstack.IPv4, mtu uint16) []byte {
	quote := pkt[:pkt.HeaderLen()+8]
	b := make([]byte, 14+20+8+len(quote))
	(&netstack.EthernetFields{Dst: fragServerMAC, Src: fragRouterMAC, Type: netstack.EtherTypeIPv4}).Encode(b)
	(&netstack.IPv4Fields{TotalLen: uint16(len(b) - 14), TTL: 64, Protocol: netstack.ProtoICMP, Src: fragRouterIP, Dst: fragServerIP}).Encode(b[14:])
	copy(b[14+20+8:], quote)
	(&netstack.ICMPv4Fields{Type: netstack.ICMPv4Unreachable, Code: netstack.ICMPv4FragNeeded, Seq: mtu}).Encode(b[14+20:])
	return b
}

// An ICMP "fragmentation needed" that lands on queue 0, whose stack does
// not hold the flow, reaches queue 2's stack, on another shard, which
// holds it: that stack lowers the MSS and sends again what was in flight.
// Queue 1, on the first shard too, takes it and finds nothing.
func TestFragRouterAcrossShards(t *testing.T) {
	r := newFragRouter(4, [][]int{{0, 1}, {2}}) // queue 3: no shard's
	now := time.Unix(1_000_000, 0)
	s0 := newFragStack(t, fragServerMAC, fragServerIP)
	s1 := newFragStack(t, fragServerMAC, fragServerIP)
	s2 := newFragStack(t, fragServerMAC, fragServerIP)
	cl := newFragStack(t, fragClientMAC, fragClientIP)
	l0, l1, l2, lc := netstack.NewChanLink(1500, 64), netstack.NewChanLink(1500, 64), netstack.NewChanLink(1500, 64), netstack.NewChanLink(1500, 64)
	full := 0
	s0.ForwardFragNeeded(func(e netstack.FragNeeded) { full += r.post(0, e) })
	if err := s2.ListenTCP(80, sendEP{size: 8000}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ConnectTCP(now, fragServerIP, 80, &sendApp{}, sendEP{}); err != nil {
		t.Fatal(err)
	}
	// The handshake; the server's first flight stays on its link.
	for i := 0; i < 3; i++ {
		cl.Poll(now, lc)
		lc.ForwardTo(l2)
		s2.Poll(now, l2)
		if i < 2 {
			l2.ForwardTo(lc)
		}
	}
	var data netstack.IPv4
	for l2.Sent() > 0 {
		b, _ := l2.Take()
		if ip := netstack.IPv4(netstack.Ethernet(b).Payload()); len(netstack.TCP(ip.Payload()).Payload()) > 0 && data == nil {
			data = append(netstack.IPv4(nil), ip...)
		}
	}
	if data == nil {
		t.Fatalf("no data in flight: %+v", s2.TCPStats())
	}

	// Each stack on its own goroutine, as on its shard; the channel only
	// orders the test, the mailbox carries the message.
	posted := make(chan struct{})
	go func() {
		defer close(posted)
		l0.Inject(fragNeeded(data, 1000))
		s0.Poll(now, l0)
	}()
	<-posted
	if st := s0.Stats(); st.ICMPForwarded != 1 || full != 0 {
		t.Fatalf("queue 0: forwarded %d, full %d", st.ICMPForwarded, full)
	}
	got := make(chan int)
	go func() { got <- r.drain(2, now, s2, l2) }()
	if n := <-got; n != 1 {
		t.Fatalf("queue 2 took %d messages", n)
	}
	if n := r.drain(2, now, s2, l2); n != 0 {
		t.Fatalf("queue 2 took %d messages again", n)
	}
	if n := r.drain(1, now, s1, l1); n != 1 || s1.TCPStats().PMTUNoConn != 1 {
		t.Fatalf("queue 1 took %d messages: %+v", n, s1.TCPStats())
	}
	if n := r.drain(0, now, s0, l0); n != 0 {
		t.Fatalf("queue 0 took back %d of its own", n)
	}
	if st := s2.TCPStats(); st.PMTUDecreases != 1 || st.Retransmits == 0 {
		t.Fatalf("queue 2: %+v", st)
	}
	l2.Flush()
	sent := 0
	for l2.Sent() > 0 {
		b, _ := l2.Take()
		if n := netstack.IPv4(netstack.Ethernet(b).Payload()).TotalLen(); n > 1000 {
			t.Fatalf("a packet of %d bytes after the path MTU fell to 1000", n)
		}
		sent++
	}
	if sent == 0 {
		t.Fatal("nothing sent again")
	}

	// A flood fills a mailbox: counted, never blocking.
	for i := 0; i < fragMailbox+1; i++ {
		full += r.post(0, netstack.FragNeeded{})
	}
	if full != 2 { // queues 1 and 2 each refused the 17th
		t.Fatalf("%d refused", full)
	}
}
