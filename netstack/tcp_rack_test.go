package netstack

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"
)

// RACK (RFC 8985), D-SACK (RFC 2883) and undo (RFC 3708) on the fixture.

// ackSACK is an ACK of ack with SACK blocks.
func ackSACK(ack uint32, blocks ...TCPSACKBlock) seg {
	f := fl(A, 5001, ack, 65535)
	f.NSACK = copy(f.SACK[:], blocks)
	return seg{TCPFields: f}
}

// rackFlight sends n segments from a SACK connection with a 10 ms RTT
// measured, so that RACK's reordering window is 2.5 ms, and lets 10 ms
// pass as if the segments travelled.
func rackFlight(x *tcpTest, n int) (*tcpConn, string) {
	c, app := sackConn(x, 10*time.Millisecond, 10*time.Millisecond)
	d := sendFlight(x, c, app, n)
	x.now = x.now.Add(10 * time.Millisecond)
	x.l.poll(x.now)
	return c, d
}

// The peer SACKs segment 1 but not 0, which was sent with it: one
// duplicate ACK, far from three, yet once RACK.rtt + reo_wnd has passed
// since segment 0 went, the reorder timer finds it lost and it goes again.
func TestTCPRACKLossByTime(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, d := rackFlight(x, 4)
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(2)}))
	x.expectNothing()
	if want := x.l.now + x.l.reoWnd(c); c.rackAt != want || x.l.reoWnd(c) != int64(2500*time.Microsecond) {
		t.Fatalf("reorder timer %d, want %d (reo_wnd %d)", c.rackAt, want, x.l.reoWnd(c))
	}
	x.advance(2 * time.Millisecond)
	x.expectNothing()
	x.advance(time.Millisecond)
	x.expect(seg{TCPFields: fl(A, segSeq(0), 5001, 32768), data: d[:1460]})
	st := x.stats()
	if !c.recovery || st.RACKRecoveries != 1 || st.ReorderTimeouts != 1 || st.RACKLost != 1 || c.dupAcks != 1 {
		t.Fatalf("recovery %v dupacks %d stats %+v", c.recovery, c.dupAcks, st)
	}
}

// RFC 8985 §6.2 step 2 sets RACK.rtt for each segment delivered, as
// Linux's tcp_rack_advance does, not only for RACK's segment. Without
// timestamps, an original's ACK that a stall held back min_RTT or more
// past the segment's retransmission passes for the retransmission's, and
// RACK's segment is the retransmission. With its RTT, short, as RACK.rtt,
// all sent before it counted as lost at once: here segments 6-9, sent
// 100 µs before it and still in flight. With the RTT of the last segment
// the ACK delivered (5, sent with 0), only segments sent a reordering
// window before that one can be.
func TestTCPRACKRetransmitAmbiguous(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c := rackHeldFirst(x, 300*time.Microsecond, 100*time.Microsecond)
	// 150 µs later, no sooner than min_RTT after the retransmission, the
	// ACK of 0's original and of 4 and 5, which a stall held back.
	x.advance(150 * time.Microsecond)
	x.send(seg{TCPFields: fl(A, 5001, segSeq(6), 65535)})
	x.expectNothing()
	if seq, lost := x.l.rackLost(c); lost || c.rackRTT != int64(450*time.Microsecond) {
		t.Fatalf("RACK.rtt %v; lost %v from %d", time.Duration(c.rackRTT), lost, seq)
	}
	if st := x.stats(); st.Retransmits != 1 || st.RACKLost != 1 {
		t.Fatalf("stats %+v, want 1 retransmission, 1 RACK loss", st)
	}
}

