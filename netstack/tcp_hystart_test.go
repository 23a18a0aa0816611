package netstack

import (
	"testing"
	"time"
)

// HyStart++ (RFC 9406) on a connection with RACK's RTT samples: a round
// at 10 ms, then a round whose minimum RTT rose past 10 ms + 4 ms
// (MIN_RTT_THRESH): Conservative Slow Start grows a quarter as fast, and
// after CSS_ROUNDS rounds ssthresh is set to cwnd.
func TestTCPHyStartPlusPlus(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := rackFlight(x, 4)
	mss := uint32(c.mss)
	ack := c.sndUna
	round := func(rtt time.Duration) { // the samples of one round, then the ACK that starts the next
		for i := 0; i < hsNRTTSample; i++ {
			c.hystartSample(int64(rtt))
		}
		c.sndMax = c.sndMax.add(100 * mss)
		ack = c.hystart.roundEnd
		x.l.slowStart(c, ack, 2*mss)
	}
	x.l.slowStart(c, ack, 2*mss) // the first ACK starts the first round
	round(10 * time.Millisecond)
	round(11 * time.Millisecond) // not 4 ms more: slow start goes on
	if c.hystart.baseline != 0 || c.hystart.lastMin != 11000 {
		t.Fatalf("hystart %+v after a round at 11 ms", c.hystart)
	}
	for i := 0; i < hsNRTTSample; i++ {
		c.hystartSample(int64(15 * time.Millisecond))
	}
	cwnd := c.cwnd
	ack = ack.add(2 * mss)
	x.l.slowStart(c, ack, 2*mss) // 15 >= 11 + 4: CSS, from this ACK's growth on
	if c.hystart.baseline != 15000 || c.cwnd != cwnd+2*mss {
		t.Fatalf("cwnd %d (was %d) hystart %+v", c.cwnd, cwnd, c.hystart)
	}
	x.l.slowStart(c, ack.add(2*mss), 2*mss)
	if c.cwnd != cwnd+2*mss+2*mss/hsCSSDivisor {
		t.Fatalf("cwnd %d in CSS (was %d)", c.cwnd, cwnd)
	}
	for i := 0; i < hsCSSRounds; i++ {
		if c.ssthresh != ^uint32(0) {
			t.Fatalf("ssthresh %d after %d CSS rounds", c.ssthresh, i)
		}
		round(15 * time.Millisecond)
	}
	if st := x.stats(); c.ssthresh != c.cwnd || !c.hystart.done || st.HyStartCSS != 1 || st.HyStartExits != 1 {
		t.Fatalf("ssthresh %d cwnd %d hystart %+v stats %+v", c.ssthresh, c.cwnd, c.hystart, st)
	}
	// Plain slow start after, as after a loss: L segments an ACK at most.
	c.ssthresh = ^uint32(0)
	cwnd = c.cwnd
	x.l.slowStart(c, ack, 20*mss)
	if c.cwnd != cwnd+hsL*mss {
		t.Fatalf("cwnd %d, want %d", c.cwnd, cwnd+hsL*mss)
	}
}

// ssClock drives slow start by hand, as its ACK clock would: each step
// lets d pass and acknowledges one more segment while two more go out.
type ssClock struct {
	x   *tcpTest
	c   *tcpConn
	ack seqnum
	age time.Duration // how long before it is handled the next ACK arrived
}

func (s *ssClock) step(d time.Duration) {
	mss := uint32(s.c.mss)
	s.x.l.now += int64(d)
	s.x.l.rxAt = s.x.l.now - int64(s.age)
	s.ack = s.ack.add(mss)
	s.c.sndMax = s.c.sndMax.add(2 * mss)
	s.x.l.slowStart(s.c, s.ack, mss)
}

// round acknowledges the round's end: the next round begins.
func (s *ssClock) round() {
	s.ack = s.c.hystart.roundEnd
	s.step(0)
}

