package cudabench

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime/cuda"
)

// The auto table's building, on the CPU: from figures, buckets, saving and
// loading, merging (runtime/cuda's tests cover reading and choosing).

func benchFigs() []CollFigure {
	f := func(op, algo, dt string, bytes int64, us float64) CollFigure {
		return CollFigure{Op: op, Algo: algo, DType: dt, World: 2, Bytes: bytes, Iters: 10, Micros: us}
	}
	return []CollFigure{
		f("all_reduce", "one_shot", "bf16", 8<<10, 7),
		f("all_reduce", "two_shot", "bf16", 8<<10, 12),
		f("all_reduce", "ring", "bf16", 8<<10, 30),
		f("all_reduce", "nccl", "bf16", 8<<10, 11),
		f("all_reduce", "one_shot", "bf16", 1<<20, 40),
		f("all_reduce", "two_shot", "bf16", 1<<20, 25),
		f("all_reduce", "ring", "bf16", 1<<20, 60),
		f("all_reduce", "nccl", "bf16", 1<<20, 30),
		f("all_gather", "one_shot", "bf16", 1<<30, 3000),
		f("all_gather", "copy_engine", "bf16", 1<<30, 2800),
		f("all_gather", "nccl", "bf16", 1<<30, 4000),
		f("all_gather", "ring", "bf16", 1<<30, 0), // no time: left out
		{Op: "all_to_all", Algo: "one_shot", DType: "bf16", World: 2, Bytes: 1 << 30, Micros: 5, Err: "failed"},
	}
}

func TestBuildAutoTableRanksFastestFirst(t *testing.T) {
	tb := BuildAutoTable("GPU X", "now", benchFigs())
	if tb.Version != cuda.AutoTableVersion || tb.Device != "GPU X" || len(tb.Entries) != 3 {
		t.Fatalf("table %+v", tb)
	}
	for _, c := range []struct {
		op    ir.Opcode
		bytes int64
		want  []string
	}{
		{ir.OpAllReduce, 8 << 10, []string{"one_shot", "nccl", "two_shot", "ring"}},
		{ir.OpAllReduce, 1 << 20, []string{"two_shot", "nccl", "one_shot", "ring"}},
		{ir.OpAllGather, 1 << 30, []string{"copy_engine", "one_shot", "nccl"}},
	} {
		if got := ir.Words(tb.Ranked(c.op, 2, ir.BF16, c.bytes)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %d: %v, want %v", c.op, c.bytes, got, c.want)
		}
	}
	if tb.Ranked(ir.OpAllToAll, 2, ir.BF16, 1<<30) != nil {
		t.Errorf("a failed figure made an entry")
	}
}

func TestAutoTableBuckets(t *testing.T) {
	tb := BuildAutoTable("GPU X", "", benchFigs())
	first := func(bytes int64, dt ir.DType, world int) string {
		r := tb.Ranked(ir.OpAllReduce, world, dt, bytes)
		if len(r) == 0 {
			return ""
		}
		return r[0].String()
	}
	for _, c := range []struct {
		bytes int64
		want  string
	}{
		{2, "one_shot"},         // below the smallest: the smallest
		{8 << 10, "one_shot"},   // exactly
		{8<<10 + 2, "two_shot"}, // above 8 KiB: the 1 MiB entry
		{1 << 20, "two_shot"},
		{1 << 34, "two_shot"}, // above the largest: the largest
	} {
		if got := first(c.bytes, ir.BF16, 2); got != c.want {
			t.Errorf("%d bytes: %q, want %q", c.bytes, got, c.want)
		}
	}
	// f16 is bf16's class; f32, another world size: no entry.
	if got := first(8<<10, ir.F16, 2); got != "one_shot" {
		t.Errorf("f16: %q", got)
	}
	if got := first(8<<10, ir.F32, 2); got != "" {
		t.Errorf("f32: %q, want no entry", got)
	}
	if got := first(8<<10, ir.BF16, 4); got != "" {
		t.Errorf("world 4: %q, want no entry", got)
	}
	var nilTable *cuda.AutoTable
	if nilTable.Ranked(ir.OpAllReduce, 2, ir.BF16, 8) != nil {
		t.Errorf("a nil table ranks")
	}
}

func TestAutoTableSaveLoadMerge(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "collectives.json")
	old := BuildAutoTable("GPU X", "", append(benchFigs(),
		CollFigure{Op: "all_reduce", Algo: "ring", DType: "f32", World: 2, Bytes: 8 << 10, Micros: 3},
		CollFigure{Op: "all_reduce", Algo: "one_shot", DType: "bf16", World: 4, Bytes: 8 << 10, Micros: 9}))
	if err := SaveAutoTable(old, path); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v %v", st.Mode(), err)
	}
	back, err := cuda.LoadAutoTable(path)
	if err != nil || !reflect.DeepEqual(back, old) {
		t.Fatalf("loaded %+v, %v; saved %+v", back, err, old)
	}
	// A new bf16 run on 2 ranks replaces the bf16/2-rank all_reduce
	// entries, and keeps f32's and 4 ranks'.
	fresh := BuildAutoTable("GPU X", "", []CollFigure{{Op: "all_reduce", Algo: "nccl", DType: "bf16", World: 2, Bytes: 8 << 10, Micros: 1}})
	m := MergeAutoTable(fresh, back)
	if got := ir.Words(m.Ranked(ir.OpAllReduce, 2, ir.BF16, 1<<20)); !reflect.DeepEqual(got, []string{"nccl"}) {
		t.Errorf("bf16 after the merge: %v", got)
	}
	if got := ir.Words(m.Ranked(ir.OpAllReduce, 2, ir.F32, 8<<10)); !reflect.DeepEqual(got, []string{"ring"}) {
		t.Errorf("f32 lost in the merge: %v", got)
	}
	if got := ir.Words(m.Ranked(ir.OpAllReduce, 4, ir.BF16, 8<<10)); !reflect.DeepEqual(got, []string{"one_shot"}) {
		t.Errorf("4 ranks lost in the merge: %v", got)
	}
	if got := m.Ranked(ir.OpAllGather, 2, ir.BF16, 1<<30); len(got) == 0 {
		t.Errorf("all_gather lost in the merge")
	}
	other := MergeAutoTable(BuildAutoTable("GPU Y", "", nil), back)
	if len(other.Entries) != 0 {
		t.Errorf("another device's entries were kept: %v", other.Entries)
	}
	if tb, err := cuda.LoadAutoTable(filepath.Join(dir, "missing.json")); tb != nil || err != nil {
		t.Errorf("missing file: %v %v", tb, err)
	}
}

func TestCollFigureBusBandwidth(t *testing.T) {
	ar := CollFigure{Op: "all_reduce", World: 2, Bytes: 1 << 30, Micros: 3000}
	if g := ar.BusGBps(); g < 357 || g > 358 { // 1 GiB / 3 ms × 2·1/2
		t.Errorf("all_reduce: %v", g)
	}
	ag := CollFigure{Op: "all_gather", World: 4, Bytes: 1 << 30, Micros: 3000}
	if g := ag.BusGBps(); g < 268 || g > 269 { // × 3/4
		t.Errorf("all_gather: %v", g)
	}
	if (CollFigure{Op: "all_gather", World: 2, Bytes: 1}).BusGBps() != 0 {
		t.Errorf("no time, some bandwidth")
	}
}
