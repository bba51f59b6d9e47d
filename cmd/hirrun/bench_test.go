package main

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime/cuda"
	"github.com/hirlab/hir/runtime/cuda/cudabench"
)

// hirrun bench on the CPU: its options, what it prints (from figures made
// up here; the GPU run measures real ones) and the table it saves.

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"8192": 8192, "8KiB": 8 << 10, "16MiB": 16 << 20, "1GiB": 1 << 30, "2G": 2 << 30, "64K": 64 << 10, "512B": 512} {
		got, err := parseSize(in)
		assert.NoError(t, err, "%q", in)
		assert.Equal(t, want, got, "%q", in)
	}
	for _, bad := range []string{"", "KiB", "-1", "0", "1.5GiB", "8 parsecs"} {
		_, err := parseSize(bad)
		assert.Error(t, err, "%q: no error", bad)
	}
}

func TestBenchOptions(t *testing.T) {
	p, err := parseBenchOptions(&benchOptions{minSize: "8KiB", maxSize: "1GiB", dtypes: "bf16, f32", ops: "all_reduce,all_gather"})
	require.NoError(t, err)
	assert.Equal(t, int64(8<<10), p.opts.MinBytes, "MinBytes")
	assert.Equal(t, int64(1<<30), p.opts.MaxBytes, "MaxBytes")
	assert.Equal(t, []ir.DType{ir.BF16, ir.F32}, p.opts.DTypes, "DTypes")
	assert.Equal(t, []ir.Opcode{ir.OpAllReduce, ir.OpAllGather}, p.opts.Ops, "Ops")
	for _, c := range []struct {
		o    benchOptions
		want string
	}{
		{benchOptions{minSize: "1MiB", maxSize: "8KiB", dtypes: "bf16", ops: "all_reduce"}, "below --min-size"},
		{benchOptions{minSize: "x", maxSize: "8KiB", dtypes: "bf16", ops: "all_reduce"}, "--min-size"},
		{benchOptions{minSize: "8KiB", maxSize: "8KiB", dtypes: "bool", ops: "all_reduce"}, `"bool" is not a dtype`},
		{benchOptions{minSize: "8KiB", maxSize: "8KiB", dtypes: "bf16", ops: "broadcast"}, "not one bench measures"},
		{benchOptions{minSize: "8KiB", maxSize: "8KiB", dtypes: "bf16", ops: "all_reduce_please"}, "unknown collective"},
		{benchOptions{minSize: "8KiB", maxSize: "8KiB", dtypes: "", ops: "all_reduce"}, "at least one"},
	} {
		_, err := parseBenchOptions(&c.o)
		assert.ErrorContains(t, err, c.want, "%+v", c.o)
	}
	r := hirrun("bench", "--min-size", "2GiB")
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr, "below --min-size")
	r = hirrun("bench", "extra")
	expectCode(t, r, exitUsage)
}

func TestPrintBenchIsBenchstatFormat(t *testing.T) {
	figs := []cudabench.CollFigure{
		{Op: "all_reduce", Algo: "one_shot", DType: "bf16", World: 2, Bytes: 8 << 10, Iters: 100, Micros: 7.25},
		{Op: "all_reduce", Algo: "nccl", DType: "bf16", World: 2, Bytes: 8 << 10, Iters: 100, Micros: 11},
		{Op: "all_reduce", Algo: "two_shot", DType: "bf16", World: 2, Bytes: 1 << 30, Iters: 5, Micros: 3000},
		{Op: "all_reduce", Algo: "nccl", DType: "bf16", World: 2, Bytes: 1 << 30, Iters: 5, Micros: 3300},
	}
	var out bytes.Buffer
	c := &cli{stdout: &out, stderr: &out}
	c.printBench("GPU X", 2, figs)
	got := out.String()
	t.Log("\n" + got)
	var lines []string
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "Benchmark") {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, len(figs), "benchmark lines")
	// Name, iterations, then value-unit pairs: what benchstat parses.
	f := strings.Fields(lines[2])
	// The values (f[2], f[4]) are checked below, each in its own way.
	require.Len(t, f, 6, "line %q", lines[2])
	assert.Equal(t, []string{"BenchmarkCollective/op=all_reduce/dtype=bf16/world=2/size=1GiB/algo=two_shot", "5", "ns/op", "busGB/s"},
		[]string{f[0], f[1], f[3], f[5]}, "line %q", lines[2])
	ns, _ := strconv.ParseFloat(f[2], 64)
	assert.Equal(t, 3e6, ns, "ns/op %v", f[2])
	bw, _ := strconv.ParseFloat(f[4], 64)
	assert.GreaterOrEqual(t, bw, 357.0, "busGB/s %v", f[4])
	assert.LessOrEqual(t, bw, 358.0, "busGB/s %v", f[4])
	expectContains(t, "output", got, "device: GPU X", "fastest per size")
	for _, row := range [][]string{{"all_reduce", "8KiB", "one_shot", "7.2", "11.0"}, {"all_reduce", "1GiB", "two_shot", "3000.0", "3300.0"}} {
		found := false
		for _, l := range strings.Split(got, "\n") {
			ok := !strings.HasPrefix(l, "Benchmark")
			for _, w := range row {
				ok = ok && strings.Contains(l, w)
			}
			found = found || ok
		}
		assert.True(t, found, "no summary row with %v", row)
	}
}

