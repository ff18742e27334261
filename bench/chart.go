package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart geometry: one tile per scenario and one for the legend.
const (
	chartTileW  = 4.3 * vg.Inch
	chartTileH  = 3.3 * vg.Inch
	chartTitleH = 0.5 * vg.Inch
	chartDPI    = 110
)

// chartColors are the colours of the implementations, in table order
// (Okabe-Ito, distinguishable with colour-blindness).
var chartColors = []color.Color{
	color.RGBA{0x00, 0x72, 0xb2, 0xff}, // blue
	color.RGBA{0xd5, 0x5e, 0x00, 0xff}, // vermillion
	color.RGBA{0x00, 0x9e, 0x73, 0xff}, // green
	color.RGBA{0xe6, 0x9f, 0x00, 0xff}, // orange
	color.RGBA{0x33, 0x33, 0x33, 0xff}, // near black
	color.RGBA{0xcc, 0x79, 0xa7, 0xff}, // purple
	color.RGBA{0x56, 0xb4, 0xe9, 0xff}, // sky blue
	color.RGBA{0xa0, 0x8a, 0x00, 0xff}, // dark yellow
}

// seriesStyle is how one label's line looks: the implementation's colour
// and glyph, dashed for a scenario's second and later variants.
type seriesStyle struct {
	line  draw.LineStyle
	glyph draw.GlyphStyle
}

// chartStyles assigns a style to every label of rs.
func chartStyles(o *outcome) map[string]seriesStyle {
	styles := map[string]seriesStyle{}
	shapes := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{},
		draw.PyramidGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}}
	for i, im := range o.impls {
		col := chartColors[i%len(chartColors)]
		width := vg.Points(1.4)
		if im.ours() {
			width = vg.Points(2.4)
		}
		style := func(dashed bool) seriesStyle {
			s := seriesStyle{
				line:  draw.LineStyle{Color: col, Width: width},
				glyph: draw.GlyphStyle{Color: col, Radius: vg.Points(3), Shape: shapes[i%len(shapes)]},
			}
			if dashed {
				s.line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			}
			return s
		}
		styles[im.label()] = style(false)
		for _, sc := range o.scenarios {
			for j, v := range sc.variants {
				styles[im.label()+"/"+v.name] = style(j > 0)
			}
		}
	}
	return styles
}

// writeChart draws decisions/s against callers, log-log, one panel per
// scenario and one line per implementation (and variant), and writes it to
// path as PNG or SVG by its extension.
func writeChart(path string, o *outcome) error {
	if len(o.results) == 0 {
		return fmt.Errorf("no results to draw")
	}
	var c vg.CanvasWriterTo
	n := len(o.scenarios) + 1 // and the legend
	cols := min(3, n)
	rows := (n + cols - 1) / cols
	w, h := chartTileW*vg.Length(cols), chartTileH*vg.Length(rows)+chartTitleH
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(chartDPI))}
	case ".svg":
		c = vgsvg.New(w, h)
	default:
		return fmt.Errorf("want a .png or .svg file, not %q", path)
	}
	drawChart(draw.New(c), o)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// drawChart draws the chart's title, panels and legend on dc.
func drawChart(dc draw.Canvas, o *outcome) {
	n := len(o.scenarios) + 1
	cols := min(3, n)
	rows := (n + cols - 1) / cols

	runs := "one run"
	if o.cfg.runs > 1 {
		runs = fmt.Sprintf("medians of %d runs", o.cfg.runs)
	}
	title := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 15), Handler: plot.DefaultTextHandler,
		XAlign: draw.XCenter, YAlign: draw.YTop}
	dc.FillText(title, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: dc.Max.Y - vg.Points(8)},
		fmt.Sprintf("ratelimit: decisions per second against concurrent callers (%s of %v per cell, GOMAXPROCS %d)",
			runs, o.cfg.dur, runtime.GOMAXPROCS(0)))
	body := draw.Crop(dc, 0, 0, 0, -chartTitleH)

	styles := chartStyles(o)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for _, r := range o.results {
		if r.DecisionsPerSec > 0 {
			ymin, ymax = min(ymin, r.DecisionsPerSec), max(ymax, r.DecisionsPerSec)
		}
	}
	// Whole decades, the same in every panel, so panels compare at a glance.
	ymin = math.Pow(10, math.Floor(math.Log10(ymin)))
	ymax = math.Pow(10, math.Ceil(math.Log10(ymax)))
	if ymax <= ymin {
		ymax = ymin * 10
	}
	xmin, xmax := float64(slices.Min(o.cfg.callers)), float64(slices.Max(o.cfg.callers))

	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for i, sc := range o.scenarios {
		plots[i/cols][i%cols] = scenarioPlot(sc, o.results, styles, xmin, xmax, ymin, ymax)
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(14), PadY: vg.Points(14),
		PadLeft: vg.Points(6), PadRight: vg.Points(10), PadBottom: vg.Points(6)}
	canvases := plot.Align(plots, tiles, body)
	for i := range o.scenarios {
		plots[i/cols][i%cols].Draw(canvases[i/cols][i%cols])
	}
	last := len(o.scenarios)
	legend, notes := canvases[last/cols][last%cols], (*draw.Canvas)(nil)
	if next := last + 1; next < rows*cols { // an empty tile beside the legend
		notes = &canvases[next/cols][next%cols]
	}
	drawLegend(legend, notes, o, styles)
}

