package timeline

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// SVGOptions tunes SVG.
type SVGOptions struct {
	Title string // drawn above the timeline when set
	Width int    // of the whole picture in px; 0 means 1100
}

// Layout, in px.
const (
	labelW      = 200 // the column of process and track names
	marginR     = 24
	axisH       = 34  // the time axis under the title
	procH       = 24  // a process's header row
	laneH       = 24  // one level of a track's slices
	asyncH      = 20  // one lane of a process's async slices
	gapH        = 10  // between processes
	charW       = 6.4 // a slice label's letter, generously
	legendCharW = 5.5
	titleH      = 28
	minSlice    = 1.5 // the narrowest slice drawn
)

// SVG draws f as a picture: a row per process (rank) with a track per
// thread (stream) holding its slices, labelled where they fit (every slice
// has a tooltip), a process's async slices in lanes under its tracks, and
// flows as arrows between the slices they bind to. Each op has a colour of
// its own, its hue family saying its class (Colours), and the key lists
// the ops by class.
func SVG(w io.Writer, f *File, opts SVGOptions) error {
	width := opts.Width
	if width == 0 {
		width = 1100
	}
	procNames, threadNames := f.Names()
	procIdx, threadIdx := f.sortIndexes()

	// Gather slices, async slices and flows.
	bySlice := map[Track][]Event{}
	type asyncSpan struct {
		b    Event
		end  Micros
		lane int
	}
	asyncBy := map[int][]*asyncSpan{}
	open := map[[2]string]*asyncSpan{} // (pid, id) -> begun
	flows := map[string][2]*Event{}
	var flowOrder []string
	procSet := map[int]bool{}
	var end Micros
	for i := range f.TraceEvents {
		e := &f.TraceEvents[i]
		key := [2]string{fmt.Sprint(e.Pid), e.ID}
		switch e.Ph {
		case "X":
			bySlice[Track{e.Pid, e.Tid}] = append(bySlice[Track{e.Pid, e.Tid}], *e)
			procSet[e.Pid] = true
			end = max(end, e.End())
		case "b":
			s := &asyncSpan{b: *e, end: e.Ts}
			open[key] = s
			asyncBy[e.Pid] = append(asyncBy[e.Pid], s)
			procSet[e.Pid] = true
		case "e":
			if s := open[key]; s != nil {
				s.end = e.Ts
				end = max(end, e.Ts)
				delete(open, key)
			}
		case "s", "f":
			p, ok := flows[e.ID]
			if !ok {
				flowOrder = append(flowOrder, e.ID)
			}
			if e.Ph == "s" {
				p[0] = e
			} else {
				p[1] = e
			}
			flows[e.ID] = p
		}
	}
	var start Micros = math.MaxInt64
	for _, evs := range bySlice {
		for _, e := range evs {
			start = min(start, e.Ts)
		}
	}
	for _, spans := range asyncBy {
		for _, s := range spans {
			start = min(start, s.b.Ts)
		}
	}
	if start > end {
		start, end = 0, 1000
	}
	span := float64(end - start)
	if span <= 0 {
		span = 1
	}
	chartW := float64(width - labelW - marginR)
	xOf := func(t Micros) float64 { return labelW + float64(t-start)/span*chartW }

	// Colours by op: a shade of its class's family each (colour.go).
	var all []Event
	for _, evs := range bySlice {
		all = append(all, evs...)
	}
	ops := colours(all)
	colour := map[string]string{}
	for _, c := range ops {
		colour[c.Name] = c.Colour
	}

	// Rows: processes in sort order, each with its tracks and async lanes.
	pids := make([]int, 0, len(procSet))
	for p := range procSet {
		pids = append(pids, p)
	}
	slices.SortFunc(pids, func(a, b int) int { return cmp.Or(cmp.Compare(procIdx[a], procIdx[b]), cmp.Compare(a, b)) })
	type row struct {
		track Track
		y     float64
		depth []int // by slice index in bySlice[track]
		lanes int
	}
	rows := map[Track]*row{}
	var b strings.Builder
	y := 8.0
	if opts.Title != "" {
		y += titleH
	}
	axisY := y + axisH - 8
	y += axisH
	var body strings.Builder
	for _, pid := range pids {
		name := procNames[pid]
		if name == "" {
			name = fmt.Sprintf("process %d", pid)
		}
		fmt.Fprintf(&body, `<rect x="0" y="%.1f" width="%d" height="%d" class="proc"/>`+"\n", y, width, procH)
		fmt.Fprintf(&body, `<text x="8" y="%.1f" class="pname">%s</text>`+"\n", y+procH-7, esc(name))
		y += procH
		var tids []int
		for tr := range bySlice {
			if tr.Pid == pid {
				tids = append(tids, tr.Tid)
			}
		}
		slices.SortFunc(tids, func(a, b int) int {
			return cmp.Or(cmp.Compare(threadIdx[Track{pid, a}], threadIdx[Track{pid, b}]), cmp.Compare(a, b))
		})
		for _, tid := range tids {
			tr := Track{pid, tid}
			evs := bySlice[tr]
			slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Or(cmp.Compare(a.Ts, b.Ts), cmp.Compare(b.Dur, a.Dur)) })
			r := &row{track: tr, y: y, depth: make([]int, len(evs))}
			var stack []Micros // ends of the open slices
			for i, e := range evs {
				for len(stack) > 0 && stack[len(stack)-1] <= e.Ts {
					stack = stack[:len(stack)-1]
				}
				r.depth[i] = len(stack)
				r.lanes = max(r.lanes, len(stack)+1)
				stack = append(stack, e.End())
			}
			rows[tr] = r
			h := float64(r.lanes * laneH)
			tname := threadNames[tr]
			if tname == "" {
				tname = fmt.Sprintf("thread %d", tid)
			}
			fmt.Fprintf(&body, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="sep"/>`+"\n", labelW, y+h, width-marginR, y+h)
			fmt.Fprintf(&body, `<text x="18" y="%.1f" class="tname">%s</text>`+"\n", y+laneH/2+4, esc(clip(tname, labelW-24)))
			for i, e := range evs {
				x0, x1 := xOf(e.Ts), xOf(e.End())
				sw := max(x1-x0, minSlice)
				sy := y + float64(r.depth[i]*laneH) + 3
				tip := fmt.Sprintf("%s%s\nstart %s µs, %s µs", e.Name, argString(e.Args["pos"]), fmtMicros(e.Ts-start), fmtMicros(e.Dur))
				fmt.Fprintf(&body, `<g><title>%s</title><rect x="%.2f" y="%.1f" width="%.2f" height="%d" rx="2" fill="%s" class="slice"/>`,
					esc(tip), x0, sy, sw, laneH-6, colour[e.Name])
				if label := clip(e.Name, sw-6); label != "" {
					cls := "slabel"
					if light(colour[e.Name]) {
						cls = "slabel dk" // dark letters on a light colour
					}
					fmt.Fprintf(&body, `<text x="%.2f" y="%.1f" class="%s">%s</text>`, x0+3, sy+laneH/2+1, cls, esc(label))
				}
				body.WriteString("</g>\n")
			}
			y += h
		}
		// Async slices in lanes: each takes the first lane free at its start.
		spans := asyncBy[pid]
		slices.SortStableFunc(spans, func(a, b *asyncSpan) int { return cmp.Compare(a.b.Ts, b.b.Ts) })
		var laneEnds []Micros
		for _, s := range spans {
			s.lane = -1
			for l, le := range laneEnds {
				if le <= s.b.Ts {
					s.lane, laneEnds[l] = l, s.end
					break
				}
			}
			if s.lane < 0 {
				s.lane = len(laneEnds)
				laneEnds = append(laneEnds, s.end)
			}
		}
		if len(laneEnds) > 0 {
			fmt.Fprintf(&body, `<text x="18" y="%.1f" class="tname">async (post → wait)</text>`+"\n", y+asyncH/2+4)
		}
		for _, s := range spans {
			x0, x1 := xOf(s.b.Ts), xOf(s.end)
			sw := max(x1-x0, minSlice)
			sy := y + float64(s.lane*asyncH) + 2
			tip := fmt.Sprintf("%s (async)%s\nposted %s µs, complete by %s µs", s.b.Name, argString(s.b.Args["pos"]), fmtMicros(s.b.Ts-start), fmtMicros(s.end-start))
			fmt.Fprintf(&body, `<g><title>%s</title><rect x="%.2f" y="%.1f" width="%.2f" height="%d" rx="3" fill="%s" class="async"/>`,
				esc(tip), x0, sy, sw, asyncH-4, colour[s.b.Name])
			if label := clip(s.b.Name+" (async)", sw-6); label != "" {
				fmt.Fprintf(&body, `<text x="%.2f" y="%.1f" class="alabel">%s</text>`, x0+3, sy+asyncH/2+2, esc(label))
			}
			body.WriteString("</g>\n")
		}
		y += float64(len(laneEnds)*asyncH) + gapH
	}
	// Flows: from the middle of the start's row to the end's, at their ts.
	for _, id := range flowOrder {
		p := flows[id]
		if p[0] == nil || p[1] == nil {
			continue
		}
		r0, r1 := rows[Track{p[0].Pid, p[0].Tid}], rows[Track{p[1].Pid, p[1].Tid}]
		if r0 == nil || r1 == nil {
			continue
		}
		x0, y0 := xOf(p[0].Ts), r0.y+laneH/2
		x1, y1 := xOf(p[1].Ts), r1.y+laneH/2
		dy := (y1 - y0) / 2
		fmt.Fprintf(&body, `<g><title>%s</title><path d="M%.2f %.1f C%.2f %.1f %.2f %.1f %.2f %.1f" class="flow" marker-end="url(#arrow)"/><circle cx="%.2f" cy="%.1f" r="2.5" class="flowdot"/></g>`+"\n",
			esc(p[0].Name+" (linked across ranks)"), x0, y0, x0, y0+dy, x1, y1-dy, x1, y1, x0, y0)
	}
	// The legend, then the op colours' key, each item after the last,
	// wrapping at the right edge.
	var key strings.Builder
	kx, ky := float64(labelW), y+18
	place := func(w float64) (float64, float64) {
		if kx+w > float64(width-marginR) && kx > labelW {
			kx, ky = labelW, ky+18
		}
		x := kx
		kx += w
		return x, ky
	}
	text := func(x, y float64, s string) {
		fmt.Fprintf(&key, `<text x="%.1f" y="%.1f" class="legend">%s</text>`+"\n", x, y, esc(s))
	}
	sliceText := "op on the host, its stream synchronised"
	if f.OtherData != nil && f.OtherData.TraceOverlap {
		sliceText = "op on the host: the time to enqueue it (--trace-overlap; GPU tracks: when it ran)"
	}
	for _, item := range []struct{ kind, text string }{
		{"slice", sliceText},
		{"async", "async op: post → the wait that saw it complete"},
		{"flow", "one collective call, linked across ranks"},
	} {
		x, y := place(32 + float64(len([]rune(item.text)))*legendCharW + 20)
		switch item.kind {
		case "slice":
			fmt.Fprintf(&key, `<rect x="%.1f" y="%.1f" width="26" height="12" rx="2" fill="%s"/>`, x, y-10, classShades[ClassCompute][0])
		case "async":
			fmt.Fprintf(&key, `<rect x="%.1f" y="%.1f" width="26" height="12" rx="3" fill="%s" class="async"/>`, x, y-10, classShades[ClassCompute][0])
		case "flow":
			fmt.Fprintf(&key, `<path d="M%.1f %.1f L%.1f %.1f" class="flow" marker-end="url(#arrow)"/>`, x, y-4, x+24, y-4)
		}
		text(x+32, y, item.text)
	}
	kx, ky = labelW, ky+18
	text(labelW, ky, "Hover a slice for its op, source position, start and duration.")
	kx, ky = labelW, ky+18
	text(labelW, ky, "Each op has a colour of its own; the hue says its kind: compute blue and green, communication orange and red,")
	kx, ky = labelW, ky+14
	text(labelW, ky, "memory purple, views brown and yellow, streams and sync grey.")
	// The key: each class present, its ops after it.
	kx, ky = labelW, ky+6
	for class := range numClasses {
		first := true
		for _, c := range ops {
			if c.Class != class {
				continue
			}
			if first {
				kx, ky = labelW, ky+18
				fmt.Fprintf(&key, `<text x="8" y="%.1f" class="legend kind">%s</text>`+"\n", ky, esc(class.String()))
				first = false
			}
			x, y := place(20 + float64(len([]rune(c.Name)))*legendCharW + 18)
			fmt.Fprintf(&key, `<rect x="%.1f" y="%.1f" width="14" height="12" rx="2" fill="%s"/>`, x, y-10, c.Colour)
			text(x+20, y, c.Name)
		}
	}
	height := ky + 14

	// Header: styles, title, axis.
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%.0f" viewBox="0 0 %d %.0f" font-family="Helvetica, Arial, sans-serif">`+"\n", width, height, width, height)
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="#333"/></marker></defs>` + "\n")
	b.WriteString(`<style>
.bg{fill:#fff}.proc{fill:#eef1f5}.pname{font-size:13px;font-weight:bold;fill:#222}.tname{font-size:11.5px;fill:#444}
.sep{stroke:#e3e3e3;stroke-width:1}.slice{stroke:#fff;stroke-width:0.5}.slabel{font-size:11px;fill:#fff}.slabel.dk{fill:#222}
.async{fill-opacity:0.35;stroke-width:1;stroke:#555;stroke-dasharray:3 2}.alabel{font-size:10.5px;fill:#222}
.axis{stroke:#999;stroke-width:1}.tick{font-size:10.5px;fill:#555}.grid{stroke:#f0f0f0;stroke-width:1}
.flow{fill:none;stroke:#333;stroke-width:1.3;stroke-opacity:0.8}.flowdot{fill:#333}.title{font-size:15px;font-weight:bold;fill:#222}.legend{font-size:11px;fill:#444}.kind{font-weight:bold}
</style>` + "\n")
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%.0f" class="bg"/>`+"\n", width, height)
	if opts.Title != "" {
		fmt.Fprintf(&b, `<text x="8" y="26" class="title">%s</text>`+"\n", esc(opts.Title))
	}
	step := niceStep(span / 1000 / 8) // µs per tick, about 8 ticks
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="axis"/>`+"\n", labelW, axisY, width-marginR, axisY)
	fmt.Fprintf(&b, `<text x="8" y="%.1f" class="tick">time (µs)</text>`+"\n", axisY-6)
	for t := 0.0; t <= span/1000+1e-9; t += step {
		x := labelW + t*1000/span*chartW
		fmt.Fprintf(&b, `<line x1="%.2f" y1="%.1f" x2="%.2f" y2="%.1f" class="grid"/>`, x, axisY, x, y)
		fmt.Fprintf(&b, `<line x1="%.2f" y1="%.1f" x2="%.2f" y2="%.1f" class="axis"/>`, x, axisY-4, x, axisY)
		fmt.Fprintf(&b, `<text x="%.2f" y="%.1f" text-anchor="middle" class="tick">%s</text>`+"\n", x, axisY-7, trimFloat(t))
	}
	b.WriteString(body.String())
	b.WriteString(key.String())
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceStep rounds a tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// fmtMicros writes ns as µs with three decimals.
func fmtMicros(m Micros) string {
	raw, _ := m.MarshalJSON()
	return string(raw)
}

// clip fits s in px pixels, with an ellipsis when cut; "" when not even a
// letter fits.
func clip(s string, px float64) string {
	n := int(px / charW)
	r := []rune(s)
	switch {
	case len(r) <= n:
		return s
	case n < 3:
		return ""
	}
	return string(r[:n-1]) + "…"
}

// argString is a tooltip's line for an arg, or "".
func argString(v any) string {
	if v == nil {
		return ""
	}
	return "\n" + fmt.Sprint(v)
}

func esc(s string) string { return html.EscapeString(s) }
