package sweep

import (
	"strings"
	"testing"
)

func TestParseCell(t *testing.T) {
	for _, c := range []struct {
		in          string
		med, lo, hi float64
	}{
		{"49,960", 49960, 49960, 49960},
		{"163,504 (120,000–170,001)", 163504, 120000, 170001},
		{"12.41 (9.50–13.00)", 12.41, 9.5, 13},
		{"0.50", 0.5, 0.5, 0.5},
	} {
		med, lo, hi, err := ParseCell(c.in)
		if err != nil || med != c.med || lo != c.lo || hi != c.hi {
			t.Errorf("ParseCell(%q) = %v %v %v %v, want %v %v %v", c.in, med, lo, hi, err, c.med, c.lo, c.hi)
		}
	}
	for _, bad := range []string{"", "–", "1 (2–3)", "5 (1-9)", "5 (1–9", "x", "5 (1–x)"} {
		if _, _, _, err := ParseCell(bad); err == nil {
			t.Errorf("ParseCell accepted %q", bad)
		}
	}
}

func TestFormatNumRoundTrips(t *testing.T) {
	for _, v := range []float64{0, 1.25, 9.99, 10, 999.9, 1000, 12345.4, 6869199, -1500} {
		s := spreadOf([]float64{v}).String()
		med, _, _, err := ParseCell(s)
		if err != nil {
			t.Fatalf("%v -> %q: %v", v, s, err)
		}
		if d := med - v; d > 0.5 || d < -0.5 {
			t.Errorf("%v -> %q -> %v", v, s, med)
		}
	}
	if got := spreadOf([]float64{3, 1, 2, 10}).String(); got != "2.50 (1.00–10.0)" {
		t.Errorf("spread of 3,1,2,10 = %q", got)
	}
}

func TestReplace(t *testing.T) {
	sec := BeginMark + "\nnew\n" + EndMark + "\n"
	// No section yet: appended under the heading, other sections kept.
	doc, err := Replace("# Benchmarks\n\n## AF_XDP\n\ntext\n", sec)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Benchmarks\n\n## AF_XDP\n\ntext\n\n" + Heading + "\n\n" + sec
	if doc != want {
		t.Fatalf("append:\n%s\nwant\n%s", doc, want)
	}
	// Existing section: replaced in place, text after it kept.
	doc2, err := Replace(strings.Replace(doc, "new", "old", 1)+"\n## Later\n", strings.Replace(sec, "new", "newer", 1))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(doc2, "old") || !strings.Contains(doc2, "newer") || !strings.HasSuffix(doc2, EndMark+"\n\n## Later\n") ||
		strings.Count(doc2, Heading) != 1 {
		t.Fatalf("replace:\n%s", doc2)
	}
	if _, err := Replace("x\n"+EndMark+"\n"+BeginMark+"\n", sec); err == nil {
		t.Error("Replace accepted markers out of order")
	}
	if _, err := Replace("x\n"+BeginMark+"\n", sec); err == nil {
		t.Error("Replace accepted an unpaired marker")
	}
}

func TestParseTables(t *testing.T) {
	md := "## A\n\n| a | b |\n|---|---:|\n| 1 | 2 |\n| 3 | 4 |\n\ntext | not a table\n#### B\n| x |\n|:---:|\n"
	tabs, err := ParseTables(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(tabs) != 2 || tabs[0].Title != "A" || len(tabs[0].Rows) != 2 || tabs[0].Rows[1][1] != "4" ||
		tabs[1].Title != "B" || len(tabs[1].Rows) != 0 || tabs[1].Header[0] != "x" {
		t.Fatalf("ParseTables = %+v", tabs)
	}
	for _, bad := range []string{"| a | b |\n| 1 | 2 |\n", "| a | b |\n|---|---|\n| 1 |\n", "| a |\n|--|\n"} {
		if _, err := ParseTables(bad); err == nil {
			t.Errorf("ParseTables accepted %q", bad)
		}
	}
}

// TestLatencyTableSkipsUnreported checks that a percentile wrk printed as 0
// in some rounds is the median of the others, and "–" when no round has it.
func TestLatencyTableSkipsUnreported(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SMPs, cfg.Servers, cfg.Clients = []int{1}, []string{"posix"}, []string{"wrk"}
	r := &Results{Config: &cfg, Points: []*Point{{Key: Key{"posix", "wrk", 1, 1}, Samples: []Sample{
		{P50: 100, P90: 300, P99: 0, Max: 900},
		{P50: 200, P90: 0, P99: 0, Max: 700},
		{P50: 300, P90: 500, P99: 0, Max: 800},
	}}}}
	var b strings.Builder
	r.latencyTable(&b, 1, "wrk", []string{"p50", "p90", "p99", "max"})
	if !strings.Contains(b.String(), "| percore posix | 1 | 200.0 | 400.0 | – | 800.0 | 0 |") {
		t.Errorf("table:\n%s", b.String())
	}
}
