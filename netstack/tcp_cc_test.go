package netstack

import (
	"testing"
	"time"
)

// CUBIC (RFC 9438) on the fixture: windows checked to the byte against
// values worked out by hand from the RFC's formulas, with MSS 1460.

func cubicTestConfig() TCPConfig {
	cfg := tcpTestConfig()
	cfg.CC = CUBIC
	return cfg
}

// cubicLoss sends a flight of n segments on c (cwnd n MSS) and has the
// peer SACK the three after the first, which enters fast recovery with
// the first segment retransmitted.
func cubicLoss(x *tcpTest, c *tcpConn, app *testApp, first, n int) {
	x.t.Helper()
	d := sendFlight(x, c, app, n)
	for i := 1; i <= 3; i++ {
		f := fl(A, 5001, segSeq(first), 65535)
		f.NSACK, f.SACK[0] = 1, TCPSACKBlock{segSeq(first + 1), segSeq(first + 1 + i)}
		x.send(seg{TCPFields: f})
	}
	x.expect(seg{TCPFields: fl(A, segSeq(first), 5001, 32768), data: d[:1460]})
	if !c.recovery {
		x.t.Fatal("no recovery")
	}
}

// A loss reduces the window to cwnd*0.7 (RFC 9438 §4.6) and remembers
// cwnd as W_max; a second loss below W_max remembers less (fast
// convergence, §4.7: W_max = cwnd*(1+0.7)/2).
func TestTCPCUBICReduction(t *testing.T) {
	x := newTCPTest(t, cubicTestConfig())
	c, app := x.establish()
	c.sackOK = true
	if c.cc != CUBIC {
		t.Fatalf("cc %v", c.cc)
	}
	cubicLoss(x, c, app, 0, 36) // cwnd 36*1460 = 52560
	// ssthresh 52560*0.7 = 36792; cwnd inflated by the three duplicates.
	if c.ssthresh != 36792 || c.cwnd != 36792+3*1460 || c.cubic.wmax != 52560 || c.cubic.prior != 52560 {
		t.Fatalf("ssthresh %d cwnd %d wmax %d prior %d", c.ssthresh, c.cwnd, c.cubic.wmax, c.cubic.prior)
	}
	x.send(seg{TCPFields: fl(A, 5001, segSeq(36), 65535)})
	if c.recovery || c.cwnd != 2*1460 {
		t.Fatalf("after the full ACK: recovery %v cwnd %d", c.recovery, c.cwnd)
	}
	cubicLoss(x, c, app, 36, 25) // cwnd 36500, below W_max
	// W_max 36500*0.85 = 31025; ssthresh 36500*0.7 = 25550.
	if c.ssthresh != 25550 || c.cwnd != 25550+3*1460 || c.cubic.wmax != 31025 || c.cubic.prior != 36500 {
		t.Fatalf("ssthresh %d cwnd %d wmax %d prior %d", c.ssthresh, c.cwnd, c.cubic.wmax, c.cubic.prior)
	}
}

// cubicAvoidance leaves c in congestion avoidance after a loss from
// W_max = 52560: cwnd = ssthresh = 36792, so K = cbrt((52560-36792)/1460/0.4)
// = cbrt(27) = 3 s; SRTT 100 ms, no RTT timing (the clock jumps), and a
// flight out with more data queued.
func cubicAvoidance(t *testing.T) (*tcpTest, *tcpConn) {
	x := newTCPTest(t, cubicTestConfig())
	c, app := x.establish()
	c.sackOK = true
	cubicLoss(x, c, app, 0, 36)
	x.send(seg{TCPFields: fl(A, 5001, segSeq(36), 65535)})
	c.cwnd = c.ssthresh // as a flight still full at the full ACK would leave it
	c.srtt = int64(100 * time.Millisecond)
	app.write(pattern(1460 * 40))
	x.kick(c)
	x.recv()
	c.rttOn = false
	return x, c
}

// ackAt ACKs up to segment i after moving the clock by d (no timers run).
func ackAt(x *tcpTest, d time.Duration, i int) {
	x.now = x.now.Add(d)
	x.send(seg{TCPFields: fl(A, 5001, segSeq(i), 65535)})
}

// Just after the reduction the curve is flat at cwnd_epoch (W_cubic(0) =
// W_max - C*K^3 = 36792) while W_est grows by α = 9/17 MSS per window
// acked: cwnd follows W_est (RFC 9438 §4.3), to the byte with the
// fractions carried.
func TestTCPCUBICRenoFriendly(t *testing.T) {
	x, c := cubicAvoidance(t)
	// W_est += 9*1460*1460 / (17*cwnd): 19184400/625464 = 30 (rest 420480),
	// then (420480+19184400)/(17*36822) = 31 (rest 199686), then
	// (199686+19184400)/(17*36853) = 30.
	for i, want := range []uint32{36822, 36853, 36883} {
		ackAt(x, 0, 37+i)
		if c.cwnd != want || c.cubic.west != want {
			t.Fatalf("ACK %d: cwnd %d W_est %d, want %d", i+1, c.cwnd, c.cubic.west, want)
		}
	}
}

