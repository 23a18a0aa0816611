package netstack

import (
	"testing"
	"time"
)

// RFC 5961 §3: RST exactly at RCV.NXT resets; in the window but not exact
// gets a challenge ACK; outside the window is dropped. (TIME-WAIT ignores
// every RST: TestTCPTimeWaitIgnoresRST.)
func TestTCPRSTInWindow(t *testing.T) {
	for _, s := range []tcpState{tcpEstablished, tcpFinWait1, tcpFinWait2, tcpCloseWait, tcpClosing, tcpLastAck} {
		t.Run(s.String(), func(t *testing.T) {
			x := newTCPTest(t, tcpTestConfig())
			c, _ := x.inState(s)
			nxt := uint32(c.rcvNxt)
			x.send(seg{TCPFields: fl(R, nxt+100, 0, 0)})
			x.expect(seg{TCPFields: fl(A, uint32(c.sndNxt), nxt, c16(c, x))})
			x.state(s)
			x.send(seg{TCPFields: fl(R, nxt+40000, 0, 0)}) // out of window
			x.expectNothing()
			x.state(s)
			x.send(seg{TCPFields: fl(R, nxt, 0, 0)})
			x.expectNothing()
			x.state(tcpClosed)
			if st := x.stats(); st.ChallengeACKs != 1 || st.OutOfWindow != 1 || st.ResetsIn != 1 || st.Conns != 0 {
				t.Fatalf("stats %+v", st)
			}
			if x.ep.released != 1 {
				t.Fatal("app not released")
			}
		})
	}
}

// c16 is the window the fixture connection advertises.
func c16(c *tcpConn, x *tcpTest) uint16 {
	return uint16(c.rcvAdv.diff(c.rcvNxt))
}

// RFC 5961 §4: a SYN in a synchronized state gets a challenge ACK, whatever
// its sequence number, and changes nothing.
func TestTCPSYNChallenge(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.establish()
	for _, seq := range []uint32{5001, 5100, 1, 5000} {
		x.send(seg{TCPFields: fl(S, seq, 0, 8192)})
		x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768)})
	}
	x.state(tcpEstablished)
	if st := x.stats(); st.ChallengeACKs != 4 || st.OutOfWindow != 0 || st.DupSegs != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// RFC 5961 §5: an ACK for data not yet sent is answered by an ACK and
