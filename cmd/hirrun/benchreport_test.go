package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/runtime/cuda/cudabench"
)

// hirrun bench's records (--format csv, json), read back (--from) and
// drawn (--plot), from figures made up here: the GPU run measures real
// ones, which go through the same code once measured.

// recordedFigures is a --graph run of 2 ranks, all_reduce and all_gather
// from 8 KiB to 256 KiB, each figure a + bytes/bandwidth to the
// nanosecond (as a saved file holds them): NCCL is fastest at 256 KiB of
// all_reduce, one_shot below, and copy_engine in a graph at 256 KiB of
// all_gather.
func recordedFigures() []cudabench.CollFigure {
	type model struct {
		algo          string
		a, gbps, gA   float64 // µs, GB/s, µs in a graph
		eagerOnlyFrom int64   // 0
	}
	ops := []struct {
		op     string
		models []model
	}{
		{"all_reduce", []model{{algo: "one_shot", a: 5.2, gbps: 40, gA: 3.3}, {algo: "two_shot", a: 7.6, gbps: 120, gA: 6.9}, {algo: "nccl", a: 7.8, gbps: 150, gA: 6.4}}},
		{"all_gather", []model{{algo: "one_shot", a: 4.9, gbps: 90, gA: 3.1}, {algo: "copy_engine", a: 9.5, gbps: 300, gA: 4.2}, {algo: "nccl", a: 7.1, gbps: 140, gA: 6.0}}},
	}
	var figs []cudabench.CollFigure
	for size := int64(8 << 10); size <= 256<<10; size *= 2 {
		for _, o := range ops {
			for _, m := range o.models {
				us := m.a + float64(size)/(m.gbps*1e3)
				figs = append(figs, cudabench.CollFigure{
					Op: o.op, Algo: m.algo, DType: "bf16", World: 2, Bytes: size, Iters: 300,
					Micros: math.Round(us*1e3) / 1e3, GraphMicros: math.Round((m.gA+float64(size)/(m.gbps*1e3))*1e3) / 1e3,
				})
			}
		}
	}
	return figs
}

const (
	testCreated = "2026-11-25T09:00:00Z"
	testVersion = "v0.0.0-test (rev 0123456789abcdef)"
)

func recordedReport() *benchReport {
	return newBenchReport("GPU X", 2, true, recordedFigures(), testCreated, testVersion)
}

var benchGoldens = map[string]string{
	"table": "testdata/bench/report.txt",
	"csv":   "testdata/bench/report.csv",
	"json":  "testdata/bench/report.json",
}

// TestBenchFormatsGolden: what each --format prints of the recorded run.
// Run `go test ./cmd/hirrun -run BenchFormatsGolden -update` to rewrite
// testdata/bench/report.*.
func TestBenchFormatsGolden(t *testing.T) {
	for format, golden := range benchGoldens {
		t.Run(format, func(t *testing.T) {
			var out, errb bytes.Buffer
			c := &cli{stdout: &out, stderr: &errb}
			rep := recordedReport()
			require.Equal(t, exitOK, c.emitBench(&benchOutput{format: format}, rep, rep.figures()), "stderr: %s", errb.String())
			assert.Empty(t, errb.String(), "stderr")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
				require.NoError(t, os.WriteFile(golden, out.Bytes(), 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run `go test ./cmd/hirrun -run BenchFormatsGolden -update` to create it")
			assert.Empty(t, cmp.Diff(string(want), out.String()), "output differs from %s (run with -update to accept it) (-want +got)", golden)
		})
	}
}

// TestBenchFromGolden: --from the saved json prints what the run printed,
// in every format (the json itself byte for byte).
func TestBenchFromGolden(t *testing.T) {
	for format, golden := range benchGoldens {
		r := hirrun("bench", "--from", benchGoldens["json"], "--format", format)
		expectCode(t, r, exitOK)
		assert.Empty(t, r.stderr, "stderr")
		want, err := os.ReadFile(golden)
		require.NoError(t, err)
		assert.Empty(t, cmp.Diff(string(want), r.stdout), "--from %s --format %s differs from %s (-want +got)", benchGoldens["json"], format, golden)
	}
}

// The derived fields against nccl-tests' definitions, worked out here.
func TestBenchRecordFigures(t *testing.T) {
	rep := recordedReport()
	find := func(op, algo string, bytes int64) benchRecord {
		for _, r := range rep.Records {
			if r.Op == op && r.Algo == algo && r.SizeBytes == bytes {
				return r
			}
		}
		t.Fatalf("no record %s %s %d", op, algo, bytes)
		return benchRecord{}
	}
	// all_reduce, 2 ranks: busbw = algbw × 2(D−1)/D = algbw.
	ar := find("all_reduce", "one_shot", 8<<10)
	assert.Equal(t, 5.405, ar.LatencyUs, "5.2 + 8192/40e3")
	assert.InDelta(t, 8192/5.405e-6/1e9, ar.AlgBwGBps, 0.0005, "algbw")
	assert.Equal(t, ar.AlgBwGBps, ar.BusBwGBps, "all_reduce of 2: busbw = algbw")
	require.NotNil(t, ar.GraphLatencyUs)
	assert.Equal(t, 3.505, *ar.GraphLatencyUs)
	assert.InDelta(t, 8192/3.505e-6/1e9, *ar.GraphBusBwGBps, 0.0005, "graph busbw")
	// all_gather, 2 ranks: busbw = algbw × (D−1)/D.
	ag := find("all_gather", "copy_engine", 64<<10)
	assert.InDelta(t, ag.AlgBwGBps/2, ag.BusBwGBps, 0.001, "all_gather of 2: busbw = algbw/2")

	// One fastest per op and size, eager and in a graph: the lowest time.
	fastest, inGraph := map[string]string{}, map[string]string{}
	for _, r := range rep.Records {
		k := r.Op + " " + sizeWord(r.SizeBytes)
		if r.Fastest {
			assert.NotContains(t, fastest, k, "two fastest")
			fastest[k] = r.Algo
		}
		if r.FastestInGraph {
			assert.NotContains(t, inGraph, k, "two fastest in a graph")
			inGraph[k] = r.Algo
		}
	}
	assert.Len(t, fastest, 12, "6 sizes × 2 collectives")
	assert.Equal(t, "one_shot", fastest["all_reduce 8KiB"])
	assert.Equal(t, "nccl", fastest["all_reduce 256KiB"], "7.8 + 262144/150e3 = 9.548 < one_shot's 11.754, two_shot's 9.785")
	assert.Equal(t, "copy_engine", inGraph["all_gather 256KiB"], "4.2 + 0.874 < one_shot's 3.1 + 2.913")
	assert.Equal(t, "one_shot", inGraph["all_gather 8KiB"])
}

func TestBenchCSVColumns(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, writeBenchCSV(&out, recordedReport()))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 1+36, "a header and a line per figure")
	assert.Equal(t, "op,dtype,world,size_bytes,algo,iters,latency_us,algbw_GBps,busbw_GBps,graph_latency_us,graph_busbw_GBps,fastest,fastest_in_graph", lines[0])
	assert.Equal(t, "all_reduce,bf16,2,8192,one_shot,300,5.405,1.516,1.516,3.505,2.337,true,true", lines[1])

	// Without --graph, the graph columns stay, empty (and null in json).
	figs := recordedFigures()[:1]
	figs[0].GraphMicros = 0
	eager := newBenchReport("GPU X", 2, false, figs, testCreated, testVersion)
	out.Reset()
	require.NoError(t, writeBenchCSV(&out, eager))
	assert.Equal(t, "all_reduce,bf16,2,8192,one_shot,300,5.405,1.516,1.516,,,true,false", strings.Split(out.String(), "\n")[1])
	out.Reset()
	require.NoError(t, writeBenchJSON(&out, eager))
	assert.Contains(t, out.String(), `"graph_latency_us": null`)
	assert.Contains(t, out.String(), `"graph_busbw_GBps": null`)
}

