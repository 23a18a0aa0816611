package wreck

import (
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"slices"

	"percore/netstack"
	"percore/shard"
	"percore/specweb/fileset"
)

const firstUserID = fileset.FirstUser

// validateWorkload checks the settings the SPECweb99 workload takes.
func (c *Config) validateWorkload() error {
	switch c.Workload {
	case "":
		switch {
		case c.FileSet != 0:
			return badField("FileSet", "belongs to Workload %s", WorkloadSpecweb99)
		case c.StaticOnly:
			return badField("StaticOnly", "belongs to Workload %s", WorkloadSpecweb99)
		case c.Warmup < 0:
			return badField("Warmup", "%v: must not be negative", c.Warmup)
		case c.Warmup > 0 && c.Reqs > 0:
			return badField("Warmup", "measures for Duration after it: drop Reqs")
		}
		return nil
	case WorkloadSpecweb99:
	default:
		return badField("Workload", "%q: the only workload is %s", c.Workload, WorkloadSpecweb99)
	}
	switch {
	case c.Native.Enabled && c.TLS.Enabled:
		return badField("TLS.Enabled", "the SPECweb99 users speak TLS on kernel sockets only so far: drop Native.Enabled or TLS.Enabled")
	case c.Pipeline != 1, c.Rate != 0, c.Reqs != 0, c.CheckSeq:
		return badField("Workload", "%s paces its own users: drop Pipeline, Rate, Reqs and CheckSeq", WorkloadSpecweb99)
	case c.Warmup < 0:
		return badField("Warmup", "%v: must not be negative", c.Warmup)
	case c.FileSet < 0:
		return badField("FileSet", "%d: must not be negative", c.FileSet)
	}
	return nil
}

// specwebShape is the file set a run asks for: its directories and users.
func specwebShape(c *Config) (dirs, users int) {
	conns := c.FileSet
	if conns == 0 {
		conns = c.Conns
	}
	return fileset.Dirs(conns), min(max(conns, 1), fileset.MaxUsers)
}

// runSpecweb is Run for the SPECweb99 workload: warm-up, then the measured
// interval, on kernel sockets or the native stack.
func runSpecweb(cfg Config) (*Result, error) {
	dirs, users := specwebShape(&cfg)
	sets := make([][]*swUsers, cfg.SMP) // by shard: one set, or one per native stack
	var res *Result
	var err error
	if cfg.Native.Enabled {
		res, err = runNativeApps(cfg, false, func(a *acct, slots, j, off int, dst netstack.IPv4Addr, port uint16, _ *tlsBox) nApp {
			c := newNswClient(a, slots, dst, port, dirs, users, firstSlot(&cfg, a.id)+off, uint64(a.id+j*cfg.SMP))
			sets[a.id] = append(sets[a.id], c.swUsers)
			return c
		})
	} else {
		res, err = runSpecwebKernel(cfg, dirs, users, sets)
	}
	if err != nil {
		return nil, err
	}
	// The counters restarted when the warm-up ended: rates are over the
	// measured interval.
	var span int64
	var all []*swUsers
	for i, ss := range sets {
		if len(ss) == 0 {
			continue
		}
		c := ss[0] // a shard's sets share its account
		span = max(span, c.stopped-c.measureT0)
		if secs := float64(c.stopped-c.measureT0) / 1e9; secs > 0 {
			res.Shards[i].ReqPerSec = float64(res.Shards[i].Requests) / secs
		}
		all = append(all, ss...)
	}
	if res.Seconds = float64(span) / 1e9; res.Seconds > 0 {
		res.ReqPerSec = float64(res.Requests) / res.Seconds
		res.BytesPerSec = float64(res.BytesRead) / res.Seconds
	}
	res.Specweb = specwebResult(all, dirs, cfg.StaticOnly, cfg.Warmup.Seconds(), res.Seconds)
	return res, nil
}

