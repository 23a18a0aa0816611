package netstack

import (
	"testing"
	"time"
)

// Active close: ESTABLISHED -> FIN-WAIT-1 -> FIN-WAIT-2 -> TIME-WAIT -> CLOSED.
func TestTCPActiveClose(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	app.write("bye")
	app.closing = true
	x.kick(c)
	x.expect(seg{TCPFields: fl(FPA, 1001, 5001, 32768), data: "bye"})
	x.state(tcpFinWait1)
	x.send(seg{TCPFields: fl(A, 5001, 1005, 65535)})
	x.expectNothing()
	x.state(tcpFinWait2)
	if app.advanced != 3 {
		t.Fatalf("advanced %d, want 3 (the FIN is not data)", app.advanced)
	}
	x.send(seg{TCPFields: fl(FA, 5001, 1005, 65535)})
	x.expect(seg{TCPFields: fl(A, 1005, 5002, 32767)})
	x.state(tcpTimeWait)
	if !app.peerClosed || x.ep.released != 1 || c.rb != nil {
		t.Fatalf("peerClosed %v released %d", app.peerClosed, x.ep.released)
	}
	x.advance(59 * time.Second)
	x.state(tcpTimeWait)
	x.advance(time.Second)
	x.state(tcpClosed)
	x.expectNothing()
	if st := x.stats(); st.TimeWaitDone != 1 || st.Conns != 0 || st.TimeWaits != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Passive close: ESTABLISHED -> CLOSE-WAIT -> LAST-ACK -> CLOSED.
func TestTCPPassiveClose(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	x.send(seg{TCPFields: fl(FPA, 5001, 1001, 65535), data: "last"})
	x.expect(seg{TCPFields: fl(A, 1001, 5006, 32763)})
	x.state(tcpCloseWait)
	if app.received() != "last" || !app.peerClosed {
		t.Fatalf("app %q peerClosed %v", app.received(), app.peerClosed)
	}
	// Data after the FIN: "Ignore the segment text."
	x.send(seg{TCPFields: fl(A, 5006, 1001, 65535), data: "more"})
	x.expectNothing()
	if st := x.stats(); st.AfterFinDrop != 1 || app.received() != "last" {
		t.Fatalf("stats %+v", st)
	}
	app.closing = true
	x.kick(c)
	x.expect(seg{TCPFields: fl(FA, 1001, 5006, 32763)})
	x.state(tcpLastAck)
	// RTO retransmits the FIN.
	x.advance(time.Second)
	x.expect(seg{TCPFields: fl(FA, 1001, 5006, 32763)})
	x.send(seg{TCPFields: fl(A, 5006, 1002, 65535)})
	x.expectNothing()
	x.state(tcpClosed)
	if x.ep.released != 1 || x.stats().Conns != 0 || len(x.l.timers.h) != 0 {
		t.Fatal("LAST-ACK did not delete the TCB")
	}
}

// Simultaneous close: FIN-WAIT-1 + FIN -> CLOSING; ACK of our FIN -> TIME-WAIT.
func TestTCPClosing(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.inState(tcpFinWait1)
	x.send(seg{TCPFields: fl(FA, 5001, 1001, 65535)})
	x.expect(seg{TCPFields: fl(A, 1002, 5002, 32767)})
	x.state(tcpClosing)
	x.send(seg{TCPFields: fl(A, 5002, 1002, 65535)})
	x.expectNothing()
	x.state(tcpTimeWait)
}

// FIN-WAIT-1 + FIN that also ACKs our FIN -> TIME-WAIT at once.
func TestTCPFinWait1FinAck(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.inState(tcpFinWait1)
	x.send(seg{TCPFields: fl(FA, 5001, 1002, 65535)})
	x.expect(seg{TCPFields: fl(A, 1002, 5002, 32767)})
	x.state(tcpTimeWait)
}

// TIME-WAIT: a retransmitted FIN is ACKed and restarts 2MSL.
func TestTCPTimeWaitFinRestarts(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.inState(tcpTimeWait)
	x.advance(50 * time.Second)
	x.send(seg{TCPFields: fl(FA, 5001, 1002, 65535)})
	x.expect(seg{TCPFields: fl(A, 1002, 5002, 32767)})
	x.advance(50 * time.Second)
	x.state(tcpTimeWait)
	x.advance(10 * time.Second)
	x.state(tcpClosed)
}

// TIME-WAIT: a new SYN above the old sequence space starts a new connection.
func TestTCPTimeWaitReuse(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.inState(tcpTimeWait)
	x.send(seg{TCPFields: fl(S, 90000, 0, 8192)})
	x.state(tcpSynRcvd)
	if got := x.recv(); len(got) != 1 || got[0].Flags != SA || got[0].Ack != 90001 {
		t.Fatalf("sent %v", got)
	}
	// An old SYN (below RCV.NXT) gets a challenge ACK instead... in
	// SYN-RECEIVED now the retransmitted SYN gets the SYN-ACK again.
	if st := x.stats(); st.TimeWaitDone != 1 || st.TimeWaits != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TIME-WAIT with timestamps: a SYN whose TSval is above TS.Recent reopens
// the 4-tuple whatever its ISN (RFC 6191), as a port-reusing client's
// random ISN may well be below RCV.NXT.
func TestTCPTimeWaitReuseNewerTimestamp(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.inState(tcpTimeWait)
	c.tsOK, c.tsRecent = true, 1000
	syn := fl(S, 100, 0, 8192)
	syn.HasTimestamp, syn.TSVal = true, 1001
	x.send(seg{TCPFields: syn})
	x.state(tcpSynRcvd)
	if got := x.recv(); len(got) != 1 || got[0].Flags != SA || got[0].Ack != 101 || got[0].TSEcr != 1001 {
		t.Fatalf("sent %v", got)
	}
	if st := x.stats(); st.TimeWaitReopened != 1 || st.TimeWaitDone != 1 || st.TimeWaits != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TIME-WAIT with timestamps: a SYN whose TSval is below TS.Recent is an old
// duplicate even with an ISN above RCV.NXT: PAWS ACKs and drops it.
func TestTCPTimeWaitReuseOlderTimestamp(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.inState(tcpTimeWait)
	c.tsOK, c.tsRecent = true, 1000
	syn := fl(S, 90000, 0, 8192)
	syn.HasTimestamp, syn.TSVal = true, 999
	x.send(seg{TCPFields: syn})
	x.state(tcpTimeWait)
	if got := x.recv(); len(got) != 1 || got[0].Flags != A || got[0].Ack != tIRS+2 {
		t.Fatalf("sent %v", got)
	}
	if st := x.stats(); st.TimeWaitReopened != 0 || st.PAWSDrop != 1 || st.TimeWaits != 1 {
		t.Fatalf("stats %+v", st)
	}
	// The same TSval as TS.Recent falls back to the ISN rule: below
	// RCV.NXT, a challenge ACK; above it, a new connection.
	syn.TSVal, syn.Seq = 1000, tIRS
	x.send(seg{TCPFields: syn})
	x.state(tcpTimeWait)
	syn.Seq = 90000
	x.advance(time.Second) // past the ACK rate limit
	x.recv()
	x.send(seg{TCPFields: syn})
	x.state(tcpSynRcvd)
	if st := x.stats(); st.TimeWaitReopened != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TIME-WAIT without timestamps: only an ISN above RCV.NXT reopens; another
// SYN gets a challenge ACK (RFC 5961 §4) and the TIME-WAIT stays.
func TestTCPTimeWaitReuseISN(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.inState(tcpTimeWait)
	x.send(seg{TCPFields: fl(S, tIRS+1, 0, 8192)})
	x.state(tcpTimeWait)
	if got := x.recv(); len(got) != 1 || got[0].Flags != A || got[0].Ack != tIRS+2 {
		t.Fatalf("sent %v", got)
	}
	x.send(seg{TCPFields: fl(S, tIRS+3, 0, 8192)})
	x.state(tcpSynRcvd)
	if st := x.stats(); st.TimeWaitReopened != 1 || st.TimeWaits != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// FIN-WAIT-2 does not last forever when the peer never sends FIN.
func TestTCPFinWait2Timeout(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.inState(tcpFinWait2)
	x.advance(60 * time.Second)
	x.state(tcpClosed)
	x.expectNothing()
	if st := x.stats(); st.FinWait2Timeout != 1 || x.ep.released != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// FIN-WAIT-2 still receives data (half close).
func TestTCPFinWait2Data(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	_, app := x.inState(tcpFinWait2)
	x.send(seg{TCPFields: fl(A, 5001, 1002, 65535), data: "ab"})
	x.send(seg{TCPFields: fl(A, 5003, 1002, 65535), data: "cd"})
	x.expect(seg{TCPFields: fl(A, 1002, 5005, 32764)})
	if app.received() != "abcd" {
		t.Fatalf("app got %q", app.received())
	}
}

// A FIN beyond a hole waits for the hole; then CLOSE-WAIT, and PeerClosed
// comes after all the data.
func TestTCPFinAfterHole(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	_, app := x.establish()
	x.send(seg{TCPFields: fl(FA, 5004, 1001, 65535), data: "def"})
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768)})
	x.state(tcpEstablished)
	if app.peerClosed {
		t.Fatal("PeerClosed before the data")
	}
	x.send(seg{TCPFields: fl(A, 5001, 1001, 65535), data: "abc"})
	x.expect(seg{TCPFields: fl(A, 1001, 5008, 32761)})
	x.state(tcpCloseWait)
	if app.received() != "abcdef" || !app.peerClosed {
		t.Fatalf("app %q peerClosed %v", app.received(), app.peerClosed)
	}
}

// A FIN while the app holds back input: PeerClosed only after the app
// has taken every byte.
func TestTCPFinWithHeldData(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	app.room = 2
	app.write("r")
	x.send(seg{TCPFields: fl(FPA, 5001, 1001, 65535), data: "abcd"})
	x.expect(seg{TCPFields: fl(PA, 1001, 5006, 32763), data: "r"})
	x.state(tcpCloseWait)
	if app.peerClosed {
		t.Fatal("PeerClosed with bytes held")
	}
	app.room = -1
	x.send(seg{TCPFields: fl(A, 5006, 1002, 65535)})
	if app.received() != "abcd" || !app.peerClosed || c.rb != nil {
		t.Fatalf("app %q peerClosed %v", app.received(), app.peerClosed)
	}
}

// A full table recycles its oldest TIME-WAIT connection for a new SYN.
func TestTCPTimeWaitRecycle(t *testing.T) {
	cfg := tcpTestConfig()
	cfg.MaxConns = 3
	x := newTCPTest(t, cfg)
	for i := 0; i < 3; i++ {
		x.key.rport = uint16(40000 + i)
		x.inState(tcpTimeWait)
	}
	x.key.rport = 40001
	x.l.setState(x.conn(), tcpEstablished) // a live one in the middle
	x.sendFrom(tRemote, 50000, seg{TCPFields: fl(S, 1, 0, 8192)})
	x.sendFrom(tRemote, 50001, seg{TCPFields: fl(S, 1, 0, 8192)})
	x.sendFrom(tRemote, 50002, seg{TCPFields: fl(S, 1, 0, 8192)})
	if got := len(x.recv()); got != 2 {
		t.Fatalf("%d SYN-ACKs, want 2", got)
	}
	st := x.stats()
	if st.TimeWaitRecycled != 2 || st.TableFull != 1 || st.TimeWaits != 0 || st.Conns != 3 {
		t.Fatalf("stats %+v", st)
	}
	if x.l.twHead != -1 || x.l.twTail != -1 {
		t.Fatal("TIME-WAIT list not empty")
	}
	x.state(tcpEstablished)
}

// TestTCPTimestampClockPerPeer: our TSval clock is offset per host pair, not
// per connection, so a client that reuses a port sends a TSval above what its
// last connection left in the server's TIME-WAIT (RFC 6191 reopens it); other
// peers see another offset.
func TestTCPTimestampClockPerPeer(t *testing.T) {
	s := newTCPSecrets(7)
	a := tcpKey{raddr: 0xc6120001, laddr: 0xc6120002, rport: 80, lport: 40000}
	b := a
	b.lport, b.rport = 40001, 8080
	if s.tsOffFor(a) != s.tsOffFor(b) {
		t.Fatalf("two connections to one peer: offsets %d and %d", s.tsOffFor(a), s.tsOffFor(b))
	}
	c := a
	c.raddr++
	if s.tsOffFor(a) == s.tsOffFor(c) {
		t.Fatalf("two peers share offset %d", s.tsOffFor(a))
	}
	if other := newTCPSecrets(8); other.tsOffFor(a) == s.tsOffFor(a) {
		t.Fatal("the offset does not depend on the secret")
	}
}
