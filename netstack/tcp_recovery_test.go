package netstack

import (
	"strings"
	"testing"
	"time"
)

// data returns n bytes of a recognisable pattern.
func pattern(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteByte("abcdefghijklmnopqrstuvwxyz"[i%26])
	}
	return b.String()
}

// RFC 6298: RTO with backoff (1 s, 2 s, 4 s ...), go-back-N, collapsed
// cwnd, and an abort with RST after Retries.
func TestTCPRTOBackoffAbort(t *testing.T) {
	cfg := tcpTestConfig()
	cfg.Retries = 3
	x := newTCPTest(t, cfg)
	c, app := x.establish()
	d := pattern(2000)
	app.write(d)
	x.kick(c)
	x.expect(
		seg{TCPFields: fl(A, 1001, 5001, 32768), data: d[:1460]},
		seg{TCPFields: fl(PA, 2461, 5001, 32768), data: d[1460:]},
	)
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		x.advance(wait - time.Millisecond)
		x.expectNothing()
		x.advance(time.Millisecond)
		// cwnd is one segment: only the first goes again.
		x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768), data: d[:1460]})
		if c.cwnd != 1460 || c.ssthresh != 2920 || c.retries != uint8(i+1) {
			t.Fatalf("cwnd %d ssthresh %d retries %d", c.cwnd, c.ssthresh, c.retries)
		}
	}
	x.advance(8 * time.Second)
	x.expect(seg{TCPFields: fl(R, 3001, 0, 0)}) // <SEQ=SND.NXT><CTL=RST>
	x.state(tcpClosed)
	if st := x.stats(); st.RTOTimeouts != 4 || st.RTOAborts != 1 || st.Retransmits != 3 || x.ep.released != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// After an RTO the ACK of the retransmission resumes sending in slow
// start; Karn: no RTT sample from the retransmitted segment.
func TestTCPRTORecovery(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	d := pattern(2000)
	app.write(d)
	x.kick(c)
	x.recv()
	x.advance(time.Second)
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768), data: d[:1460]})
	x.advance(100 * time.Millisecond)
	x.send(seg{TCPFields: fl(A, 5001, 2461, 65535)})
	// The second segment was sent before the RTO: go-back-N sends it again.
	x.expect(seg{TCPFields: fl(PA, 2461, 5001, 32768), data: d[1460:]})
	if c.srtt != 0 || c.rto != int64(2*time.Second) {
		t.Fatalf("srtt %v rto %v: Karn violated", time.Duration(c.srtt), time.Duration(c.rto))
	}
	x.send(seg{TCPFields: fl(A, 5001, 3001, 65535)})
	if c.rtxAt != 0 || app.advanced != 2000 {
		t.Fatal("not all acked")
	}
}

// RFC 6298 RTT estimator from clean samples.
func TestTCPRTTEstimator(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.establish()
	x.l.rttSample(c, int64(100*time.Millisecond))
	if c.srtt != int64(100*time.Millisecond) || c.rttvar != int64(50*time.Millisecond) || c.rto != int64(300*time.Millisecond) {
		t.Fatalf("first: srtt %d rttvar %d rto %d", c.srtt, c.rttvar, c.rto)
	}
	x.l.rttSample(c, int64(200*time.Millisecond))
	// RTTVAR = 3/4*50 + 1/4*100 = 62.5; SRTT = 7/8*100 + 1/8*200 = 112.5
	if c.rttvar != 62500000 || c.srtt != 112500000 || c.rto != 112500000+4*62500000 {
		t.Fatalf("second: srtt %d rttvar %d rto %d", c.srtt, c.rttvar, c.rto)
	}
	x.l.rttSample(c, int64(time.Microsecond))
	for i := 0; i < 50; i++ {
		x.l.rttSample(c, int64(time.Microsecond))
	}
	if c.rto != int64(200*time.Millisecond) {
		t.Fatalf("RTOMin not applied: %d", c.rto)
	}
}

// sendFlight writes n full segments and returns the data, with the
// segments collected.
func sendFlight(x *tcpTest, c *tcpConn, app *testApp, n int) string {
	d := pattern(1460 * n)
	app.write(d)
	c.cwnd = uint32(1460 * n)
	x.kick(c)
	if got := len(x.recv()); got != n {
		x.t.Fatalf("%d segments in flight, want %d", got, n)
	}
	return d
}

