// Package benchplot draws `hirrun bench` figures with gonum/plot: for each
// collective a row of two panels, bus bandwidth and latency against the
// message size, one line per algorithm. It is the only package that
// imports gonum/plot, so that users of hir's library packages do not pull
// it in; it knows nothing of how the figures were measured.
package benchplot

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Point is one figure of a series.
type Point struct {
	Bytes   int64   // the message size
	BusGBps float64 // bus bandwidth, GB/s
	Micros  float64 // time per call, µs
}

// Series is one line in both panels of a row.
type Series struct {
	Name   string // in the legend
	Key    string // series with the same key share a colour (an algorithm, eager and in a graph)
	Dashed bool   // drawn dashed (replayed from a graph)
	Points []Point
}

// Row is one collective: a bus bandwidth panel and a latency panel.
type Row struct {
	Title  string // e.g. "all_reduce bf16"
	Series []Series
}

// Chart is the whole picture: a title line over its rows.
type Chart struct {
	Title string
	Rows  []Row
}

// Labels of the axes, which tests look for.
const (
	SizeLabel      = "message size (bytes)"
	BandwidthLabel = "bus bandwidth (GB/s)"
	LatencyLabel   = "latency (µs per call)"
)

// Format is how a chart is encoded: "svg" or "png".
type Format string

const (
	SVG Format = "svg"
	PNG Format = "png"
)

// FormatOf is the format a file name asks for, by its extension.
func FormatOf(path string) (Format, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		return SVG, nil
	case ".png":
		return PNG, nil
	}
	return "", fmt.Errorf("%q: a chart is written as .svg or .png, not %q", path, filepath.Ext(path))
}

// Panel sizes: two panels side by side, a row per collective.
const (
	panelWidth  = 11 * vg.Centimeter
	rowHeight   = 8 * vg.Centimeter
	titleHeight = 1 * vg.Centimeter
	pngDPI      = 150
)

// chartFont is the typeface every text of a chart is laid out in: Liberation
// Sans, which gonum embeds and whose metrics Arial and Helvetica share.
// An SVG does not embed it: it names it with those and the generic
// sans-serif after (fontStack), and leaves room for a wider substitute.
var chartFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

// fontStack is the font-family an SVG gives for the family gonum's SVG
// canvas names (by the font's own name, and with no fallback): the
// metric-compatible fonts first, then the generic family, so that a
// viewer without Liberation Sans draws the text in a font it has.
var fontStack = map[string]string{
	"Liberation Sans": "'Liberation Sans', Arial, Helvetica, sans-serif",
}

// Color is the colour of the i-th key of a chart, in order of first
// appearance.
func Color(i int) color.Color { return plotutil.DarkColors[i%len(plotutil.DarkColors)] }

// Dashes is how a dashed series is drawn.
var Dashes = []vg.Length{vg.Points(6), vg.Points(3)}

// Write draws c and encodes it to w.
func Write(w io.Writer, f Format, c Chart) error {
	grid, err := Plots(c)
	if err != nil {
		return err
	}
	width, height := 2*panelWidth, titleHeight+vg.Length(len(grid))*rowHeight
	var canvas vg.CanvasWriterTo
	switch f {
	case SVG:
		canvas = vgsvg.New(width, height)
	case PNG:
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(pngDPI))}
	default:
		return fmt.Errorf("benchplot: unknown format %q (svg or png)", f)
	}
	if f == SVG {
		canvas = &familyStacks{canvas}
	}
	dc := draw.New(canvas)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	drawTitle(dc, c.Title)
	body := draw.Crop(dc, 0, 0, 0, -titleHeight)
	// gonum leaves room for the last size label in Liberation Sans; the
	// pads right and below leave room for a wider font a viewer may put
	// in its place (the tests size every text at 0.65 em a character).
	tiles := draw.Tiles{Rows: len(grid), Cols: 2, PadX: vg.Millimeter, PadY: 2 * vg.Millimeter, PadTop: vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: vg.Millimeter, PadRight: 6 * vg.Millimeter}
	// Each panel in its tile, not plot.Align: Align lines the data areas
	// up but lifts some titles off their panels.
	for i := range grid {
		for j := range grid[i] {
			grid[i][j].Draw(tiles.At(body, j, i))
		}
	}
	_, err = canvas.WriteTo(w)
	return err
}

// familyStacks writes its SVG canvas with every font-family gonum names
// given its fallbacks (fontStack).
type familyStacks struct{ vg.CanvasWriterTo }

func (c *familyStacks) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	if _, err := c.CanvasWriterTo.WriteTo(&b); err != nil {
		return 0, err
	}
	out := b.Bytes()
	for name, stack := range fontStack {
		out = bytes.ReplaceAll(out, []byte("font-family:"+name+";"), []byte("font-family:"+stack+";"))
	}
	n, err := w.Write(out)
	return int64(n), err
}

