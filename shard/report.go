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

// Kind says what a counter measures, so a report can total its drops and an
// exporter can tell a level from a running total. The zero Kind is Count.
type Kind uint8

const (
	Count Kind = iota // events or bytes: a running total (the default)
	Drop              // a frame, segment, request or connection lost or discarded unanswered
	Error             // a failure that is not a drop: a write error, a failed log write
	Gauge             // a current level: open connections, free frames
)

var kindNames = [...]string{Count: "count", Drop: "drop", Error: "error", Gauge: "gauge"}

// String returns the kind's name as a stat tag spells it ("drop").
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Counter is one named per-shard counter, e.g. "posix.accepted".
type Counter struct {
	Name  string
	Kind  Kind
	Value uint64
}

// Add appends a named Count (control path: may allocate).
func (r *Report) Add(name string, v uint64) {
	r.AddKind(name, Count, v)
}

// AddKind appends a named counter of kind k (control path: may allocate).
func (r *Report) AddKind(name string, k Kind, v uint64) {
	r.Counters = append(r.Counters, Counter{Name: name, Kind: k, Value: v})
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

// Sum returns the total of the counters of kind k: Sum(Drop) is everything
// the shard dropped, for any reason.
func (r Report) Sum(k Kind) uint64 {
	var v uint64
	for _, c := range r.Counters {
		if c.Kind == k {
			v += c.Value
		}
	}
	return v
}

// Merge sums reports into one: loop stats and counters by name (Shard is -1).
// A counter keeps the kind it was first reported with; gauges sum too (open
// connections across shards).
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