// TestBenchFromPlot: --from and --plot draw the saved run, as SVG (read
// back as XML) and PNG, with no GPU.
func TestBenchFromPlot(t *testing.T) {
	dir := t.TempDir()
	svg := filepath.Join(dir, "run.svg")
	r := hirrun("bench", "--from", benchGoldens["json"], "--plot", svg)
	expectCode(t, r, exitOK)
	expectContains(t, "stdout", r.stdout, "fastest per size", "\nchart: "+svg+"\n")
	data, err := os.ReadFile(svg)
	require.NoError(t, err)
	texts, lines := svgTextsAndLines(t, data)
	for _, want := range []string{"hirrun bench: GPU X × 2, 2026-11-25", "message size (bytes)", "bus bandwidth (GB/s)", "latency (µs per call)",
		"all_reduce bf16: bus bandwidth", "all_reduce bf16: latency", "all_gather bf16: bus bandwidth", "all_gather bf16: latency",
		"8KiB", "256KiB", "one_shot", "one_shot (graph)", "two_shot", "copy_engine (graph)", "nccl", "nccl (graph)"} {
		assert.Contains(t, texts, want, "SVG text")
	}
	// 2 collectives × 3 algorithms × eager and graph, in 2 panels each,
	// every line through the 6 sizes.
	assert.Equal(t, 2*3*2*2, lines, "lines through 6 points")

	// With --format json, stdout is the json alone and notes go to stderr.
	png := filepath.Join(dir, "run.PNG")
	r = hirrun("bench", "--from", benchGoldens["json"], "--format", "json", "--plot", png)
	expectCode(t, r, exitOK)
	var back benchReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &back), "stdout is json")
	assert.Equal(t, "chart: "+png+"\n", r.stderr)
	data, err = os.ReadFile(png)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")), "a PNG file")
}

// svgTextsAndLines decodes the whole SVG (it must be well-formed XML) and
// returns its texts and the number of paths drawn through 6 points (one
// move and 5 segments, no arcs: a series' line, not an axis or marker).
func svgTextsAndLines(t *testing.T, data []byte) ([]string, int) {
	t.Helper()
	type node struct {
		XMLName xml.Name
		Attrs   []xml.Attr `xml:",any,attr"`
		Text    string     `xml:",chardata"`
		Nodes   []node     `xml:",any"`
	}
	var root node
	require.NoError(t, xml.Unmarshal(data, &root), "the SVG is not well-formed XML")
	require.Equal(t, "svg", root.XMLName.Local)
	var texts []string
	lines := 0
	var walk func(n node)
	walk = func(n node) {
		switch n.XMLName.Local {
		case "text":
			texts = append(texts, n.Text)
		case "path":
			for _, a := range n.Attrs {
				if a.Name.Local == "d" && strings.Count(a.Value, "L") == 5 && !strings.ContainsAny(a.Value, "AZ") {
					lines++
				}
			}
		}
		for _, c := range n.Nodes {
			walk(c)
		}
	}
	walk(root)
	return texts, lines
}
