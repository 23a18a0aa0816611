package specsearch

import (
	"slices"
	"testing"
)

// TestSearch: the bisection against a server that is valid up to a known
// number of users.
func TestSearch(t *testing.T) {
	limit := 0
	run := func(c int) (Step, error) { return Step{Conns: c, Valid: c <= limit}, nil }
	conns := func(s []Step) []int {
		var c []int
		for _, x := range s {
			c = append(c, x.Conns)
		}
		return c
	}
	for _, tc := range []struct {
		limit, lo, hi, steps, res int
		best                      int
		tried                     []int
	}{
		{limit: 1300, lo: 100, hi: 3300, steps: 8, res: 50, best: 1300, tried: []int{100, 3300, 1700, 900, 1300, 1500, 1400, 1350}},
		{limit: 1300, lo: 100, hi: 3300, steps: 3, res: 50, best: 100, tried: []int{100, 3300, 1700}},
		{limit: 5000, lo: 100, hi: 3300, steps: 8, res: 50, best: 3300, tried: []int{100, 3300}},
		{limit: 50, lo: 100, hi: 3300, steps: 8, res: 50, best: 0, tried: []int{100}},
		{limit: 104, lo: 100, hi: 110, steps: 8, res: 1, best: 104, tried: []int{100, 110, 105, 102, 103, 104}},
	} {
		limit = tc.limit
		best, tried, err := Search(tc.lo, tc.hi, tc.steps, tc.res, run)
		if err != nil || best.Conns != tc.best || !slices.Equal(conns(tried), tc.tried) {
			t.Errorf("limit %d: best %d, tried %v, %v; want %d, %v", tc.limit, best.Conns, conns(tried), err, tc.best, tc.tried)
		}
	}
	if _, _, err := Search(10, 5, 3, 1, run); err == nil {
		t.Error("hi below lo accepted")
	}
}