// Without timestamps, an ACK that a retransmission may have brought but
// that leaves unSACKed every original sent shortly before that
// retransmission answers the original transmission: on a path that keeps
// order, those originals would have arrived ahead of the retransmission.
// Taken for the retransmission's, its short RTT made RACK deem lost at
// once all still in flight: in TestTCPPathReorderStalls's seed 12 without
// timestamps, once CUBIC's window had grown past 400 segments (a trial
// build that kept the 5% growth across undos), 83 needless
// retransmissions of 16 MiB, every one D-SACKed; 6 with this rule.
func TestTCPRACKRetransmitOvertaking(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	rackHeldFirst(x, 2*time.Millisecond, 150*time.Microsecond)
	// 1.6 ms later, well past min_RTT, the ACK of 0's original, which the
	// path held back, SACKing none of 4-9.
	x.advance(1600 * time.Microsecond)
	x.send(ackSACK(segSeq(4)))
	x.expectNothing()
	if st := x.stats(); st.Retransmits != 1 {
		t.Fatalf("stats %+v, want 1 retransmission", st)
	}
	// Then all is acknowledged and the retransmission reported
	// duplicate: the reduction is undone.
	x.send(ackSACK(segSeq(10), TCPSACKBlock{segSeq(0), segSeq(1)}))
	if st := x.stats(); st.Retransmits != 1 || st.SpuriousUndos != 1 {
		t.Fatalf("stats %+v, want 1 retransmission, undone", st)
	}
}

// rackHeldFirst sends ten segments from a SACK connection with srtt and
// minRTT measured, six and 200 µs later four; 300 µs after the first
// went, 1-3 are SACKed: segment 0, held back, is deemed lost (no
// reordering seen and three segments SACKed: no window) and goes again.
func rackHeldFirst(x *tcpTest, srtt, minRTT time.Duration) *tcpConn {
	x.t.Helper()
	c, app := sackConn(x, srtt, minRTT)
	d := pattern(10 * 1460)
	app.write(d)
	burst := func(cwnd, want int) {
		c.cwnd = uint32(cwnd * 1460)
		x.kick(c)
		if got := len(x.recv()); got != want {
			x.t.Fatalf("%d segments sent, want %d", got, want)
		}
	}
	burst(6, 6)
	x.advance(200 * time.Microsecond)
	burst(10, 4)
	x.advance(100 * time.Microsecond)
	for i := 2; i <= 4; i++ {
		x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(i)}))
	}
	x.expect(seg{TCPFields: fl(A, segSeq(0), 5001, 32768), data: d[:1460]})
	return c
}

// Reordering within the window: segment 0 arrives 1 ms after the SACK for
// segment 1, before reo_wnd (2.5 ms) is over. Nothing is retransmitted
// and the reorder timer stops.
func TestTCPRACKReorderWithinWindow(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := rackFlight(x, 4)
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(2)}))
	x.advance(time.Millisecond)
	x.send(seg{TCPFields: fl(A, 5001, segSeq(4), 65535)})
	x.advance(10 * time.Millisecond)
	x.expectNothing()
	if st := x.stats(); st.Retransmits != 0 || c.recovery || c.rackAt != 0 {
		t.Fatalf("recovery %v rackAt %d stats %+v", c.recovery, c.rackAt, st)
	}
}

// A D-SACK (a block below the cumulative ACK, RFC 2883 §4) of a
// retransmission widens the reordering window by min_RTT/4, once per
// round trip (RFC 8985 §6.2).
func TestTCPDSACKWidensReoWnd(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := rackFlight(x, 4)
	before := x.l.reoWnd(c)
	// Segment 0 late: three SACKs make it lost (no reordering seen yet)
	// and it goes again; then it arrives, and its retransmission too.
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(2)}))
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(3)}))
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(4)}))
	if got := len(x.recv()); got != 1 || c.reordSeen {
		t.Fatalf("%d segments, reordering seen %v; want segment 0 again", got, c.reordSeen)
	}
	x.send(ackSACK(segSeq(2), TCPSACKBlock{segSeq(0), segSeq(1)}))
	x.send(ackSACK(segSeq(2), TCPSACKBlock{segSeq(0), segSeq(1)})) // the same round trip
	if got := x.l.reoWnd(c); got != 2*before || x.stats().DSACKsIn != 2 {
		t.Fatalf("reo_wnd %d, want %d; stats %+v", got, 2*before, x.stats())
	}
	// The window stops at SRTT.
	c.reoMult = 100
	if got := x.l.reoWnd(c); got != c.srtt {
		t.Fatalf("reo_wnd %d, want SRTT %d", got, c.srtt)
	}
}

