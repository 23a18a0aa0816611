package netstack

import (
	"testing"
	"time"
)

// Loss recovery against a peer like Linux: duplicate ACKs whose window
// changes, retransmissions lost again, and ACKs a reordering path delivers
// late.

func dupSACK(wnd uint16, blocks ...TCPSACKBlock) seg {
	f := fl(A, 5001, 1001, wnd)
	f.NSACK = copy(f.SACK[:], blocks)
	return seg{TCPFields: f}
}

func segSeq(i int) uint32 { return 1001 + uint32(1460*i) }

// RFC 6675 §2, 5: with SACK, an ACK that brings new SACK information is a
// duplicate even when its window differs from the last (Linux grows its
// window while it queues out-of-order data). The third one starts fast
// retransmit.
func TestTCPSACKDupAckWindowChanges(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK = true
	d := sendFlight(x, c, app, 4)
	x.send(dupSACK(60000, TCPSACKBlock{segSeq(1), segSeq(2)}))
	x.send(dupSACK(61000, TCPSACKBlock{segSeq(1), segSeq(3)}))
	x.expectNothing()
	x.send(dupSACK(62000, TCPSACKBlock{segSeq(1), segSeq(4)}))
	x.expect(seg{TCPFields: fl(A, segSeq(0), 5001, 32768), data: d[:1460]})
	if !c.recovery || c.sndWnd != 62000 {
		t.Fatalf("recovery %v snd.wnd %d", c.recovery, c.sndWnd)
	}
	// The same SACK again with yet another window: no new information,
	// not a duplicate (RFC 5681's window test applies), no inflation.
	cwnd := c.cwnd
	x.send(dupSACK(63000, TCPSACKBlock{segSeq(1), segSeq(4)}))
	x.expectNothing()
	if c.cwnd != cwnd || c.dupAcks != 3 {
		t.Fatalf("cwnd %d (was %d) dupacks %d", c.cwnd, cwnd, c.dupAcks)
	}
}

// A retransmission lost again: once the peer SACKs data sent after it
// (above SND.MAX at the time it went), SND.UNA's segment goes again at
// once instead of after an RTO (RFC 8985 §6.2 in sequence order, Linux's
// tcp_mark_lost_retrans).
func TestTCPLostRetransmit(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK = true
	d := sendFlight(x, c, app, 4)
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(2)}))
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(3)}))
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(4)}))
	x.expect(seg{TCPFields: fl(A, segSeq(0), 5001, 32768), data: d[:1460]})
	if !c.rtxUna || c.rtxMark != seqnum(segSeq(4)) {
		t.Fatalf("rtxUna %v mark %d", c.rtxUna, c.rtxMark)
	}
	// New data goes out in recovery (cwnd = ssthresh + 3 MSS = 5 MSS).
	more := pattern(2 * 1460)
	app.write(more)
	x.kick(c)
	x.expect(seg{TCPFields: fl(A, segSeq(4), 5001, 32768), data: more[:1460]})
	// The peer SACKs segment 4, still without segment 0: the
	// retransmission was lost. Segment 0 again, then segment 5 on the
	// inflated window.
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(5)}))
	x.expect(
		seg{TCPFields: fl(A, segSeq(0), 5001, 32768), data: d[:1460]},
		seg{TCPFields: fl(PA, segSeq(5), 5001, 32768), data: more[1460:]},
	)
	if c.rtxMark != seqnum(segSeq(5)) {
		t.Fatalf("mark %d after the second retransmission", c.rtxMark)
	}
	// The same SACK again: nothing above the new mark (SND.MAX when the
	// second retransmission went), so nothing is known lost.
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(5)}))
	x.expectNothing()
	x.send(seg{TCPFields: fl(A, 5001, segSeq(6), 65535)})
	x.expectNothing()
	if st := x.stats(); st.LostRetransmits != 1 || st.FastRetransmits != 1 || st.RTOTimeouts != 0 || c.recovery || app.advanced != 6*1460 {
		t.Fatalf("recovery %v advanced %d stats %+v", c.recovery, app.advanced, st)
	}
}

// A segment SACKed at SND.UNA itself is not a lost retransmission.
func TestTCPLostRetransmitNotWhenSACKed(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK = true
	c.recovery, c.rtxUna, c.rtxMark = true, true, seqnum(segSeq(1))
	sendFlight(x, c, app, 3)
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(0), segSeq(3)}))
	x.expectNothing()
	if x.stats().LostRetransmits != 0 {
		t.Fatalf("stats %+v", x.stats())
	}
}

