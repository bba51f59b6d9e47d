package benchplot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A substitute font may be wider than the one gonum laid the chart out
// with: the test sizes every text with a wide font's advance, 0.65 em a
// character, 0.8 em above the baseline and 0.25 em below.
const (
	wideEm    = 0.65
	ascentEm  = 0.8
	descentEm = 0.25
)

// affine is the SVG matrix(a b c d e f): x' = a x + c y + e, y' = b x + d y + f.
type affine struct{ a, b, c, d, e, f float64 }

var identity = affine{a: 1, d: 1}

// then is m applied after n: the transform of an element whose parent's
// is m and whose own is n.
func (m affine) then(n affine) affine {
	return affine{
		a: m.a*n.a + m.c*n.b, b: m.b*n.a + m.d*n.b,
		c: m.a*n.c + m.c*n.d, d: m.b*n.c + m.d*n.d,
		e: m.a*n.e + m.c*n.f + m.e, f: m.b*n.e + m.d*n.f + m.f,
	}
}

func (m affine) apply(x, y float64) (float64, float64) {
	return m.a*x + m.c*y + m.e, m.b*x + m.d*y + m.f
}

var transformFunc = regexp.MustCompile(`(\w+)\s*\(([^)]*)\)`)

// parseTransform reads an SVG transform list (translate, scale, rotate,
// matrix: what vgsvg writes).
func parseTransform(s string) (affine, error) {
	m := identity
	for _, f := range transformFunc.FindAllStringSubmatch(s, -1) {
		var args []float64
		for _, a := range strings.FieldsFunc(f[2], func(r rune) bool { return r == ',' || r == ' ' }) {
			v, err := strconv.ParseFloat(a, 64)
			if err != nil {
				return m, fmt.Errorf("transform %q: %v", s, err)
			}
			args = append(args, v)
		}
		arg := func(i int, def float64) float64 {
			if i < len(args) {
				return args[i]
			}
			return def
		}
		var n affine
		switch f[1] {
		case "translate":
			n = affine{a: 1, d: 1, e: arg(0, 0), f: arg(1, 0)}
		case "scale":
			n = affine{a: arg(0, 1), d: arg(1, arg(0, 1))}
		case "rotate":
			if len(args) != 1 {
				return m, fmt.Errorf("transform %q: rotate about a point", s)
			}
			r := args[0] * math.Pi / 180
			n = affine{a: math.Cos(r), b: math.Sin(r), c: -math.Sin(r), d: math.Cos(r)}
		case "matrix":
			if len(args) != 6 {
				return m, fmt.Errorf("transform %q: matrix of %d numbers", s, len(args))
			}
			n = affine{args[0], args[1], args[2], args[3], args[4], args[5]}
		default:
			return m, fmt.Errorf("transform %q: unknown function %s", s, f[1])
		}
		m = m.then(n)
	}
	return m, nil
}

// svgText is a text element as a viewer would place it: its corners, in
// the coordinates of the viewBox, with a wide substitute font.
type svgText struct {
	text       string
	family     string // the font-family in effect (an attribute or the style's)
	minX, maxX float64
	minY, maxY float64
	size       float64
	anchor     string
}

type svgFonts struct {
	viewBox  [4]float64
	texts    []svgText
	families []string // every font-family named, in attributes, styles and @font-face
	embedded []string // the families of @font-face rules with a src
}

var (
	styleProp  = regexp.MustCompile(`(?:^|;)\s*([\w-]+)\s*:\s*([^;]*)`)
	fontFaceRe = regexp.MustCompile(`@font-face\s*\{[^}]*font-family\s*:\s*([^;]*);[^}]*src\s*:`)
	cssFamily  = regexp.MustCompile(`font-family\s*:\s*([^;}]*)`)
)