// A fast retransmit that a D-SACK shows needless: the peer had segment 0
// all along (reordered). The window comes back as it was (RFC 3708).
func TestTCPDSACKUndoesFastRetransmit(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK = true
	d := sendFlight(x, c, app, 4)
	cwnd, ssthresh := c.cwnd, c.ssthresh
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(2)}))
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(3)}))
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(4)}))
	x.expect(seg{TCPFields: fl(A, segSeq(0), 5001, 32768), data: d[:1460]})
	if c.ssthresh >= ssthresh {
		t.Fatalf("no reduction: ssthresh %d", c.ssthresh)
	}
	// The original arrives, then the retransmission: ACK of all, D-SACK
	// for segment 0.
	x.send(seg{TCPFields: fl(A, 5001, segSeq(4), 65535)})
	x.send(ackSACK(segSeq(4), TCPSACKBlock{segSeq(0), segSeq(1)}))
	st := x.stats()
	if c.cwnd < cwnd || c.ssthresh != ssthresh || c.recovery || st.SpuriousUndos != 1 || st.Reductions != 1 {
		t.Fatalf("cwnd %d (was %d) ssthresh %d (was %d) recovery %v stats %+v", c.cwnd, cwnd, c.ssthresh, ssthresh, c.recovery, st)
	}
}

// The receiver reports duplicate data in a D-SACK block, first, once
// (RFC 2883 §4).
func TestTCPDSACKGenerated(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.establish()
	c.sackOK = true
	x.send(seg{TCPFields: fl(A|P, 5001, 1001, 65535), data: "abcd"})
	x.send(seg{TCPFields: fl(A|P, 5001, 1001, 65535), data: "abcd"}) // again
	got := x.recv()
	last := got[len(got)-1]
	if last.NSACK != 1 || last.SACK[0] != (TCPSACKBlock{5001, 5005}) || last.Ack != 5005 {
		t.Fatalf("segments %v, want the last with D-SACK 5001-5005", got)
	}
	x.send(seg{TCPFields: fl(A, 5005, 1001, 65535)})
	x.l.sendAck(c)
	if got := x.recv(); len(got) != 1 || got[0].NSACK != 0 {
		t.Fatalf("segments %v, want a plain ACK", got)
	}
	if st := x.stats(); st.DSACKsOut != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A retransmission that reordering delivers after later segments carries
// an older timestamp and fails PAWS; its data, held already, is still
// D-SACKed (Linux's tcp_send_dupack), so that the sender can undo.
func TestTCPDSACKAfterPAWS(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.establish()
	c.sackOK, c.tsOK, c.tsRecent = true, true, 100
	in := func(ts uint32, seq uint32, data string) {
		s := seg{TCPFields: fl(A|P, seq, 1001, 65535), data: data}
		s.HasTimestamp, s.TSVal = true, ts
		x.send(s)
	}
	in(101, 5001, "abcd")
	in(103, 5005, "efgh")
	x.recv()
	c.tsRecent = 103      // as an ACK of the first had gone before the second came
	in(102, 5001, "abcd") // the retransmission, late
	got := x.recv()
	if len(got) != 1 || got[0].NSACK != 1 || got[0].SACK[0] != (TCPSACKBlock{5001, 5005}) || got[0].Ack != 5009 {
		t.Fatalf("segments %v, want one ACK of 5009 with D-SACK 5001-5005", got)
	}
	if st := x.stats(); st.PAWSDrop != 1 || st.DSACKsOut != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A reorder-only path (10%, no loss, seeded): the transfer completes
// byte-exact, and every reduction that reordering caused is undone by the
// D-SACKs of its retransmissions.
func TestTCPReorderOnlyUndone(t *testing.T) {
	const size = 4 << 20
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i*7 + i>>8)
	}
	for seed := uint64(1); seed <= 2; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			n := newE2E(t, Faults{Reorder: 0.10}, seed, TCPConfig{RcvBuf: 1 << 20, MaxConns: 16})
			sep := &sizeServerEP{body: body}
			if err := n.a.ListenTCP(80, sep); err != nil {
				t.Fatal(err)
			}
			c := &sizeClient{sizes: []int{size}}
			c.request()
			if _, err := n.b.ConnectTCP(n.now, ipA, 80, c, &releaseCounter{}); err != nil {
				t.Fatal(err)
			}
			n.run(func() bool { return c.done }, 1000000)
			if c.sums[0] != sha256.Sum256(body) {
				t.Fatal("body corrupt")
			}
			sa, sb := n.a.TCPStats(), n.b.TCPStats()
			t.Logf("reductions %d undone %d | retrans %d fast %d rack %d rto %d tlp %d dsack in %d | client dsack out %d ooo %d | faults %+v",
				sa.Reductions, sa.SpuriousUndos, sa.Retransmits, sa.FastRetransmits, sa.RACKRecoveries, sa.RTOTimeouts,
				sa.TailLossProbes, sa.DSACKsIn, sb.DSACKsOut, sb.OOOSegs, n.fa.Stats)
			if sa.SpuriousUndos != sa.Reductions {
				t.Errorf("%d reductions, %d undone", sa.Reductions, sa.SpuriousUndos)
			}
			if n.fa.Stats.TxReordered == 0 {
				t.Error("no reordering")
			}
		})
	}
}

