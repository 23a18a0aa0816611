package netstack

import (
	"testing"
	"time"

	"github.com/google/gopacket/layers"
)

// knowB makes B (at macB) a reachable neighbour, as its request for us does.
func knowB(c *testCtx) {
	c.t.Helper()
	c.send(arpFrame(c.t, macB, MACBroadcast, ARPRequest, macB, ipB, MACZero, ipA))
	c.link.Discard()
	if e := c.s.arp.find(ipB); e == nil || e.mac != macB || e.state != arpReachable {
		c.t.Fatalf("B not learned: %+v", e)
	}
}

// TestARPPoisoning: frames that a bit flip (ARP has no checksum) or a
// hostile host could make never change the cache: each is dropped or
// ignored with its own counter, and B's entry keeps macB.
func TestARPPoisoning(t *testing.T) {
	flip := macB
	flip[5] ^= 0x40 // one bit off
	for _, tc := range []struct {
		name  string
		frame func(t testing.TB) []byte
		want  Stats
	}{
		{"sender MAC bit flipped", func(t testing.TB) []byte {
			return arpFrame(t, macB, MACBroadcast, ARPRequest, flip, ipB, MACZero, ipA)
		}, Stats{ARPBadEthSrc: 1}},
		{"Ethernet source bit flipped", func(t testing.TB) []byte {
			return arpFrame(t, flip, MACBroadcast, ARPRequest, macB, ipB, MACZero, ipA)
		}, Stats{ARPBadEthSrc: 1}},
		{"zero sender MAC", func(t testing.TB) []byte {
			return arpFrame(t, MACZero, MACBroadcast, ARPRequest, MACZero, ipB, MACZero, ipA)
		}, Stats{ARPBadSender: 1}},
		{"unsolicited reply", func(t testing.TB) []byte {
			return arpFrame(t, macC, macA, ARPReply, macC, ipB, macA, ipA)
		}, Stats{ARPUnsolicited: 1}},
		{"gratuitous reply", func(t testing.TB) []byte {
			return arpFrame(t, macC, MACBroadcast, ARPReply, macC, ipB, MACBroadcast, ipB)
		}, Stats{ARPNotForUs: 1}},
		{"request for another host", func(t testing.TB) []byte {
			return arpFrame(t, macC, MACBroadcast, ARPRequest, macC, ipB, MACZero, ipC)
		}, Stats{ARPNotForUs: 1}},
		{"gratuitous request", func(t testing.TB) []byte {
			return arpFrame(t, macC, MACBroadcast, ARPRequest, macC, ipB, MACZero, ipB)
		}, Stats{ARPNotForUs: 1}},
		{"off-link sender", func(t testing.TB) []byte {
			return arpFrame(t, macC, MACBroadcast, ARPRequest, macC, ipFar, MACZero, ipA)
		}, Stats{ARPBadSender: 1}},
		{"network address sender", func(t testing.TB) []byte {
			return arpFrame(t, macC, MACBroadcast, ARPRequest, macC, IPv4Addr{198, 18, 0, 0}, MACZero, ipA)
		}, Stats{ARPBadSender: 1}},
		{"subnet broadcast sender", func(t testing.TB) []byte {
			return arpFrame(t, macC, MACBroadcast, ARPRequest, macC, IPv4Addr{198, 18, 0, 255}, MACZero, ipA)
		}, Stats{ARPBadSender: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCtx(t, nil)
			knowB(c)
			before := c.stats()
			c.send(tc.frame(t))
			c.expectNone()
			if e := c.s.arp.find(ipB); e == nil || e.mac != macB || e.state != arpReachable {
				t.Fatalf("B's entry changed: %+v", e)
			}
			for _, ip := range []IPv4Addr{ipC, ipFar, {198, 18, 0, 0}, {198, 18, 0, 255}} {
				if e := c.s.arp.find(ip); e != nil {
					t.Fatalf("%v cached: %+v", ip, e)
				}
			}
			got := c.stats()
			tc.want.RxFrames, tc.want.Polls = 1, 1
			if d := statsDiff(got, before); d != tc.want {
				t.Fatalf("counters moved\n got %+v\nwant %+v", d, tc.want)
			}
		})
	}
}