func drawTitle(dc draw.Canvas, title string) {
	sty := text.Style{
		Color:   color.Black,
		Font:    font.From(chartFont, 13),
		XAlign:  draw.XCenter,
		YAlign:  draw.YCenter,
		Handler: plot.DefaultTextHandler,
	}
	at := vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: dc.Max.Y - titleHeight/2}
	dc.FillText(sty, at, title)
}

// Plots are c's panels, a row of two (bandwidth, latency) per row of c.
// The log axes (sizes, times) are linear axes of log2(bytes) and
// log10(µs) whose ticks are labelled in bytes and µs: gonum's LogScale
// places an axis label's box at the arithmetic mean of the range, which
// on a log axis pads the panel with blank space.
func Plots(c Chart) ([][]*plot.Plot, error) {
	if len(c.Rows) == 0 {
		return nil, errors.New("benchplot: no figures to draw")
	}
	colors := map[string]int{}
	for _, r := range c.Rows {
		for _, s := range r.Series {
			if _, ok := colors[s.Key]; !ok {
				colors[s.Key] = len(colors)
			}
		}
	}
	var grid [][]*plot.Plot
	for _, r := range c.Rows {
		if err := checkRow(r); err != nil {
			return nil, err
		}
		bw := newPanel(r.Title+": bus bandwidth", BandwidthLabel)
		lat := newPanel(r.Title+": latency", LatencyLabel)
		bw.Y.Tick.Marker, lat.Y.Tick.Marker = bandwidthTicks{}, latencyTicks{}
		for _, s := range r.Series {
			sty := draw.LineStyle{Color: Color(colors[s.Key]), Width: vg.Points(1.5)}
			if s.Dashed {
				sty.Dashes = Dashes
			}
			for _, p := range []struct {
				plot *plot.Plot
				y    func(Point) float64
			}{{bw, func(p Point) float64 { return p.BusGBps }}, {lat, func(p Point) float64 { return math.Log10(p.Micros) }}} {
				xys := make(plotter.XYs, len(s.Points))
				for i, pt := range s.Points {
					xys[i] = plotter.XY{X: math.Log2(float64(pt.Bytes)), Y: p.y(pt)}
				}
				line, points, err := plotter.NewLinePoints(xys)
				if err != nil {
					return nil, fmt.Errorf("benchplot: %s, %s: %w", r.Title, s.Name, err)
				}
				line.LineStyle = sty
				points.GlyphStyle = draw.GlyphStyle{Color: sty.Color, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
				p.plot.Add(line, points)
				if p.plot == bw {
					bw.Legend.Add(s.Name, line, points)
				}
			}
		}
		fitAxes(bw, lat)
		grid = append(grid, []*plot.Plot{bw, lat})
	}
	return grid, nil
}

func newPanel(title, yLabel string) *plot.Plot {
	p := plot.New()
	for _, f := range []*font.Font{&p.Title.TextStyle.Font, &p.Legend.TextStyle.Font,
		&p.X.Label.TextStyle.Font, &p.X.Tick.Label.Font, &p.Y.Label.TextStyle.Font, &p.Y.Tick.Label.Font} {
		f.Typeface, f.Variant, f.Style, f.Weight = chartFont.Typeface, chartFont.Variant, chartFont.Style, chartFont.Weight
	}
	p.Title.Text = title
	p.X.Label.Text = SizeLabel
	p.Y.Label.Text = yLabel
	p.X.Tick.Marker = sizeTicks{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Millimeter, -vg.Millimeter
	p.Legend.TextStyle.Font.Size = 10
	p.Add(plotter.NewGrid())
	return p
}

// checkRow refuses what gonum would draw wrongly or panic on (a log axis
// through 0): every size and time must be positive and finite.
func checkRow(r Row) error {
	if len(r.Series) == 0 {
		return fmt.Errorf("benchplot: %s has no series", r.Title)
	}
	for _, s := range r.Series {
		if len(s.Points) == 0 {
			return fmt.Errorf("benchplot: %s, %s has no points", r.Title, s.Name)
		}
		for _, p := range s.Points {
			if p.Bytes <= 0 || !(p.Micros > 0) || math.IsInf(p.Micros, 0) || !(p.BusGBps >= 0) || math.IsInf(p.BusGBps, 0) {
				return fmt.Errorf("benchplot: %s, %s: %d bytes, %v µs, %v GB/s is not a figure to draw", r.Title, s.Name, p.Bytes, p.Micros, p.BusGBps)
			}
		}
	}
	return nil
}

// fitAxes pads the data ranges a little so that no point sits on an
// axis, and starts the bandwidth axis at 0.
func fitAxes(bw, lat *plot.Plot) {
	for _, p := range []*plot.Plot{bw, lat} {
		p.X.Min, p.X.Max = p.X.Min-0.3, p.X.Max+0.3
	}
	bw.Y.Min, bw.Y.Max = 0, max(bw.Y.Max*1.08, 1)
	lat.Y.Min, lat.Y.Max = lat.Y.Min-0.1, lat.Y.Max+0.1
}
