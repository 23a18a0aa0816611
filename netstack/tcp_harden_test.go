package netstack

import (
	"testing"
	"time"
)

// Hardening found in review: each test fails on the stack before its fix.

// A peer that SACKs and then drops the SACKed data (reneges, RFC 2018 §8)
// must not stall the connection: the RTO clears the scoreboard (RFC 6675
// §5.1) and go-back-N resends everything from SND.UNA.
func TestTCPRenegeAfterRTO(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK = true
	d := pattern(3 * 1460)
	app.write(d)
	x.kick(c)
	if n := len(x.recv()); n != 3 {
		t.Fatalf("%d segments sent, want 3", n)
	}
	ack := fl(A, 5001, 1001, 65535)
	ack.NSACK, ack.SACK[0] = 1, TCPSACKBlock{2461, 5381}
	x.send(seg{TCPFields: ack})
	x.advance(time.Second)
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768), data: d[:1460]})
	if c.nsacked != 0 {
		t.Fatalf("RTO kept the scoreboard %v", c.sackedRanges())
	}
	// The peer reneged: it ACKs the first segment and SACKs nothing.
	x.send(seg{TCPFields: fl(A, 5001, 2461, 65535)})
	x.expect(
		seg{TCPFields: fl(A, 2461, 5001, 32768), data: d[1460:2920]},
		seg{TCPFields: fl(PA, 3921, 5001, 32768), data: d[2920:]},
	)
	x.send(seg{TCPFields: fl(A, 5001, 5381, 65535)})
	if app.advanced != len(d) || c.rtxAt != 0 || x.stats().SACKCleared != 1 {
		t.Fatalf("advanced %d of %d, SACKCleared %d", app.advanced, len(d), x.stats().SACKCleared)
	}
}

// The receiver holds as many out-of-order ranges as its buffer allows and
// never forgets one it has SACKed; SACK blocks go most recent first.
func TestTCPReassemblyNeverReneges(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK = true
	const n = 20 // far more than four ranges
	for i := uint32(0); i < n; i++ {
		x.send(seg{TCPFields: fl(A, 5011+20*i, 1001, 65535), data: "0123456789"})
	}
	if len(c.ooo) != n {
		t.Fatalf("%d ranges held, want %d", len(c.ooo), n)
	}
	got := x.recv()
	last := got[len(got)-1]
	want := []TCPSACKBlock{{5391, 5401}, {5371, 5381}, {5351, 5361}, {5331, 5341}}
	if last.NSACK != 4 || [4]TCPSACKBlock(last.SACK[:4]) != [4]TCPSACKBlock(want) {
		t.Fatalf("SACK blocks %v, want %v", last.SACK[:last.NSACK], want)
	}
	// An older range again: it goes first, the others follow by recency.
	x.send(seg{TCPFields: fl(A, 5011, 1001, 65535), data: "0123456789"})
	got = x.recv()
	if s := got[0].SACK; got[0].NSACK != 4 || s[0] != (TCPSACKBlock{5011, 5021}) || s[1] != (TCPSACKBlock{5391, 5401}) {
		t.Fatalf("SACK blocks %v", s[:got[0].NSACK])
	}
	// Fill every hole: all of it arrives in order.
	for i := uint32(0); i < n; i++ {
		x.send(seg{TCPFields: fl(A, 5001+20*i, 1001, 65535), data: "abcdefghij"})
	}
	if len(app.in) != 20*n || c.rb != nil || len(c.ooo) != 0 {
		t.Fatalf("app got %d bytes of %d, ranges %v", len(app.in), 20*n, c.ooo)
	}
	if st := x.stats(); st.OOODrop != 0 {
		t.Fatalf("OOODrop %d", st.OOODrop)
	}
}

// When the range table is full, a segment that would need a new range is
// not accepted (it was never SACKed); every range already held stays.
func TestTCPReassemblyFullRefusesNew(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.establish()
	x.send(seg{TCPFields: fl(A, 5011, 1001, 65535), data: "x"})
	max := cap(c.ooo)
	for i := 1; i < max; i++ {
		x.send(seg{TCPFields: fl(A, 5011+2*uint32(i), 1001, 65535), data: "x"})
	}
	held := append([]tcpRange(nil), c.ooo...)
	x.send(seg{TCPFields: fl(A, 5003, 1001, 65535), data: "x"}) // below them all
	x.send(seg{TCPFields: fl(A, 5012, 1001, 65535), data: "x"}) // joins two ranges
	if st := x.stats(); st.OOODrop != 1 || st.OOOFull != 1 {
		t.Fatalf("OOODrop %d OOOFull %d", st.OOODrop, st.OOOFull)
	}
	if len(c.ooo) != max-1 || c.ooo[0] != (tcpRange{5011, 5014}) || c.ooo[len(c.ooo)-1] != held[len(held)-1] {
		t.Fatalf("ranges %v", c.ooo)
	}
	x.recv()
}

