package netstack

import (
	"strings"
	"testing"
	"time"
)

// Window scaling (RFC 7323 §2): our window field is shifted by our scale,
// the peer's by its scale; SYN segments are never scaled.
func TestTCPWindowScaleData(t *testing.T) {
	cfg := tcpTestConfig()
	cfg.RcvBuf = 1 << 20 // scale 5: 1 MiB >> 5 = 32768
	x := newTCPTest(t, cfg)
	syn := fl(S, tIRS, 0, 65535)
	syn.HasWScale, syn.WScale, syn.MSS = true, 2, 1460
	x.send(seg{TCPFields: syn})
	got := x.recv()
	if len(got) != 1 || !got[0].HasWScale || got[0].WScale != 5 || got[0].Window != 65535 {
		t.Fatalf("SYN-ACK %v", got)
	}
	iss := got[0].Seq
	x.send(seg{TCPFields: fl(A, tIRS+1, iss+1, 100)}) // 100<<2 = 400 bytes
	c := x.conn()
	if c.sndWnd != 400 || c.rcvWScale != 5 || c.sndWScale != 2 {
		t.Fatalf("snd.wnd %d scales %d/%d", c.sndWnd, c.rcvWScale, c.sndWScale)
	}
	app := x.ep.apps[0]
	app.write(strings.Repeat("w", 1000))
	x.kick(c)
	// The peer's 400-byte window limits the first segment; ours is 1 MiB >> 5.
	x.expect(seg{TCPFields: fl(A, iss+1, tIRS+1, 32768), data: strings.Repeat("w", 400)})
	x.send(seg{TCPFields: fl(A, tIRS+1, iss+401, 1000)})
	x.expect(seg{TCPFields: fl(PA, iss+401, tIRS+1, 32768), data: strings.Repeat("w", 600)})
}

// Timestamps on every segment once negotiated (RFC 7323 §3.2): TSval from
// our clock in ms plus the per-connection offset, TSecr echoing TS.Recent.
func TestTCPTimestampsData(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.tsOK, c.tsOff, c.tsRecent = true, 1_000_000, 70
	app.echo = true
	x.advance(25 * time.Millisecond)
	in := fl(PA, 5001, 1001, 65535)
	in.HasTimestamp, in.TSVal = true, 71
	x.send(seg{TCPFields: in, data: "ping"})
	w := fl(PA, 1001, 5005, 32764)
	w.HasTimestamp, w.TSVal, w.TSEcr = true, 1_000_025, 71
	x.expect(seg{TCPFields: w, data: "ping"})
}

// timedApp is a testApp with its own timeout (like httpd's idle timeout).
// Once expired it keeps reporting the deadline it passed, as httpd.Conn does.
type timedApp struct {
	testApp
	deadline time.Time
	expired  int
}

func (a *timedApp) Deadline() time.Time { return a.deadline }
func (a *timedApp) Expire(now time.Time) bool {
	if now.Before(a.deadline) {
		return false
	}
	a.expired++
	a.closing = true
	a.out = nil // output dropped, as httpd does
	return true
}

// An app's own deadline: TCP calls Expire when it passes and sends FIN.
func TestTCPAppTimer(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.establish()
	app := &timedApp{testApp: testApp{room: -1}}
	c.app, c.appTimer = app, app
	app.deadline = x.now.Add(5 * time.Second)
	x.send(seg{TCPFields: fl(A, 5001, 1001, 65535), data: "x"}) // TCP reads the deadline
	x.advance(40 * time.Millisecond)
	x.recv() // the delayed ACK
	x.advance(5*time.Second - 41*time.Millisecond)
	x.expectNothing()
	x.advance(time.Millisecond)
	x.expect(seg{TCPFields: fl(FA, 1001, 5002, 32767)})
	x.state(tcpFinWait1)
	// The expired app stays attached until TIME_WAIT, its deadline still
	// past: TCP owns the close now, whether the FIN waits for its ACK or the
	// peer for its own FIN, and asks the app nothing more (a second Expire
	// counted a second timeout and aborted the FIN with RST).
	for range 10 {
		x.advance(time.Millisecond)
		x.expectNothing()
	}
	x.send(seg{TCPFields: fl(A, 5002, 1002, 65535)})
	x.state(tcpFinWait2)
	for range 10 {
		x.advance(time.Millisecond)
		x.expectNothing()
	}
	x.send(seg{TCPFields: fl(FA, 5002, 1002, 65535)})
	x.expect(seg{TCPFields: fl(A, 1002, 5003, 32766)})
	x.state(tcpTimeWait)
	if st := x.stats(); app.expired != 1 || st.AppTimeouts != 1 || x.ep.released != 1 {
		t.Fatalf("Expire called %d times, %d app timeouts, %d released", app.expired, st.AppTimeouts, x.ep.released)
	}
}

// An app that expires with output in flight gets an abort: its output is gone.
func TestTCPAppTimerAbort(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.establish()
	app := &timedApp{testApp: testApp{room: -1}}
	c.app, c.appTimer = app, app
	app.write("response")
	app.deadline = x.now.Add(500 * time.Millisecond)
	x.kick(c)
	x.l.appDeadline(c)
	x.l.schedule(c)
	x.expect(seg{TCPFields: fl(PA, 1001, 5001, 32768), data: "response"})
	app.out = nil // dropped by Expire, as httpd does
	x.advance(500 * time.Millisecond)
	x.expect(seg{TCPFields: fl(R, 1009, 0, 0)})
	x.state(tcpClosed)
	if st := x.stats(); st.AppTimeouts != 1 || x.ep.released != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// stubbornApp reports a past deadline but never expires (a slow reader
// still taking output, in httpd's terms): poll must not spin.
type stubbornApp struct {
	testApp
	calls int
}

func (a *stubbornApp) Deadline() time.Time       { return time.Unix(1, 0) }
func (a *stubbornApp) Expire(now time.Time) bool { a.calls++; return false }

func TestTCPAppTimerNoSpin(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.establish()
	app := &stubbornApp{testApp: testApp{room: -1}}
	c.app, c.appTimer = app, app
	x.send(seg{TCPFields: fl(A, 5001, 1001, 65535)})
	x.advance(10 * time.Millisecond)
	if app.calls < 1 || app.calls > 11 {
		t.Fatalf("Expire called %d times in 10 ms", app.calls)
	}
}
