package netstack

import (
	"fmt"
	"math"
)

// CongestionControl is a connection's congestion control algorithm: the
// window arithmetic on an ACK of new data, on entering loss recovery and
// on a retransmission timeout. Loss detection and recovery themselves
// (fast retransmit, NewReno partial ACKs, SACK holes) are shared. It is a
// byte switched on per ACK rather than an interface, so that a pooled
// connection carries its algorithm's state inline and nothing allocates.
type CongestionControl uint8

const (
	CUBIC   CongestionControl = iota // RFC 9438, Linux's default; the zero value
	NewReno                          // RFC 5681 with RFC 6582 recovery
)

func (cc CongestionControl) String() string {
	switch cc {
	case CUBIC:
		return "cubic"
	case NewReno:
		return "newreno"
	}
	return fmt.Sprintf("CongestionControl(%d)", uint8(cc))
}

// ParseCongestionControl reads "cubic" or "newreno".
func ParseCongestionControl(s string) (CongestionControl, error) {
	switch s {
	case "cubic":
		return CUBIC, nil
	case "newreno":
		return NewReno, nil
	}
	return 0, fmt.Errorf("tcp: unknown congestion control %q (cubic or newreno)", s)
}

// CUBIC's constants (RFC 9438 §5): the multiplicative decrease β is 7/10,
// kept as a fraction so that reductions are exact integer arithmetic.
const (
	cubicC       = 0.4
	cubicInvC    = 1 / cubicC // exact: Go's constant arithmetic is rational
	cubicBetaNum = 7
	cubicBetaDen = 10
	// α_cubic = 3(1-β)/(1+β) = 9/17, the Reno-friendly growth (RFC 9438 §4.3).
	cubicAlphaNum = 9
	cubicAlphaDen = 17
)

// cubicState is CUBIC's per-connection state, in bytes and ns, 32 bytes
// (the connection's cubicOn says whether a stage is running, and caAcked
// carries the remainder of the cubic increase, numerator over cwnd).
type cubicState struct {
	epoch   int64   // start of the current congestion avoidance stage (layer clock)
	westRem uint64  // remainder of W_est's increase
	k       float32 // seconds from epoch until the curve is back at wmax
	wmax    uint32  // window before the last reduction (after fast convergence); 0 after an RTO
	prior   uint32  // cwnd when ssthresh was last set (cwnd_prior)
	west    uint32  // the Reno-friendly estimate W_est
}

// ccAck grows cwnd for acked new bytes outside recovery; ack is the new
// SND.UNA.
func (l *tcpLayer) ccAck(c *tcpConn, ack seqnum, acked uint32) {
	mss := uint32(c.mss)
	switch {
	case c.cwnd < c.ssthresh:
		l.slowStart(c, ack, acked) // RFC 5681 (2), HyStart++ (tcp_hystart.go)
	case c.cc == CUBIC:
		l.cubicAck(c, acked)
	default:
		// Congestion avoidance by bytes acknowledged (RFC 3465 2.1,
		// RFC 5681 3.1): one SMSS per cwnd of data ACKed, so that a
		// receiver's delayed ACKs do not halve the growth, which at
		// small windows (5% loss) decides the rate.
		c.caAcked += acked
		if c.caAcked >= c.cwnd {
			c.caAcked -= c.cwnd
			c.cwnd += mss
		}
	}
	c.cwnd = min(c.cwnd, 1<<30)
}

// ccLoss sets ssthresh on entering fast recovery; the caller inflates cwnd
// from it (RFC 5681 3.2 (2), (3)).
func (l *tcpLayer) ccLoss(c *tcpConn) {
	mss := uint32(c.mss)
	c.hystartEnd()
	if c.cc == CUBIC {
		c.ssthresh = l.cubicReduce(c)
		return
	}
	c.ssthresh = max(c.sndMax.diff(c.sndUna)/2, 2*mss)
	c.caAcked = 0
}

// ccTimeout sets ssthresh on a retransmission timeout; the caller sets
// cwnd to one segment (RFC 5681 (4)).
func (l *tcpLayer) ccTimeout(c *tcpConn) {
	c.hystartEnd()
	if c.cc == CUBIC {
		// Like Linux (tcp_enter_loss), only the first timeout of an
		// episode outside recovery reduces: recovery already did, and
		// a backed-off RTO says nothing new about the window.
		if !c.recovery && c.retries == 0 {
			c.ssthresh = l.cubicReduce(c)
		}
		// RFC 9438 §4.8: the first stage after a timeout starts with
		// K = 0 and W_max = cwnd at its beginning.
		c.cubic.wmax = 0
		return
	}
	c.ssthresh = max(c.sndMax.diff(c.sndUna)/2, 2*uint32(c.mss))
	c.caAcked = 0
}

