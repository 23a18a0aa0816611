package netstack

import (
	"math"
	"testing"
	"time"
)

// A receive time counts between the previous Poll's now, after which the
// link was read, and now; none means now. The link's times (ChanLink's:
// Unix ns) convert with the offset of its RxClock.
func TestStackRxAge(t *testing.T) {
	s, err := NewStack(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	l := NewChanLink(1500, 4)
	t0 := time.Unix(1_000_000, 0)
	s.Poll(t0, l)
	s.Poll(t0.Add(time.Millisecond), l)
	now := t0.Add(3 * time.Millisecond)
	s.enter(now, l)
	floor, off := int64(time.Millisecond), s.rxOffset(l)
	for _, c := range []struct {
		at   int64 // ns since l.RxClock()
		want time.Duration
	}{
		{0, 0},
		{now.UnixNano(), 0},
		{now.Add(-500 * time.Microsecond).UnixNano(), 500 * time.Microsecond},
		{now.Add(time.Second).UnixNano(), 0},                              // in the future: now
		{t0.Add(500 * time.Microsecond).UnixNano(), 2 * time.Millisecond}, // before the link was last read: then
		{time.Unix(1, 0).UnixNano(), 2 * time.Millisecond},
		{math.MinInt64, 0},         // wraps to the far future: now
		{math.MaxInt64, 0},         // the far future
		{-1, 2 * time.Millisecond}, // before the Unix epoch
	} {
		if got := s.rxAgeOf(c.at, off, floor); got != int64(c.want) {
			t.Errorf("arrival %d: age %v, want %v", c.at, time.Duration(got), c.want)
		}
	}
	s.leave()
}

// RFC 8985 §6.2 step 2 with the ACK's arrival time: without timestamps,
// only "RTT < min_RTT" tells that an ACK answers a segment's original,
// not its retransmission. The original's ACK arrives 10 µs after the
// retransmission went (min_RTT 100 µs) and is read 350 µs later: timed
// from the read, it would pass for the retransmission's, and RACK would
// deem segment 2, sent before the retransmission and still in flight,
// lost.
func TestTCPRACKMinRTTFromRxTime(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := sackConn(x, 200*time.Microsecond, 100*time.Microsecond)
	c.cwnd = 10 * 1460
	sendThreeSpaced(t, x, c, app)

	// Segment 1 is SACKed: segment 0, sent 100 µs before it, is deemed
	// lost and goes again.
	x.send(dupSACK(65535, TCPSACKBlock{segSeq(1), segSeq(2)}))
	if got := x.recv(); len(got) != 1 || got[0].Seq != segSeq(0) {
		t.Fatalf("sent %v, want segment 0 again", got)
	}

	// Segment 0's original fills the hole 10 µs later; the stack reads
	// the ACK 350 µs after that.
	x.advance(360 * time.Microsecond)
	x.age = 350 * time.Microsecond
	x.send(seg{TCPFields: fl(A, 5001, segSeq(2), 65535)})
	x.expectNothing()
	if seq, lost := x.l.rackLost(c); lost {
		t.Fatalf("RACK deems lost from %d", seq)
	}
	if st := x.stats(); st.Retransmits != 1 || st.RACKLost != 1 {
		t.Fatalf("stats %+v, want 1 retransmission, 1 RACK loss", st)
	}
}

// The floor of receive times moves only with a Poll that empties the link:
// the frames a Poll leaves there (past MaxRxBatches) came before it, and
// keep their times in the next.
func TestStackRxFloor(t *testing.T) {
	cfg := testConfig()
	cfg.Batch, cfg.MaxRxBatches = 2, 1
	s, err := NewStack(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := NewChanLink(1500, 8)
	t0 := time.Unix(1_000_000, 0)
	s.Poll(t0, l)
	for range 3 {
		l.InjectAt(make([]byte, 60), t0.Add(time.Microsecond))
	}
	if next := s.Poll(t0.Add(time.Millisecond), l); !next.Equal(t0.Add(time.Millisecond)) || s.drained != 0 {
		t.Fatalf("a Poll that left a frame: next %v, floor %v", next.Sub(t0), time.Duration(s.drained))
	}
	s.Poll(t0.Add(2*time.Millisecond), l)
	if s.drained != int64(2*time.Millisecond) {
		t.Fatalf("a Poll that emptied the link: floor %v", time.Duration(s.drained))
	}
}
