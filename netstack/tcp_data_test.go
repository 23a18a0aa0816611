package netstack

import (
	"strings"
	"testing"
	"time"
)

// kick runs the output path the way the input path does after a segment.
func (x *tcpTest) kick(c *tcpConn) {
	x.l.output(c)
	x.l.schedule(c)
}

// ESTABLISHED: in-order data is fed to the app straight away; the ACK is
// delayed for one segment and sent at once for the second (RFC 5681 4.2).
func TestTCPDelayedAck(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	_, app := x.establish()
	x.send(seg{TCPFields: fl(PA, 5001, 1001, 65535), data: "hello"})
	x.expectNothing()
	if app.received() != "hello" {
		t.Fatalf("app got %q", app.received())
	}
	x.advance(39 * time.Millisecond)
	x.expectNothing()
	x.advance(time.Millisecond)
	x.expect(seg{TCPFields: fl(A, 1001, 5006, 32763)}) // edge held by SWS avoidance
	x.send(seg{TCPFields: fl(A, 5006, 1001, 65535), data: "12345"})
	x.expectNothing()
	x.send(seg{TCPFields: fl(A, 5011, 1001, 65535), data: "67890"})
	x.expect(seg{TCPFields: fl(A, 1001, 5016, 32753)})
	x.advance(time.Second)
	x.expectNothing()
	if st := x.stats(); st.DelayedAcks != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A response written during Feed carries the ACK (no separate ACK).
func TestTCPRequestResponse(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	app.echo = true
	x.send(seg{TCPFields: fl(PA, 5001, 1001, 65535), data: "GET / HTTP/1.1\r\n\r\n"})
	x.expect(seg{TCPFields: fl(PA, 1001, 5019, 32750), data: "GET / HTTP/1.1\r\n\r\n"})
	if c.rtxAt == 0 {
		t.Fatal("RTO not armed")
	}
	x.now = x.now.Add(10 * time.Millisecond)
	x.send(seg{TCPFields: fl(A, 5019, 1019, 65535)})
	x.expectNothing()
	if app.advanced != 18 || app.pending() != 0 || c.rtxAt != 0 || c.ackAt != 0 {
		t.Fatalf("advanced %d pending %d rtx %d ack %d", app.advanced, app.pending(), c.rtxAt, c.ackAt)
	}
	if c.srtt != int64(10*time.Millisecond) || c.rto != int64(200*time.Millisecond) {
		t.Fatalf("srtt %v rto %v", time.Duration(c.srtt), time.Duration(c.rto))
	}
}

// The send queue is cut into MSS segments across the app's slices, the
// last with PSH, limited by cwnd.
func TestTCPSegmentation(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.cwnd = 2 * 1460
	a, b := strings.Repeat("a", 1000), strings.Repeat("b", 3000)
	app.write(a)
	app.write(b)
	x.kick(c)
	all := a + b
	x.expect(
		seg{TCPFields: fl(A, 1001, 5001, 32768), data: all[:1460]},
		seg{TCPFields: fl(A, 2461, 5001, 32768), data: all[1460:2920]},
	)
	// Slow start: each ACK of a full segment opens cwnd by one MSS.
	x.send(seg{TCPFields: fl(A, 5001, 2461, 65535)})
	x.expect(seg{TCPFields: fl(PA, 3921, 5001, 32768), data: all[2920:]})
	if app.advanced != 1460 || c.cwnd != 3*1460 {
		t.Fatalf("advanced %d cwnd %d", app.advanced, c.cwnd)
	}
	x.send(seg{TCPFields: fl(A, 5001, 5001, 65535)})
	x.expectNothing()
	if app.advanced != 4000 || c.sndUna != 5001 || c.rtxAt != 0 {
		t.Fatalf("advanced %d una %d", app.advanced, c.sndUna)
	}
}

// The peer's window limits what is sent; a window update lets the rest go.
func TestTCPSendWindow(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sndWnd = 1000
	app.write(strings.Repeat("z", 1500))
	x.kick(c)
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768), data: strings.Repeat("z", 1000)})
	x.send(seg{TCPFields: fl(A, 5001, 2001, 1000)})
	x.expect(seg{TCPFields: fl(PA, 2001, 5001, 32768), data: strings.Repeat("z", 500)})
}

// Out of order: held and ACKed at once (dup ACK); the hole filled: all of
// it fed in order and ACKed at once. Overlaps and duplicates are trimmed.
func TestTCPReassembly(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	x.send(seg{TCPFields: fl(A, 5011, 1001, 65535), data: "KLMNO"}) // [5011,5016)
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768)})
	x.send(seg{TCPFields: fl(A, 5021, 1001, 65535), data: "UVWXY"}) // [5021,5026)
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768)})
	x.send(seg{TCPFields: fl(A, 5013, 1001, 65535), data: "MNOPQRSTU"}) // overlaps both ranges
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768)})
	x.send(seg{TCPFields: fl(A, 5011, 1001, 65535), data: "KLMNO"}) // duplicate of held data
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768)})
	if app.received() != "" || len(c.ooo) != 1 || c.ooo[0] != (tcpRange{5011, 5026}) {
		t.Fatalf("app %q ooo %v", app.received(), c.ooo)
	}
	x.send(seg{TCPFields: fl(A, 5001, 1001, 65535), data: "ABCDEFGHIJKL"}) // fills the hole, overlaps 1
	x.expect(seg{TCPFields: fl(A, 1001, 5026, 32743)})
	if app.received() != "ABCDEFGHIJKLMNOPQRSTUVWXY" {
		t.Fatalf("app got %q", app.received())
	}
	if c.rb != nil || len(c.ooo) != 0 {
		t.Fatal("receive buffer not returned to the pool")
	}
	// Entirely old: DupSegs, ACK.
	x.send(seg{TCPFields: fl(A, 5001, 1001, 65535), data: "ABC"})
	x.expect(seg{TCPFields: fl(A, 1001, 5026, 32743)})
	if st := x.stats(); st.OOOSegs != 4 || st.DupSegs != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// With SACK negotiated the dup ACKs carry SACK blocks, most recent first.
