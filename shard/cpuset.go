package shard

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Errors of ChooseCPUs, to test with errors.Is (a command adds the flags that
// fix them).
var (
	ErrCPUNotAllowed = errors.New("cpu not available to this process")
	ErrShards        = errors.New("the number of shards must be positive")
	ErrTooManyShards = errors.New("more shards than CPUs")
)

// ParseCPUSet parses a Seastar-style CPU list such as "0-3,6" into sorted,
// distinct CPU numbers.
func ParseCPUSet(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty cpu set")
	}
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseCPU(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = parseCPU(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("cpu range %q runs backwards", part)
			}
		}
		if b-a > 4096 {
			return nil, fmt.Errorf("cpu range %q is too large", part)
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	cpus := make([]int, 0, len(seen))
	for c := range seen {
		cpus = append(cpus, c)
	}
	sort.Ints(cpus)
	return cpus, nil
}

func parseCPU(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n >= 1<<16 {
		return 0, fmt.Errorf("bad cpu number %q", s)
	}
	return n, nil
}

// AllowedCPUs returns the CPUs this process may run on, sorted.
func AllowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("read cpu affinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// ChooseCPUs picks the shards' CPUs: the first smp CPUs of cpuset (all allowed
// CPUs when cpuset is nil). smp 0 means one shard per CPU in the set. Every CPU
// must be one the process may run on.
func ChooseCPUs(smp int, cpuset []int) ([]int, error) {
	allowed, err := AllowedCPUs()
	if err != nil {
		return nil, err
	}
	ok := map[int]bool{}
	for _, c := range allowed {
		ok[c] = true
	}
	set := cpuset
	if set == nil {
		set = allowed
	}
	for _, c := range set {
		if !ok[c] {
			return nil, fmt.Errorf("%w: cpu %d (allowed: %s)", ErrCPUNotAllowed, c, FormatCPUs(allowed))
		}
	}
	if smp < 0 {
		return nil, fmt.Errorf("%w: %d shards", ErrShards, smp)
	}
	if smp == 0 {
		smp = len(set)
	}
	if smp > len(set) {
		return nil, fmt.Errorf("%w: %d shards, %d CPUs available (%s)", ErrTooManyShards, smp, len(set), FormatCPUs(set))
	}
	return append([]int(nil), set[:smp]...), nil
}

// FormatCPUs writes cpus back in the "0-3,6" form.
func FormatCPUs(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}
