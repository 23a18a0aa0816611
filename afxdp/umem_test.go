package afxdp

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"percore/lab"
)

func TestMapUMEMFallsBackToNormalPages(t *testing.T) {
	// Without MAP_HUGETLB, or without free hugepages, normal pages serve.
	m, huge, err := mapUMEM(1<<20, false)
	if err != nil || huge || len(m) != 1<<20 {
		t.Fatalf("mapUMEM = len %d huge %v err %v", len(m), huge, err)
	}
	m[len(m)-1] = 1
	if err := unmapUMEM(m); err != nil {
		t.Fatal(err)
	}
	if hugeFree(t) == 0 {
		m, huge, err := mapUMEM(3<<20, true)
		if err != nil || huge || len(m) != 3<<20 {
			t.Fatalf("no hugepages: mapUMEM = len %d huge %v err %v", len(m), huge, err)
		}
		unmapUMEM(m)
	}
}

func hugeFree(t *testing.T) int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "HugePages_Free:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// TestSocketOnHugePages reserves two 2 MiB hugepages for the test (restoring
// the system setting after) and checks the UMEM lands on them.
func TestSocketOnHugePages(t *testing.T) {
	needRoot(t)
	const knob = "/proc/sys/vm/nr_hugepages"
	old, err := os.ReadFile(knob)
	if err != nil {
		t.Skipf("kernel without hugetlbfs: %v", err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(old)))
	if err := os.WriteFile(knob, []byte(strconv.Itoa(n+2)), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(knob, old, 0) })
	if hugeFree(t) < 1 {
		t.Skip("kernel could not reserve a hugepage (memory fragmented)")
	}
	l := newLab(t, lab.Config{Prefix: "ph"})
	var s *Socket
	if err := l.ServerNS.Do(func() (err error) {
		s, err = Open(Config{Interface: l.ServerIf, FrameCount: 512, Logf: t.Logf})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !s.HugePages() {
		t.Error("UMEM not on hugepages although some were free")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
