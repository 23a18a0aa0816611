package shard

import (
	"reflect"
	"testing"
)

func TestReportAddKindAndSum(t *testing.T) {
	var r Report
	r.Add("a.events", 1)
	r.AddKind("a.lost", Drop, 2)
	r.AddKind("b.lost", Drop, 4)
	r.AddKind("a.failed", Error, 8)
	r.AddKind("a.open", Gauge, 16)
	want := []Counter{{"a.events", Count, 1}, {"a.lost", Drop, 2}, {"b.lost", Drop, 4}, {"a.failed", Error, 8}, {"a.open", Gauge, 16}}
	if !reflect.DeepEqual(r.Counters, want) {
		t.Fatalf("counters %v, want %v", r.Counters, want)
	}
	for k, want := range map[Kind]uint64{Count: 1, Drop: 6, Error: 8, Gauge: 16} {
		if got := r.Sum(k); got != want {
			t.Errorf("Sum(%v) = %d, want %d", k, got, want)
		}
	}
}

func TestMergeKeepsKinds(t *testing.T) {
	rs := []Report{
		{Shard: 0, Loop: LoopStats{Loops: 1}, Counters: []Counter{{"x.open", Gauge, 3}, {"x.lost", Drop, 1}, {"x.in", Count, 10}}},
		{Shard: 1, Loop: LoopStats{Loops: 2}, Counters: []Counter{{"x.in", Count, 5}, {"x.open", Gauge, 4}, {"x.lost", Drop, 2}}},
	}
	m := Merge(rs)
	want := []Counter{{"x.in", Count, 15}, {"x.lost", Drop, 3}, {"x.open", Gauge, 7}}
	if m.Shard != -1 || m.Loop.Loops != 3 || !reflect.DeepEqual(m.Counters, want) {
		t.Fatalf("merged %+v, want loops 3 and %v", m, want)
	}
	if m.Sum(Drop) != 3 || m.Get("x.open") != 7 {
		t.Fatalf("merged drops %d, open %d", m.Sum(Drop), m.Get("x.open"))
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Count: "count", Drop: "drop", Error: "error", Gauge: "gauge", 9: "Kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", uint8(k), got, want)
		}
	}
}
