package afxdp

import (
	"os"
	"slices"
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

// TestMapUMEMAsksForTransparentHugePages: normal pages come with the request
// for transparent hugepages (VmFlags "hg") unless hugepages are refused;
// without the request none back them, unless the kernel gives them to every
// mapping (mode "always", as Fedora and RHEL ship).
func TestMapUMEMAsksForTransparentHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("kernel without transparent hugepages (%q, %v)", mode, err)
	}
	if hugeFree(t) > 0 {
		t.Skip("hugetlbfs pages free: the UMEM would take those")
	}
	always := strings.Contains(string(mode), "[always]")
	for _, try := range []bool{true, false} {
		m, huge, err := mapUMEM(4<<20, try)
		if err != nil || huge || len(m) != 4<<20 {
			t.Fatalf("mapUMEM(try %v) = len %d huge %v err %v", try, len(m), huge, err)
		}
		flags := strings.Fields(smapsField(m, "VmFlags:"))
		if len(flags) == 0 {
			t.Fatalf("try %v: no VmFlags for the UMEM's mapping", try)
		}
		if asked := slices.Contains(flags, "hg"); asked != try {
			t.Errorf("try %v: MADV_HUGEPAGE asked %v (VmFlags %v)", try, asked, flags)
		}
		if thp := transparentHuge(m); thp < 0 || thp > len(m) || (!try && !always && thp != 0) {
			t.Errorf("try %v: %d bytes in transparent hugepages of %d", try, thp, len(m))
		}
		if err := unmapUMEM(m); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkUMEMFirstTouch maps a default-sized UMEM (64 MiB) as mapUMEM
// does, with and without the request for transparent hugepages, and times
// the first write to each 4 KiB page after populating: what a received
// frame's first read costs when its page was not touched for long. On a
// guest whose host keeps the page tables, a small page's first touch traps.
func BenchmarkUMEMFirstTouch(b *testing.B) {
	const size = 64 << 20
	for _, try := range []bool{false, true} {
		name := "small"
		if try {
			name = "transparent-huge"
		}
		b.Run(name, func(b *testing.B) {
			var thp int
			for b.Loop() {
				b.StopTimer()
				m, huge, err := mapUMEM(size, try)
				if err != nil {
					b.Fatal(err)
				}
				if huge {
					b.Skip("hugetlbfs pages free: the UMEM took those")
				}
				thp = transparentHuge(m)
				b.StartTimer()
				for i := 0; i < size; i += 4096 {
					m[i+8]++
				}
				b.StopTimer()
				unmapUMEM(m)
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size/4096), "ns/page")
			b.ReportMetric(float64(thp>>20), "MiB-huge")
		})
	}
}