// The RACK ring is lent only while data is in flight: the ACK of the last
// byte gives it back, and the next flight takes it again from the pool.
func TestTCPRACKRingLent(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.sackOK = true
	if c.tx != nil {
		t.Fatal("ring lent with nothing in flight")
	}
	for flight := 0; flight < 2; flight++ {
		base := 4 * flight
		sendFlight(x, c, app, 4)
		x.send(seg{TCPFields: fl(A, 5001, segSeq(base+2), 65535)})
		if c.tx == nil || x.l.txMade != 1 {
			t.Fatalf("flight %d half ACKed: ring %v, %d made", flight, c.tx != nil, x.l.txMade)
		}
		x.send(seg{TCPFields: fl(A, 5001, segSeq(base+4), 65535)})
		if c.tx != nil || c.ntx != 0 || len(x.l.txRings) != 1 {
			t.Fatalf("flight %d ACKed: ring %v, %d records, %d free", flight, c.tx != nil, c.ntx, len(x.l.txRings))
		}
	}
}

// A loss while the last reduction is still undecided (D-SACKs for its
// retransmissions on their way, reordering having delayed them past the
// next loss): the two reductions are undone together, to the window
// before the first, once every retransmission of both is D-SACKed.
func TestTCPUndoSpansEpisodes(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := rackFlight(x, 4)
	c.cwnd, c.ssthresh = 10*1460, 20*1460
	x.l.saveUndo(c)
	c.undoRtx, c.cwnd, c.ssthresh = 1, 5*1460, 5*1460 // one retransmission, cwnd halved
	x.advance(time.Millisecond)
	c.sndUna = c.sndUna.add(1460)
	x.l.saveUndo(c) // the next loss, 1 ms later
	c.undoRtx, c.cwnd, c.ssthresh = 2, 3*1460, 3*1460
	una := seqnum(segSeq(0))
	x.l.dsackArrived(c, tcpRange{una, una.add(1460)}) // the first episode's
	if c.cwnd != 3*1460 {
		t.Fatalf("cwnd %d undone with a retransmission not yet D-SACKed", c.cwnd)
	}
	x.l.dsackArrived(c, tcpRange{una.add(1460), una.add(2920)})
	if st := x.stats(); c.cwnd != 10*1460 || c.ssthresh != 20*1460 || st.Reductions != 2 || st.SpuriousUndos != 2 {
		t.Fatalf("cwnd %d ssthresh %d stats %+v", c.cwnd, c.ssthresh, st)
	}
}