func TestTCPSACKBlocksSent(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.establish()
	c.sackOK = true
	x.send(seg{TCPFields: fl(A, 5011, 1001, 65535), data: "0123456789"})
	w := fl(A, 1001, 5001, 32768)
	w.NSACK, w.SACK[0] = 1, TCPSACKBlock{5011, 5021}
	x.expect(seg{TCPFields: w})
	x.send(seg{TCPFields: fl(A, 5031, 1001, 65535), data: "0123456789"})
	w.NSACK, w.SACK[0], w.SACK[1] = 2, TCPSACKBlock{5031, 5041}, TCPSACKBlock{5011, 5021}
	x.expect(seg{TCPFields: w})
}

// Data beyond the window is trimmed to it.
func TestTCPTrimToWindow(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.establish()
	x.send(seg{TCPFields: fl(A, 5001+32768-2, 1001, 65535), data: "abcd"})
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768)})
	if len(c.ooo) != 1 || c.ooo[0] != (tcpRange{5001 + 32768 - 2, 5001 + 32768}) {
		t.Fatalf("ranges %v", c.ooo)
	}
}

// Back-pressure: the app takes fewer bytes, TCP keeps the rest, the
// window shrinks; when the app's output drains it takes the rest and a
// window update goes out.
func TestTCPBackPressure(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	app.room = 10
	app.write("resp")
	x.send(seg{TCPFields: fl(PA, 5001, 1001, 65535), data: strings.Repeat("r", 2000)})
	x.expect(seg{TCPFields: fl(PA, 1001, 5001+2000, 32768-2000), data: "resp"}) // edge held (SWS)
	if len(app.in) != 10 || c.rb == nil || c.rcvNxt != 7001 || c.appSeq != 5011 {
		t.Fatalf("in %d rcvNxt %d appSeq %d", len(app.in), c.rcvNxt, c.appSeq)
	}
	app.room = -1
	x.send(seg{TCPFields: fl(A, 7001, 1005, 65535)})
	x.expect(seg{TCPFields: fl(A, 1005, 7001, 32768)})
	if len(app.in) != 2000 || c.rb != nil {
		t.Fatalf("in %d", len(app.in))
	}
}

// Zero window from the peer: the persist timer probes with backoff and
// does not count towards the retry limit; a window opening sends data.
func TestTCPZeroWindowPersist(t *testing.T) {
	cfg := tcpTestConfig()
	cfg.Retries = 2
	x := newTCPTest(t, cfg)
	c, app := x.establish()
	c.sndWnd = 0
	app.write("data")
	x.kick(c)
	x.expectNothing()
	if !c.persist {
		t.Fatal("persist timer not armed")
	}
	for i, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		x.advance(d - time.Millisecond)
		x.expectNothing()
		x.advance(time.Millisecond)
		x.expect(seg{TCPFields: fl(A, 1000, 5001, 32768)})
		x.send(seg{TCPFields: fl(A, 5001, 1001, 0)})
		x.expectNothing()
		if x.stats().PersistProbes != uint64(i+1) {
			t.Fatalf("probes %d", x.stats().PersistProbes)
		}
	}
	x.send(seg{TCPFields: fl(A, 5001, 1001, 100)})
	x.expect(seg{TCPFields: fl(PA, 1001, 5001, 32768), data: "data"})
	x.state(tcpEstablished)
}

// Our receive window closes under back-pressure, a zero-window probe from
// the peer is answered, and the ACK of a zero window still works.
func TestTCPZeroWindowReceive(t *testing.T) {
	cfg := tcpTestConfig()
	cfg.RcvBuf = 4096
	x := newTCPTest(t, cfg)
	c, app := x.establish()
	app.room = 0
	x.send(seg{TCPFields: fl(A, 5001, 1001, 65535), data: strings.Repeat("q", 4096)})
	x.advance(40 * time.Millisecond)
	x.expect(seg{TCPFields: fl(A, 1001, 9097, 0)})
	x.send(seg{TCPFields: fl(A, 9097, 1001, 65535), data: "z"}) // beyond the zero window
	x.expect(seg{TCPFields: fl(A, 1001, 9097, 0)})
	app.write("out")
	x.send(seg{TCPFields: fl(A, 9097, 1001, 65535)}) // acceptable with zero window
	x.expect(seg{TCPFields: fl(PA, 1001, 9097, 0), data: "out"})
	app.room = -1
	x.send(seg{TCPFields: fl(A, 9097, 1004, 65535)})
	x.expect(seg{TCPFields: fl(A, 1004, 9097, 4096)})
	if len(app.in) != 4096 || c.rb != nil {
		t.Fatalf("in %d", len(app.in))
	}
	if x.stats().OutOfWindow != 1 {
		t.Fatalf("stats %+v", x.stats())
	}
}
