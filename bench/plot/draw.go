package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// errPoints are a series' points with their min–max, for YErrorBars.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// intTicks marks each whole shard count between the axis ends.
type intTicks struct{}

func (intTicks) Ticks(min, max float64) []plot.Tick {
	var t []plot.Tick
	step := math.Max(1, math.Ceil((max-min)/16))
	for v := math.Ceil(min); v <= max; v += step {
		t = append(t, plot.Tick{Value: v, Label: strconv.Itoa(int(v))})
	}
	return t
}

// rateTicks labels four to seven round values from 0 to the top of the axis
// (steps of 1, 2, 2.5 or 5 times a power of ten) as 0, 250K, 1.5M.
type rateTicks struct{}

func (rateTicks) Ticks(min, max float64) []plot.Tick {
	if max <= min {
		return []plot.Tick{{Value: min, Label: rateLabel(min)}}
	}
	raw := (max - min) / 6
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := pow * 10
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*pow >= raw {
			step = m * pow
			break
		}
	}
	var t []plot.Tick
	for v := math.Ceil(min/step) * step; v <= max; v += step {
		t = append(t, plot.Tick{Value: v, Label: rateLabel(v)})
		if mid := v + step/2; mid <= max {
			t = append(t, plot.Tick{Value: mid}) // unlabelled minor tick
		}
	}
	return t
}

func rateLabel(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "K"
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func drawSVG(in input, out string) error {
	p := plot.New()
	p.Title.Text = in.Title
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = in.XLabel
	p.Y.Label.Text = in.YLabel
	p.X.Tick.Marker = intTicks{}
	if len(in.XTicks) > 0 {
		ticks := make(plot.ConstantTicks, len(in.XTicks))
		for i, t := range in.XTicks {
			ticks[i] = plot.Tick{Value: t.Value, Label: t.Label}
		}
		p.X.Tick.Marker = ticks
	}
	p.Y.Tick.Marker = rateTicks{}
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	colors := 0
	colorOf := map[string]int{} // the same server keeps its colour across clients
	for _, s := range in.Series {
		if len(s.Points) == 0 {
			continue
		}
		var e errPoints
		for _, pt := range s.Points {
			e.XYs = append(e.XYs, plotter.XY{X: pt.X, Y: pt.Y})
			e.YErrors = append(e.YErrors, struct{ Low, High float64 }{pt.Y - pt.Lo, pt.Hi - pt.Y})
		}
		server := serverOf(s.Name)
		ci, ok := colorOf[server]
		if !ok {
			ci = colors
			colorOf[server] = ci
			colors++
		}
		line, points, err := plotter.NewLinePoints(e.XYs)
		if err != nil {
			return fmt.Errorf("series %s: %w", s.Name, err)
		}
		line.Color = plotutil.Color(ci)
		line.Width = vg.Points(1.5)
		points.Color = plotutil.Color(ci)
		points.Shape = plotutil.Shape(ci)
		switch {
		case s.Dashed:
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		case s.Dotted:
			line.Dashes = []vg.Length{vg.Points(1.5), vg.Points(2)}
		}
		bars, err := plotter.NewYErrorBars(e)
		if err != nil {
			return fmt.Errorf("series %s: %w", s.Name, err)
		}
		bars.Color = plotutil.Color(ci)
		p.Add(line, points, bars)
		p.Legend.Add(s.Name, line, points)
		if hi := maxHi(s.Points); hi > p.Y.Max {
			p.Y.Max = hi
		}
	}
	p.Y.Max *= 1.35 // room for the legend above the lines
	// Pad the x axis so the first and last shard counts sit off the frame.
	p.X.Min -= 0.25
	p.X.Max += 0.25
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Legend.Padding = vg.Points(1)
	p.Legend.ThumbnailWidth = vg.Points(22)
	return p.Save(8*vg.Inch, 5*vg.Inch, out)
}

func serverOf(name string) string {
	server, _, _ := strings.Cut(name, " · ")
	return server
}

func maxHi(pts []struct{ X, Y, Lo, Hi float64 }) float64 {
	m := 0.0
	for _, p := range pts {
		m = math.Max(m, math.Max(p.Hi, p.Y))
	}
	return m
}
