package main

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime/cuda"
	"github.com/hirlab/hir/runtime/cuda/cudabench"
)

// hirrun bench on the CPU: its options, what it prints (from figures made
// up here; the GPU run measures real ones) and the table it saves.

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"8192": 8192, "8KiB": 8 << 10, "16MiB": 16 << 20, "1GiB": 1 << 30, "2G": 2 << 30, "64K": 64 << 10, "512B": 512} {
		if got, err := parseSize(in); got != want || err != nil {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "KiB", "-1", "0", "1.5GiB", "8 parsecs"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestBenchOptions(t *testing.T) {
	p, err := parseBenchOptions(&benchOptions{minSize: "8KiB", maxSize: "1GiB", dtypes: "bf16, f32", ops: "all_reduce,all_gather"})
	if err != nil {
		t.Fatal(err)
	}
	if p.opts.MinBytes != 8<<10 || p.opts.MaxBytes != 1<<30 || !reflect.DeepEqual(p.opts.DTypes, []ir.DType{ir.BF16, ir.F32}) ||
		!reflect.DeepEqual(p.opts.Ops, []ir.Opcode{ir.OpAllReduce, ir.OpAllGather}) {
		t.Errorf("options %+v", p.opts)
	}
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
		if _, err := parseBenchOptions(&c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	r := hirrun("bench", "--min-size", "2GiB")
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr, "below --min-size")
	r = hirrun("bench", "extra")
	expectCode(t, r, exitUsage)
}

func TestBenchWithoutGPU(t *testing.T) {
	if p := cuda.Probe(); p.Available {
		t.Skip("this machine has a usable GPU")
	}
	r := hirrun("bench", "--nproc", "2")
	expectCode(t, r, exitFail)
	expectContains(t, "stderr", r.stderr, "bench: cuda backend unavailable: ")
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
	if len(lines) != len(figs) {
		t.Fatalf("%d benchmark lines, want %d", len(lines), len(figs))
	}
	// Name, iterations, then value-unit pairs: what benchstat parses.
	f := strings.Fields(lines[2])
	if len(f) != 6 || f[0] != "BenchmarkCollective/op=all_reduce/dtype=bf16/world=2/size=1GiB/algo=two_shot" || f[1] != "5" ||
		f[3] != "ns/op" || f[5] != "busGB/s" {
		t.Errorf("line %q", lines[2])
	}
	if ns, _ := strconv.ParseFloat(f[2], 64); ns != 3e6 {
		t.Errorf("ns/op %v", f[2])
	}
	if bw, _ := strconv.ParseFloat(f[4], 64); bw < 357 || bw > 358 {
		t.Errorf("busGB/s %v", f[4])
	}
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
		if !found {
			t.Errorf("no summary row with %v", row)
		}
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
	if _, err := saveAutoTable(path, first); err != nil {
		t.Fatal(err)
	}
	second := cudabench.BuildAutoTable("GPU X", "", []cudabench.CollFigure{
		{Op: "all_reduce", Algo: "one_shot", DType: "bf16", World: 2, Bytes: 8 << 10, Micros: 12},
		{Op: "all_reduce", Algo: "nccl", DType: "bf16", World: 2, Bytes: 8 << 10, Micros: 11},
	})
	saved, err := saveAutoTable(path, second)
	if err != nil {
		t.Fatal(err)
	}
	back, err := cuda.LoadAutoTable(path)
	if err != nil || !reflect.DeepEqual(back, saved) {
		t.Fatalf("loaded %+v (%v), saved %+v", back, err, saved)
	}
	if got := ir.Words(back.Ranked(ir.OpAllReduce, 2, ir.BF16, 8<<10)); !reflect.DeepEqual(got, []string{"nccl", "one_shot"}) {
		t.Errorf("all_reduce: %v", got)
	}
	if got := ir.Words(back.Ranked(ir.OpAllGather, 2, ir.F16, 1<<30)); !reflect.DeepEqual(got, []string{"copy_engine"}) {
		t.Errorf("all_gather kept: %v", got)
	}
}
