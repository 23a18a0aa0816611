package netstack

import (
	"testing"
	"time"
)

// labFlight sends n segments on a connection whose SRTT is the lab's,
// 100 µs (RTO 200 ms, the floor), and returns the data sent.
func labFlight(x *tcpTest, n int) (*tcpConn, string) {
	c, app := x.establish()
	c.sackOK = true
	x.l.rttSample(c, int64(100*time.Microsecond))
	return c, sendFlight(x, c, app, n)
}

// A flight whose one ACK the path lost (a receiver that coalesces a burst
// answers it with one ACK): the tail loss probe goes after 2*SRTT + 2 ms, as
// Linux's tcp_schedule_loss_probe times it, not after a 10 ms floor. On the
// lab's loss-1% path each such tail cost percore 10.5 ms of silence against
// Linux's few.
func TestTCPProbeTimeoutShortRTT(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, d := labFlight(x, 10)
	pto := 2*c.srtt + int64(2*time.Millisecond)
	if !c.tlp || c.rtxAt != x.l.now+pto {
		t.Fatalf("timer: probe %v at %d, want the probe at %d", c.tlp, c.rtxAt, x.l.now+pto)
	}
	x.advance(time.Duration(pto) - time.Microsecond)
	x.expectNothing()
	x.advance(time.Microsecond)
	x.expect(seg{TCPFields: fl(PA, segSeq(9), 5001, 32768), data: d[9*1460:]})
	if st := x.stats(); st.TailLossProbes != 1 || st.RTOTimeouts != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// With one segment in flight the probe waits for the peer's delayed ACK
// too: 2*SRTT + RTOMin (Linux adds TCP_RTO_MIN), which is the RTO's time or
// later here, so the RTO alone is armed.
func TestTCPProbeTimeoutOneSegment(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := labFlight(x, 1)
	if c.tlp || c.rtxAt != x.l.now+c.rto {
		t.Fatalf("timer: probe %v at %d, want the RTO at %d", c.tlp, c.rtxAt, x.l.now+c.rto)
	}
}

// A probe that draws nothing leaves the RTO where it was: RTO after the
// last transmission of SND.UNA's segment (Linux's tcp_rearm_rto after a
// probe, tcp_rto_delta_us), not RTO after the probe.
func TestTCPRTOAfterProbeFromSendTime(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, d := labFlight(x, 10)
	sent := x.now
	x.advance(time.Duration(c.rtxAt - x.l.now))
	x.expect(seg{TCPFields: fl(PA, segSeq(9), 5001, 32768), data: d[9*1460:]})
	x.advance(time.Duration(c.rto) - x.now.Sub(sent) - time.Microsecond)
	x.expectNothing()
	x.advance(time.Microsecond)
	x.expect(seg{TCPFields: fl(A, segSeq(0), 5001, 32768), data: d[:1460]})
	if st := x.stats(); st.TailLossProbes != 1 || st.RTOTimeouts != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// With new data waiting, the probe is two new segments: when the path lost
// the flight's one ACK, one segment in order is what a receiver may hold its
// ACK for (Linux's 40 ms delayed ACK); two draw it at once (RFC 5681 §4.2).
func TestTCPProbeTwoNewSegments(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK = true
	x.l.rttSample(c, int64(100*time.Microsecond))
	d := pattern(1460 * 13)
	app.write(d)
	c.cwnd = 1460 * 10
	x.kick(c)
	if got := len(x.recv()); got != 10 {
		t.Fatalf("%d segments in flight, want 10", got)
	}
	x.advance(time.Duration(c.rtxAt - x.l.now))
	x.expect(seg{TCPFields: fl(A, segSeq(10), 5001, 32768), data: d[10*1460 : 11*1460]},
		seg{TCPFields: fl(A, segSeq(11), 5001, 32768), data: d[11*1460 : 12*1460]})
	// The ACK they draw takes the flight: the window sends the rest.
	x.send(seg{TCPFields: fl(A, 5001, segSeq(12), 65535)})
	x.expect(seg{TCPFields: fl(PA, segSeq(12), 5001, 32768), data: d[12*1460:]})
	if st := x.stats(); st.TailLossProbes != 1 || st.Retransmits != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// The recovery probe waits 2*SRTT + 2 ms also with one segment in flight:
// a retransmission that fills a hole is ACKed at once, so no allowance for a
// delayed ACK, and no 10 ms floor.
func TestTCPRecoveryProbeOneSegment(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := labFlight(x, 1)
	c.recovery, c.rtxUna = true, true // SND.UNA's retransmission is out
	x.l.rearmRTO(c)
	pto := 2*c.srtt + int64(2*time.Millisecond)
	if !c.tlp || c.rtxAt != x.l.now+pto {
		t.Fatalf("timer: probe %v at %d, want the probe at %d", c.tlp, c.rtxAt, x.l.now+pto)
	}
}