// parseSVGText walks the SVG with the transforms and inherited font
// properties of each element, and returns every text's extent.
func parseSVGText(t *testing.T, data []byte) svgFonts {
	t.Helper()
	var doc svgFonts
	type frame struct {
		m                    affine
		family, anchor, size string
	}
	stack := []frame{{m: identity, anchor: "start", size: "16px"}}
	dec := xml.NewDecoder(bytes.NewReader(data))
	var text *strings.Builder
	var cur frame
	var tx, ty float64
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the SVG is not well-formed XML")
		switch tok := tok.(type) {
		case xml.StartElement:
			top := stack[len(stack)-1]
			f := top
			props := map[string]string{}
			for _, a := range tok.Attr {
				props[a.Name.Local] = a.Value
			}
			if st, ok := props["style"]; ok {
				for _, p := range styleProp.FindAllStringSubmatch(st, -1) {
					props[p[1]] = strings.TrimSpace(p[2])
				}
			}
			if tr, ok := props["transform"]; ok {
				m, err := parseTransform(tr)
				require.NoError(t, err)
				f.m = top.m.then(m)
			}
			if v, ok := props["font-family"]; ok {
				f.family = v
				doc.families = append(doc.families, v)
			}
			if v, ok := props["text-anchor"]; ok {
				f.anchor = v
			}
			if v, ok := props["font-size"]; ok {
				f.size = v
			}
			if tok.Name.Local == "svg" {
				var vb [4]float64
				for i, s := range strings.Fields(strings.ReplaceAll(props["viewBox"], ",", " ")) {
					if i < 4 {
						vb[i], _ = strconv.ParseFloat(s, 64)
					}
				}
				doc.viewBox = vb
			}
			if tok.Name.Local == "text" {
				text, cur = &strings.Builder{}, f
				tx, _ = strconv.ParseFloat(props["x"], 64)
				ty, _ = strconv.ParseFloat(props["y"], 64)
			}
			if tok.Name.Local == "style" {
				text, cur = &strings.Builder{}, f
			}
			stack = append(stack, f)
		case xml.CharData:
			if text != nil {
				text.Write(tok)
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
			switch tok.Name.Local {
			case "style":
				css := text.String()
				for _, m := range cssFamily.FindAllStringSubmatch(css, -1) {
					doc.families = append(doc.families, strings.TrimSpace(m[1]))
				}
				for _, m := range fontFaceRe.FindAllStringSubmatch(css, -1) {
					doc.embedded = append(doc.embedded, unquote(strings.TrimSpace(m[1])))
				}
				text = nil
			case "text":
				s := text.String()
				text = nil
				size, err := strconv.ParseFloat(strings.TrimSuffix(cur.size, "px"), 64)
				require.NoError(t, err, "font-size %q of %q", cur.size, s)
				w := wideEm * size * float64(len([]rune(s)))
				x0 := tx
				switch cur.anchor {
				case "middle":
					x0 -= w / 2
				case "end":
					x0 -= w
				}
				st := svgText{text: s, family: cur.family, size: size, anchor: cur.anchor,
					minX: math.Inf(1), maxX: math.Inf(-1), minY: math.Inf(1), maxY: math.Inf(-1)}
				for _, c := range [][2]float64{{x0, ty - ascentEm*size}, {x0 + w, ty - ascentEm*size}, {x0, ty + descentEm*size}, {x0 + w, ty + descentEm*size}} {
					x, y := cur.m.apply(c[0], c[1])
					st.minX, st.maxX = min(st.minX, x), max(st.maxX, x)
					st.minY, st.maxY = min(st.minY, y), max(st.maxY, y)
				}
				doc.texts = append(doc.texts, st)
			}
		}
	}
	return doc
}

func unquote(s string) string { return strings.Trim(s, `"'`) }

var genericFamilies = map[string]bool{"serif": true, "sans-serif": true, "monospace": true, "cursive": true, "fantasy": true, "system-ui": true,
	"ui-serif": true, "ui-sans-serif": true, "ui-monospace": true}

// svgFontProblems lists what a viewer without the fonts would get wrong:
// a font-family that neither ends in a generic family nor names an
// embedded font, a text with no font-family, and a text that runs out of
// the viewBox in a wide substitute font.
func svgFontProblems(doc svgFonts) []string {
	var out []string
	if len(doc.texts) == 0 || doc.viewBox[2] == 0 {
		return []string{"no text or no viewBox"}
	}
	embedded := map[string]bool{}
	for _, f := range doc.embedded {
		embedded[f] = true
	}
	seen := map[string]bool{}
	for _, fam := range doc.families {
		if seen[fam] {
			continue
		}
		seen[fam] = true
		names := strings.Split(fam, ",")
		last := unquote(strings.TrimSpace(names[len(names)-1]))
		first := unquote(strings.TrimSpace(names[0]))
		if !genericFamilies[last] && !embedded[first] {
			out = append(out, fmt.Sprintf("font-family %q neither ends in a generic family nor is embedded", fam))
		}
	}
	x0, y0, x1, y1 := doc.viewBox[0], doc.viewBox[1], doc.viewBox[0]+doc.viewBox[2], doc.viewBox[1]+doc.viewBox[3]
	for _, tx := range doc.texts {
		if tx.family == "" {
			out = append(out, fmt.Sprintf("%q has no font-family", tx.text))
		}
		if tx.minX < x0 || tx.maxX > x1 || tx.minY < y0 || tx.maxY > y1 {
			out = append(out, fmt.Sprintf("%q (%gpx, anchor %s) spans x %.1f..%.1f, y %.1f..%.1f in a wide font: outside the viewBox %g %g %g %g",
				tx.text, tx.size, tx.anchor, tx.minX, tx.maxX, tx.minY, tx.maxY, doc.viewBox[0], doc.viewBox[1], doc.viewBox[2], doc.viewBox[3]))
		}
	}
	return out
}

