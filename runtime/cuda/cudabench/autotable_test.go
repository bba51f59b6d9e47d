package cudabench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.Equal(t, cuda.AutoTableVersion, tb.Version, "table %+v", tb)
	require.Equal(t, "GPU X", tb.Device, "table %+v", tb)
	require.Len(t, tb.Entries, 3, "table %+v", tb)
	for _, c := range []struct {
		op    ir.Opcode
		bytes int64
		want  []string
	}{
		{ir.OpAllReduce, 8 << 10, []string{"one_shot", "nccl", "two_shot", "ring"}},
		{ir.OpAllReduce, 1 << 20, []string{"two_shot", "nccl", "one_shot", "ring"}},
		{ir.OpAllGather, 1 << 30, []string{"copy_engine", "one_shot", "nccl"}},
	} {
		assert.Equal(t, c.want, ir.Words(tb.Ranked(c.op, 2, ir.BF16, c.bytes)), "%s %d", c.op, c.bytes)
	}
	assert.Nil(t, tb.Ranked(ir.OpAllToAll, 2, ir.BF16, 1<<30), "a failed figure made an entry")
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
		assert.Equal(t, c.want, first(c.bytes, ir.BF16, 2), "%d bytes", c.bytes)
	}
	// f16 is bf16's class; f32, another world size: no entry.
	assert.Equal(t, "one_shot", first(8<<10, ir.F16, 2), "f16")
	assert.Equal(t, "", first(8<<10, ir.F32, 2), "f32: want no entry")
	assert.Equal(t, "", first(8<<10, ir.BF16, 4), "world 4: want no entry")
	var nilTable *cuda.AutoTable
	assert.Nil(t, nilTable.Ranked(ir.OpAllReduce, 2, ir.BF16, 8), "a nil table ranks")
}

func TestAutoTableSaveLoadMerge(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "collectives.json")
	old := BuildAutoTable("GPU X", "", append(benchFigs(),
		CollFigure{Op: "all_reduce", Algo: "ring", DType: "f32", World: 2, Bytes: 8 << 10, Micros: 3},
		CollFigure{Op: "all_reduce", Algo: "one_shot", DType: "bf16", World: 4, Bytes: 8 << 10, Micros: 9}))
	require.NoError(t, SaveAutoTable(old, path))
	st, err := os.Stat(filepath.Dir(path))
	if assert.NoError(t, err, "directory") {
		assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "directory mode")
	}
	back, err := cuda.LoadAutoTable(path)
	require.NoError(t, err, "loaded")
	require.Equal(t, old, back, "loaded")
	// A new bf16 run on 2 ranks replaces the bf16/2-rank all_reduce
	// entries, and keeps f32's and 4 ranks'.
	fresh := BuildAutoTable("GPU X", "", []CollFigure{{Op: "all_reduce", Algo: "nccl", DType: "bf16", World: 2, Bytes: 8 << 10, Micros: 1}})
	m := MergeAutoTable(fresh, back)
	assert.Equal(t, []string{"nccl"}, ir.Words(m.Ranked(ir.OpAllReduce, 2, ir.BF16, 1<<20)), "bf16 after the merge")
	assert.Equal(t, []string{"ring"}, ir.Words(m.Ranked(ir.OpAllReduce, 2, ir.F32, 8<<10)), "f32 lost in the merge")
	assert.Equal(t, []string{"one_shot"}, ir.Words(m.Ranked(ir.OpAllReduce, 4, ir.BF16, 8<<10)), "4 ranks lost in the merge")
	assert.NotEmpty(t, m.Ranked(ir.OpAllGather, 2, ir.BF16, 1<<30), "all_gather lost in the merge")
	other := MergeAutoTable(BuildAutoTable("GPU Y", "", nil), back)
	assert.Empty(t, other.Entries, "another device's entries were kept")
	missing, err := cuda.LoadAutoTable(filepath.Join(dir, "missing.json"))
	assert.NoError(t, err, "missing file")
	assert.Nil(t, missing, "missing file")
}

func TestCollFigureBusBandwidth(t *testing.T) {
	ar := CollFigure{Op: "all_reduce", World: 2, Bytes: 1 << 30, Micros: 3000}
	g := ar.BusGBps() // 1 GiB / 3 ms × 2·1/2
	assert.GreaterOrEqual(t, g, 357.0, "all_reduce")
	assert.LessOrEqual(t, g, 358.0, "all_reduce")
	ag := CollFigure{Op: "all_gather", World: 4, Bytes: 1 << 30, Micros: 3000}
	g = ag.BusGBps() // × 3/4
	assert.GreaterOrEqual(t, g, 268.0, "all_gather")
	assert.LessOrEqual(t, g, 269.0, "all_gather")
	assert.Zero(t, (CollFigure{Op: "all_gather", World: 2, Bytes: 1}).BusGBps(), "no time, some bandwidth")
}

// A --graph sweep gives each entry a second ranking, by the replayed time,
// which a captured call follows; an eager-only sweep gives none, and a
// captured call then follows the eager ranking.
func TestAutoTableRanksGraphApart(t *testing.T) {
	f := func(algo string, us, graphUS float64) CollFigure {
		return CollFigure{Op: "all_gather", Algo: algo, DType: "bf16", World: 4, Bytes: 64 << 10, Iters: 10, Micros: us, GraphMicros: graphUS}
	}
	tb := BuildAutoTable("GPU X", "", []CollFigure{f("ll", 7, 5.3), f("one_shot", 6.5, 9), f("nccl", 14, 8.6)})
	require.Len(t, tb.Entries, 1)
	assert.Equal(t, []string{"one_shot", "ll", "nccl"}, ir.Words(tb.RankedFor(ir.OpAllGather, 4, ir.BF16, 64<<10, false)), "eager")
	assert.Equal(t, []string{"ll", "nccl", "one_shot"}, ir.Words(tb.RankedFor(ir.OpAllGather, 4, ir.BF16, 64<<10, true)), "graph")
	assert.Equal(t, map[string]float64{"ll": 5.3, "one_shot": 9, "nccl": 8.6}, tb.Entries[0].GraphMicros)
	eager := BuildAutoTable("GPU X", "", []CollFigure{f("ll", 7, 0), f("one_shot", 6.5, 0)})
	assert.Equal(t, []string{"one_shot", "ll"}, ir.Words(eager.RankedFor(ir.OpAllGather, 4, ir.BF16, 64<<10, true)), "no graph figures: the eager ranking")
	// It survives a save and a load.
	path := filepath.Join(t.TempDir(), "t.json")
	require.NoError(t, SaveAutoTable(tb, path))
	back, err := cuda.LoadAutoTable(path)
	require.NoError(t, err)
	assert.Equal(t, []string{"ll", "nccl", "one_shot"}, ir.Words(back.RankedFor(ir.OpAllGather, 4, ir.BF16, 64<<10, true)), "graph, loaded")
}
