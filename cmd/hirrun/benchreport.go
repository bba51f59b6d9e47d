package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/hirlab/hir/runtime/cuda/cudabench"
)

// The figures of `hirrun bench` as records: what --format csv and json
// write and --from reads back. The measuring (cudabench) knows nothing of
// them, so they are tested here with recorded figures. The field names
// are documented in docs/COLLECTIVES.md and stay as they are; a change of
// a name or a meaning makes a new benchFormatVersion.

// benchFormatVersion names the layout of --format json.
const benchFormatVersion = "hir-bench/1"

// benchReport is one run: the machine and a record per figure.
type benchReport struct {
	Format     string        `json:"format"`
	Device     string        `json:"device"`
	World      int           `json:"world"`
	Graph      bool          `json:"graph"`
	Created    string        `json:"created"`
	HirVersion string        `json:"hir_version"`
	Records    []benchRecord `json:"records"`
}

// benchRecord is one figure. Latencies are what was measured (to the
// nanosecond); the bandwidths and the fastest flags follow from them and
// are worked out again when a file is read.
type benchRecord struct {
	Op             string   `json:"op"`
	DType          string   `json:"dtype"`
	World          int      `json:"world"`
	SizeBytes      int64    `json:"size_bytes"`
	Algo           string   `json:"algo"`
	Iters          int      `json:"iters"`
	LatencyUs      float64  `json:"latency_us"`
	AlgBwGBps      float64  `json:"algbw_GBps"`
	BusBwGBps      float64  `json:"busbw_GBps"`
	GraphLatencyUs *float64 `json:"graph_latency_us"` // null without --graph
	GraphBusBwGBps *float64 `json:"graph_busbw_GBps"`
	Fastest        bool     `json:"fastest"`          // the lowest latency_us of its op, dtype and size
	FastestInGraph bool     `json:"fastest_in_graph"` // the lowest graph_latency_us of them
}

// csvHeader is the first line of --format csv: the JSON names, in order.
var csvHeader = []string{"op", "dtype", "world", "size_bytes", "algo", "iters", "latency_us", "algbw_GBps", "busbw_GBps", "graph_latency_us", "graph_busbw_GBps", "fastest", "fastest_in_graph"}

// roundNs keeps a time in µs to the nanosecond: finer is noise, and a
// file read back then gives the same bandwidths.
func roundNs(us float64) float64 { return math.Round(us*1e3) / 1e3 }

func round3(x float64) float64 { return math.Round(x*1e3) / 1e3 }

// newBenchReport makes the records of figs, in their order.
func newBenchReport(device string, world int, graph bool, figs []cudabench.CollFigure, created, version string) *benchReport {
	r := &benchReport{Format: benchFormatVersion, Device: device, World: world, Graph: graph, Created: created, HirVersion: version, Records: []benchRecord{}}
	for _, f := range figs {
		f.Micros, f.GraphMicros = roundNs(f.Micros), roundNs(f.GraphMicros)
		rec := benchRecord{
			Op: f.Op, DType: f.DType, World: f.World, SizeBytes: f.Bytes, Algo: f.Algo, Iters: f.Iters,
			LatencyUs: f.Micros, AlgBwGBps: round3(algGBps(f.Bytes, f.Micros)), BusBwGBps: round3(f.BusGBps()),
		}
		if f.GraphMicros > 0 {
			g := f
			g.Micros = f.GraphMicros
			us, bw := f.GraphMicros, round3(g.BusGBps())
			rec.GraphLatencyUs, rec.GraphBusBwGBps = &us, &bw
		}
		r.Records = append(r.Records, rec)
	}
	markFastest(r.Records)
	return r
}

// algGBps is the algorithm bandwidth as nccl-tests defines it: bytes/time.
func algGBps(bytes int64, us float64) float64 {
	if us <= 0 {
		return 0
	}
	return float64(bytes) / (us * 1e-6) / 1e9
}

// markFastest sets Fastest and FastestInGraph: the first record of the
// lowest time of each op, dtype and size (as the table's "fastest").
func markFastest(recs []benchRecord) {
	type key struct {
		op, dt string
		bytes  int64
	}
	best, bestGraph := map[key]int{}, map[key]int{}
	for i, r := range recs {
		k := key{r.Op, r.DType, r.SizeBytes}
		if b, ok := best[k]; !ok || r.LatencyUs < recs[b].LatencyUs {
			best[k] = i
		}
		if g, ok := bestGraph[k]; r.GraphLatencyUs != nil && (!ok || *r.GraphLatencyUs < *recs[g].GraphLatencyUs) {
			bestGraph[k] = i
		}
	}
	for i := range recs {
		recs[i].Fastest, recs[i].FastestInGraph = false, false
	}
	for _, i := range best {
		recs[i].Fastest = true
	}
	for _, i := range bestGraph {
		recs[i].FastestInGraph = true
	}
}