// With more bursts in flight than the ring holds, two records merge: the
// two sent closest in time, not the newest with the burst just sent. The
// delivery of the burst before then tells RACK its own send time (RFC
// 8985 §6.2), not the newest's, which made RACK deem lost every segment
// sent in between.
func TestTCPRACKMergeClosest(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := x.establish()
	c.sackOK, c.minRTT = true, int64(time.Millisecond)
	start := x.l.now
	sent := func(i int) int64 { // bursts 10 ns apart, but 5 close to 6
		if i == 5 {
			return start + 59
		}
		return start + int64(10*i)
	}
	for i := 0; i < tcpTxRing; i++ {
		x.l.txStamp(c, seqnum(segSeq(i)), seqnum(segSeq(i+1)), sent(i), false)
	}
	late := start + 1000
	x.l.txStamp(c, seqnum(segSeq(tcpTxRing)), seqnum(segSeq(tcpTxRing+1)), late, false)
	merged, newest := c.tx.rec[5], c.tx.rec[tcpTxRing-1]
	if c.ntx != tcpTxRing || merged != (tcpTxRec{l: seqnum(segSeq(5)), r: seqnum(segSeq(7)), at: sent(6)}) ||
		newest != (tcpTxRec{l: seqnum(segSeq(tcpTxRing)), r: seqnum(segSeq(tcpTxRing + 1)), at: late}) {
		t.Fatalf("%d records: merged %+v, newest %+v", c.ntx, merged, newest)
	}
	x.l.now = late + int64(time.Millisecond)
	x.l.rackDelivered(c, seqnum(segSeq(tcpTxRing-1)), seqnum(segSeq(tcpTxRing)), 0, &TCPFields{})
	if c.rackXmit != sent(tcpTxRing-1) {
		t.Fatalf("RACK xmit %d, want %d", c.rackXmit, sent(tcpTxRing-1))
	}
}

// After a timeout, go-back-N resends the flight from SND.UNA in slow
// start; when one of its retransmissions is lost too, RACK finds it by
// the SACK of a later one and sends it again, as Linux's RACK does in its
// Loss state, instead of a second timeout at twice the RTO (the RTO
// stays backed off while go-back-N resends: no RTT sample from
// retransmitted data). On a shallow bottleneck the lab's downloads stalled
// 1.3 and 3.6 s on chains of such timeouts.
func TestTCPRACKAfterRTO(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, d := rackFlight(x, 10) // all ten are lost, and the tail loss probe
	x.advance(12 * time.Millisecond)
	x.expect(seg{TCPFields: fl(PA, segSeq(9), 5001, 32768), data: d[9*1460:]})
	x.advance(time.Second)
	x.expect(seg{TCPFields: fl(A, segSeq(0), 5001, 32768), data: d[:1460]})
	x.send(ackSACK(segSeq(1))) // slow start: two go
	x.expect(seg{TCPFields: fl(A, segSeq(1), 5001, 32768), data: d[1460 : 2*1460]},
		seg{TCPFields: fl(A, segSeq(2), 5001, 32768), data: d[2*1460 : 3*1460]})
	x.advance(10 * time.Millisecond)
	x.send(ackSACK(segSeq(1), TCPSACKBlock{segSeq(2), segSeq(3)})) // segment 1 is lost again
	// Limited transmit (RFC 3042) lets one more go; RACK waits out its
	// reordering window.
	x.expect(seg{TCPFields: fl(A, segSeq(3), 5001, 32768), data: d[3*1460 : 4*1460]})
	x.advance(3 * time.Millisecond)
	x.expect(seg{TCPFields: fl(A, segSeq(1), 5001, 32768), data: d[1460 : 2*1460]})
	if st := x.stats(); st.RTOTimeouts != 1 || st.RACKLost != 1 || st.Retransmits != 6 || c.sndNxt != seqnum(segSeq(4)) {
		t.Fatalf("SND.NXT %d stats %+v", c.sndNxt, st)
	}
}

