package benchplot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testChart: two collectives; all_reduce has three algorithms, each also
// in a graph; all_gather two, eager only. Latency a + bytes/bandwidth.
func testChart() Chart {
	c := Chart{Title: "GPU X × 2"}
	for _, op := range []struct {
		title string
		algos []string
		graph bool
	}{{"all_reduce bf16", []string{"one_shot", "two_shot", "nccl"}, true}, {"all_gather bf16", []string{"one_shot", "nccl"}, false}} {
		r := Row{Title: op.title}
		for k, algo := range op.algos {
			for _, graph := range []bool{false, true} {
				if graph && !op.graph {
					continue
				}
				s := Series{Name: algo, Key: algo, Dashed: graph}
				if graph {
					s.Name += " (graph)"
				}
				for b := int64(8 << 10); b <= 1<<30; b *= 2 {
					us := 5 + float64(k) + float64(b)/(300e3+float64(k)*20e3)
					if graph {
						us *= 0.8
					}
					s.Points = append(s.Points, Point{Bytes: b, Micros: us, BusGBps: float64(b) / us / 1e3})
				}
				r.Series = append(r.Series, s)
			}
		}
		c.Rows = append(c.Rows, r)
	}
	return c
}

// svgDoc is what the test reads back from an SVG: every path's style and
// data, every text.
type svgDoc struct {
	paths []svgPath
	texts []string
}

type svgPath struct{ d, style string }

// parseSVG decodes every token (so the file is well-formed XML) and keeps
// the paths and texts.
func parseSVG(t *testing.T, data []byte) svgDoc {
	t.Helper()
	var doc svgDoc
	dec := xml.NewDecoder(bytes.NewReader(data))
	var inText bool
	var text strings.Builder
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the SVG is not well-formed XML")
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			attr := map[string]string{}
			for _, a := range tok.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch tok.Name.Local {
			case "path":
				doc.paths = append(doc.paths, svgPath{attr["d"], attr["style"]})
			case "text":
				inText = true
				text.Reset()
			}
		case xml.CharData:
			if inText {
				text.Write(tok)
			}
		case xml.EndElement:
			if tok.Name.Local == "text" {
				inText = false
				doc.texts = append(doc.texts, text.String())
			}
		}
	}
	require.Equal(t, "svg", root, "root element")
	return doc
}

func hexColor(i int) string {
	r, g, b, _ := Color(i).RGBA()
	return fmt.Sprintf("#%02X%02X%02X", r>>8, g>>8, b>>8)
}

func TestWriteSVG(t *testing.T) {
	c := testChart()
	var out bytes.Buffer
	require.NoError(t, Write(&out, SVG, c))
	doc := parseSVG(t, out.Bytes())

	for _, want := range []string{"GPU X × 2", SizeLabel, BandwidthLabel, LatencyLabel,
		"all_reduce bf16: bus bandwidth", "all_reduce bf16: latency", "all_gather bf16: bus bandwidth", "all_gather bf16: latency",
		"32KiB", "1GiB", "one_shot", "two_shot (graph)", "nccl (graph)", "10", "100", "1000"} {
		assert.Contains(t, doc.texts, want, "text")
	}
	assert.Equal(t, 2, count(doc.texts, BandwidthLabel), "a bandwidth panel per row")
	assert.Equal(t, 2, count(doc.texts, LatencyLabel), "a latency panel per row")

	// A series' line is a path in its colour through each of its points
	// (one move, then a segment per point after the first), once in each
	// panel of its row; a graph's is dashed. Key colours go in order of
	// first appearance: one_shot, two_shot, nccl.
	colour := map[string]int{"one_shot": 0, "two_shot": 1, "nccl": 2}
	want := map[string]int{}
	for _, r := range c.Rows {
		for _, s := range r.Series {
			want[lineID(hexColor(colour[s.Key]), s.Dashed, len(s.Points)-1)] += 2
		}
	}
	got := map[string]int{}
	for _, p := range doc.paths {
		segments := strings.Count(p.d, "L")
		if segments < 2 || strings.ContainsAny(p.d, "AZ") {
			continue // axes, ticks, legend samples, markers, backgrounds
		}
		m := regexp.MustCompile(`stroke:(#[0-9A-F]{6})`).FindStringSubmatch(p.style)
		require.NotNil(t, m, "path %q has no stroke", p.style)
		got[lineID(m[1], strings.Contains(p.style, "stroke-dasharray"), segments)]++
	}
	assert.Equal(t, want, got, "lines (colour, dashed, segments): count")
	assert.Len(t, want, 6, "one_shot, two_shot, nccl, each eager and dashed: the test draws what it means to")
}

