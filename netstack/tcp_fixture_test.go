package netstack

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// The TCP test fixture, in the smoltcp/gVisor style: a layer on a collecting
// sink with a fake clock, connections built directly in the state under
// test, send() for a crafted segment and expect() for exactly the segments
// that must come back.

var (
	tLocal  = IPv4Addr{198, 18, 0, 1}
	tRemote = IPv4Addr{198, 18, 0, 2}
)

const (
	tLPort = 80
	tRPort = 40000
	tISS   = 1000 // our ISS in directly built fixtures
	tIRS   = 5000 // the peer's
)

// fakeSink collects the segments the layer sends. With keep off it only
// counts, so that allocation tests see the layer's allocations alone.
type fakeSink struct {
	buf   []byte
	segs  [][]byte
	keep  bool
	noBuf bool
	count int
}

func (s *fakeSink) tcpBuf(raddr, laddr uint32, n int) []byte {
	if s.noBuf {
		return nil
	}
	if cap(s.buf) < n {
		s.buf = make([]byte, n)
	}
	b := s.buf[:n]
	if s.keep {
		for i := range b {
			b[i] = 0xa5 // an unset field shows
		}
	}
	return b
}

func (s *fakeSink) tcpSend(n int) {
	s.count++
	if s.keep {
		s.segs = append(s.segs, bytes.Clone(s.buf[:n]))
	}
}

// testApp is a TCPApp that records what it gets. room < 0 takes everything;
// otherwise Feed takes at most room bytes in total until room is raised.
type testApp struct {
	in         []byte
	room       int
	out        [][]byte
	closing    bool
	peerClosed bool
	advanced   int
	feeds      int
	echo       bool // write back what is fed
}

func (a *testApp) Feed(p []byte, now time.Time) int {
	a.feeds++
	n := len(p)
	if a.room >= 0 {
		n = min(n, a.room)
		a.room -= n
	}
	a.in = append(a.in, p[:n]...)
	if a.echo {
		a.write(string(p[:n]))
	}
	return n
}

func (a *testApp) Output() [][]byte { return a.out }

func (a *testApp) Advance(n int) {
	a.advanced += n
	a.out = consume(a.out, n)
}

func (a *testApp) Closing() bool            { return a.closing }
func (a *testApp) PeerClosed(now time.Time) { a.peerClosed = true }
func (a *testApp) write(s string)           { a.out = append(a.out, []byte(s)) }
func (a *testApp) Reset()                   { *a = testApp{room: -1} }
func newTestApp() *testApp                  { return &testApp{room: -1} }
func (a *testApp) String() string           { return fmt.Sprintf("app{in %q}", a.in) }
func (a *testApp) received() string         { return string(a.in) }
func (a *testApp) pending() int {
	n := 0
	for _, b := range a.out {
		n += len(b)
	}
	return n
}

// testEndpoint hands out testApps and records releases.
type testEndpoint struct {
	apps     []*testApp
	refuse   bool
	released int
	remote   netip.AddrPort
}

func (e *testEndpoint) Accept(remote netip.AddrPort, _ TCPHandle, now time.Time) TCPApp {
	if e.refuse {
		return nil
	}
	e.remote = remote
	a := newTestApp()
	e.apps = append(e.apps, a)
	return a
}

func (e *testEndpoint) Release(app TCPApp, now time.Time) { e.released++ }

type tcpTest struct {
	t    testing.TB
	l    *tcpLayer
	sink *fakeSink
	ep   *testEndpoint
	now  time.Time
	key  tcpKey
	age  time.Duration // how long before now the segments send delivers arrived: a shard reading its link late
}

func tcpTestConfig() TCPConfig {
	// NewReno: the fixtures check its window arithmetic; CUBIC has its own.
	return TCPConfig{Addr: tLocal, MaxConns: 64, SynBacklog: 8, MSS: 1460, RcvBuf: 32768, Seed: 1, CC: NewReno}
}