// The first ACK after a timeout that echoes a timestamp ends the backoff:
// the RTO is SRTT + 4*RTTVAR again (RFC 7323 §4, Linux's icsk_backoff).
func TestTCPRTOBackoffEndsOnTimestamp(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	c.tsOK, c.tsRecent, c.tsOff = true, 100, 50
	c.srtt, c.rttvar, c.rto = int64(10*time.Millisecond), int64(5*time.Millisecond), int64(time.Second)
	app.write(pattern(3 * 1460))
	x.kick(c)
	x.recv()
	x.advance(time.Second)
	got := x.recv()
	if len(got) != 1 || c.rto != int64(2*time.Second) {
		t.Fatalf("after the RTO: rto %v, sent %v", time.Duration(c.rto), got)
	}
	ack := fl(A, 5001, segSeq(1), 65535)
	ack.HasTimestamp, ack.TSVal, ack.TSEcr = true, 101, got[0].TSVal
	x.send(seg{TCPFields: ack})
	if want := int64(30 * time.Millisecond); c.rto != max(want, int64(x.l.cfg.RTOMin)) || x.stats().EifelUndos != 0 {
		t.Fatalf("rto %v after the ACK, stats %+v", time.Duration(c.rto), x.stats())
	}
}

// sackConn establishes a SACK connection without timestamps, an RTT of
// srtt measured (half as much variation, RTO 1 s) and a minimum RTT of
// minRTT.
func sackConn(x *tcpTest, srtt, minRTT time.Duration) (*tcpConn, *testApp) {
	c, app := x.establish()
	c.sackOK = true
	c.srtt, c.rttvar, c.rto = int64(srtt), int64(srtt/2), int64(time.Second)
	c.minRTT = int64(minRTT)
	return c, app
}

// tsConn is sackConn with timestamps (TS.Recent 100, offset 50).
func tsConn(x *tcpTest, srtt, minRTT time.Duration) (*tcpConn, *testApp) {
	c, app := sackConn(x, srtt, minRTT)
	c.tsOK, c.tsRecent, c.tsOff = true, 100, 50
	return c, app
}

// tsAck is an ACK of ack with SACK blocks that echoes ecr.
func tsAck(ack, ecr uint32, blocks ...TCPSACKBlock) seg {
	s := ackSACK(ack, blocks...)
	s.HasTimestamp, s.TSVal, s.TSEcr = true, 101, ecr
	return s
}

// A recovery that reordering alone caused is undone in part, as Linux's
// tcp_try_undo_partial does: a partial ACK that echoes a timestamp from
// before the first retransmission says the hole was filled by a segment
// the path held back. While a retransmission is still out, that ACK
// deems nothing more lost; once none is, the reduction is undone and the
// recovery ends, without waiting for the D-SACKs, which then still widen
// the reordering window.
func TestTCPPartialUndo(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := tsConn(x, 10*time.Millisecond, 10*time.Millisecond)
	sendFlight(x, c, app, 8) // segments 0-7
	orig := x.l.tsNow(c)
	x.advance(5 * time.Millisecond)
	app.write(pattern(1460))
	c.cwnd = 9 * 1460
	x.kick(c) // segment 8, 5 ms later
	if got := len(x.recv()); got != 1 {
		t.Fatalf("%d segments sent, want 1", got)
	}
	x.advance(5 * time.Millisecond)
	cwnd, ssthresh := c.cwnd, c.ssthresh

	// Segments 0 and 2 held back: the SACKs of 1 and 3-6 make them lost
	// (no reordering seen yet), and both go again.
	x.send(tsAck(segSeq(0), orig, TCPSACKBlock{segSeq(3), segSeq(7)}, TCPSACKBlock{segSeq(1), segSeq(2)}))
	if got := x.recv(); len(got) != 2 || got[0].Seq != segSeq(0) || got[1].Seq != segSeq(2) || !c.recovery {
		t.Fatalf("recovery %v, sent %v; want segments 0 and 2 again", c.recovery, got)
	}

	// Segment 0's original fills its hole (the echo is older than the
	// retransmission), and segment 8 is SACKed: RACK deems 7, sent 5 ms
	// before it, lost, but segment 2's retransmission is out, and this
	// ACK marks nothing.
	x.advance(time.Millisecond)
	x.send(tsAck(segSeq(2), orig, TCPSACKBlock{segSeq(8), segSeq(9)}, TCPSACKBlock{segSeq(3), segSeq(7)}))
	x.expectNothing()
	if seq, lost := x.l.rackLost(c); !lost || seq != seqnum(segSeq(7)) || !c.recovery || !c.reordSeen || x.stats().PartialUndos != 0 {
		t.Fatalf("rack lost %v at %d, recovery %v, reordering seen %v, stats %+v", lost, seq, c.recovery, c.reordSeen, x.stats())
	}

	// Segments 2 and 7 arrive, originals too: no retransmission is out,
	// and the reduction is undone.
	x.send(tsAck(segSeq(8), orig, TCPSACKBlock{segSeq(8), segSeq(9)}))
	x.expectNothing()
	st := x.stats()
	if c.recovery || c.cwnd < cwnd || c.ssthresh != ssthresh || st.PartialUndos != 1 || st.SpuriousUndos != 1 || st.Reductions != 1 || st.Retransmits != 2 {
		t.Fatalf("recovery %v cwnd %d (was %d) ssthresh %d (was %d) stats %+v", c.recovery, c.cwnd, cwnd, c.ssthresh, ssthresh, st)
	}
	if c.cwnd >= c.ssthresh || c.hystart.done {
		// The reduction came in slow start: slow start resumes, with
		// HyStart++ to end it.
		t.Fatalf("cwnd %d ssthresh %d, HyStart++ over %v", c.cwnd, c.ssthresh, c.hystart.done)
	}

	// The D-SACK for segment 0's retransmission comes after the undo: it
	// widens the reordering window all the same, and undoes nothing more.
	x.send(tsAck(segSeq(8), orig, TCPSACKBlock{segSeq(0), segSeq(1)}, TCPSACKBlock{segSeq(8), segSeq(9)}))
	if st := x.stats(); c.reoMult != 2 || st.SpuriousUndos != 1 || st.DSACKsIn != 1 {
		t.Fatalf("reo_wnd multiplier %d, stats %+v", c.reoMult, st)
	}
}