// The ACK train (Linux's CUBIC): at 16 segments or more, ACKs that come
// back to back (2 ms apart at most) from the start of a round for more
// than half the minimum RTT end slow start at cwnd; a gap of more than
// 2 ms breaks the train for the rest of the round, and below 16 segments
// there is no test.
func TestTCPHyStartACKTrain(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := rackFlight(x, 4) // minRTT 10 ms: the train must run past 5 ms
	mss := uint32(c.mss)
	s := &ssClock{x: x, c: c, ack: c.sndUna}
	step := s.step
	c.cwnd = 8 * mss
	x.l.slowStart(c, s.ack, mss) // the round begins
	for i := 0; i < 8; i++ {
		step(time.Millisecond) // below 16 segments: grows on past 5 ms
	}
	if c.hystart.done || c.cwnd != 17*mss {
		t.Fatalf("cwnd %d segments, hystart %+v", c.cwnd/mss, c.hystart)
	}
	s.round()
	step(3 * time.Millisecond) // the train breaks
	for i := 0; i < 6; i++ {
		step(time.Millisecond)
	}
	s.round()
	step(2 * time.Millisecond)
	step(2 * time.Millisecond)
	step(time.Millisecond) // 5 ms of train: not past half the RTT
	if c.hystart.done {
		t.Fatalf("slow start ended after %+v", c.hystart)
	}
	cwnd := c.cwnd
	step(time.Millisecond) // 6 ms
	if st := x.stats(); !c.hystart.done || c.ssthresh != cwnd || c.cwnd != cwnd || st.HyStartExits != 1 {
		t.Fatalf("ssthresh %d cwnd %d (was %d) hystart %+v", c.ssthresh, c.cwnd, cwnd, c.hystart)
	}
}

// The train is timed by the ACKs' arrival, not by the Poll that handles
// them: ACKs that came back to back but waited (the shard busy or
// asleep) do not end slow start, and ACKs whose arrivals span more than
// half the minimum RTT do, also when one Poll handles them all.
func TestTCPHyStartTrainArrival(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := rackFlight(x, 4) // minRTT 10 ms: the train must run past 5 ms
	mss := uint32(c.mss)
	s := &ssClock{x: x, c: c, ack: c.sndUna}
	c.cwnd = 20 * mss
	c.sndMax = c.sndMax.add(40 * mss) // a round of 40 segments
	s.step(0)                         // the round begins
	for i := 1; i <= 8; i++ {
		// Handled 1 ms apart, arrived 0.1 ms apart.
		s.age = time.Duration(i) * 900 * time.Microsecond
		s.step(time.Millisecond)
	}
	if c.hystart.done {
		t.Fatalf("slow start ended on ACKs that arrived within 0.8 ms: %+v", c.hystart)
	}
	// One Poll handles ACKs that arrived 1 ms apart over 7 ms.
	s.age = 7 * time.Millisecond
	s.round()
	for i := 0; i < 7; i++ {
		s.age -= time.Millisecond
		s.step(0)
	}
	if !c.hystart.done || c.ssthresh != c.cwnd {
		t.Fatalf("slow start goes on after ACKs that arrived over 7 ms: ssthresh %d cwnd %d, %+v", c.ssthresh, c.cwnd, c.hystart)
	}
}

// On a path of a tenth of a millisecond the train test waits out Linux's
// cushion (hsAckDelay): at 20 segments, 100 µs of train (past half the
// minimum RTT) does not end slow start; at 200 segments, whose cushion is
// small, 80 µs does.
func TestTCPHyStartShortPath(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := rackFlight(x, 4)
	c.srtt, c.minRTT = int64(100*time.Microsecond), int64(100*time.Microsecond)
	mss := uint32(c.mss)
	s := &ssClock{x: x, c: c, ack: c.sndUna}
	step := s.step
	c.cwnd = 20 * mss
	x.l.slowStart(c, s.ack, mss) // the round begins
	for i := 0; i < 10; i++ {
		step(10 * time.Microsecond)
	}
	if c.hystart.done {
		t.Fatalf("slow start ended at %d segments after 100 µs of train", c.cwnd/mss)
	}
	c.cwnd = 200 * mss
	s.round()
	for i := 0; i < 8; i++ {
		step(10 * time.Microsecond)
	}
	if !c.hystart.done || c.ssthresh != c.cwnd || c.cwnd/mss != 208 {
		t.Fatalf("cwnd %d segments, ssthresh %d, hystart %+v", c.cwnd/mss, c.ssthresh, c.hystart)
	}
}

// The first round begins at the first ACK whatever the ISN: with roundEnd
// unset (0), every ACK of 2^31 or more compared below it, and no round
// ever began (half of all connections ran without HyStart++).
func TestTCPHyStartHighISN(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, _ := rackFlight(x, 4)
	c.sndMax = 0x9000_0000
	x.l.now = int64(5 * time.Millisecond)
	x.l.rxAt = x.l.now
	x.l.slowStart(c, 0x8000_1000, uint32(c.mss))
	if c.hystart.roundEnd != 0x9000_0000 || c.hystart.start != 5000 {
		t.Fatalf("hystart %+v", c.hystart)
	}
}