// Growth after a loss follows W_cubic(t) = 0.4*(t-K)^3 + W_max segments,
// aimed one SRTT ahead: cwnd += (target - cwnd)/cwnd per byte acked.
func TestTCPCUBICGrowth(t *testing.T) {
	x, c := cubicAvoidance(t)
	ackAt(x, 0, 37) // t = 0: W_est leads (see TestTCPCUBICRenoFriendly)
	if c.cwnd != 36822 {
		t.Fatalf("t=0: cwnd %d", c.cwnd)
	}
	// t = 3 s = K: W_cubic = W_max = 52560 above W_est (36853); target
	// W_cubic(3.1) = 52560 + 0.4*0.001*1460 = 52560.584 -> 52560;
	// cwnd += (52560-36822)*1460/36822 = 624 (rest 552).
	ackAt(x, 3*time.Second, 38)
	if c.cwnd != 37446 {
		t.Fatalf("t=3s: cwnd %d, want 37446", c.cwnd)
	}
	// t = 4 s: target W_cubic(4.1) = 52560 + 0.4*1.331*1460 = 53337.304;
	// cwnd += (552 + (53337-37446)*1460)/37446 = 619.
	ackAt(x, time.Second, 39)
	if c.cwnd != 38065 {
		t.Fatalf("t=4s: cwnd %d, want 38065", c.cwnd)
	}
}

// A stage with no window to come back to (slow start ended without a
// loss, as HyStart++ ends it) grows at least 5% a window acknowledged, as
// Linux's CUBIC does until the first congestion event; RFC 9438 alone
// would start flat at cwnd (W_cubic(t) = 0.4*t^3 + cwnd, K = 0) and follow
// W_est, one segment a window: 1460*1460/58400 = 36 bytes an ACK. Once a
// loss has set W_max, the next stage follows the RFC again.
func TestTCPCUBICFirstStage(t *testing.T) {
	x := newTCPTest(t, cubicTestConfig())
	c, app := x.establish()
	c.sackOK = true
	sendFlight(x, c, app, 40) // cwnd 40*1460 = 58400
	c.ssthresh = c.cwnd       // slow start over, no loss
	c.srtt = int64(100 * time.Millisecond)
	c.rttOn = false
	// target = cwnd + cwnd/20 = 61320: cwnd += 2920*1460/58400 = 73.
	ackAt(x, 0, 1)
	if !c.cubicNew || c.cubic.wmax != 58400 || c.cwnd != 58473 {
		t.Fatalf("first ACK: new stage %v W_max %d cwnd %d, want true, 58400, 58473", c.cubicNew, c.cubic.wmax, c.cwnd)
	}
	for i := 2; i <= 40; i++ {
		ackAt(x, 0, i)
	}
	if c.cwnd < 58400*21/20-40 {
		t.Fatalf("a window acknowledged: cwnd %d, want about %d (5%% more)", c.cwnd, 58400*21/20)
	}
	x.recv()
	cubicLoss(x, c, app, 40, 40)
	x.send(seg{TCPFields: fl(A, 5001, segSeq(80), 65535)})
	c.cwnd = c.ssthresh
	app.write(pattern(1460 * 40))
	x.kick(c)
	x.recv()
	cwnd := c.cwnd
	ackAt(x, 0, 81)
	if c.cubicNew || c.cwnd-cwnd > 40 {
		t.Fatalf("after a loss: new stage %v, cwnd %d -> %d (W_est's growth, about 20 bytes an ACK)", c.cubicNew, cwnd, c.cwnd)
	}
}

// A timeout reduces like a loss, then sets cwnd to one segment (RFC 9438
// §4.8); a backed-off timeout does not reduce again, and the next stage
// starts from K = 0.
func TestTCPCUBICTimeout(t *testing.T) {
	x := newTCPTest(t, cubicTestConfig())
	c, app := x.establish()
	d := sendFlight(x, c, app, 10) // cwnd 14600
	x.advance(time.Second)
	x.expect(seg{TCPFields: fl(A, segSeq(0), 5001, 32768), data: d[:1460]})
	if c.ssthresh != 10220 || c.cwnd != 1460 || c.cubic.wmax != 0 {
		t.Fatalf("ssthresh %d cwnd %d wmax %d", c.ssthresh, c.cwnd, c.cubic.wmax)
	}
	x.advance(2 * time.Second)
	x.expect(seg{TCPFields: fl(A, segSeq(0), 5001, 32768), data: d[:1460]})
	if c.ssthresh != 10220 || c.cwnd != 1460 {
		t.Fatalf("second RTO: ssthresh %d cwnd %d", c.ssthresh, c.cwnd)
	}
}

func TestParseCongestionControl(t *testing.T) {
	for _, cc := range []CongestionControl{CUBIC, NewReno} {
		if got, err := ParseCongestionControl(cc.String()); err != nil || got != cc {
			t.Errorf("%v: %v %v", cc, got, err)
		}
	}
	if _, err := ParseCongestionControl("bbr"); err == nil {
		t.Error("bbr accepted")
	}
	var cfg TCPConfig
	if cfg.CC != CUBIC {
		t.Error("the default is not CUBIC")
	}
}