// dropped; an ACK older than SND.UNA-MAX.SND.WND gets a challenge ACK and is
// dropped (its data is not taken).
func TestTCPAckRange(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sndUna, c.sndNxt, c.sndMax = 100001, 100001, 100001
	c.maxSndWnd = 65535
	x.send(seg{TCPFields: fl(A, 5001, 100002, 65535), data: "x"})
	x.expect(seg{TCPFields: fl(A, 100001, 5001, 32768)})
	x.send(seg{TCPFields: fl(A, 5001, 100001-65536, 65535), data: "y"})
	x.expect(seg{TCPFields: fl(A, 100001, 5001, 32768)})
	if app.received() != "" {
		t.Fatalf("data of an unacceptable ACK taken: %q", app.received())
	}
	// An old ACK within MAX.SND.WND is fine: data taken, ACK ignored.
	x.send(seg{TCPFields: fl(A, 5001, 100001-65535, 65535), data: "z"})
	if app.received() != "z" || c.sndUna != 100001 {
		t.Fatalf("app %q una %d", app.received(), c.sndUna)
	}
	if st := x.stats(); st.AckTooNew != 1 || st.AckTooOld != 1 || st.ChallengeACKs != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// RFC 5961 §7: challenge ACKs are limited per second, to a budget drawn in
// [limit/2, 3*limit/2).
func TestTCPChallengeRateLimit(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.establish()
	x.sink.keep = false
	for i := 0; i < 2*tcpChallengeLimit; i++ {
		x.send(seg{TCPFields: fl(R, 5002, 0, 0)})
	}
	st := x.stats()
	if st.ChallengeACKs < tcpChallengeLimit/2 || st.ChallengeACKs >= 3*tcpChallengeLimit/2 || st.ChallengeACKs+st.ChallengeLimit != 2*tcpChallengeLimit {
		t.Fatalf("stats %+v", st)
	}
	sent := st.ChallengeACKs
	x.now = x.now.Add(time.Second)
	x.send(seg{TCPFields: fl(R, 5002, 0, 0)})
	if st := x.stats(); st.ChallengeACKs != sent+1 {
		t.Fatalf("stats %+v", st)
	}
}

// SYN-RECEIVED + RST at RCV.NXT: the half-open connection goes away.
func TestTCPSynRcvdRST(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.send(seg{TCPFields: fl(S, tIRS, 0, 8192)})
	x.recv()
	x.send(seg{TCPFields: fl(R, tIRS+1, 0, 0)})
	x.state(tcpClosed)
	if st := x.stats(); st.SynRcvd != 0 || st.Conns != 0 || st.ResetsIn != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Segments with bad checksums, truncated headers and bad options are
// dropped and counted, nothing sent.
func TestTCPBadSegments(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.establish()
	good := make([]byte, 20)
	(&TCPFields{SrcPort: tRPort, DstPort: tLPort, Seq: 5001, Ack: 1001, Flags: A, Window: 100}).Encode(good)
	TCP(good).SetChecksum(tcpChecksum(ip4(tRemote), ip4(tLocal), good))
	bad := append([]byte(nil), good...)
	bad[17] ^= 1
	x.l.input(x.now, 0, tRemote, tLocal, bad)
	x.l.input(x.now, 0, tRemote, tLocal, good[:19])
	short := append([]byte(nil), good...)
	short[12] = 4 << 4 // data offset 16
	x.l.input(x.now, 0, tRemote, tLocal, short)
	opt := make([]byte, 24)
	(&TCPFields{SrcPort: tRPort, DstPort: tLPort, Seq: 5001, Ack: 1001, Flags: A, MSS: 1}).Encode(opt)
	opt[21] = 9 // option length past the header
	TCP(opt).SetChecksum(tcpChecksum(ip4(tRemote), ip4(tLocal), opt))
	x.l.input(x.now, 0, tRemote, tLocal, opt)
	x.expectNothing()
	if st := x.stats(); st.ChecksumDrop != 1 || st.HeaderDrop != 2 || st.OptionDrop != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// RFC 7323 PAWS: an old timestamp is ACKed and dropped.
func TestTCPPAWS(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.tsOK, c.tsRecent, c.tsOff = true, 1000, 50
	old := fl(A, 5001, 1001, 65535)
	old.HasTimestamp, old.TSVal = true, 999
	x.send(seg{TCPFields: old, data: "old"})
	w := fl(A, 1001, 5001, 32768)
	w.HasTimestamp, w.TSVal, w.TSEcr = true, 50, 1000
	x.expect(seg{TCPFields: w})
	fresh := old
	fresh.TSVal = 1001
	x.send(seg{TCPFields: fresh, data: "new"})
	if app.received() != "new" || c.tsRecent != 1001 || x.stats().PAWSDrop != 1 {
		t.Fatalf("app %q ts.recent %d", app.received(), c.tsRecent)
	}
}

// Pure ACKs outside the window get at most one ACK per 500 ms (no ACK
// loops); segments with data are always answered.
func TestTCPOutOfWindowAckLimit(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.establish()
	ack := seg{TCPFields: fl(A, 5001+40000, 1001, 65535)}
	x.send(ack)
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768)})
	x.send(ack)
	x.send(ack)
	x.expectNothing()
	x.send(seg{TCPFields: fl(A, 5001+40000, 1001, 65535), data: "d"})
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768)})
	x.advance(500 * time.Millisecond)
	x.send(ack)
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768)})
	if st := x.stats(); st.OOWAckLimit != 2 || st.OutOfWindow != 5 {
		t.Fatalf("stats %+v", st)
	}
}
