// Command plot draws the sweep's SVG: requests/s per shard count, a line per
// server and client with min–max error bars, from the JSON that
// percore/bench/sweep writes (sweep.PlotInput).
//
//	go run . -in sweep.plot.json -out ../../docs/sweep.svg
//
// It is a module of its own (percore/bench/plot) because gonum/plot and its
// font and image dependencies belong to the benchmark report, not to the
// server: percore's go.mod stays lean, and the main module's `go test ./...`
// never compiles them.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

// input mirrors sweep.PlotInput (kept apart so this module needs nothing
// from percore's).
type input struct {
	Title  string `json:"title"`
	XLabel string `json:"x_label"`
	YLabel string `json:"y_label"`
	Series []struct {
		Name   string `json:"name"`
		Dashed bool   `json:"dashed"`
		Dotted bool   `json:"dotted"`
		Points []struct {
			X, Y, Lo, Hi float64
		} `json:"points"`
	} `json:"series"`
	XTicks []struct {
		Value float64 `json:"value"`
		Label string  `json:"label"`
	} `json:"x_ticks"` // fixed x ticks (a log axis labelled with its values); none: whole numbers
}

func main() {
	in := flag.String("in", "", "plot input JSON (from bench sweep)")
	out := flag.String("out", "", "SVG file to write")
	flag.Parse()
	if *in == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: plot -in sweep.plot.json -out sweep.svg")
		os.Exit(2)
	}
	if err := run(*in, *out); err != nil {
		fmt.Fprintf(os.Stderr, "plot: %v\n", err)
		os.Exit(1)
	}
}

func run(inPath, outPath string) error {
	b, err := os.ReadFile(inPath)
	if err != nil {
		return err
	}
	var in input
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("parse %s: %w", inPath, err)
	}
	if len(in.Series) == 0 {
		return fmt.Errorf("%s has no series to plot", inPath)
	}
	return drawSVG(in, outPath)
}