// A peer MSS below 48 is raised to 48 (Linux's tcp_min_snd_mss after
// CVE-2019-11479): with timestamps that leaves 36 bytes a segment, neither
// an underflow nor a flood of 1-byte segments.
func TestTCPPeerMSSFloor(t *testing.T) {
	for _, mss := range []uint16{1, 11, 12, 13, 47} {
		x := newTCPTest(t, tcpTestConfig())
		syn := fl(S, tIRS, 0, 65535)
		syn.MSS, syn.HasTimestamp, syn.TSVal = mss, true, 1
		x.send(seg{TCPFields: syn})
		c := x.conn()
		if c.mss != 48-12 {
			t.Fatalf("peer MSS %d: send MSS %d, want 36", mss, c.mss)
		}
		if st := x.stats(); st.MSSClamped != 1 {
			t.Fatalf("MSSClamped %d", st.MSSClamped)
		}
	}
}

// Challenge ACKs are limited per connection, with a randomised budget
// (RFC 5961 §7; CVE-2016-5696 read a shared counter): one connection's
// flood neither exhausts another's nor shows a fixed count.
func TestTCPChallengeACKPerConn(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.establish()
	counts := map[int]bool{}
	for round := 0; round < 8; round++ {
		x.advance(time.Second)
		before := x.stats().ChallengeACKs
		for i := 0; i < 2000; i++ {
			x.send(seg{TCPFields: fl(R, 5002, 0, 0)}) // in window, not RCV.NXT
		}
		n := int(x.stats().ChallengeACKs - before)
		if n < tcpChallengeLimit/2 || n >= 3*tcpChallengeLimit/2 {
			t.Fatalf("%d challenge ACKs in a second", n)
		}
		counts[n] = true
		x.recv()
	}
	if len(counts) < 2 {
		t.Fatalf("the same number of challenge ACKs every second: %v", counts)
	}
	// Another connection still gets its challenge ACK.
	x.key.rport++
	x.establish()
	x.sendFrom(tRemote, x.key.rport, seg{TCPFields: fl(R, 5002, 0, 0)})
	if got := x.recv(); len(got) != 1 || got[0].Flags != A || c.state != tcpEstablished {
		t.Fatalf("second connection: %v", got)
	}
}

// A valid SYN cookie is accepted only while cookies are being issued: after
// the backlog overflowed, for as long as a cookie made then stays valid.
func TestTCPSynCookieOnlyAfterOverflow(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	cookie, _ := x.l.sec.makeCookie(x.key, tIRS, 1460, x.l.now)
	x.send(seg{TCPFields: fl(A, tIRS+1, uint32(cookie)+1, 8192)})
	x.expect(seg{TCPFields: fl(R, uint32(cookie)+1, 0, 0)})
	if x.conn() != nil || x.stats().SynCookiesNoOverflow != 1 {
		t.Fatalf("a cookie was accepted with no overflow: %+v", x.stats())
	}
	fillBacklog(x)
	x.send(seg{TCPFields: fl(S, tIRS, 0, 8192)}) // overflows
	x.recv()
	x.advance(10 * time.Second)
	cookie, _ = x.l.sec.makeCookie(x.key, tIRS, 1460, x.l.now)
	x.send(seg{TCPFields: fl(A, tIRS+1, uint32(cookie)+1, 8192)})
	x.state(tcpEstablished)
}

// RFC 1337: a RST in TIME-WAIT is ignored; the 2MSL wait runs out.
func TestTCPTimeWaitIgnoresRST(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.inState(tcpTimeWait)
	x.send(seg{TCPFields: fl(R, tIRS+2, 0, 0)})
	x.expectNothing()
	x.state(tcpTimeWait)
	if st := x.stats(); st.TimeWaitRST != 1 || st.ResetsIn != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// RFC 7323 §4.3: TS.Recent takes SEG.TSval only from a segment with
// SEG.SEQ <= Last.ACK.sent, so that a delayed ACK echoes the earliest
// timestamp of the segments it acknowledges.
func TestTCPTSRecentLastAckSent(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.establish()
	c.tsOK, c.tsRecent = true, 50
	d := pattern(2000)
	s1 := fl(A, 5001, 1001, 65535)
	s1.HasTimestamp, s1.TSVal = true, 100
	x.send(seg{TCPFields: s1, data: d[:1000]})
	x.expectNothing() // the ACK is delayed
	s2 := fl(A, 6001, 1001, 65535)
	s2.HasTimestamp, s2.TSVal = true, 200
	x.send(seg{TCPFields: s2, data: d[1000:]})
	got := x.recv()
	if len(got) != 1 || got[0].Ack != 7001 || got[0].TSEcr != 100 {
		t.Fatalf("sent %v, want an ACK of 7001 echoing 100", got)
	}
}

// A segment trimmed at the right edge of the window loses its FIN: the FIN
// lies beyond what was accepted (RFC 9293 3.10.7.4, first step).
func TestTCPFinBeyondTrimmedSegment(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.establish()
	x.send(seg{TCPFields: fl(FA, 5001+32768-2, 1001, 65535), data: "abcd"})
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768)})
	if c.finPend || c.finRcvd {
		t.Fatalf("FIN at %d beyond the window taken", c.rcvFin)
	}
	if st := x.stats(); st.FinBeyondWindow != 1 {
		t.Fatalf("FinBeyondWindow %d", st.FinBeyondWindow)
	}
	// In order and trimmed: the text up to the edge is taken, the FIN not.
	x.send(seg{TCPFields: fl(FA, 5001, 1001, 65535), data: pattern(32768 + 10)})
	x.state(tcpEstablished)
	if c.finPend || c.finRcvd {
		t.Fatal("FIN beyond the window taken")
	}
	x.recv()
}