// RFC 5681 fast retransmit on the third duplicate ACK, NewReno (RFC 6582)
// partial ACK retransmits the next hole, the full ACK ends recovery.
func TestTCPFastRetransmitNewReno(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	d := sendFlight(x, c, app, 6)
	seq := func(i int) uint32 { return 1001 + uint32(1460*i) }
	// Segments 0 and 2 lost: the peer ACKs segment 1 as a dup, then 3, 4, 5.
	x.send(seg{TCPFields: fl(A, 5001, 1001, 65535)})
	x.send(seg{TCPFields: fl(A, 5001, 1001, 65535)})
	x.expectNothing()
	x.send(seg{TCPFields: fl(A, 5001, 1001, 65535)})
	x.expect(seg{TCPFields: fl(A, seq(0), 5001, 32768), data: d[:1460]})
	if !c.recovery || c.ssthresh != 3*1460 || c.cwnd != 6*1460 {
		t.Fatalf("recovery %v ssthresh %d cwnd %d", c.recovery, c.ssthresh, c.cwnd)
	}
	x.send(seg{TCPFields: fl(A, 5001, 1001, 65535)}) // inflate
	x.expectNothing()
	// Partial ACK (up to segment 2): retransmit segment 2 at once.
	x.send(seg{TCPFields: fl(A, 5001, seq(2), 65535)})
	x.expect(seg{TCPFields: fl(A, seq(2), 5001, 32768), data: d[2*1460 : 3*1460]})
	if !c.recovery {
		t.Fatal("left recovery on a partial ACK")
	}
	// Full ACK: recovery ends, cwnd = min(ssthresh, flight+MSS).
	x.send(seg{TCPFields: fl(A, 5001, seq(6), 65535)})
	x.expectNothing()
	if c.recovery || c.cwnd != 2*1460 || app.advanced != 6*1460 {
		t.Fatalf("recovery %v cwnd %d advanced %d", c.recovery, c.cwnd, app.advanced)
	}
	if st := x.stats(); st.FastRetransmits != 1 || st.Retransmits != 2 || st.RTOTimeouts != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// SACK: fast recovery retransmits holes below the highest SACKed byte
// only; an RTO clears the scoreboard (RFC 6675 §5.1) and the SACKs that
// come after it build it again, so go-back-N still skips what the peer
// holds.
func TestTCPSACKRetransmit(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK = true
	d := sendFlight(x, c, app, 5)
	seq := func(i int) uint32 { return 1001 + uint32(1460*i) }
	// Segments 0 and 2 lost; 1, 3, 4 SACKed.
	for _, blocks := range [][]TCPSACKBlock{
		{{seq(1), seq(2)}},
		{{seq(3), seq(4)}, {seq(1), seq(2)}},
		{{seq(3), seq(5)}, {seq(1), seq(2)}},
	} {
		f := fl(A, 5001, 1001, 65535)
		f.NSACK = copy(f.SACK[:], blocks)
		x.send(seg{TCPFields: f})
	}
	// Third dup ACK: segment 0 again, and the hole at segment 2.
	x.expect(seg{TCPFields: fl(A, seq(0), 5001, 32768), data: d[:1460]})
	f := fl(A, 5001, 1001, 65535)
	f.NSACK, f.SACK[0], f.SACK[1] = 2, TCPSACKBlock{seq(3), seq(5)}, TCPSACKBlock{seq(1), seq(2)}
	x.send(seg{TCPFields: f})
	x.expect(seg{TCPFields: fl(A, seq(2), 5001, 32768), data: d[2*1460 : 3*1460]})
	x.send(seg{TCPFields: f})
	x.expectNothing() // no hole left below the highest SACKed byte
	// RTO now: segment 0 again, and the scoreboard forgotten.
	c.cwnd = 10 * 1460
	x.advance(time.Second)
	got := x.recv()
	if len(got) != 1 || got[0].Seq != seq(0) || c.nsacked != 0 {
		t.Fatalf("after RTO sent %v, scoreboard %v", got, c.sackedRanges())
	}
	// Its ACK covers 0 and the held 1, and SACKs 3 and 4 again: only 2 goes.
	f = fl(A, 5001, seq(2), 65535)
	f.NSACK, f.SACK[0] = 1, TCPSACKBlock{seq(3), seq(5)}
	x.send(seg{TCPFields: f})
	x.expect(seg{TCPFields: fl(A, seq(2), 5001, 32768), data: d[2*1460 : 3*1460]})
	x.send(seg{TCPFields: fl(A, 5001, seq(5), 65535)})
	x.expectNothing()
	if x.stats().SACKSkipped == 0 || app.advanced != 5*1460 {
		t.Fatalf("stats %+v", x.stats())
	}
}

// Sequence numbers wrap at 2^32: data, ACKs and reassembly across the wrap.
func TestTCPSeqWrap(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	var iss, irs uint32 = 0xFFFFFF00, 0xFFFFFFF0
	c.iss, c.sndUna, c.sndNxt, c.sndMax, c.recover = seqnum(iss-1), seqnum(iss), seqnum(iss), seqnum(iss), seqnum(iss-1)
	c.sndWl1, c.sndWl2 = seqnum(irs), seqnum(iss)
	c.irs, c.rcvNxt, c.appSeq = seqnum(irs-1), seqnum(irs), seqnum(irs)
	c.rcvAdv = c.rcvNxt.add(32768)
	d := pattern(1000)
	app.write(d)
	x.kick(c)
	x.expect(seg{TCPFields: fl(PA, iss, irs, 32768), data: d})
	// Out of order across the wrap, then the hole.
	x.send(seg{TCPFields: fl(A, irs+16, iss, 65535), data: "0123456789"}) // seq 0
	x.expect(seg{TCPFields: fl(A, iss+1000, irs, 32768)})
	x.send(seg{TCPFields: fl(A, irs, iss+1000, 65535), data: pattern(16)})
	x.expect(seg{TCPFields: fl(A, iss+1000, 10, 32768-26)})
	if app.received() != pattern(16)+"0123456789" || app.advanced != 1000 || c.rtxAt != 0 {
		t.Fatalf("app %q advanced %d", app.received(), app.advanced)
	}
}

// RFC 3042 limited transmit: each of the first two duplicate ACKs lets one
// new segment out; with SACK, recovery starts as soon as more than two
// segments are SACKed above the hole (RFC 6675 IsLost), here on the
// second duplicate ACK.
func TestTCPLimitedTransmitSACKLoss(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK = true
	d := pattern(1460 * 8)
	app.write(d)
	c.cwnd = 3 * 1460
	x.kick(c)
	if got := len(x.recv()); got != 3 {
		t.Fatalf("%d segments for cwnd 3", got)
	}
	seq := func(i int) uint32 { return 1001 + uint32(1460*i) }
	dup := func(blocks ...TCPSACKBlock) seg {
		f := fl(A, 5001, 1001, 65535)
		f.NSACK = copy(f.SACK[:], blocks)
		return seg{TCPFields: f}
	}
	// Segment 0 lost. Dup ACK 1 (SACK 1): segment 3 goes out.
	x.send(dup(TCPSACKBlock{seq(1), seq(2)}))
	x.expect(seg{TCPFields: fl(A, seq(3), 5001, 32768), data: d[seq(3)-1001 : seq(4)-1001]})
	// Dup ACK 2: segments 1, 2, 3 SACKed: recovery, retransmit 0.
	x.send(dup(TCPSACKBlock{seq(1), seq(4)})) // segments 1-3 SACKed: recovery
	got := x.recv()
	if len(got) == 0 || got[0].Seq != seq(0) || got[0].data != d[:1460] {
		t.Fatalf("sent %v", got)
	}
	if !c.recovery || x.stats().FastRetransmits != 1 {
		t.Fatalf("recovery %v stats %+v", c.recovery, x.stats())
	}
}

// RFC 8985 tail loss probe: with SACK and an RTT sample, the last segment
// goes again after 2*SRTT + 2 ms instead of waiting for the RTO; the
// RTO follows if the probe draws nothing.
func TestTCPTailLossProbe(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK = true
	x.l.rttSample(c, int64(30*time.Millisecond)) // SRTT 30 ms, RTO 200 ms
	d := pattern(3000)
	app.write(d)
	x.kick(c)
	x.recv()
	x.advance(61 * time.Millisecond) // PTO: 2*SRTT + 2 ms
	x.expectNothing()
	x.advance(time.Millisecond)
	x.expect(seg{TCPFields: fl(PA, 2541, 5001, 32768), data: d[1540:]}) // the last MSS
	// The probe's SACK shows the first segment lost: it goes again.
	f := fl(A, 5001, 1001, 65535)
	f.NSACK, f.SACK[0] = 1, TCPSACKBlock{2461, 4001}
	x.send(seg{TCPFields: f})
	x.expect(seg{TCPFields: fl(A, 1001, 5001, 32768), data: d[:1460]})
	x.send(seg{TCPFields: fl(A, 5001, 4001, 65535)})
	if st := x.stats(); st.TailLossProbes != 1 || st.RTOTimeouts != 0 || st.FastRetransmits != 1 || app.advanced != 3000 {
		t.Fatalf("stats %+v", st)
	}
	// A probe that draws nothing: the RTO follows.
	app.write("tail")
	x.kick(c)
	x.recv()
	pto := time.Duration(2*c.srtt + int64(200*time.Millisecond)) // one segment: 2*SRTT + RTOMin
	if pto >= time.Duration(c.rto) {
		x.advance(time.Duration(c.rto))
		x.expect(seg{TCPFields: fl(PA, 4001, 5001, 32768), data: "tail"})
		return
	}
	t.Fatalf("one segment in flight: PTO %v should not beat RTO %v", pto, time.Duration(c.rto))
}

// A spurious timeout (RFC 3522 detection, RFC 4015 response): the ACK
// after the RTO's retransmission echoes the timestamp of the original,
// which got there. The reduction is undone, and go-back-N stops: the
// segments after it are not sent again, new data follows.
func TestTCPSpuriousRTOUndone(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.tsOK, c.tsRecent, c.tsOff = true, 100, 50
	d := pattern(3 * 1460)
	app.write(d)
	x.kick(c)
	orig := x.recv()[0].TSVal
	cwnd := c.cwnd
	x.advance(time.Second)
	if got := x.recv(); len(got) != 1 || got[0].Seq != 1001 || c.cwnd != 1460 {
		t.Fatalf("after the RTO: cwnd %d, sent %v", c.cwnd, got)
	}
	more := pattern(100)
	app.write(more)
	ack := fl(A, 5001, 2461, 65535)
	ack.HasTimestamp, ack.TSVal, ack.TSEcr = true, 101, orig
	x.send(seg{TCPFields: ack})
	w := fl(PA, 1001+3*1460, 5001, 32768)
	w.HasTimestamp, w.TSVal, w.TSEcr = true, x.l.tsNow(c), 101
	x.expect(seg{TCPFields: w, data: more})
	if st := x.stats(); c.cwnd < cwnd || st.EifelUndos != 1 || st.RTOTimeouts != 1 || st.Retransmits != 1 {
		t.Fatalf("cwnd %d (was %d) stats %+v", c.cwnd, cwnd, st)
	}
}

// frtoFlight sends 4 segments to a peer without timestamps (Eifel cannot
// judge the timeout), with 2 more queued, lets the RTO resend segment 0,
// and ACKs that retransmission: F-RTO (RFC 5682) sends the 2 new
// segments rather than segments 1 and 2 again.
func frtoFlight(t *testing.T, x *tcpTest, sack bool) *tcpConn {
	c, app := x.establish()
	c.sackOK = sack
	sendFlight(x, c, app, 4)
	app.write(pattern(2 * 1460))
	x.advance(time.Second)
	if got := x.recv(); len(got) != 1 || got[0].Seq != segSeq(0) || c.cwnd != 1460 {
		t.Fatalf("after the RTO: cwnd %d, sent %v", c.cwnd, got)
	}
	x.advance(10 * time.Millisecond)
	x.send(seg{TCPFields: fl(A, 5001, segSeq(1), 65535)})
	if got := x.recv(); len(got) != 2 || got[0].Seq != segSeq(4) || got[1].Seq != segSeq(5) || !c.frto {
		t.Fatalf("F-RTO %v, sent %v; want segments 4 and 5", c.frto, got)
	}
	return c
}

// The next ACK acknowledges segments 1 and 2, sent once before the
// timeout: they were delayed, not lost, and the reduction is undone.
func TestTCPFRTOSpurious(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c := frtoFlight(t, x, false)
	x.send(seg{TCPFields: fl(A, 5001, segSeq(3), 65535)})
	x.expectNothing()
	st := x.stats()
	if c.frto || c.cwnd < 4*1460 || c.sndNxt != c.sndMax || st.FRTOUndos != 1 || st.SpuriousUndos != 1 || st.Retransmits != 1 {
		t.Fatalf("F-RTO %v cwnd %d SND.NXT %d SND.MAX %d stats %+v", c.frto, c.cwnd, c.sndNxt, c.sndMax, st)
	}
}

// A duplicate ACK instead says segment 1 was lost too: go-back-N resumes
// from it, and the reduction stays.
func TestTCPFRTOLoss(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c := frtoFlight(t, x, true)
	x.send(ackSACK(segSeq(1), TCPSACKBlock{segSeq(4), segSeq(6)})) // the new segments only
	if got := x.recv(); len(got) == 0 || got[0].Seq != segSeq(1) || c.frto || c.cwnd > 3*1460 || x.stats().FRTOUndos != 0 {
		t.Fatalf("F-RTO %v cwnd %d, sent %v; want segment 1 again", c.frto, c.cwnd, got)
	}
}

// With SACK, a duplicate ACK that SACKs segment 2, sent once before the
// timeout and never since, shows the originals arrived: the timeout was
// spurious too (RFC 5682 §3.1, step 3b) and is undone. Segment 1 is still
// missing below a SACKed one: RACK takes it from there with a fast
// recovery, as Linux does after such an undo.
func TestTCPFRTOSpuriousSACK(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c := frtoFlight(t, x, true)
	x.send(ackSACK(segSeq(1), TCPSACKBlock{segSeq(2), segSeq(3)}))
	got := x.recv()
	st := x.stats()
	if c.frto || st.FRTOUndos != 1 || st.SpuriousUndos != 1 || !c.recovery || st.RACKRecoveries != 1 || len(got) == 0 || got[0].Seq != segSeq(1) {
		t.Fatalf("F-RTO %v recovery %v, sent %v, stats %+v", c.frto, c.recovery, got, st)
	}
}
