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