func newTCPTest(t testing.TB, cfg TCPConfig) *tcpTest {
	t.Helper()
	x := &tcpTest{t: t, sink: &fakeSink{keep: true}, ep: &testEndpoint{},
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	x.l = newTCPLayer(cfg, x.sink, x.now)
	if err := x.l.listen(tLPort, x.ep); err != nil {
		t.Fatal(err)
	}
	x.key = tcpKey{raddr: ip4(tRemote), laddr: ip4(tLocal), rport: tRPort, lport: tLPort}
	return x
}

// seg is a segment on the wire: its fields and payload. In send() zero
// ports mean the test's remote -> local ports.
type seg struct {
	TCPFields
	data string
}

func (s seg) String() string {
	var fl []string
	for i, n := range []string{"FIN", "SYN", "RST", "PSH", "ACK", "URG"} {
		if s.Flags&(1<<i) != 0 {
			fl = append(fl, n)
		}
	}
	o := ""
	if s.MSS != 0 {
		o += fmt.Sprintf(" mss=%d", s.MSS)
	}
	if s.HasWScale {
		o += fmt.Sprintf(" ws=%d", s.WScale)
	}
	if s.SACKPermitted {
		o += " sackOK"
	}
	if s.HasTimestamp {
		o += fmt.Sprintf(" ts=%d/%d", s.TSVal, s.TSEcr)
	}
	for i := 0; i < s.NSACK; i++ {
		o += fmt.Sprintf(" sack=%d-%d", s.SACK[i].Left, s.SACK[i].Right)
	}
	return fmt.Sprintf("%d>%d [%s] seq=%d ack=%d win=%d%s len=%d %q", s.SrcPort, s.DstPort,
		strings.Join(fl, ","), s.Seq, s.Ack, s.Window, o, len(s.data), s.data)
}

func (x *tcpTest) sendFrom(src IPv4Addr, sport uint16, s seg) {
	if s.SrcPort == 0 {
		s.SrcPort = sport
	}
	if s.DstPort == 0 {
		s.DstPort = tLPort
	}
	hl := s.HeaderLen()
	b := make([]byte, hl+len(s.data))
	s.Encode(b)
	copy(b[hl:], s.data)
	TCP(b).SetChecksum(tcpChecksum(ip4(src), ip4(tLocal), b))
	x.l.input(x.now, int64(x.age), src, tLocal, b)
	x.l.rackBatch() // each segment its own batch
}

func (x *tcpTest) send(s seg) { x.t.Helper(); x.sendFrom(tRemote, tRPort, s) }

// recv returns and forgets the segments sent so far, checking each one's
// checksum and addresses.
func (x *tcpTest) recv() []seg {
	x.t.Helper()
	var out []seg
	for _, b := range x.sink.segs {
		v := TCP(b)
		if !v.Valid() {
			x.t.Fatalf("layer sent an invalid segment % x", b)
		}
		if c := tcpChecksum(ip4(tLocal), ip4(tRemote), b); c != 0 {
			x.t.Fatalf("layer sent a bad checksum (residue %#x): % x", c, b)
		}
		var s seg
		if !s.Decode(v) {
			x.t.Fatalf("layer sent bad options % x", b)
		}
		s.data = string(v.Payload())
		out = append(out, s)
	}
	x.sink.segs = x.sink.segs[:0]
	return out
}

// expect asserts that exactly want were sent since the last check. Zero
// ports in want mean local -> remote.
func (x *tcpTest) expect(want ...seg) {
	x.t.Helper()
	got := x.recv()
	for i := range want {
		if want[i].SrcPort == 0 {
			want[i].SrcPort = tLPort
		}
		if want[i].DstPort == 0 {
			want[i].DstPort = tRPort
		}
	}
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].TCPFields == want[i].TCPFields && got[i].data == want[i].data
	}
	if !ok {
		var g, w strings.Builder
		for _, s := range got {
			fmt.Fprintf(&g, "\n\t%v", s)
		}
		for _, s := range want {
			fmt.Fprintf(&w, "\n\t%v", s)
		}
		x.t.Fatalf("segments sent:%s\nwant:%s", g.String(), w.String())
	}
}