// The saved table is what auto reads; a second run replaces what it
// measured again and keeps the rest.
func TestSaveAutoTableMerges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hir", "collectives.json")
	first := cudabench.BuildAutoTable("GPU X", "", []cudabench.CollFigure{
		{Op: "all_reduce", Algo: "one_shot", DType: "bf16", World: 2, Bytes: 8 << 10, Micros: 7},
		{Op: "all_reduce", Algo: "nccl", DType: "bf16", World: 2, Bytes: 8 << 10, Micros: 11},
		{Op: "all_gather", Algo: "copy_engine", DType: "bf16", World: 2, Bytes: 1 << 30, Micros: 2800},
	})
	_, err := saveAutoTable(path, first)
	require.NoError(t, err)
	second := cudabench.BuildAutoTable("GPU X", "", []cudabench.CollFigure{
		{Op: "all_reduce", Algo: "one_shot", DType: "bf16", World: 2, Bytes: 8 << 10, Micros: 12},
		{Op: "all_reduce", Algo: "nccl", DType: "bf16", World: 2, Bytes: 8 << 10, Micros: 11},
	})
	saved, err := saveAutoTable(path, second)
	require.NoError(t, err)
	back, err := cuda.LoadAutoTable(path)
	require.NoError(t, err)
	require.Equal(t, saved, back, "loaded (actual) vs saved (expected)")
	assert.Equal(t, []string{"nccl", "one_shot"}, ir.Words(back.Ranked(ir.OpAllReduce, 2, ir.BF16, 8<<10)), "all_reduce")
	assert.Equal(t, []string{"copy_engine"}, ir.Words(back.Ranked(ir.OpAllGather, 2, ir.F16, 1<<30)), "all_gather kept")
}

// TestPrintBenchGraphColumn: with --graph figures, each line carries the
// graph time as a third benchstat metric and the fastest table adds the
// fastest algorithm in a graph and NCCL's graph time.
func TestPrintBenchGraphColumn(t *testing.T) {
	figs := []cudabench.CollFigure{
		{Op: "all_reduce", Algo: "one_shot", DType: "bf16", World: 2, Bytes: 8 << 10, Iters: 100, Micros: 6.5, GraphMicros: 3.3},
		{Op: "all_reduce", Algo: "two_shot", DType: "bf16", World: 2, Bytes: 8 << 10, Iters: 100, Micros: 8.7, GraphMicros: 7.0},
		{Op: "all_reduce", Algo: "nccl", DType: "bf16", World: 2, Bytes: 8 << 10, Iters: 100, Micros: 8.2, GraphMicros: 6.4},
	}
	var out bytes.Buffer
	c := &cli{stdout: &out, stderr: &out}
	c.printBench("GPU X", 2, figs)
	got := out.String()
	assert.Contains(t, got, "BenchmarkCollective/op=all_reduce/dtype=bf16/world=2/size=8KiB/algo=one_shot\t100\t6500 ns/op\t1.26 busGB/s\t3300 graph-ns/op\n")
	assert.Contains(t, got, "fastest in a graph")
	assert.Regexp(t, `all_reduce\s+bf16\s+8KiB\s+one_shot\s+6\.5\s+[0-9.]+\s+8\.2\s+[0-9.]+\s+one_shot\s+3\.3\s+6\.4`, got)
}