// runSpecwebKernel runs the users over kernel sockets, shard i's in sets[i].
func runSpecwebKernel(cfg Config, dirs, users int, sets [][]*swUsers) (*Result, error) {
	sa, family, err := resolve(cfg.Server)
	if err != nil {
		return nil, err
	}
	cfg.Duration += cfg.Warmup // the shards' deadline
	r := newRun(&cfg)
	var tconf *tls.Config
	if cfg.TLS.Enabled { // SPECweb99_SSL
		if tconf, err = cfg.TLS.clientConfig(cfg.Server); err != nil {
			return nil, err
		}
	}
	g, err := r.start(func(sh *shard.Shard, a *acct) error {
		c := newSwClient(sh, a, sa, family, dirs, users, firstSlot(&cfg, sh.ID))
		sets[sh.ID] = []*swUsers{c.swUsers}
		if tconf != nil {
			return c.useTLS(sh, tconf)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.wait(g)
	return r.result(), nil
}

// firstSlot is the first of shard i's connections (newRun splits them).
func firstSlot(cfg *Config, i int) int {
	return i*(cfg.Conns/cfg.SMP) + min(i, cfg.Conns%cfg.SMP)
}

// SpecwebResult is a SPECweb99 run's outcome, over the measured interval
// (after the warm-up).
type SpecwebResult struct {
	StaticOnly        bool         `json:"static_only,omitempty"` // the static-only mix (Config.StaticOnly)
	Dirs              int          `json:"dirs"`
	Users             int          `json:"users"`
	WarmupSeconds     float64      `json:"warmup_seconds"`
	Seconds           float64      `json:"seconds"`
	Conforming        int          `json:"conforming"`         // users above 320,000 bit/s (swUser.lineTime says how a rate is measured)
	PercentConforming float64      `json:"percent_conforming"` // of all users
	MinUserKbps       float64      `json:"min_user_kbps"`
	MeanUserKbps      float64      `json:"mean_user_kbps"`
	Ops               uint64       `json:"ops"`
	OpsPerSec         float64      `json:"ops_per_sec"`
	MeanResponseMs    float64      `json:"mean_response_ms"`
	Kinds             []SpecwebMix `json:"requests"` // by kind: static, dynamic, ad, post, cgi
	Classes           []SpecwebMix `json:"classes"`  // by file class 0..3
	Valid             bool         `json:"valid"`
	Invalid           []string     `json:"invalid,omitempty"` // why not
}

// SpecwebMix is one kind of request (or one file class): how many, its
// share against the target, and its errors.
type SpecwebMix struct {
	Name     string  `json:"name"`
	Requests uint64  `json:"requests"` // answered or failed
	Share    float64 `json:"share"`
	Target   float64 `json:"target"`
	InMix    bool    `json:"in_mix"`              // share within tolerance of target
	Invalid  uint64  `json:"invalid,omitempty"`   // answers that failed their check
	Errors   uint64  `json:"errors,omitempty"`    // no answer
	ErrorPct float64 `json:"error_pct,omitempty"` // (invalid+errors) / requests
}

// inMix reports whether share (of n draws) is within 10% of target, or
// within 3 standard deviations of its sampling error, so that a short run
// is not judged on chance alone for the rare kinds.
func inMix(share, target float64, n uint64) bool {
	if n == 0 {
		return false
	}
	tol := max(0.10*target, 3*math.Sqrt(target*(1-target)/float64(n)))
	return math.Abs(share-target) <= tol
}

func specwebResult(clients []*swUsers, dirs int, staticOnly bool, warmup, secs float64) *SpecwebResult {
	r := &SpecwebResult{StaticOnly: staticOnly, Dirs: dirs, WarmupSeconds: warmup, Seconds: secs, Valid: true}
	shares := kindShares(staticOnly)
	var kinds [numKinds]kindCount
	var classes [4]uint64
	var sum, n float64
	r.MinUserKbps = math.Inf(1)
	for _, c := range clients {
		if c == nil {
			continue
		}
		for i, k := range c.kinds {
			kinds[i].Responses += k.Responses
			kinds[i].Invalid += k.Invalid
			kinds[i].Errors += k.Errors
		}
		for i, v := range c.classes {
			classes[i] += v
		}
		for i := range c.users {
			kbps := c.users[i].kbps(c.measureT0, c.stopped)
			r.Users++
			if kbps*1e3 > conformRate {
				r.Conforming++
			}
			sum += kbps
			r.MinUserKbps = min(r.MinUserKbps, kbps)
		}
		n += float64(c.hist.TotalCount())
		r.MeanResponseMs += c.hist.Mean() * float64(c.hist.TotalCount()) / 1e6
	}
	if r.Users > 0 {
		r.PercentConforming = 100 * float64(r.Conforming) / float64(r.Users)
		r.MeanUserKbps = sum / float64(r.Users)
	} else {
		r.MinUserKbps = 0
	}
	if n > 0 {
		r.MeanResponseMs /= n
	}
	var total uint64
	for _, k := range kinds {
		total += k.Responses + k.Errors
	}
	for i, k := range kinds {
		m := SpecwebMix{Name: kindNames[i], Requests: k.Responses + k.Errors, Target: shares[i],
			Invalid: k.Invalid, Errors: k.Errors}
		r.Ops += k.Responses
		if total > 0 {
			m.Share = float64(m.Requests) / float64(total)
		}
		if m.Requests > 0 {
			m.ErrorPct = 100 * float64(k.Invalid+k.Errors) / float64(m.Requests)
		}
		m.InMix = inMix(m.Share, m.Target, total)
		if !m.InMix {
			r.Invalid = append(r.Invalid, fmt.Sprintf("%s requests %.2f%% of the mix, target %.2f%%", m.Name, 100*m.Share, 100*m.Target))
		}
		if m.ErrorPct > 1 {
			r.Invalid = append(r.Invalid, fmt.Sprintf("%s errors %.2f%%, over 1%%", m.Name, m.ErrorPct))
		}
		r.Kinds = append(r.Kinds, m)
	}
	var ctotal uint64
	for _, v := range classes {
		ctotal += v
	}
	for i, v := range classes {
		m := SpecwebMix{Name: fmt.Sprintf("class%d", i), Requests: v, Target: classShare[i]}
		if ctotal > 0 {
			m.Share = float64(v) / float64(ctotal)
		}
		m.InMix = inMix(m.Share, m.Target, ctotal)
		if !m.InMix {
			r.Invalid = append(r.Invalid, fmt.Sprintf("%s %.2f%% of the files, target %.2f%%", m.Name, 100*m.Share, 100*m.Target))
		}
		r.Classes = append(r.Classes, m)
	}
	if secs > 0 {
		r.OpsPerSec = float64(r.Ops) / secs
	}
	if r.PercentConforming < 95 {
		r.Invalid = append(r.Invalid, fmt.Sprintf("%.1f%% of connections conform, under 95%%", r.PercentConforming))
	}
	r.Valid = len(r.Invalid) == 0
	slices.Sort(r.Invalid)
	return r
}

// writeText writes the SPECweb99 lines of a report.
func (r *SpecwebResult) writeText(w io.Writer) {
	verdict := "valid"
	if !r.Valid {
		verdict = "INVALID"
	}
	mix := ""
	if r.StaticOnly {
		mix = " static-only mix"
	}
	fmt.Fprintf(w, "SPECweb99%s: %d conforming connections of %d (%.1f%%), %.0f ops/s, mean response %.2f ms, %s\n",
		mix, r.Conforming, r.Users, r.PercentConforming, r.OpsPerSec, r.MeanResponseMs, verdict)
	fmt.Fprintf(w, "  %d directories, %.1fs warm-up, %.2fs measured; per user kbit/s: min %.1f, mean %.1f (conforming above 320)\n",
		r.Dirs, r.WarmupSeconds, r.Seconds, r.MinUserKbps, r.MeanUserKbps)
	for _, m := range append(slices.Clip(r.Kinds), r.Classes...) {
		fmt.Fprintf(w, "  %-8s %8d  %6.2f%% (target %6.2f%%)  invalid %d  errors %d\n",
			m.Name, m.Requests, 100*m.Share, 100*m.Target, m.Invalid, m.Errors)
	}
	for _, why := range r.Invalid {
		fmt.Fprintf(w, "  invalid: %s\n", why)
	}
}