func lineID(colour string, dashed bool, segments int) string {
	return fmt.Sprintf("%s dashed=%v segments=%d", colour, dashed, segments)
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

func TestWritePNG(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, Write(&out, PNG, testChart()))
	img, err := png.Decode(&out)
	require.NoError(t, err)
	// 22 cm wide, 1 + 2 × 8 cm high, at 150 dpi.
	assert.Equal(t, int(math.Round(22/2.54*pngDPI)), img.Bounds().Dx(), "width")
	assert.Equal(t, int(math.Round(17/2.54*pngDPI)), img.Bounds().Dy(), "height")
}

func TestFormatOf(t *testing.T) {
	for path, want := range map[string]Format{"a.svg": SVG, "dir/b.SVG": SVG, "c.png": PNG} {
		got, err := FormatOf(path)
		assert.NoError(t, err, path)
		assert.Equal(t, want, got, path)
	}
	for _, bad := range []string{"a.pdf", "svg", "a.svg.txt", ""} {
		_, err := FormatOf(bad)
		assert.ErrorContains(t, err, "a chart is written as .svg or .png", "%q", bad)
	}
}

// Figures gonum cannot put on a log axis, and charts with nothing to
// draw, are errors, not panics.
func TestWriteRefusesWhatItCannotDraw(t *testing.T) {
	for name, c := range map[string]Chart{
		"no rows":    {Title: "x"},
		"no series":  {Rows: []Row{{Title: "all_reduce bf16"}}},
		"no points":  {Rows: []Row{{Title: "all_reduce bf16", Series: []Series{{Name: "nccl"}}}}},
		"zero time":  {Rows: []Row{{Title: "all_reduce bf16", Series: []Series{{Name: "nccl", Points: []Point{{Bytes: 8, Micros: 0}}}}}}},
		"NaN time":   {Rows: []Row{{Title: "all_reduce bf16", Series: []Series{{Name: "nccl", Points: []Point{{Bytes: 8, Micros: math.NaN()}}}}}}},
		"zero bytes": {Rows: []Row{{Title: "all_reduce bf16", Series: []Series{{Name: "nccl", Points: []Point{{Bytes: 0, Micros: 1}}}}}}},
	} {
		err := Write(io.Discard, SVG, c)
		assert.Error(t, err, name)
	}
	// One point is a line of one marker: drawn.
	one := Chart{Rows: []Row{{Title: "all_reduce bf16", Series: []Series{{Name: "nccl", Key: "nccl", Points: []Point{{Bytes: 8 << 10, Micros: 7, BusGBps: 1.2}}}}}}}
	assert.NoError(t, Write(io.Discard, SVG, one))
}

func TestSizeTicks(t *testing.T) {
	labels := func(lo, hi int64) []string {
		var out []string
		for _, tk := range (sizeTicks{}).Ticks(math.Log2(float64(lo))-0.3, math.Log2(float64(hi))+0.3) {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	assert.Equal(t, []string{"8KiB", "16KiB", "32KiB", "64KiB"}, labels(8<<10, 64<<10), "few sizes: every one")
	assert.Equal(t, []string{"32KiB", "256KiB", "2MiB", "16MiB", "128MiB", "1GiB"}, labels(8<<10, 1<<30), "bench's default range: every third, down from the largest")
	assert.Equal(t, []string{"512B", "1KiB", "2KiB"}, labels(512, 2<<10))
	assert.Len(t, (sizeTicks{}).Ticks(13-0.3, 30+0.3), 18, "a mark at every power of two")
}

func TestLatencyTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var out []string
		for _, tk := range (latencyTicks{}).Ticks(math.Log10(lo), math.Log10(hi)) {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	assert.Equal(t, []string{"5", "10", "20", "50", "100"}, labels(4, 150), "two decades: 1, 2, 5")
	assert.Equal(t, []string{"0.2", "0.5", "1", "2"}, labels(0.15, 3), "below 1 µs, no float noise")
	assert.Equal(t, []string{"1", "10", "100", "1000", "10000"}, labels(1, 20000), "more than three decades: powers of ten")
	assert.Equal(t, []string{"3", "4", "5", "6", "7", "8", "9", "10"}, labels(3, 11.7), "under a decade: every whole one")
}

func TestBandwidthTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var out []string
		for _, tk := range (bandwidthTicks{}).Ticks(lo, hi) {
			out = append(out, tk.Label)
		}
		return out
	}
	assert.Equal(t, []string{"0", "5", "10", "15", "20", "25"}, labels(0, 26))
	assert.Equal(t, []string{"0", "100", "200", "300", "400"}, labels(0, 420))
	assert.Equal(t, []string{"0.0", "0.5", "1.0", "1.5"}, labels(0, 1.6))
	assert.Empty(t, labels(1, 1), "an empty range")
}
