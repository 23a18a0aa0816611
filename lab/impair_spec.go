package lab

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ImpairSpec says what the impairment bridge does to every frame, the same in
// both directions. Rates are probabilities in [0, 1]; the zero value forwards
// every frame untouched.
type ImpairSpec struct {
	Loss      float64       // drop the frame
	Reorder   float64       // hold the frame back until the next one has passed it
	Duplicate float64       // send the frame twice
	Corrupt   float64       // flip one random bit beyond the Ethernet header
	Delay     time.Duration // hold every frame this long before forwarding it
	Seed      uint64        // seeds the decisions: same seed and frames, same faults
}

// MaxImpairDelay bounds the delay so that queued frames stay bounded.
const MaxImpairDelay = time.Second

// ParseImpair parses a spec such as
// "loss=5%,reorder=10%,duplicate=1%,corrupt=0.1%,delay=1ms,seed=7".
// Keys may come in any order and each at most once; missing keys are zero.
// Rates take a percent sign so that "loss=5" cannot mean 5 or 500 percent.
// Errors quote the offending value, so they stay on one line.
func ParseImpair(s string) (ImpairSpec, error) {
	var sp ImpairSpec
	s = strings.TrimSpace(s)
	if s == "" {
		return sp, fmt.Errorf("impair: empty spec: give key=value pairs, e.g. loss=5%%,delay=1ms")
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return sp, fmt.Errorf("impair: %q is not key=value: write e.g. loss=5%%", kv)
		}
		if seen[k] {
			return sp, fmt.Errorf("impair: %s given twice: give each key once", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "loss":
			sp.Loss, err = parseRate(k, v)
		case "reorder":
			sp.Reorder, err = parseRate(k, v)
		case "duplicate":
			sp.Duplicate, err = parseRate(k, v)
		case "corrupt":
			sp.Corrupt, err = parseRate(k, v)
		case "delay":
			sp.Delay, err = time.ParseDuration(v)
			if err != nil {
				err = fmt.Errorf("impair: delay=%q is not a duration: write e.g. delay=1ms", v)
			} else if sp.Delay < 0 || sp.Delay > MaxImpairDelay {
				err = fmt.Errorf("impair: delay=%q is out of range: use 0 to %v", v, MaxImpairDelay)
			}
		case "seed":
			sp.Seed, err = strconv.ParseUint(v, 0, 64)
			if err != nil {
				err = fmt.Errorf("impair: seed=%q is not an unsigned integer: write e.g. seed=1", v)
			}
		default:
			err = fmt.Errorf("impair: unknown key %q: use loss, reorder, duplicate, corrupt, delay or seed", k)
		}
		if err != nil {
			return sp, err
		}
	}
	return sp, nil
}

// parseRate parses "5%" or "0.1%" into a probability.
func parseRate(k, v string) (float64, error) {
	num, ok := strings.CutSuffix(v, "%")
	if !ok {
		return 0, fmt.Errorf("impair: %s=%q needs a percent sign: write e.g. %s=5%%", k, v, k)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f != f {
		return 0, fmt.Errorf("impair: %s=%q is not a percentage: write e.g. %s=5%%", k, v, k)
	}
	if f < 0 || f > 100 {
		return 0, fmt.Errorf("impair: %s=%q is out of range: use 0%% to 100%%", k, v)
	}
	return f / 100, nil
}

// String formats the spec so that ParseImpair reads it back.
func (sp ImpairSpec) String() string {
	pct := func(p float64) string { return strconv.FormatFloat(p*100, 'g', 12, 64) + "%" }
	return "loss=" + pct(sp.Loss) + ",reorder=" + pct(sp.Reorder) +
		",duplicate=" + pct(sp.Duplicate) + ",corrupt=" + pct(sp.Corrupt) +
		",delay=" + sp.Delay.String() + ",seed=" + strconv.FormatUint(sp.Seed, 10)
}
