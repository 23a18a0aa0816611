package shard

import (
	"reflect"
	"testing"
)

func TestParseCPUSet(t *testing.T) {
	good := map[string][]int{
		"0":         {0},
		"0-3,6":     {0, 1, 2, 3, 6},
		" 6, 0-1,1": {0, 1, 6},
		"2-2":       {2},
	}
	for in, want := range good {
		got, err := ParseCPUSet(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseCPUSet(%q) = %v, %v; want %v", in, got, err, want)
		}
		if f := FormatCPUs(got); err == nil {
			back, _ := ParseCPUSet(f)
			if !reflect.DeepEqual(back, want) {
				t.Errorf("FormatCPUs round trip of %q gave %q", in, f)
			}
		}
	}
	for _, in := range []string{"", "a", "3-1", "-1", "1,", "0-100000", "1-x"} {
		if got, err := ParseCPUSet(in); err == nil {
			t.Errorf("ParseCPUSet(%q) = %v, want an error", in, got)
		}
	}
	if f := FormatCPUs([]int{0, 1, 2, 3, 6, 8, 9}); f != "0-3,6,8-9" {
		t.Errorf("FormatCPUs = %q", f)
	}
}

func TestChooseCPUs(t *testing.T) {
	allowed, err := AllowedCPUs()
	if err != nil || len(allowed) == 0 {
		t.Fatalf("AllowedCPUs = %v, %v", allowed, err)
	}
	got, err := ChooseCPUs(0, nil)
	if err != nil || !reflect.DeepEqual(got, allowed) {
		t.Fatalf("ChooseCPUs(0, nil) = %v, %v; want all of %v", got, err, allowed)
	}
	if got, err := ChooseCPUs(1, nil); err != nil || len(got) != 1 || got[0] != allowed[0] {
		t.Fatalf("ChooseCPUs(1, nil) = %v, %v", got, err)
	}
	if _, err := ChooseCPUs(len(allowed)+1, nil); err == nil {
		t.Fatalf("ChooseCPUs accepted more shards than CPUs")
	}
	if _, err := ChooseCPUs(1, []int{allowed[len(allowed)-1] + 1000}); err == nil {
		t.Fatalf("ChooseCPUs accepted a CPU the process may not use")
	}
	if _, err := ChooseCPUs(-1, nil); err == nil {
		t.Fatalf("ChooseCPUs accepted a negative --smp")
	}
}
