package wreck

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"percore/shard"
)

const (
	tick        = 10 * time.Millisecond // timeouts, back-offs and progress are checked this often
	connBackoff = 10 * time.Millisecond // wait after a failed connect before the next

	// wheelTick is the shards' timer resolution: the open loop's intended
	// send times are microseconds apart.
	wheelTick = 10 * time.Microsecond

	// Wake-up coalescing (shard.SetNap): a nap is at most napMax and at
	// most 1/napShare of the median latency so far; shorter than napMin it
	// costs more than it saves and is skipped.
	napMax   = 100 * time.Microsecond
	napMin   = 10 * time.Microsecond
	napShare = 32
)

// epoch is the origin of mono.
var epoch = time.Now()

// mono is monotonic nanoseconds since epoch (the vDSO clock; no allocation).
func mono() int64 { return int64(time.Since(epoch)) }

// acct is one client shard's accounting and schedule, the same for both
// client modes: counters, latency histograms, the request budget, the open
// loop's schedule (--rate), and the shard's timers (the tick, the end of the
// run, the next intended send). It holds no descriptor: the kernel mode's
// kclient and the native mode's nclient drive connections and account here.
//
// Owned by the shard's goroutine; Run reads it after the shards have exited,
// and pub at any time.
type acct struct {
	id    int
	cfg   *Config // read-only, shared by all shards
	slots int     // the shard's connections

	hist *hdrhistogram.Histogram // latency, ns
	lag  *hdrhistogram.Histogram // --rate: send time minus intended send time, ns
	conn *hdrhistogram.Histogram // connect start to established, ns
	cnt  Counters
	tls  tlsCounts // --tls on the native client
	pub  published

	now         int64 // ns since epoch: the loop's time for the current callback
	t0, stopped int64 // when the shard began and ended its run
	begun       bool

	// The measured interval begins at t0, or with --warmup at warmedAt (0
	// until the warm-up ends): responses, bytes and latencies count from
	// there; connects, connect times and errors count over the whole run.
	warmup, warmedAt int64

	// Requests: budget is what this shard completes before it stops (<0: no
	// cap); issued counts requests taken (in flight or done); done counts those
	// answered or failed. Requests abandoned on a closed connection are given
	// back (issued--) and taken again.
	budget, issued, done int64
	finished             bool

	// Open loop (--rate): request i is intended at t0 + i*iv. requeue holds the
	// intended times of abandoned requests, taken before new ones.
	rate      bool
	iv        float64
	next      int64
	requeue   []int64
	rqHead    int
	rqN       int
	saturated bool // the last scan found no conn with room
	cursor    int  // where the next dispatch scan starts

	// Connect pacing (--connect-rate): the shard's connect i may start at
	// t0 + i*connIv; connIv 0: no pacing.
	connIv   float64
	connNext int64

	swept int // the next slot a tick checks for timeouts (see tickSlots)

	// The shard's (nil in tests that drive a client by hand).
	sh                 *shard.Shard
	tickT, endT, sendT shard.Timer
	connT              shard.Timer // wakes the loop when the next paced connect may start
	onTick             func()      // the client mode's tick: timeouts and back-offs
	ended              func()      // tells the control plane this shard's run is over

	nap time.Duration // see retune
}

// newAcct is shard id's accounting for conns connections and a budget of
// requests (<0: none).
func newAcct(id int, cfg *Config, conns int, budget int64) *acct {
	a := &acct{id: id, cfg: cfg, slots: conns, hist: newHist(), conn: newHist(), budget: budget, rate: cfg.Rate > 0}
	if cfg.Workload == "" {
		a.warmup = int64(cfg.Warmup)
	}
	if cfg.ConnectRate > 0 {
		a.connIv = float64(time.Second) * float64(cfg.SMP) / cfg.ConnectRate
	}
	if a.rate {
		a.lag = newHist()
		a.iv = float64(time.Second) * float64(cfg.SMP) / cfg.Rate
		a.requeue = make([]int64, conns*cfg.Pipeline)
	}
	return a
}

// attach puts the account's timers on sh's wheel; onTick is the client
// mode's share of the tick.
func (a *acct) attach(sh *shard.Shard, onTick func()) {
	a.sh, a.onTick = sh, onTick
	a.tickT.Init(a.onTickTimer)
	a.endT.Init(func(now time.Time) { a.setNow(now); a.end() })
	a.sendT.Init(func(time.Time) {}) // only wakes the loop: its poller dispatches
	a.connT.Init(func(time.Time) {}) // only wakes the loop: its poller connects
}

// setNow takes the loop's time for the callback under way.
func (a *acct) setNow(now time.Time) { a.now = int64(now.Sub(epoch)) }

// at is the loop's time of mono value t.
func at(t int64) time.Time { return epoch.Add(time.Duration(t)) }

// begin starts the shard's run at a.now: its open-loop schedule, its tick
// and its deadline.
func (a *acct) begin() {
	a.begun, a.t0 = true, a.now
	if a.sh != nil {
		w := a.sh.Wheel()
		w.Start(&a.tickT, at(a.now+int64(tick)))
		w.Start(&a.endT, at(a.now+int64(a.cfg.Duration)))
	}
}

func (a *acct) onTickTimer(now time.Time) {
	a.setNow(now)
	if a.finished {
		return
	}
	if a.warmup > 0 && a.warmedAt == 0 && a.now-a.t0 >= a.warmup {
		a.endWarmup()
	}
	a.onTick()
	a.publish()
	a.sh.Wheel().Start(&a.tickT, at(a.now+int64(tick)))
}

