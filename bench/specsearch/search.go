// Package specsearch finds the largest number of SPECweb99 conforming
// connections a server sustains: it bisects over the number of simulated
// users, each step a whole wreck --workload specweb99 run against specweb
// serve whose verdict (at least 95% of users conforming, errors at most 1%
// per kind, the mix within tolerance) decides the step, and prints the
// result in SPECweb99's form beside the published TUX results. nginx, which
// has no SPECweb99 dynamic modules, serves the file set as static files and
// is driven with the static-only mix (wreck --specweb-static-only).
//
// Like package sweep it only orchestrates processes: it builds specweb,
// specweb-cgi and wreck, generates the file set (resumably), starts the
// server in its own process group and stops it by that group's id.
package specsearch

import (
	"fmt"
	"time"
)

// Step is one run of the search: C users and the client's verdict.
type Step struct {
	Conns      int      `json:"conns"`
	Valid      bool     `json:"valid"`
	Conforming int      `json:"conforming"`
	Percent    float64  `json:"percent_conforming"`
	OpsPerSec  float64  `json:"ops_per_sec"`
	MeanMs     float64  `json:"mean_response_ms"`
	Why        []string `json:"invalid,omitempty"`

	// Over the client's whole run (warm-up included), in CPUs: the
	// server's (its process group's: nginx's workers, the CGI programs)
	// and the client's time on a CPU and waiting, runnable, for one (other
	// work on a shared machine); and the load average after it.
	ServerCPU, ServerWait float64
	ClientCPU, ClientWait float64
	Load                  float64
	wall                  time.Duration
}

// Search bisects between lo and hi users with at most steps runs: lo is run
// first (if it fails there is no result), then hi (if it passes it is the
// result, a lower bound), then midpoints until the interval is within
// resolution users. best is the largest valid step (Conns 0: none).
func Search(lo, hi, steps, resolution int, run func(conns int) (Step, error)) (best Step, tried []Step, err error) {
	if lo < 1 || hi < lo || steps < 1 {
		return best, nil, fmt.Errorf("search: want 1 <= lo <= hi and at least one step (lo %d, hi %d, steps %d)", lo, hi, steps)
	}
	try := func(c int) (bool, error) {
		s, err := run(c)
		if err != nil {
			return false, err
		}
		tried = append(tried, s)
		if s.Valid && s.Conns > best.Conns {
			best = s
		}
		return s.Valid, nil
	}
	ok, err := try(lo)
	if err != nil || !ok || hi == lo || len(tried) == steps {
		return best, tried, err
	}
	if ok, err = try(hi); err != nil || ok {
		return best, tried, err
	}
	for len(tried) < steps && hi-lo > max(1, resolution) {
		mid := lo + (hi-lo)/2
		ok, err := try(mid)
		if err != nil {
			return best, tried, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return best, tried, nil
}