func (x *tcpTest) expectNothing() { x.t.Helper(); x.expect() }

// advance moves the fake clock and runs due timers.
func (x *tcpTest) advance(d time.Duration) {
	x.now = x.now.Add(d)
	x.l.poll(x.now)
}

// conn returns the test connection's TCB, or nil.
func (x *tcpTest) conn() *tcpConn {
	if i := x.l.table.lookup(x.key); i >= 0 {
		return x.l.conns[i]
	}
	return nil
}

func (x *tcpTest) state(want tcpState) {
	x.t.Helper()
	got := tcpClosed
	if c := x.conn(); c != nil {
		got = c.state
	}
	if got != want {
		x.t.Fatalf("state %v, want %v", got, want)
	}
}

// establish builds the test connection directly in ESTABLISHED: our ISS
// 1000 (SND.UNA 1001), the peer's ISS 5000 (RCV.NXT 5001), MSS 1460, no
// window scaling, SACK or timestamps, peer window 65535.
func (x *tcpTest) establish() (*tcpConn, *testApp) {
	l := x.l
	c := l.newConn(x.key)
	app := newTestApp()
	c.passive, c.ep, c.app = true, x.ep, app
	x.ep.apps = append(x.ep.apps, app)
	l.setState(c, tcpEstablished)
	c.iss, c.irs = tISS, tIRS
	c.sndUna, c.sndNxt, c.sndMax, c.recover = tISS+1, tISS+1, tISS+1, tISS
	c.rcvNxt, c.appSeq, c.lastAck = tIRS+1, tIRS+1, tIRS+1
	c.rcvAdv = c.rcvNxt.add(uint32(l.cfg.RcvBuf)) // as if advertised
	c.mss = 1460
	c.sndWnd, c.maxSndWnd = 65535, 65535
	c.sndWl1, c.sndWl2 = tIRS, tISS+1
	c.cwnd = 14600
	return c, app
}

// inState builds the connection in any synchronized state, as the RFC's
// transitions would leave it (our FIN at 1001 where we sent one, the
// peer's FIN at 5001 where it did).
func (x *tcpTest) inState(s tcpState) (*tcpConn, *testApp) {
	c, app := x.establish()
	l := x.l
	switch s {
	case tcpFinWait1, tcpFinWait2, tcpClosing, tcpTimeWait, tcpLastAck:
		app.closing = true
		c.finSent, c.finSeq = true, tISS+1
		c.sndNxt, c.sndMax = tISS+2, tISS+2
		if s == tcpFinWait1 || s == tcpClosing || s == tcpLastAck {
			c.rtxAt = l.now + c.rto
		} else {
			c.sndUna = tISS + 2
		}
	}
	switch s {
	case tcpClosing, tcpTimeWait, tcpCloseWait, tcpLastAck:
		c.finRcvd, c.rcvFin, c.peerFed = true, tIRS+1, true
		app.peerClosed = true
		c.rcvNxt, c.lastAck = tIRS+2, tIRS+2
	}
	switch s {
	case tcpFinWait2:
		c.rtxAt = l.now + int64(l.cfg.FinWait2)
	case tcpTimeWait:
		l.setState(c, tcpTimeWait)
		c.rtxAt = l.now + int64(l.cfg.TimeWait)
		l.schedule(c)
		return c, app
	}
	l.setState(c, s)
	l.schedule(c)
	return c, app
}

func (x *tcpTest) stats() TCPStats { return x.l.Stats() }

// consume drops the first n bytes of an app's output slices, as a test app's
// Advance does.
func consume(out [][]byte, n int) [][]byte {
	for n > 0 {
		if n >= len(out[0]) {
			n -= len(out[0])
			out = out[1:]
			continue
		}
		out[0] = out[0][n:]
		n = 0
	}
	return out
}
