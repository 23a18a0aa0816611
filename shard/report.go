package shard

import (
	"fmt"
	"sort"
	"strings"
)

// Report is one shard's counters at the moment it handled the stats message.
type Report struct {
	Shard, CPU int
	Loop       LoopStats
	Counters   []Counter // named counters added by the shard's reporters
}

// Counter is one named per-shard counter, e.g. "posix.accepted".
type Counter struct {
	Name  string
	Value uint64
}

// Add appends a named counter (control path: may allocate).
func (r *Report) Add(name string, v uint64) {
	r.Counters = append(r.Counters, Counter{name, v})
}

// Get returns the named counter's value (0 if absent).
func (r Report) Get(name string) uint64 {
	var v uint64
	for _, c := range r.Counters {
		if c.Name == name {
			v += c.Value
		}
	}
	return v
}

// Merge sums reports into one: loop stats and counters by name (Shard is -1).
func Merge(rs []Report) Report {
	m := Report{Shard: -1, CPU: -1}
	idx := map[string]int{}
	for _, r := range rs {
		m.Loop.Loops += r.Loop.Loops
		m.Loop.Sleeps += r.Loop.Sleeps
		m.Loop.Events += r.Loop.Events
		m.Loop.Fired += r.Loop.Fired
		m.Loop.Messages += r.Loop.Messages
		m.Loop.EINTR += r.Loop.EINTR
		for _, c := range r.Counters {
			if i, ok := idx[c.Name]; ok {
				m.Counters[i].Value += c.Value
			} else {
				idx[c.Name] = len(m.Counters)
				m.Counters = append(m.Counters, c)
			}
		}
	}
	sort.Slice(m.Counters, func(i, j int) bool { return m.Counters[i].Name < m.Counters[j].Name })
	return m
}

// String formats the report as "name=value" pairs on one line, leaving out
// counters that are zero.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "loops=%d sleeps=%d events=%d timers=%d", r.Loop.Loops, r.Loop.Sleeps, r.Loop.Events, r.Loop.Fired)
	for _, c := range r.Counters {
		if c.Value != 0 {
			fmt.Fprintf(&b, " %s=%d", c.Name, c.Value)
		}
	}
	return b.String()
}