// figures are the report's records as cudabench measures them, for the
// table and the chart.
func (r *benchReport) figures() []cudabench.CollFigure {
	figs := make([]cudabench.CollFigure, len(r.Records))
	for i, rec := range r.Records {
		figs[i] = cudabench.CollFigure{Op: rec.Op, Algo: rec.Algo, DType: rec.DType, World: rec.World, Bytes: rec.SizeBytes, Iters: rec.Iters, Micros: rec.LatencyUs}
		if rec.GraphLatencyUs != nil {
			figs[i].GraphMicros = *rec.GraphLatencyUs
		}
	}
	return figs
}

func writeBenchJSON(w io.Writer, r *benchReport) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func writeBenchCSV(w io.Writer, r *benchReport) error {
	cw := csv.NewWriter(w)
	num := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	opt := func(x *float64) string {
		if x == nil {
			return ""
		}
		return num(*x)
	}
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, rec := range r.Records {
		row := []string{rec.Op, rec.DType, strconv.Itoa(rec.World), strconv.FormatInt(rec.SizeBytes, 10), rec.Algo, strconv.Itoa(rec.Iters),
			num(rec.LatencyUs), num(rec.AlgBwGBps), num(rec.BusBwGBps), opt(rec.GraphLatencyUs), opt(rec.GraphBusBwGBps),
			strconv.FormatBool(rec.Fastest), strconv.FormatBool(rec.FastestInGraph)}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// readBenchReport reads what --format json wrote (name is for messages):
// the measured fields are checked and the others worked out again.
func readBenchReport(name string, data []byte) (*benchReport, error) {
	var r benchReport
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, jsonError(name, data, err)
	}
	if r.Format != benchFormatVersion {
		return nil, fmt.Errorf("%s: not a file `hirrun bench --format json` wrote (\"format\" is %q, not %q)", name, r.Format, benchFormatVersion)
	}
	if r.World < 1 {
		return nil, fmt.Errorf("%s: \"world\" must be at least 1, not %d", name, r.World)
	}
	if len(r.Records) == 0 {
		return nil, fmt.Errorf("%s: no records", name)
	}
	seen := map[string]int{}
	for i, rec := range r.Records {
		what := fmt.Sprintf("%s: record %d (%s %s %s algo=%s)", name, i+1, rec.Op, rec.DType, sizeWord(rec.SizeBytes), rec.Algo)
		if err := checkBenchRecord(rec, r.World); err != nil {
			return nil, fmt.Errorf("%s: %v", what, err)
		}
		k := fmt.Sprint(rec.Op, rec.DType, rec.SizeBytes, rec.Algo)
		if j, dup := seen[k]; dup {
			return nil, fmt.Errorf("%s: the same figure as record %d", what, j+1)
		}
		seen[k] = i
	}
	return newBenchReport(r.Device, r.World, r.Graph, r.figures(), r.Created, r.HirVersion), nil
}

func checkBenchRecord(rec benchRecord, world int) error {
	positive := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) }
	switch {
	case rec.Op == "" || rec.DType == "" || rec.Algo == "":
		return errors.New(`"op", "dtype" and "algo" must be named`)
	case rec.World != world:
		return fmt.Errorf("\"world\" is %d, but the run's is %d", rec.World, world)
	case rec.SizeBytes <= 0:
		return fmt.Errorf("\"size_bytes\" must be positive, not %d", rec.SizeBytes)
	case rec.Iters < 0:
		return fmt.Errorf("\"iters\" must not be negative, not %d", rec.Iters)
	case !positive(rec.LatencyUs):
		return fmt.Errorf("\"latency_us\" must be a positive time, not %v", rec.LatencyUs)
	case rec.GraphLatencyUs != nil && !positive(*rec.GraphLatencyUs):
		return fmt.Errorf("\"graph_latency_us\" must be a positive time or null, not %v", *rec.GraphLatencyUs)
	}
	return nil
}

// jsonError says where in data a decoding error is, as file:line:col.
func jsonError(name string, data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var off int64 = -1
	msg := err.Error()
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
		what := "the file"
		if typ.Field != "" {
			what = strconv.Quote(typ.Field)
		}
		msg = fmt.Sprintf("%s must be a JSON %s, not %s", what, jsonKind(typ.Type), typ.Value)
	}
	if off < 0 {
		return fmt.Errorf("%s: %v", name, msg)
	}
	// Offset counts the bytes read, the wrong one (or a wrong value's
	// last) included: that byte's line and column.
	before := string(data[:min(off, int64(len(data)))])
	line := 1 + strings.Count(before, "\n")
	col := len(before) - strings.LastIndexByte(before, '\n') - 1
	return fmt.Errorf("%s:%d:%d: %s", name, line, max(col, 1), msg)
}

// jsonKind is what JSON calls the values that decode into t.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return "number"
}

// buildVersion is hir's version as `hirrun version` prints it.
func buildVersion() string {
	var b strings.Builder
	bi, ok := debug.ReadBuildInfo()
	writeBuildVersion(&b, bi, ok)
	line, _, _ := strings.Cut(b.String(), "\n")
	return strings.TrimPrefix(line, "hir ")
}