// endWarmup starts the measured interval now (the plain workload's
// --warmup; SPECweb99 keeps its own).
func (a *acct) endWarmup() {
	a.warmedAt = a.now
	a.hist.Reset()
	if a.lag != nil {
		a.lag.Reset()
	}
	a.cnt.Responses, a.cnt.Bytes = 0, 0
}

// measuredFrom is when the shard's measured interval began.
func (a *acct) measuredFrom() int64 {
	if a.warmedAt > 0 {
		return a.warmedAt
	}
	return a.t0
}

// end ends the shard's run (its budget is done, its deadline passed, or Run
// stops it): no request is taken after it. Once.
func (a *acct) end() {
	if a.finished {
		return
	}
	if !a.begun {
		a.begun, a.t0 = true, a.now
	}
	a.finished = true
	a.stopped = a.now
	a.publish()
	if a.sh != nil {
		w := a.sh.Wheel()
		w.Stop(&a.tickT)
		w.Stop(&a.endT)
		w.Stop(&a.sendT)
		w.Stop(&a.connT)
	}
	if a.ended != nil {
		a.ended()
	}
}

// armSend wakes the shard at the next intended send time (--rate), when a
// request will be due and a connection may take it.
func (a *acct) armSend() {
	if a.sh == nil || !a.rate || a.saturated || !a.room() || a.rqN > 0 {
		return
	}
	t := at(a.t0 + int64(float64(a.next)*a.iv))
	if !a.sendT.Armed() || !t.Equal(a.sendT.When()) {
		a.sh.Wheel().Start(&a.sendT, t)
	}
}

// retune sets the nap from the median latency so far (a scan of the
// histogram, once a tick): the median, not the mean, so that a few stalls on
// a busy machine do not lengthen it. No nap under --rate, whose sends are
// timed.
func (a *acct) retune() {
	a.nap = 0
	if !a.rate {
		if nap := min(time.Duration(a.hist.ValueAtQuantile(50))/napShare, napMax); nap >= napMin {
			a.nap = nap
		}
	}
	if a.sh != nil {
		a.sh.SetNap(a.nap)
	}
}

// A tick checks every slot of a shard of up to sweepAll; a larger shard's
// slots are checked a share at a time, a tenth of them (each once in
// sweepTicks ticks, 100 ms) but at most sweepMax, so that a million idle
// connections do not cost a pass every tick: at 256K slots a pass takes
// 0.64 s, at 1M 2.6 s, within the seconds of a timeout (checking every
// slot each 100 ms was a sixth of the client's time at 256K).
const (
	sweepAll   = 8192
	sweepTicks = 10
	sweepMax   = 4096
)

// tickSlots is the run of slots this tick checks: n from from on, wrapping.
func (a *acct) tickSlots() (from, n int) { return sweepRange(a.slots, &a.swept) }

// sweepRange is the run of slots out of slots that this tick checks, going
// on from *swept, which it advances.
func sweepRange(slots int, swept *int) (from, n int) {
	if slots <= sweepAll {
		return 0, slots
	}
	from, n = *swept, min((slots+sweepTicks-1)/sweepTicks, sweepMax)
	if *swept += n; *swept >= slots {
		*swept -= slots
	}
	return from, n
}

func (a *acct) publish() {
	a.pub.responses.Store(a.cnt.Responses)
	a.pub.failures.Store(a.cnt.failures())
	a.pub.bytes.Store(a.cnt.Bytes)
}

func (a *acct) record(lat int64) { recordNs(a.hist, lat) }

// recordConnect records a connection established now that began at since.
func (a *acct) recordConnect(since int64) {
	a.cnt.Connects++
	recordNs(a.conn, a.now-since)
}

// mayConnect reports whether a connect may start now under --connect-rate,
// and counts it if so; if not, the shard's loop is woken when one may.
func (a *acct) mayConnect() bool {
	if a.connIv == 0 {
		return true
	}
	t := a.t0 + int64(float64(a.connNext)*a.connIv)
	if t > a.now {
		if a.sh != nil && (!a.connT.Armed() || !at(t).Equal(a.connT.When())) {
			a.sh.Wheel().Start(&a.connT, at(t))
		}
		return false
	}
	a.connNext++
	return true
}

// finish counts a request as done and ends the run when the budget is.
func (a *acct) finish() {
	a.done++
	if a.budget >= 0 && a.done >= a.budget {
		a.end()
	}
}

// room reports whether the budget allows another request.
func (a *acct) room() bool { return !a.finished && (a.budget < 0 || a.issued < a.budget) }

// take returns the latency origin of the next request, if one may go now.
func (a *acct) take() (int64, bool) {
	if !a.room() {
		return 0, false
	}
	if !a.rate {
		a.issued++
		return a.now, true
	}
	var t int64
	if a.rqN > 0 {
		t = a.requeue[a.rqHead]
		a.rqHead++
		if a.rqHead == len(a.requeue) {
			a.rqHead = 0
		}
		a.rqN--
	} else {
		if t = a.t0 + int64(float64(a.next)*a.iv); t > a.now {
			return 0, false
		}
		a.next++
	}
	a.issued++
	recordNs(a.lag, a.now-t) // how late the client itself is: part of the latency
	return t, true
}

// backlog reports whether a request is due and not yet on a connection.
func (a *acct) backlog() bool {
	return a.room() && (a.rqN > 0 || a.t0+int64(float64(a.next)*a.iv) <= a.now)
}

// giveBack returns an abandoned request (latency origin t) to be taken again.
func (a *acct) giveBack(t int64) {
	a.issued--
	if a.rate {
		i := a.rqHead + a.rqN
		if i >= len(a.requeue) {
			i -= len(a.requeue)
		}
		a.requeue[i] = t
		a.rqN++
	}
}