// scenarioPlot is one scenario's panel: a line per label of the cells of
// sc, over the given axis ranges.
func scenarioPlot(sc *scenario, rs []*result, styles map[string]seriesStyle, xmin, xmax, ymin, ymax float64) *plot.Plot {
	p := plot.New()
	p.Title.Text = sc.name + ": " + sc.short
	p.Title.TextStyle.Font.Size = 11
	p.X.Label.Text = "concurrent callers"
	p.Y.Label.Text = "decisions/s"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	// A single caller count still gets an axis of some width.
	p.X.Min, p.X.Max = xmin/1.5, xmax*1.5
	p.Y.Min, p.Y.Max = ymin, ymax
	p.X.Tick.Marker = callerTicks(rs)
	p.Y.Tick.Marker = plot.TickerFunc(decadeTicks)
	p.Add(plotter.NewGrid())

	var labels []string
	for _, r := range rs {
		if r.Scenario == sc.name && !slices.Contains(labels, r.label()) {
			labels = append(labels, r.label())
		}
	}
	for _, l := range labels {
		var xys plotter.XYs
		for _, r := range rs {
			if r.Scenario == sc.name && r.label() == l && r.DecisionsPerSec > 0 {
				xys = append(xys, plotter.XY{X: float64(r.Callers), Y: r.DecisionsPerSec})
			}
		}
		slices.SortFunc(xys, func(a, b plotter.XY) int { return int(a.X - b.X) })
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			continue
		}
		st := styles[l]
		line.LineStyle, points.GlyphStyle = st.line, st.glyph
		p.Add(line, points)
	}
	return p
}

// drawLegend draws, in its own tile, one entry per implementation and per
// later variant drawn (a scenario's first variant is drawn like the
// implementation), and what the chart shows: at the top of notes, an
// empty tile, if there is one, else at the bottom of the legend's.
func drawLegend(c draw.Canvas, notes *draw.Canvas, o *outcome, styles map[string]seriesStyle) {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.TextStyle.Font.Size = 12
	l.Padding = vg.Points(3)
	l.ThumbnailWidth = vg.Points(36)
	l.XOffs, l.YOffs = vg.Points(24), -vg.Points(18)
	var labels []string
	for _, im := range o.impls {
		labels = append(labels, im.label())
	}
	for _, sc := range o.scenarios {
		for i, v := range sc.variants {
			if i == 0 {
				continue
			}
			for _, im := range o.impls {
				if lab := im.label() + "/" + v.name; im.variants && !slices.Contains(labels, lab) {
					labels = append(labels, lab)
				}
			}
		}
	}
	for _, lab := range labels {
		if !slices.ContainsFunc(o.results, func(r *result) bool { return r.label() == lab || r.Impl+"/"+r.Mode == lab }) {
			continue
		}
		st := styles[lab]
		l.Add(legendName(lab, o), &plotter.Line{LineStyle: st.line}, &plotter.Scatter{GlyphStyle: st.glyph})
	}
	l.Draw(c)
	note := draw.TextStyle{Color: color.Gray{Y: 0x44}, Font: font.From(plot.DefaultFont, 10), Handler: plot.DefaultTextHandler}
	nc, y := c, c.Min.Y+vg.Points(56)
	if notes != nil {
		nc, y = *notes, notes.Max.Y-vg.Points(24)
	}
	for _, s := range []string{
		"Both axes logarithmic; every panel has the same y range.",
		"memory: state in memory; durable: each grant is on disk",
		"before the caller hears it. More: go run ./bench -h.",
	} {
		nc.FillText(note, vg.Point{X: nc.Min.X + vg.Points(24), Y: y}, s)
		y -= vg.Points(15)
	}
}

// legendName is a label as the legend shows it, a variant's with the
// scenarios it belongs to: "ours/memory/shards16 (hot, hotgrants)".
func legendName(label string, o *outcome) string {
	var in []string
	for _, sc := range o.scenarios {
		for _, v := range sc.variants {
			if strings.HasSuffix(label, "/"+v.name) {
				in = append(in, sc.name)
			}
		}
	}
	if len(in) == 0 {
		return label
	}
	return label + " (" + strings.Join(in, ", ") + ")"
}

// callerTicks labels the caller counts that were run.
func callerTicks(rs []*result) plot.Ticker {
	var ticks plot.ConstantTicks
	var seen []int
	for _, r := range rs {
		if !slices.Contains(seen, r.Callers) {
			seen = append(seen, r.Callers)
			ticks = append(ticks, plot.Tick{Value: float64(r.Callers), Label: fmt.Sprint(r.Callers)})
		}
	}
	return ticks
}

// decadeTicks labels each power of ten ("1k", "10M") with unlabelled minor
// ticks between.
func decadeTicks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		d := math.Pow(10, e)
		if d >= lo && d <= hi {
			ticks = append(ticks, plot.Tick{Value: d, Label: decadeLabel(d)})
		}
		for m := 2.0; m < 10; m++ {
			if x := m * d; x >= lo && x <= hi {
				ticks = append(ticks, plot.Tick{Value: x})
			}
		}
	}
	return ticks
}

// decadeLabel is a power of ten as a tick label: "100", "10k", "1M".
func decadeLabel(d float64) string {
	switch {
	case d >= 1e6:
		return fmt.Sprintf("%gM", d/1e6)
	case d >= 1e3:
		return fmt.Sprintf("%gk", d/1e3)
	}
	return fmt.Sprintf("%g", d)
}
