package sweep

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"percore/wreck"
)

// Sample is one client run against one server.
type Sample struct {
	Requests  uint64
	ReqPerSec float64
	Errors    uint64 // failed requests and non-2xx responses
	// Latency in microseconds; a negative value is a percentile the client
	// does not report (wrk has no p99.9).
	P50, P90, P99, P999, Max float64
	CPUPerReq                float64 // whole-machine busy CPU-µs per request
}

// ParseWreck reads the output of `wreck --json`.
func ParseWreck(out []byte) (Sample, error) {
	var r wreck.Result
	if err := json.Unmarshal(out, &r); err != nil {
		return Sample{}, fmt.Errorf("parse wreck --json output: %w", err)
	}
	if r.Seconds <= 0 {
		return Sample{}, fmt.Errorf("parse wreck --json output: no run time (seconds %v)", r.Seconds)
	}
	l := r.Latency
	return Sample{
		Requests: r.Requests, ReqPerSec: r.ReqPerSec,
		Errors: r.Errors.Total() + r.Errors.Non2xx,
		P50:    l.P50, P90: l.P90, P99: l.P99, P999: l.P999, Max: l.Max,
	}, nil
}

// ParseWrk reads the output of `wrk --latency`: the requests line, the
// Requests/sec line, the latency distribution (50/90/99%), the thread stats'
// maximum latency, and the error lines.
func ParseWrk(out []byte) (Sample, error) {
	s := Sample{P50: -1, P90: -1, P99: -1, P999: -1, Max: -1}
	var haveReqs, haveRate bool
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		var err error
		switch {
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			s.Requests, err = strconv.ParseUint(f[0], 10, 64)
			haveReqs = err == nil
		case f[0] == "Requests/sec:" && len(f) == 2:
			s.ReqPerSec, err = strconv.ParseFloat(f[1], 64)
			haveRate = err == nil
		case f[0] == "Latency" && len(f) >= 4: // Thread Stats: Avg Stdev Max +/-
			s.Max, err = wrkDuration(f[3])
		case len(f) == 2 && strings.HasSuffix(f[0], "%"):
			var v float64
			if v, err = wrkDuration(f[1]); err == nil {
				switch f[0] {
				case "50%":
					s.P50 = v
				case "90%":
					s.P90 = v
				case "99%":
					s.P99 = v
				}
			}
		case f[0] == "Socket" && len(f) > 2 && f[1] == "errors:":
			// Socket errors: connect 0, read 0, write 0, timeout 0
			for i := 2; i+1 < len(f); i += 2 {
				n, e := strconv.ParseUint(strings.TrimSuffix(f[i+1], ","), 10, 64)
				if e != nil {
					err = e
					break
				}
				s.Errors += n
			}
		case f[0] == "Non-2xx":
			var n uint64
			if n, err = strconv.ParseUint(f[len(f)-1], 10, 64); err == nil {
				s.Errors += n
			}
		}
		if err != nil {
			return s, fmt.Errorf("parse wrk output line %q: %w", sc.Text(), err)
		}
	}
	if !haveReqs || !haveRate {
		return s, fmt.Errorf("parse wrk output: no %q and %q lines in %q", "N requests in", "Requests/sec:", firstLines(out, 3))
	}
	return s, nil
}

// wrkDuration converts wrk's latency figures (850.00us, 1.23ms, 2.00s,
// 1.50m) to microseconds.
func wrkDuration(v string) (float64, error) {
	units := []struct {
		suffix string
		us     float64
	}{{"us", 1}, {"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"h", 3600e6}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("latency %q: %w", v, err)
			}
			return f * u.us, nil
		}
	}
	return 0, fmt.Errorf("latency %q: unknown unit", v)
}

// CPUTimes is the first ("cpu ") line of /proc/stat, in clock ticks.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// Busy is the time some task of this machine ran: everything but idle,
// iowait and steal (steal is another guest's time). Guest time is already
// inside user.
func (c CPUTimes) Busy() uint64 {
	return c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ
}

// ParseProcStat reads the aggregate cpu line of /proc/stat.
func ParseProcStat(b []byte) (CPUTimes, error) {
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return CPUTimes{}, fmt.Errorf("parse /proc/stat: first line %q is not the aggregate cpu line", line)
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("parse /proc/stat: field %d %q: %w", i+1, f[i+1], err)
		}
		v[i] = n
	}
	return CPUTimes{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}, nil
}

func firstLines(b []byte, n int) string {
	lines := strings.SplitN(string(b), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
