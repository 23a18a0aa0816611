package sweep

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// PlotInput is what the plot tool (module percore/bench/plot) reads: one
// series per server and client, a point per shard count with its min–max.
type PlotInput struct {
	Title  string       `json:"title"`
	XLabel string       `json:"x_label"`
	YLabel string       `json:"y_label"`
	Series []PlotSeries `json:"series"`
	XTicks []PlotTick   `json:"x_ticks,omitempty"` // fixed x-axis ticks (none: one at each whole number)
}

// PlotTick is a labelled mark on the x axis.
type PlotTick struct {
	Value float64 `json:"value"`
	Label string  `json:"label"`
}

// PlotSeries is one line: solid for wreck, dashed for wrk, dotted for
// wreck-native.
type PlotSeries struct {
	Name   string      `json:"name"`
	Dashed bool        `json:"dashed"`
	Dotted bool        `json:"dotted"`
	Points []PlotPoint `json:"points"`
}

// PlotPoint is a median with its min–max over rounds.
type PlotPoint struct {
	X  float64 `json:"x"`
	Y  float64 `json:"y"`
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

func (r *Results) plotInput(pl int) PlotInput {
	title := "requests/s per shard count, keep-alive"
	if pl > 1 {
		title = fmt.Sprintf("requests/s per shard count, pipeline %d", pl)
	}
	if r.Config.Iface == "" {
		title += fmt.Sprintf(" (veth lab, %d-CPU machine)", r.Machine.NProc)
	}
	in := PlotInput{Title: title, XLabel: "shards (--smp, workers, GOMAXPROCS)", YLabel: "requests/s (median, min–max)"}
	for _, row := range r.rows(pl) {
		s := PlotSeries{Name: Labels[row[0]] + " · " + row[1], Dashed: row[1] == "wrk", Dotted: row[1] == "wreck-native"}
		for _, k := range r.Config.SMPs {
			if samples := r.find(Key{row[0], row[1], pl, k}); len(samples) > 0 {
				sp := spreadOf(field(samples, func(s Sample) float64 { return s.ReqPerSec }))
				s.Points = append(s.Points, PlotPoint{X: float64(k), Y: sp.med, Lo: sp.lo, Hi: sp.hi})
			}
		}
		in.Series = append(in.Series, s)
	}
	return in
}

func (r *Results) writePlot(out string, pl int, plot func(in, out string) error) error {
	in := strings.TrimSuffix(out, filepath.Ext(out)) + ".plot.json"
	if err := writeJSON(in, r.plotInput(pl)); err != nil {
		return err
	}
	defer os.Remove(in)
	if err := plot(in, out); err != nil {
		return fmt.Errorf("plot %s: %w", out, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ModulePlotter runs the plot tool from its own module under root
// (bench/plot), so gonum/plot stays out of percore's go.mod.
func ModulePlotter(ctx context.Context, root string) func(in, out string) error {
	return func(in, out string) error {
		var err error
		if in, err = filepath.Abs(in); err != nil {
			return err
		}
		if out, err = filepath.Abs(out); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "go", "run", ".", "-in", in, "-out", out)
		cmd.Dir = filepath.Join(root, "bench", "plot")
		if o, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go run ./bench/plot: %v: %s", err, strings.TrimSpace(string(o)))
		}
		return nil
	}
}

// LoadResults reads a sweep saved with --json, to rewrite its report and
// plots into out's Out, SVG and JSON paths without measuring again.
func LoadResults(path string, out Config) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read saved sweep: %w", err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("parse saved sweep %s: %w", path, err)
	}
	if r.Config == nil || len(r.Points) == 0 {
		return nil, fmt.Errorf("saved sweep %s has no config or no samples: give a file written by bench sweep --json", path)
	}
	r.Config.Out, r.Config.SVG, r.Config.JSON = out.Out, out.SVG, ""
	return &r, nil
}
