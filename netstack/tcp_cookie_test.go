package netstack

import (
	"testing"
	"time"
)

// fillBacklog puts SynBacklog connections in SYN-RECEIVED from other ports.
func fillBacklog(x *tcpTest) {
	for p := 0; p < x.l.cfg.SynBacklog; p++ {
		x.sendFrom(tRemote, uint16(1000+p), seg{TCPFields: fl(S, 1, 0, 8192)})
	}
	x.recv()
}

// Backlog full -> a cookie SYN-ACK with no state; the ACK that returns the
// cookie establishes the connection, with the MSS the cookie encoded.
func TestTCPSynCookie(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	fillBacklog(x)
	syn := fl(S, tIRS, 0, 8192)
	syn.MSS, syn.HasWScale, syn.WScale, syn.SACKPermitted, syn.HasTimestamp = 1400, true, 7, true, true
	x.send(seg{TCPFields: syn})
	cookie, mss := x.l.sec.makeCookie(x.key, tIRS, 1400, 0)
	if mss != 1380 {
		t.Fatalf("cookie MSS %d, want 1380 (largest table entry <= 1400)", mss)
	}
	w := fl(SA, uint32(cookie), tIRS+1, 32768)
	w.MSS = 1380
	x.expect(seg{TCPFields: w})
	if x.conn() != nil || x.stats().SynCookiesSent != 1 {
		t.Fatal("cookie SYN-ACK kept state")
	}
	x.now = x.now.Add(5 * time.Second)
	x.send(seg{TCPFields: fl(PA, tIRS+1, uint32(cookie)+1, 8192), data: "GET"})
	x.state(tcpEstablished)
	c := x.conn()
	if !c.cookie || c.mss != 1380 || c.sndWScale != 0 || c.tsOK || c.sackOK || c.sndWnd != 8192 {
		t.Fatalf("cookie conn mss %d ws %d ts %v sack %v wnd %d", c.mss, c.sndWScale, c.tsOK, c.sackOK, c.sndWnd)
	}
	if len(x.ep.apps) != 1 || x.ep.apps[0].received() != "GET" {
		t.Fatal("data in the cookie ACK not delivered")
	}
	if st := x.stats(); st.SynCookiesOK != 1 || st.PassiveOpens != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Forged, stale and wrong-tuple cookie ACKs are answered by RST and
// counted; no connection is made.
func TestTCPSynCookieForged(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	fillBacklog(x)
	x.send(seg{TCPFields: fl(S, tIRS, 0, 8192)})
	cookie := x.recv()[0].Seq
	x.send(seg{TCPFields: fl(A, tIRS+1, cookie+2, 8192)}) // off by one
	x.expect(seg{TCPFields: fl(R, cookie+2, 0, 0)})
	x.send(seg{TCPFields: fl(A, tIRS+2, cookie+1, 8192)}) // other peer ISN
	x.expect(seg{TCPFields: fl(R, cookie+1, 0, 0)})
	x.sendFrom(tRemote, tRPort+1, seg{TCPFields: fl(A, tIRS+1, cookie+1, 8192)}) // other port
	x.expect(seg{TCPFields: TCPFields{DstPort: tRPort + 1, Flags: R, Seq: cookie + 1}})
	x.now = x.now.Add(130 * time.Second) // two cookie ticks later: no cookie can be valid
	x.send(seg{TCPFields: fl(A, tIRS+1, cookie+1, 8192)})
	x.expect(seg{TCPFields: fl(R, cookie+1, 0, 0)})
	x.state(tcpClosed)
	if st := x.stats(); st.SynCookiesBad != 3 || st.SynCookiesNoOverflow != 1 || st.SynCookiesOK != 0 || len(x.ep.apps) != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Keep-alive: probes after KeepIdle of silence, every KeepInterval, abort
// after KeepCount unanswered; an answer resets the count.
func TestTCPKeepAlive(t *testing.T) {
	cfg := tcpTestConfig()
	cfg.KeepIdle, cfg.KeepInterval, cfg.KeepCount = 10*time.Second, time.Second, 2
	x := newTCPTest(t, cfg)
	c, _ := x.establish()
	c.kaAt = x.l.now + int64(cfg.KeepIdle)
	x.l.schedule(c)
	x.advance(10 * time.Second)
	probe := seg{TCPFields: fl(A, 1000, 5001, 32768)}
	x.expect(probe)
	x.send(seg{TCPFields: fl(A, 5001, 1001, 65535)}) // the answer
	x.advance(9 * time.Second)
	x.expectNothing()
	x.advance(time.Second)
	x.expect(probe)
	x.advance(time.Second)
	x.expect(probe)
	x.advance(time.Second)
	x.expect(seg{TCPFields: fl(R, 1001, 0, 0)})
	x.state(tcpClosed)
	if st := x.stats(); st.KeepProbes != 3 || st.KeepAborts != 1 || x.ep.released != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Active open: the SYN goes out at the next poll with every option offered;
// the SYN-ACK establishes, and the app's request goes with the ACK.
func TestTCPActiveOpen(t *testing.T) {
	cfg := tcpTestConfig()
	cfg.PortLo, cfg.PortHi = 50000, 50010
	cfg.PortFilter = func(p uint16) bool { return p%4 == 3 } // e.g. this shard's RSS queue
	x := newTCPTest(t, cfg)
	app := newTestApp()
	app.write("GET / HTTP/1.1\r\n\r\n")
	if _, err := x.l.connect(x.now, tRemote, 8080, app, x.ep); err != nil {
		t.Fatal(err)
	}
	x.expectNothing()
	x.key = tcpKey{raddr: ip4(tRemote), laddr: ip4(tLocal), rport: 8080, lport: 50003}
	c := x.conn()
	if c == nil {
		t.Fatal("no connection on port 50003")
	}
	x.advance(0)
	iss := uint32(c.iss)
	syn := fl(S, iss, 0, 32768)
	syn.SrcPort, syn.DstPort = 50003, 8080
	syn.MSS, syn.HasWScale, syn.WScale, syn.SACKPermitted = 1460, true, 0, true
	syn.HasTimestamp, syn.TSVal = true, c.tsOff
	x.expect(seg{TCPFields: syn})
	x.state(tcpSynSent)
	// SYN retransmitted after 1 s.
	x.advance(time.Second)
	syn.TSVal += 1000
	x.expect(seg{TCPFields: syn})
	sa := fl(SA, 7000, iss+1, 1000)
	sa.SrcPort, sa.DstPort, sa.MSS, sa.HasWScale, sa.WScale = 8080, 50003, 1400, true, 2
	x.send(seg{TCPFields: sa})
	x.state(tcpEstablished)
	w := fl(PA, iss+1, 7001, 32768)
	w.SrcPort, w.DstPort = 50003, 8080
	x.expect(seg{TCPFields: w, data: "GET / HTTP/1.1\r\n\r\n"})
	if c.mss != 1400 || c.sndWScale != 2 || c.sackOK || c.tsOK || c.sndWnd != 1000 {
		t.Fatalf("negotiated mss %d ws %d sack %v ts %v wnd %d", c.mss, c.sndWScale, c.sackOK, c.tsOK, c.sndWnd)
	}
	// The next connect takes the next port the filter passes.
	if _, err := x.l.connect(x.now, tRemote, 8080, newTestApp(), x.ep); err != nil {
		t.Fatal(err)
	}
	if x.l.table.lookup(tcpKey{raddr: ip4(tRemote), laddr: ip4(tLocal), rport: 8080, lport: 50007}) < 0 {
		t.Fatal("second connect not on port 50007")
	}
	if _, err := x.l.connect(x.now, tRemote, 8080, newTestApp(), x.ep); err != ErrTCPNoPort {
		t.Fatalf("third connect: %v, want ErrTCPNoPort", err)
	}
}

// SYN-SENT: a RST with an acceptable ACK refuses the connection; a bad ACK
// gets a RST.
func TestTCPSynSentReset(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	app := newTestApp()
	if _, err := x.l.connect(x.now, tRemote, 8080, app, x.ep); err != nil {
		t.Fatal(err)
	}
	x.advance(0)
	x.recv()
	x.key = tcpKey{raddr: ip4(tRemote), laddr: ip4(tLocal), rport: 8080, lport: 32768}
	c := x.conn()
	x.sendFrom(tRemote, 8080, seg{TCPFields: TCPFields{DstPort: 32768, Flags: A, Ack: 12345}})
	x.expect(seg{TCPFields: TCPFields{SrcPort: 32768, DstPort: 8080, Flags: R, Seq: 12345}})
	x.sendFrom(tRemote, 8080, seg{TCPFields: TCPFields{DstPort: 32768, Flags: R | A, Ack: uint32(c.iss) + 1}})
	x.expectNothing()
	x.state(tcpClosed)
	if st := x.stats(); st.ResetsIn != 1 || x.ep.released != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// WakeTCP: output queued outside Feed/Advance goes out at the next poll;
// a stale handle does nothing.
func TestTCPWake(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	app := newTestApp()
	h, err := x.l.connect(x.now, tRemote, 8080, app, x.ep)
	if err != nil {
		t.Fatal(err)
	}
	x.key = tcpKey{raddr: ip4(tRemote), laddr: ip4(tLocal), rport: 8080, lport: 32768}
	c := x.conn()
	x.advance(0)
	x.recv()
	sa := fl(SA, 7000, uint32(c.iss)+1, 1000)
	sa.SrcPort, sa.DstPort, sa.MSS = 8080, 32768, 1460
	x.send(seg{TCPFields: sa})
	x.recv()
	app.write("later")
	x.advance(0)
	x.expectNothing()
	x.l.wake(h)
	x.l.wake(h)
	x.advance(0)
	w := fl(PA, uint32(c.iss)+1, 7001, 32768)
	w.SrcPort, w.DstPort = 32768, 8080
	x.expect(seg{TCPFields: w, data: "later"})
	x.send(seg{TCPFields: TCPFields{SrcPort: 8080, DstPort: 32768, Flags: R, Seq: 7001}})
	x.state(tcpClosed)
	x.l.wake(h) // stale
	x.advance(0)
	x.expectNothing()
}

// Simultaneous open (RFC 9293 3.5 figure 7): SYN-SENT + SYN -> SYN-RECEIVED
// with our SYN-ACK; the peer's ACK of it -> ESTABLISHED, without Accept.
func TestTCPSimultaneousOpen(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	app := newTestApp()
	if _, err := x.l.connect(x.now, tRemote, 8080, app, x.ep); err != nil {
		t.Fatal(err)
	}
	x.advance(0)
	x.recv()
	x.key = tcpKey{raddr: ip4(tRemote), laddr: ip4(tLocal), rport: 8080, lport: 32768}
	c := x.conn()
	iss := uint32(c.iss)
	syn := TCPFields{SrcPort: 8080, DstPort: 32768, Flags: S, Seq: 300, Window: 4000, MSS: 1460}
	x.sendFrom(tRemote, 8080, seg{TCPFields: syn})
	x.state(tcpSynRcvd)
	w := fl(SA, iss, 301, 32768)
	w.SrcPort, w.DstPort, w.MSS = 32768, 8080, 1460
	x.expect(seg{TCPFields: w})
	x.sendFrom(tRemote, 8080, seg{TCPFields: TCPFields{SrcPort: 8080, DstPort: 32768, Flags: A, Seq: 301, Ack: iss + 1, Window: 4000}})
	x.state(tcpEstablished)
	if len(x.ep.apps) != 0 {
		t.Fatal("an active open must not call Accept")
	}
}
