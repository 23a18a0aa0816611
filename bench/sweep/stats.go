package sweep

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// spread is the median with the smallest and largest of a set of samples.
type spread struct{ med, lo, hi float64 }

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{math.NaN(), math.NaN(), math.NaN()}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return spread{med, s[0], s[n-1]}
}

func field(samples []Sample, f func(Sample) float64) []float64 {
	v := make([]float64, len(samples))
	for i, s := range samples {
		v[i] = f(s)
	}
	return v
}

// formatNum writes v with thousands separators at or above 1000 (no
// decimals), two decimals below 10 and one below 1000.
func formatNum(v float64) string {
	switch {
	case math.Abs(v) >= 1000:
		s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		if neg {
			return "-" + b.String()
		}
		return b.String()
	case math.Abs(v) < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
}

// String is "median (min–max)", or the median alone for one sample.
func (s spread) String() string {
	if s.lo == s.hi {
		return formatNum(s.med)
	}
	return fmt.Sprintf("%s (%s–%s)", formatNum(s.med), formatNum(s.lo), formatNum(s.hi))
}

// ParseCell reads a cell that String or formatNum wrote.
func ParseCell(c string) (med, lo, hi float64, err error) {
	c = strings.TrimSpace(c)
	num := func(s string) (float64, error) {
		return strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(s), ",", ""), 64)
	}
	head, rng, hasRange := strings.Cut(c, " (")
	if med, err = num(head); err != nil {
		return 0, 0, 0, fmt.Errorf("cell %q: %w", c, err)
	}
	if !hasRange {
		return med, med, med, nil
	}
	a, b, ok := strings.Cut(strings.TrimSuffix(rng, ")"), "–")
	if !ok || !strings.HasSuffix(rng, ")") {
		return 0, 0, 0, fmt.Errorf("cell %q: want \"median (min–max)\"", c)
	}
	if lo, err = num(a); err != nil {
		return 0, 0, 0, fmt.Errorf("cell %q: %w", c, err)
	}
	if hi, err = num(b); err != nil {
		return 0, 0, 0, fmt.Errorf("cell %q: %w", c, err)
	}
	if lo > med || med > hi {
		return 0, 0, 0, fmt.Errorf("cell %q: median outside its range", c)
	}
	return med, lo, hi, nil
}
