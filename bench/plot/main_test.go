package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlot draws a sample input and checks the SVG names every series; a
// series without points is left out, and an input without series fails.
func TestPlot(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.json")
	os.WriteFile(in, []byte(`{"title":"req/s","x_label":"shards","y_label":"req/s","series":[
		{"name":"percore native · wreck","points":[{"x":1,"y":60000,"lo":55000,"hi":62000},{"x":2,"y":90000,"lo":85000,"hi":95000}]},
		{"name":"nginx · wrk","dashed":true,"points":[{"x":1,"y":40000,"lo":35000,"hi":42000}]},
		{"name":"gnet · wreck","points":[]}]}`), 0o644)
	out := filepath.Join(dir, "out.svg")
	if err := run(in, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	if !strings.Contains(svg, "<svg") {
		t.Fatalf("not an SVG: %.100s", svg)
	}
	// gonum writes text as glyph runs; the legend labels appear as text.
	for _, name := range []string{"percore native", "nginx"} {
		if !strings.Contains(svg, name) {
			t.Errorf("SVG lacks series %q", name)
		}
	}
	if strings.Contains(svg, "gnet") {
		t.Errorf("SVG has the empty series gnet")
	}
	os.WriteFile(in, []byte(`{"series":[]}`), 0o644)
	if err := run(in, out); err == nil {
		t.Errorf("run accepted an input without series")
	}
}

func TestRateTicks(t *testing.T) {
	var labels []string
	for _, tk := range (rateTicks{}).Ticks(0, 270000) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if got := strings.Join(labels, " "); got != "0 50K 100K 150K 200K 250K" {
		t.Errorf("ticks 0-270000: %s", got)
	}
	labels = nil
	for _, tk := range (rateTicks{}).Ticks(0, 1.9e6) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if got := strings.Join(labels, " "); got != "0 500K 1M 1.5M" {
		t.Errorf("ticks 0-1.9M: %s", got)
	}
}

// TestPlotXTicks: fixed x ticks are drawn with their labels.
func TestPlotXTicks(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.json")
	os.WriteFile(in, []byte(`{"title":"req/s","series":[
		{"name":"percore native","points":[{"x":6,"y":300000,"lo":300000,"hi":300000},{"x":16,"y":250000,"lo":250000,"hi":250000}]}],
		"x_ticks":[{"value":6,"label":"64"},{"value":16,"label":"64K"}]}`), 0o644)
	out := filepath.Join(dir, "out.svg")
	if err := run(in, out); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), "64K") {
		t.Error("SVG lacks the x tick label 64K")
	}
}