// ccRecovered deflates cwnd at the full ACK that ends recovery (RFC 6582
// 3.2 (3): "min (ssthresh, max(FlightSize, SMSS) + SMSS)").
func (l *tcpLayer) ccRecovered(c *tcpConn, flight uint32) {
	mss := uint32(c.mss)
	c.cwnd = min(c.ssthresh, max(flight, mss)+mss)
}

// cubicReduce remembers the window at a congestion event, with fast
// convergence (RFC 9438 §4.7), ends the epoch and returns the new
// ssthresh, cwnd*β (§4.6, on cwnd as Linux does rather than FlightSize).
func (l *tcpLayer) cubicReduce(c *tcpConn) uint32 {
	s := &c.cubic
	cwnd := uint64(c.cwnd)
	if c.cwnd < s.wmax {
		s.wmax = uint32(cwnd * (cubicBetaDen + cubicBetaNum) / (2 * cubicBetaDen))
	} else {
		s.wmax = c.cwnd
	}
	s.prior = c.cwnd
	c.cubicOn = false
	return max(uint32(cwnd*cubicBetaNum/cubicBetaDen), 2*uint32(c.mss))
}

// cubicAck is CUBIC's congestion avoidance (RFC 9438 §4.2-4.5) for acked
// bytes: cwnd follows W_cubic(t) = C(t-K)^3 + W_max, t from the start of
// the stage, or the Reno-friendly W_est where that is larger.
func (l *tcpLayer) cubicAck(c *tcpConn, acked uint32) {
	s := &c.cubic
	mss := uint64(c.mss)
	cwnd := uint64(c.cwnd)
	if !c.cubicOn {
		c.cubicOn, s.epoch = true, l.now
		c.cubicNew = s.wmax == 0 // no congestion event yet, or a timeout since
		if s.wmax < c.cwnd {
			s.wmax = c.cwnd // no reduction to come back from: K = 0
		}
		// K = cbrt((W_max - cwnd_epoch)/C), in segments and seconds.
		s.k = float32(math.Cbrt(float64(s.wmax-c.cwnd) * cubicInvC / float64(mss)))
		s.west, s.westRem, c.caAcked = c.cwnd, 0, 0
	}
	// W_est grows by α segments per window acked, 1 once past cwnd_prior.
	num, den := uint64(cubicAlphaNum), uint64(cubicAlphaDen)
	if s.west >= s.prior {
		num, den = 1, 1
	}
	w := s.westRem + num*mss*uint64(acked)
	s.west += uint32(w / (den * cwnd))
	s.westRem = w % (den * cwnd)

	t := float64(l.now-s.epoch) / 1e9
	if s.west > c.cwnd && s.wcubic(t, mss) < float64(s.west) && !c.cubicNew {
		c.cwnd = s.west // Reno-friendly region
		c.caAcked = 0
		return
	}
	// Concave and convex regions: aim at the curve one RTT ahead,
	// within [cwnd, 1.5 cwnd], by (target - cwnd)/cwnd per byte acked.
	target := min(max(s.wcubic(t+float64(c.srtt)/1e9, mss), float64(cwnd)), float64(cwnd*3/2))
	if c.cubicNew {
		// With no window to come back to (slow start ended without a
		// loss, or a timeout forgot it), the curve starts flat at the
		// window slow start reached, which is only where HyStart++ saw
		// a queue begin, not the path's capacity; Linux's CUBIC then
		// grows at least 5% a round trip until the first congestion
		// event (bictcp_update: "the initial growth of cubic function
		// may be too conservative when the available bandwidth is
		// still unknown"), or as Reno would if that is faster.
		target = max(target, float64(cwnd+cwnd/20), float64(s.west))
	}
	inc := uint64(c.caAcked) + (uint64(target)-cwnd)*uint64(acked)
	c.cwnd += uint32(inc / cwnd)
	c.caAcked = uint32(inc % cwnd)
}

// wcubic is W_cubic(t) in bytes (RFC 9438 §4.2, eq. 1).
func (s *cubicState) wcubic(t float64, mss uint64) float64 {
	d := t - float64(s.k)
	return cubicC*d*d*d*float64(mss) + float64(s.wmax)
}