// statsDiff returns a - b for the counters ARP tests look at.
func statsDiff(a, b Stats) Stats {
	return Stats{
		RxFrames: a.RxFrames - b.RxFrames, Polls: a.Polls - b.Polls,
		ARPBadSender: a.ARPBadSender - b.ARPBadSender, ARPBadEthSrc: a.ARPBadEthSrc - b.ARPBadEthSrc,
		ARPNotForUs: a.ARPNotForUs - b.ARPNotForUs, ARPUnsolicited: a.ARPUnsolicited - b.ARPUnsolicited,
		ARPRequestsRx: a.ARPRequestsRx - b.ARPRequestsRx, ARPRepliesRx: a.ARPRepliesRx - b.ARPRepliesRx,
	}
}

// TestARPSolicitedReply: a reply learns only while our request for that
// address is out, and only when it is addressed to us; a second copy after
// the entry resolved is unsolicited.
func TestARPSolicitedReply(t *testing.T) {
	c := newTestCtx(t, nil)
	c.send(echoFrame(t, macGW, macA, ipFar, ipA, ipOpts{}, false, 7, 1, nil)) // the answer needs the gateway
	c.expect(arpFrame(t, macA, MACBroadcast, ARPRequest, macA, ipA, MACZero, ipGW))
	c.send(arpFrame(t, macGW, macA, ARPReply, macGW, ipGW, macC, ipA)) // target MAC not ours
	c.expectNone()
	c.send(arpFrame(t, macGW, macA, ARPReply, macGW, ipGW, macA, ipA))
	c.expect(echoFrame(t, macA, macGW, ipA, ipFar, ipOpts{flags: layers.IPv4DontFragment}, true, 7, 1, nil))
	c.send(arpFrame(t, macC, macA, ARPReply, macC, ipGW, macA, ipA)) // a late, different answer
	c.expectNone()
	if e := c.s.arp.find(ipGW); e == nil || e.mac != macGW {
		t.Fatalf("gateway entry %+v", e)
	}
	if st := c.stats(); st.ARPRepliesRx != 1 || st.ARPUnsolicited != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestARPGleanKeepsMAC: an IPv4 packet whose Ethernet source (which no
// checksum covers) differs from a known neighbour's MAC does not move it.
func TestARPGleanKeepsMAC(t *testing.T) {
	c := newTestCtx(t, nil)
	knowB(c)
	ping := pingFromB(t, 1, "")
	copy(ping[6:], macC[:])
	c.send(ping)
	c.expect(replyToB(t, 0, 1, ""))
	if e := c.s.arp.find(ipB); e == nil || e.mac != macB {
		t.Fatalf("B's entry %+v", e)
	}
	if st := c.stats(); st.ARPGleanConflict != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestARPNeighbourMoves: a neighbour whose MAC changes (a new NIC, a
// migrated VM) and goes on talking to us without announcing it is reached
// at its old MAC until the entry expires (frames from the new MAC do not
// move it, nor refresh it), then found again by a fresh request.
func TestARPNeighbourMoves(t *testing.T) {
	c := newTestCtx(t, func(c *Config) { c.ARPLifetime = 10 * time.Second })
	knowB(c)
	ping := func(seq uint16) []byte {
		return echoFrame(t, macC, macA, ipB, ipA, ipOpts{flags: layers.IPv4DontFragment}, false, 1, seq, nil)
	}
	reply := func(dst MAC, id, seq uint16) []byte {
		return echoFrame(t, macA, dst, ipA, ipB, ipOpts{id: id, flags: layers.IPv4DontFragment}, true, 1, seq, nil)
	}
	c.send(ping(1))
	c.expect(reply(macB, 0, 1))
	c.advance(8 * time.Second) // the last quarter: one unicast refresh to the old MAC
	c.send(ping(2))
	c.expect(arpFrame(t, macA, macB, ARPRequest, macA, ipA, MACZero, ipB), reply(macB, 1, 2))
	c.advance(2 * time.Second) // expired: no answer came, and gleaning kept none alive
	c.send(ping(3))
	c.expect(arpFrame(t, macA, MACBroadcast, ARPRequest, macA, ipA, MACZero, ipB))
	c.send(arpFrame(t, macC, macA, ARPReply, macC, ipB, macA, ipA))
	c.expect(reply(macC, 2, 3))
	if e := c.s.arp.find(ipB); e == nil || e.mac != macC || e.state != arpReachable {
		t.Fatalf("B's entry %+v", e)
	}
}