// A segment that found no tx frame goes out at the next poll, not after an RTO.
func TestTCPTxNoFrameRetriesAtPoll(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	app.write("hello")
	x.sink.noBuf = true
	x.kick(c)
	if st := x.stats(); st.TxNoBuf != 1 {
		t.Fatalf("TxNoBuf %d", st.TxNoBuf)
	}
	// Still no frame: tried again at the next poll, which comes at once.
	if next := x.l.poll(x.now); next.After(x.now) {
		t.Fatalf("next poll in %v, want now", next.Sub(x.now))
	}
	x.sink.noBuf = false
	x.l.poll(x.now)
	x.expect(seg{TCPFields: fl(PA, 1001, 5001, 32768), data: "hello"})
	if st := x.stats(); st.TxNoBuf != 2 || st.TxRetries != 2 {
		t.Fatalf("TxNoBuf %d TxRetries %d", st.TxNoBuf, st.TxRetries)
	}
}

// The IPv4 header checksum is built from the template's sum plus the
// per-packet words, not by RFC 1624 update: over every ID, including the
// one whose words fold to 0xffff (a checksum of 0x0000), it equals the
// full computation.
func TestWriteHeadersEveryID(t *testing.T) {
	c := newTestCtx(t, nil)
	got, want := filled(40), filled(40)
	dst := IPv4Addr{198, 18, 0, 9}
	zero := false
	for id := 0; id <= 0xffff; id++ {
		c.s.ipID = uint16(id)
		c.s.writeHeaders(got, dst, ProtoTCP, 40)
		(&EthernetFields{Src: macA, Type: EtherTypeIPv4}).Encode(want)
		(&IPv4Fields{TotalLen: 40, ID: uint16(id), Flags: IPv4FlagDF, TTL: 64, Protocol: ProtoTCP, Src: ipA, Dst: dst}).Encode(want[14:])
		if string(got) != string(want) || !IPv4(got[14:]).HeaderChecksumOK() {
			t.Fatalf("id %d\ngot  % x\nwant % x", id, got, want)
		}
		zero = zero || IPv4(got[14:]).Checksum() == 0
	}
	if !zero {
		t.Fatal("no ID gave a checksum of 0x0000")
	}
}

// Text held out of order beyond the peer's FIN is void: the FIN says the
// data ends there. A FIN in order, or one beyond a hole, drops what is held
// past it, so nothing is SACKed or kept there (found by FuzzTCPLayer).
func TestTCPFinDropsHeldBeyond(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK = true
	x.send(seg{TCPFields: fl(A, 5003, 1001, 65535), data: "past"}) // a hole at 5001-5002
	x.send(seg{TCPFields: fl(FA, 5002, 1001, 65535)})              // FIN beyond the hole
	if !c.finPend || len(c.ooo) != 0 {
		t.Fatalf("FIN pending %v, ranges held %v", c.finPend, c.ooo)
	}
	x.recv()
	x.send(seg{TCPFields: fl(A, 5001, 1001, 65535), data: "a"}) // the hole fills: the FIN is in
	x.state(tcpCloseWait)
	got := x.recv()
	if len(app.in) != 1 || len(c.ooo) != 0 || len(got) != 1 || got[0].Ack != 5003 || got[0].NSACK != 0 {
		t.Fatalf("app got %q, ranges %v, sent %v; want an ACK of 5003 without SACK", app.in, c.ooo, got)
	}

	// In order: the FIN at RCV.NXT with text held past it.
	x = newTCPTest(t, tcpTestConfig())
	c, _ = x.establish()
	c.sackOK = true
	x.send(seg{TCPFields: fl(A, 5002, 1001, 65535), data: "past"})
	x.recv()
	x.send(seg{TCPFields: fl(FA, 5001, 1001, 65535)})
	x.state(tcpCloseWait)
	if got := x.recv(); len(c.ooo) != 0 || len(got) != 1 || got[0].Ack != 5002 || got[0].NSACK != 0 {
		t.Fatalf("ranges %v, sent %v; want an ACK of 5002 without SACK", c.ooo, got)
	}
}
