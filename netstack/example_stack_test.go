package netstack_test

import (
	"fmt"
	"time"

	"percore/netstack"
)

// A shard's loop around a Stack: Poll with the shard's clock, sleep until the
// returned deadline or until frames arrive. Here the link is a ChanLink and
// the "network" injects one ARP request.
func ExampleStack_Poll() {
	s, err := netstack.NewStack(netstack.Config{
		MAC:     netstack.MAC{0x02, 0, 0, 0, 0, 1},
		Addr:    netstack.IPv4Addr{198, 18, 0, 1},
		Netmask: netstack.IPv4Addr{255, 255, 255, 0},
	})
	if err != nil {
		panic(err)
	}
	link := netstack.NewChanLink(1500, 64)

	req := make([]byte, netstack.EthernetHeaderLen+netstack.ARPLen)
	peer := netstack.MAC{0x02, 0, 0, 0, 0, 2}
	(&netstack.EthernetFields{Dst: netstack.MACBroadcast, Src: peer, Type: netstack.EtherTypeARP}).Encode(req)
	(&netstack.ARPFields{Op: netstack.ARPRequest, SenderMAC: peer, SenderIP: netstack.IPv4Addr{198, 18, 0, 2},
		TargetIP: netstack.IPv4Addr{198, 18, 0, 1}}).Encode(req[netstack.EthernetHeaderLen:])
	link.Inject(req)

	now := time.Unix(0, 0) // the shard's clock; the stack never reads one
	next := s.Poll(now, link)

	reply, _ := link.Take()
	a := netstack.ARP(netstack.Ethernet(reply).Payload())
	st := s.Stats()
	fmt.Println(a.Valid(), a.Op() == netstack.ARPReply, a.SenderIP(), a.TargetMAC())
	fmt.Println("requests", st.ARPRequestsRx, "replies", st.ARPRepliesTx, "timer armed", !next.IsZero())
	// Output:
	// true true 198.18.0.1 02:00:00:00:00:02
	// requests 1 replies 1 timer armed false
}