// checkSVGFonts fails t with every problem of svgFontProblems.
func checkSVGFonts(t *testing.T, name string, data []byte) {
	t.Helper()
	for _, p := range svgFontProblems(parseSVGText(t, data)) {
		t.Errorf("%s: %s", name, p)
	}
}

// sizeChart is testChart over bytes from..to, with long series names: the
// last size label sits at the right edge of the latency panel.
func sizeChart(from, to int64) Chart {
	c := Chart{Title: "hirrun bench: NVIDIA H100 80GB HBM3 × 2, 2026-11-27"}
	for _, op := range []string{"all_reduce bf16", "reduce_scatter bf16"} {
		r := Row{Title: op}
		for k, algo := range []string{"one_shot", "two_shot", "ring", "nccl"} {
			for _, graph := range []bool{false, true} {
				s := Series{Name: algo, Key: algo, Dashed: graph}
				if graph {
					s.Name += " (graph)"
				}
				for b := from; b <= to; b *= 2 {
					us := 5 + float64(k) + float64(b)/(300e3+float64(k)*20e3)
					s.Points = append(s.Points, Point{Bytes: b, Micros: us, BusGBps: float64(b) / us / 1e3})
				}
				r.Series = append(r.Series, s)
			}
		}
		c.Rows = append(c.Rows, r)
	}
	return c
}

func TestSVGTextFitsWithSubstituteFont(t *testing.T) {
	charts := map[string]Chart{"testChart": testChart()}
	for _, r := range [][2]int64{{8 << 10, 64 << 20}, {8 << 10, 128 << 20}, {8 << 10, 1 << 30}, {8, 512 << 10}, {1 << 10, 16 << 30}, {4, 8}} {
		charts[fmt.Sprintf("%s..%s", SizeWord(r[0]), SizeWord(r[1]))] = sizeChart(r[0], r[1])
	}
	for name, c := range charts {
		var out bytes.Buffer
		require.NoError(t, Write(&out, SVG, c), name)
		checkSVGFonts(t, name, out.Bytes())
	}
}

// docs/images/bench-2xH100.svg is drawn by this package (hirrun bench
// --from docs/bench/h100-x2.json --plot ...): it too must fit.
func TestDocsChartFitsWithSubstituteFont(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "images", "bench-2xH100.svg")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	checkSVGFonts(t, path, data)
}

// The checker itself: a font named without a fallback, and a label that
// runs past the right edge in a wide font, are caught; the same text in a
// stack ending in sans-serif, anchored at its end, passes.
func TestSVGFontProblemsCatches(t *testing.T) {
	svg := func(family, anchor string) []byte {
		return []byte(`<svg viewBox="0 0 100 50" xmlns="http://www.w3.org/2000/svg"><g transform="scale(1, -1) translate(0, -50)">` +
			`<text x="80" y="-20" transform="scale(1, -1)" style="font-family:` + family + `;font-size:10px` + anchor + `">64MiB</text></g></svg>`)
	}
	doc := parseSVGText(t, svg("Liberation Serif", ""))
	require.Len(t, doc.texts, 1)
	tx := doc.texts[0]
	assert.InDelta(t, 80, tx.minX, 1e-9)
	assert.InDelta(t, 80+5*6.5, tx.maxX, 1e-9, "five characters of 0.65 em at 10px")
	assert.InDelta(t, 30-8, tx.minY, 1e-9, "the baseline 20 above the bottom, 0.8 em above it")
	assert.InDelta(t, 30+2.5, tx.maxY, 1e-9, "0.25 em below the baseline")
	problems := svgFontProblems(doc)
	require.Len(t, problems, 2, "%q", problems)
	assert.Contains(t, problems[0], `font-family "Liberation Serif" neither ends in a generic family`)
	assert.Contains(t, problems[1], `"64MiB" (10px, anchor start) spans x 80.0..112.5`)

	assert.Empty(t, svgFontProblems(parseSVGText(t, svg("'Liberation Sans', Arial, sans-serif", ";text-anchor:end"))))

	// A rotated label (a y axis's) is measured along its baseline: up.
	rot := []byte(`<svg viewBox="0 0 100 100" xmlns="http://www.w3.org/2000/svg"><g transform="translate(10, 50)"><g transform="rotate(-90)">` +
		`<text x="0" y="0" style="font-family:serif;font-size:10px">abcd</text></g></g></svg>`)
	doc = parseSVGText(t, rot)
	require.Len(t, doc.texts, 1)
	tx = doc.texts[0]
	assert.InDelta(t, 50-26, tx.minY, 1e-9, "four characters up from y=50")
	assert.InDelta(t, 50, tx.maxY, 1e-9)
	assert.InDelta(t, 10-8, tx.minX, 1e-9, "the ascent to the left")
	assert.InDelta(t, 10+2.5, tx.maxX, 1e-9)
}