// RFC 7323 PAWS lets through a pure duplicate ACK that only arrived late
// (Linux's tcp_disordered_ack): its SACK blocks count, it is not answered,
// and it does not move the send window. A late ACK below SND.UNA adds
// its SACK blocks only. A late ACK of new data, or one that carries data,
// is still dropped and ACKed.
func TestTCPPAWSDisorderedAck(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK, c.tsOK, c.tsRecent, c.tsOff = true, true, 5000, 50
	sendFlight(x, c, app, 4)
	late := dupSACK(60000, TCPSACKBlock{segSeq(1), segSeq(2)})
	late.HasTimestamp, late.TSVal = true, 4999
	x.send(late)
	x.expectNothing()
	if c.nsacked != 1 || c.dupAcks != 1 || c.sndWnd != 65535 || c.tsRecent != 5000 {
		t.Fatalf("sacked %d dupacks %d snd.wnd %d ts.recent %d", c.nsacked, c.dupAcks, c.sndWnd, c.tsRecent)
	}
	// Far older than one RTO (1 s here): PAWS drops it.
	ancient := late
	ancient.TSVal = 3000
	x.send(ancient)
	w := fl(A, segSeq(4), 5001, 32768)
	w.HasTimestamp, w.TSVal, w.TSEcr = true, 50, 5000
	x.expect(seg{TCPFields: w})
	// A late ACK below SND.UNA is no duplicate, but its SACK blocks
	// count: here a D-SACK.
	x.send(seg{TCPFields: fl(A, 5001, segSeq(1), 65535)})
	x.recv()
	old := dupSACK(65535, TCPSACKBlock{segSeq(0), segSeq(0) + 100})
	old.Ack, old.HasTimestamp, old.TSVal = segSeq(0)+100, true, 4999
	x.send(old)
	x.expectNothing()
	// A late ACK of data not yet acknowledged is news not to be
	// taken on trust: dropped.
	news := dupSACK(65535)
	news.Ack, news.HasTimestamp, news.TSVal = segSeq(2), true, 4999
	x.send(news)
	x.recv()
	if st := x.stats(); st.DisorderedAcks != 2 || st.PAWSDrop != 2 || st.DSACKsIn != 1 || c.sndUna != seqnum(segSeq(1)) {
		t.Fatalf("snd.una %d stats %+v", c.sndUna, st)
	}
}

// The recovery probe: SND.UNA's retransmission is out and no ACK comes
// back (it, or the one ACK it drew, was lost). It goes again after the
// probe timeout (2*SRTT + 2 ms), once; the RTO stays behind it.
func TestTCPRecoveryProbe(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK = true
	x.l.rttSample(c, int64(30*time.Millisecond)) // SRTT 30 ms, RTO 200 ms
	d := sendFlight(x, c, app, 4)
	x.advance(10 * time.Millisecond)
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(2)}))
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(3)}))
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(4)}))
	x.expect(seg{TCPFields: fl(A, segSeq(0), 5001, 32768), data: d[:1460]})
	x.advance(61 * time.Millisecond)
	x.expectNothing()
	x.advance(time.Millisecond)
	x.expect(seg{TCPFields: fl(A, segSeq(0), 5001, 32768), data: d[:1460]})
	// Once per SND.UNA: next comes the RTO, 200 ms after the probe.
	x.advance(199 * time.Millisecond)
	x.expectNothing()
	x.advance(time.Millisecond)
	x.expect(seg{TCPFields: fl(A, segSeq(0), 5001, 32768), data: d[:1460]})
	x.send(seg{TCPFields: fl(A, 5001, segSeq(4), 65535)})
	if st := x.stats(); st.RecoveryProbes != 1 || st.RTOTimeouts != 1 || st.TailLossProbes != 0 || app.advanced != 4*1460 {
		t.Fatalf("stats %+v", st)
	}
}

// Congestion avoidance counts bytes (RFC 3465 2.1): one SMSS per cwnd of
// data ACKed, however the ACKs are spread (here one per two segments, as a
// delayed-ACK receiver sends them).
func TestTCPCongestionAvoidanceBytes(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	sendFlight(x, c, app, 4)
	c.ssthresh = c.cwnd // congestion avoidance from here, cwnd 4 MSS
	x.send(seg{TCPFields: fl(A, 5001, segSeq(2), 65535)})
	if c.cwnd != 4*1460 || c.caAcked != 2*1460 {
		t.Fatalf("after 2 MSS: cwnd %d acked %d", c.cwnd, c.caAcked)
	}
	x.recv()
	x.send(seg{TCPFields: fl(A, 5001, segSeq(4), 65535)})
	if c.cwnd != 5*1460 || c.caAcked != 0 {
		t.Fatalf("after 4 MSS: cwnd %d acked %d", c.cwnd, c.caAcked)
	}
}