// sendThreeSpaced sends segments 0, 1 and 2 of a full-sized write each,
// 100 µs apart, and lets 50 µs more pass: the flight the step-2 tests
// (an ACK of an original or of its retransmission) start from.
func sendThreeSpaced(t *testing.T, x *tcpTest, c *tcpConn, app *testApp) {
	t.Helper()
	for i := range 3 {
		if i > 0 {
			x.advance(100 * time.Microsecond)
		}
		app.write(pattern(1460))
		x.kick(c)
		if got := x.recv(); len(got) != 1 || got[0].Seq != segSeq(i) {
			t.Fatalf("sent %v, want segment %d", got, i)
		}
	}
	x.advance(50 * time.Microsecond)
}

// A retransmission sent within the clock tick (1 ms) of its original
// cannot be told from it by the echoed timestamp. An ACK that echoes that
// tick may answer the original, held back by the path, and does not count
// as the retransmission's delivery even when it comes later than min_RTT
// after it (a shard's own poll delay is in that RTT): taken for it, RACK
// deemed lost the segments sent between the two, still in flight.
func TestTCPRACKSameTickEcho(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := tsConn(x, 200*time.Microsecond, 100*time.Microsecond)
	c.cwnd = 10 * 1460
	tick := x.l.tsNow(c)
	sendThreeSpaced(t, x, c, app)

	// Segment 1 is SACKed 150 µs after it went: segment 0, sent 100 µs
	// before it, is deemed lost and goes again, in the same tick.
	x.send(tsAck(segSeq(0), tick, TCPSACKBlock{segSeq(1), segSeq(2)}))
	if got := x.recv(); len(got) != 1 || got[0].Seq != segSeq(0) || got[0].TSVal != tick {
		t.Fatalf("sent %v, want segment 0 again with TSval %d", got, tick)
	}

	// Segment 0's original fills the hole; its ACK comes 350 µs after the
	// retransmission and echoes the tick both share. Segment 2 is still
	// in flight and must not be deemed lost.
	x.advance(350 * time.Microsecond)
	x.send(tsAck(segSeq(2), tick))
	x.expectNothing()
	if seq, lost := x.l.rackLost(c); lost {
		t.Fatalf("RACK deems lost from %d", seq)
	}
	if st := x.stats(); st.Retransmits != 1 || st.RACKLost != 1 {
		t.Fatalf("stats %+v, want 1 retransmission, 1 RACK loss", st)
	}
}
