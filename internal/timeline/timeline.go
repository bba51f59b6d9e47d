// Package timeline reads and writes the Chrome trace event format that
// `hirrun run --trace` writes (chrome://tracing and ui.perfetto.dev load
// it), with exact times, and renders a timeline to SVG (svg.go).
//
// Times are integer nanoseconds (Micros) written as microseconds with three
// decimals, "12.345", so a file's slices nest or are disjoint exactly as
// they were recorded, with no float rounding.
package timeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Micros is a time or duration in integer nanoseconds, written in JSON as
// microseconds with three decimals (the trace format's unit).
type Micros int64

// MarshalJSON writes m as µs with exactly three decimals.
func (m Micros) MarshalJSON() ([]byte, error) {
	v := int64(m)
	sign := ""
	if v < 0 {
		if v == math.MinInt64 {
			return nil, errors.New("timeline: time out of range")
		}
		sign, v = "-", -v
	}
	return fmt.Appendf(nil, "%s%d.%03d", sign, v/1000, v%1000), nil
}

// UnmarshalJSON reads a number of µs: a plain decimal with at most three
// decimals exactly, anything else (an exponent, more decimals) rounded to
// the nearest ns.
func (m *Micros) UnmarshalJSON(b []byte) error {
	s := string(b)
	if ns, ok := exactMicros(s); ok {
		*m = Micros(ns)
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("timeline: %q is not a time in µs", s)
	}
	*m = Micros(math.Round(f * 1e3))
	return nil
}

// exactMicros parses "[-]D[.DDD]" into ns.
func exactMicros(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 3 || strings.ContainsAny(whole+frac, "eE+-") {
		return 0, false
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/1000-1 {
		return 0, false
	}
	ns := w * 1000
	if frac != "" {
		f, err := strconv.ParseInt(frac+strings.Repeat("0", 3-len(frac)), 10, 64)
		if err != nil {
			return 0, false
		}
		ns += f
	}
	if neg {
		ns = -ns
	}
	return ns, true
}

// Event is one record of the trace event format. Ph says which:
//
//	"X"      a slice on thread Tid of process Pid, from Ts for Dur
//	"M"      metadata: Name "process_name" / "thread_name" (Args["name"]),
//	         "process_sort_index" / "thread_sort_index" (Args["sort_index"])
//	"s", "f" a flow from the slice enclosing Ts on one thread to the slice
//	         enclosing Ts on another (Bp "e"), the pair sharing ID
//	"b", "e" the start and end of an async slice of process Pid (ID)
type Event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   Micros         `json:"ts"`
	Dur  Micros         `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	ID   string         `json:"id,omitempty"`
	Bp   string         `json:"bp,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// End is an X slice's end, Ts+Dur.
func (e *Event) End() Micros { return e.Ts + e.Dur }

// File is a whole trace: {"traceEvents": [...], "displayTimeUnit": "ns"},
// and how it was recorded ("otherData", which viewers show as metadata).
type File struct {
	TraceEvents     []Event    `json:"traceEvents"`
	DisplayTimeUnit string     `json:"displayTimeUnit,omitempty"`
	OtherData       *OtherData `json:"otherData,omitempty"`
}

// OtherData says how a trace was recorded.
type OtherData struct {
	// TraceOverlap: the ops were not waited for one by one (hirrun run
	// --trace-overlap), so a host slice is the time to enqueue the op and
	// only the GPU tracks say when its work ran.
	TraceOverlap bool `json:"trace_overlap,omitempty"`
}

// Read parses a trace file.
func Read(r io.Reader) (*File, error) {
	var f File
	if err := json.NewDecoder(r).Decode(&f); err != nil {
		return nil, fmt.Errorf("not a trace: %w", err)
	}
	return &f, nil
}

// Write writes f as JSON, one event a line (diffs and greps read better).
func Write(w io.Writer, f *File) error {
	var b strings.Builder
	b.WriteString("{\"displayTimeUnit\":")
	unit, _ := json.Marshal(f.DisplayTimeUnit)
	b.Write(unit)
	if f.OtherData != nil {
		other, err := json.Marshal(f.OtherData)
		if err != nil {
			return err
		}
		b.WriteString(",\"otherData\":")
		b.Write(other)
	}
	b.WriteString(",\"traceEvents\":[")
	for i := range f.TraceEvents {
		raw, err := json.Marshal(&f.TraceEvents[i])
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n")
		b.Write(raw)
	}
	b.WriteString("\n]}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// Track names one thread (a stream) of one process (a rank).
type Track struct{ Pid, Tid int }

// Names returns the process and thread names the metadata events give.
func (f *File) Names() (procs map[int]string, threads map[Track]string) {
	procs, threads = map[int]string{}, map[Track]string{}
	for _, e := range f.TraceEvents {
		if e.Ph != "M" {
			continue
		}
		name, _ := e.Args["name"].(string)
		switch e.Name {
		case "process_name":
			procs[e.Pid] = name
		case "thread_name":
			threads[Track{e.Pid, e.Tid}] = name
		}
	}
	return procs, threads
}

// sortIndexes returns the processes' and threads' sort indexes.
func (f *File) sortIndexes() (procs map[int]float64, threads map[Track]float64) {
	procs, threads = map[int]float64{}, map[Track]float64{}
	for _, e := range f.TraceEvents {
		if e.Ph != "M" {
			continue
		}
		idx, ok := e.Args["sort_index"].(float64)
		if !ok {
			if i, isInt := e.Args["sort_index"].(int); isInt {
				idx, ok = float64(i), true
			}
		}
		if !ok {
			continue
		}
		switch e.Name {
		case "process_sort_index":
			procs[e.Pid] = idx
		case "thread_sort_index":
			threads[Track{e.Pid, e.Tid}] = idx
		}
	}
	return procs, threads
}
