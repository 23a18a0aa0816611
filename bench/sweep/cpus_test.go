package sweep

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPhysicalFirst: a dual-socket node's CPUs as Linux numbers them
// (threads 0-3 on cores 0-3, their siblings 4-7) take every core once
// before any sibling.
func TestPhysicalFirst(t *testing.T) {
	core := func(c int) string { return strconv.Itoa(c % 4) }
	if got := physicalFirst([]int{0, 1, 2, 3, 4, 5, 6, 7}, core); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("siblings numbered last: %v", got)
	}
	// Siblings numbered next to each other (0,1 on one core).
	pairs := func(c int) string { return strconv.Itoa(c / 2) }
	if got := physicalFirst([]int{0, 1, 2, 3, 4, 5}, pairs); !slices.Equal(got, []int{0, 2, 4, 1, 3, 5}) {
		t.Errorf("siblings numbered in pairs: %v", got)
	}
	if got := physicalFirst([]int{3, 1}, sysCore); len(got) != 2 {
		t.Errorf("this machine's CPUs: %v", got)
	}
}

// TestPinIRQs plays /proc: the first pin moves every queue interrupt that
// is off its shard's CPU; after a driver resets one (as i40e does on an XDP
// attach) the second pin moves that one only.
func TestPinIRQs(t *testing.T) {
	proc := t.TempDir()
	if err := os.WriteFile(filepath.Join(proc, "interrupts"), []byte(interruptsSample), 0o644); err != nil {
		t.Fatal(err)
	}
	affinity := func(irq int) string { return filepath.Join(proc, "irq", strconv.Itoa(irq), "smp_affinity_list") }
	for _, irq := range []int{99, 100} {
		os.MkdirAll(filepath.Dir(affinity(irq)), 0o755)
		os.WriteFile(affinity(irq), []byte("0-3\n"), 0o644)
	}
	moved, err := pinIRQs(proc, "eth2", "0000:03:00.0", []int{4, 6})
	if err != nil || len(moved) != 2 {
		t.Fatalf("first pin moved %v, %v", moved, err)
	}
	for irq, cpu := range map[int]string{99: "4", 100: "6"} {
		if b, _ := os.ReadFile(affinity(irq)); strings.TrimSpace(string(b)) != cpu {
			t.Errorf("irq %d on %q, want %s", irq, b, cpu)
		}
	}
	os.WriteFile(affinity(100), []byte("0-3\n"), 0o644) // the driver's reset
	moved, err = pinIRQs(proc, "eth2", "0000:03:00.0", []int{4, 6})
	if err != nil || len(moved) != 1 || moved[0].Num != 100 {
		t.Errorf("second pin moved %v, %v; want irq 100", moved, err)
	}
	if moved, err = pinIRQs(proc, "eth2", "0000:03:00.0", []int{4, 6}); err != nil || len(moved) != 0 {
		t.Errorf("third pin moved %v, %v", moved, err)
	}
	if _, err := pinIRQs(proc, "eth9", "", []int{0}); err == nil || !strings.Contains(err.Error(), "no queue interrupts of eth9") {
		t.Errorf("an interface without queue interrupts: %v", err)
	}
}
