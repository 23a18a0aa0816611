package netstack

import "time"

// Slow start with HyStart++ (RFC 9406): the first slow start of a
// connection watches the RTT of each round and, when it rises by a
// threshold (a queue builds), grows by a quarter as fast (Conservative
// Slow Start) for up to five rounds before it hands over to congestion
// avoidance, instead of running on until losses end it, a window's worth
// of them at once. The RTT samples come from RACK (one per ACK that
// delivers data sent once), so a connection without SACK runs plain slow
// start.

// The ACK train, as Linux's CUBIC has it beside its delay test
// (tcp_cubic.c, hystart_update): while the ACKs of a round come back to
// back, their train has spanned the path's round trip once the round has
// run for half the minimum RTT, and the window fills the path; slow start
// ends there (ssthresh = cwnd). On a path of a fraction of a millisecond
// HyStart++'s delay test waits for 4 ms of queue, which a shallow
// bottleneck buffer never holds: slow start then runs on into a burst of
// losses, where Linux, with the train, stops at the path's capacity.
const (
	hsTrainLowWindow = 16   // segments: no train test below (hystart_low_window)
	hsTrainGap       = 2000 // µs between ACKs that still make a train (hystart_ack_delta_us)
)

// HyStart++'s constants, RFC 9406 §4.3 (the RECOMMENDED values).
const (
	hsL             = 8  // segments an ACK may grow cwnd by, without pacing
	hsMinRTTThresh  = 4  // ms
	hsMaxRTTThresh  = 16 // ms
	hsMinRTTDivisor = 8
	hsNRTTSample    = 8
	hsCSSDivisor    = 4
	hsCSSRounds     = 5
)

// hystartState is one connection's HyStart++ state; RTTs in µs, 0 when
// none was taken (the RFC's infinity).
type hystartState struct {
	roundEnd seqnum // windowEnd: the round ends when it is acknowledged
	lastMin  uint32 // lastRoundMinRTT
	curMin   uint32 // currentRoundMinRTT
	baseline uint32 // cssBaselineMinRtt; non-zero while in CSS
	start    uint32 // when the round began, µs (wraps)
	lastAck  uint32 // when the train's last ACK came, µs (wraps)
	samples  uint8  // rttSampleCount
	cssRound uint8  // rounds spent in CSS
	done     bool   // the first slow start is over: plain slow start after
}

// hystartSample takes an RTT sample of an ACK (RFC 9406 §4.2: "keep
// track of the minimum observed RTT").
func (c *tcpConn) hystartSample(rtt int64) {
	h := &c.hystart
	if h.done || c.cwnd >= c.ssthresh {
		return
	}
	us := uint32(min(max(rtt/1000, 1), 1<<31))
	if h.curMin == 0 || us < h.curMin {
		h.curMin = us
	}
	h.samples = min(h.samples+1, 255)
}

// slowStart grows cwnd for acked bytes below ssthresh, by at most L
// segments an ACK (RFC 9406 §4.2; RFC 3465 allows 2, Linux has no limit,
// and a receiver that coalesces ACKs acknowledges 4-8 segments at once);
// ack is the new SND.UNA.
func (l *tcpLayer) slowStart(c *tcpConn, ack seqnum, acked uint32) {
	mss := uint32(c.mss)
	inc := min(acked, hsL*mss)
	h := &c.hystart
	if h.done || !c.rackActive() {
		c.cwnd = min(c.cwnd+inc, max(c.ssthresh, c.cwnd))
		return
	}
	if h.roundEnd == 0 || !ack.lt(h.roundEnd) {
		// A new round (§4.2): the last one's minimum is the baseline.
		// The first starts at the first ACK (roundEnd 0, unset: with
		// an ISN of 2^31 or more every ACK is below it, and the
		// rounds never began).
		h.roundEnd = c.sndMax
		h.lastMin, h.curMin, h.samples = h.curMin, 0, 0
		h.start, h.lastAck = uint32(l.rxAt/1000), uint32(l.rxAt/1000)
		if h.baseline != 0 {
			h.cssRound++
			if h.cssRound >= hsCSSRounds {
				// "enter congestion avoidance by setting ssthresh
				// to the current cwnd".
				l.stats.HyStartExits++
				h.done = true
				c.ssthresh = c.cwnd
				return
			}
		}
	}
	if l.ackTrain(c) {
		l.stats.HyStartExits++
		h.done = true
		c.ssthresh = c.cwnd
		return
	}
	if h.baseline == 0 {
		c.cwnd += inc
		if h.samples >= hsNRTTSample && h.curMin != 0 && h.lastMin != 0 {
			thresh := max(hsMinRTTThresh*1000, min(h.lastMin/hsMinRTTDivisor, hsMaxRTTThresh*1000))
			if h.curMin >= h.lastMin+thresh {
				// The RTT rose: a queue builds. Conservative Slow Start.
				l.stats.HyStartCSS++
				h.baseline, h.cssRound = h.curMin, 0
			}
		}
		return
	}
	c.cwnd += inc / hsCSSDivisor
	if h.samples >= hsNRTTSample && h.curMin < h.baseline {
		// "the RTT increase ... was spurious": back to slow start.
		h.baseline = 0
	}
}

// ackTrain reports whether this ACK extends the round's ACK train past
// half the minimum RTT and the ACK delay cushion (Linux's threshold
// without pacing). The train is timed by the ACKs' arrival (rxAt), as
// Linux times it in the softirq that receives them: timed by the Poll
// that handles them, ACKs that came back to back but waited while the
// shard was busy or asleep (a wake-up on a virtual machine takes tens of
// microseconds) spread out, and on the lab's clean path slow start ended
// at 20-115 segments (28-172 timed by arrival; Linux's at 66-156).
func (l *tcpLayer) ackTrain(c *tcpConn) bool {
	h := &c.hystart
	if c.cwnd < hsTrainLowWindow*uint32(c.mss) || c.minRTT == 0 {
		return false
	}
	now := uint32(l.rxAt / 1000)
	if now-h.lastAck > hsTrainGap {
		return false
	}
	h.lastAck = now
	return int64(now-h.start) > (c.minRTT+hsAckDelay(c))/2000
}

// hsAckDelay is the cushion Linux adds to the minimum RTT for the train
// (tcp_cubic.c, hystart_ack_delay), in ns: the time four 64 KiB GSO
// packets take at the rate Linux paces slow start at (twice cwnd per
// SRTT), at most 1 ms. Without it, on a path of a tenth of a millisecond
// the ACKs of the first 16 segments span half the minimum RTT whatever
// the path's capacity, as their batching by sender and receiver stretches
// them, and slow start ends there.
func hsAckDelay(c *tcpConn) int64 {
	if c.srtt == 0 {
		return 0
	}
	return min(int64(time.Millisecond), 4*65536*c.srtt/(2*int64(c.cwnd)))
}

// hystartEnd ends HyStart++ at the first loss or timeout (§4.2: "If
// ... the connection enters loss recovery ... exit").
func (c *tcpConn) hystartEnd() { c.hystart.done = true }
