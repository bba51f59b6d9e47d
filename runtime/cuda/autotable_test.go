package cuda

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/cuda/internal/autotable"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
)

// The auto table's choosing, on the CPU: parsing and loading it, and what
// auto then picks for operands that do or do not meet an algorithm's
// symmetric-heap needs (cudabench's tests build, save and merge tables).

func TestParseAutoTableDropsWhatItCannotUse(t *testing.T) {
	tb, err := autotable.ParseAutoTable([]byte(`{"version": 1, "device": "GPU X", "entries": [
		{"collective": "all_reduce", "world": 2, "dtype_class": "16bit", "bytes": 8192, "ranked": ["warp_drive", "two_shot", "auto"]},
		{"collective": "frobnicate", "world": 2, "dtype_class": "16bit", "bytes": 8192, "ranked": ["one_shot"]},
		{"collective": "all_gather", "world": 2, "dtype_class": "16bit", "bytes": 8192, "ranked": ["two_shot"]},
		{"collective": "all_gather", "world": 0, "dtype_class": "16bit", "bytes": 8192, "ranked": ["one_shot"]}
	]}`))
	require.NoError(t, err)
	if assert.Len(t, tb.Entries, 1, "entries %+v", tb.Entries) {
		assert.Equal(t, []string{"two_shot"}, tb.Entries[0].Ranked, "entries %+v", tb.Entries)
	}
	for _, bad := range []string{`{"version": 2, "entries": []}`, `not json`} {
		_, err = autotable.ParseAutoTable([]byte(bad))
		assert.Error(t, err, "%s: no error", bad)
	}
}

func TestAutoTablePath(t *testing.T) {
	t.Setenv(autotable.AutoTableEnv, "/x/y.json")
	p, err := autotable.AutoTablePath()
	assert.NoError(t, err)
	assert.Equal(t, "/x/y.json", p)
	t.Setenv(autotable.AutoTableEnv, "off")
	p, err = autotable.AutoTablePath()
	assert.NoError(t, err, "off")
	assert.Equal(t, "", p, "off")
	t.Setenv(autotable.AutoTableEnv, "")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	p, err = autotable.AutoTablePath()
	assert.NoError(t, err, "default")
	assert.Equal(t, "/cache/hir/collectives.json", p, "default")
}

func TestLoadAutoTableFor(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.json")
	t.Setenv(autotable.AutoTableEnv, path)
	tb, dg, note := autotable.LoadAutoTableFor("GPU X")
	assert.Nil(t, tb, "no file")
	assert.Equal(t, "none", dg, "no file")
	assert.Contains(t, note, "hirrun bench", "no file")
	// A table as hirrun bench saves it (cudabench builds and saves them).
	saved, err := json.MarshalIndent(&autotable.AutoTable{Version: autotable.AutoTableVersion, Device: "GPU X", Entries: []autotable.AutoEntry{
		{Op: "all_reduce", World: 2, Class: "16bit", Bytes: 8 << 10, Ranked: []string{"one_shot", "nccl"}},
	}}, "", " ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(saved, '\n'), 0o600))
	tb, dg, note = autotable.LoadAutoTableFor("GPU X")
	assert.NotNil(t, tb, "same device")
	assert.Len(t, dg, 16, "same device")
	assert.Contains(t, note, path, "same device")
	tb, dg, note = autotable.LoadAutoTableFor("GPU Y")
	assert.Nil(t, tb, "other device")
	assert.Equal(t, "none", dg, "other device")
	assert.Contains(t, note, "measured on GPU X", "other device")
	os.WriteFile(path, []byte("{"), 0o600)
	tb, _, note = autotable.LoadAutoTableFor("GPU X")
	assert.Nil(t, tb, "corrupt")
	assert.Contains(t, note, "auto table", "corrupt")
	t.Setenv(autotable.AutoTableEnv, "off")
	tb, _, note = autotable.LoadAutoTableFor("GPU X")
	assert.Nil(t, tb, "off")
	assert.Contains(t, note, "turned off", "off")
}

// auto follows the table where the operands allow, else the next ranked
// algorithm that fits, else the compiled-in choice.
func TestAutoFollowsTable(t *testing.T) {
	d := fakeDevice(0, 2)
	sym := fakeBuf(d, 64<<20, ir.Symmetric)
	sym2 := fakeBuf(d, 64<<20, ir.Symmetric)
	glob := fakeBuf(d, 64<<20, ir.Global)
	glob2 := fakeBuf(d, 64<<20, ir.Global)
	entry := func(op string, bytes int64, ranked ...string) autotable.AutoEntry {
		return autotable.AutoEntry{Op: op, World: 2, Class: "16bit", Bytes: bytes, Ranked: ranked}
	}
	d.State.Table = &autotable.AutoTable{Version: autotable.AutoTableVersion, Entries: []autotable.AutoEntry{
		entry("all_reduce", 8<<10, "two_shot", "ring", "one_shot"),
		entry("all_reduce", 1<<20, "one_shot"),
		entry("all_gather", 1<<20, "copy_engine", "one_shot"),
		entry("all_gather", 64<<20, "copy_engine"),
		entry("reduce_scatter", 16<<20, "ll", "one_shot"),
	}}
	plan := func(op ir.Opcode, in, out *gpu.Buffer, nIn, nOut int64) string {
		t.Helper()
		p, err := d.PlanCollective(&runtime.CollectiveCall{Op: op, Algo: ir.AlgoAuto, ReduceOp: ir.ReduceSum, In: tensor(in, ir.BF16, nIn), Out: tensor(out, ir.BF16, nOut)}, false)
		require.NoError(t, err)
		return p.Impl.String()
	}
	for _, c := range []struct {
		name    string
		op      ir.Opcode
		in, out *gpu.Buffer
		nIn     int64
		want    string
	}{
		{"first fits", ir.OpAllReduce, sym, sym2, 1024, "two_shot"},
		{"two_shot needs a symmetric output: the next one", ir.OpAllReduce, sym, glob, 1024, "ring"},
		{"one entry, fits", ir.OpAllReduce, sym, glob, 256 << 10, "one_shot"},
		{"copy_engine reads the input remotely", ir.OpAllGather, glob, sym2, 1024, "one_shot"},
		{"copy_engine fits", ir.OpAllGather, sym, sym2, 1024, "copy_engine"},
		{"nothing fits: compiled-in choice", ir.OpAllGather, glob, sym2, 16 << 20, "one_shot"},
		{"no entry: compiled-in choice", ir.OpReduceScatter, sym, glob2, 1024, "ll"},
		{"ll above ir.LLMaxBytes does not fit", ir.OpReduceScatter, sym, sym2, 8 << 20, "one_shot"},
	} {
		nOut := c.nIn
		switch c.op {
		case ir.OpAllGather:
			nOut = c.nIn * 2
		case ir.OpReduceScatter:
			nOut = c.nIn / 2
		}
		assert.Equal(t, c.want, plan(c.op, c.in, c.out, c.nIn, nOut), c.name)
	}
	// A call captured into a graph follows the graph ranking.
	d.State.Table.Entries = append(d.State.Table.Entries, autotable.AutoEntry{Op: "all_to_all", World: 2, Class: "16bit", Bytes: 8 << 10,
		Ranked: []string{"one_shot", "ll"}, RankedGraph: []string{"ll", "one_shot"}})
	a2a := func(graph bool) string {
		p, err := d.PlanCollective(&runtime.CollectiveCall{Op: ir.OpAllToAll, Algo: ir.AlgoAuto, Axis: 1,
			In: runtime.Tensor{Buf: sym, DType: ir.BF16, Shape: []int64{2, 512}}, Out: runtime.Tensor{Buf: sym2, DType: ir.BF16, Shape: []int64{4, 256}}}, graph)
		require.NoError(t, err)
		return p.Impl.String()
	}
	assert.Equal(t, "one_shot", a2a(false), "eager: the eager ranking")
	assert.Equal(t, "ll", a2a(true), "captured: the graph ranking")
	// Without a table: the compiled-in choices.
	d.State.Table = nil
	assert.Equal(t, "ll", plan(ir.OpAllReduce, sym, sym2, 1024, 1024), "no table, small all_reduce")
	assert.Equal(t, "one_shot", plan(ir.OpAllReduce, sym, sym2, 4<<20, 4<<20), "no table, large all_reduce on two ranks")
	assert.Equal(t, "one_shot", plan(ir.OpAllGather, sym, sym2, 16<<20, 32<<20), "no table, all_gather of 64 MiB")
	big, big2 := fakeBuf(d, 256<<20, ir.Symmetric), fakeBuf(d, 256<<20, ir.Symmetric)
	assert.Equal(t, "copy_engine", plan(ir.OpAllGather, big, big2, 64<<20, 128<<20), "no table, large all_gather of a symmetric input")
	assert.Equal(t, "one_shot", plan(ir.OpAllGather, fakeBuf(d, 256<<20, ir.Global), big2, 64<<20, 128<<20), "no table, large all_gather of a global input")
}

func TestBenchCallShapes(t *testing.T) {
	d := fakeDevice(0, 4)
	in, out := fakeBuf(d, 1<<20, ir.Symmetric), fakeBuf(d, 1<<20, ir.Symmetric)
	for _, op := range []ir.Opcode{ir.OpAllReduce, ir.OpAllGather, ir.OpReduceScatter, ir.OpAllToAll} {
		c, ok := autotable.BenchCall(op, ir.BF16, 4096, 4, in, out)
		require.True(t, ok, "%s: no call", op)
		for _, algo := range ir.Algorithms(op) {
			c.Algo = algo
			_, err := d.PlanCollective(&c, false)
			assert.NoError(t, err, "%s algo=%s", op, algo)
		}
		assert.Equal(t, int64(8192), autotable.BenchBytes(op, c.In, c.Out), "%s: files under the wrong size", op)
	}
	_, ok := autotable.BenchCall(ir.OpAllGather, ir.BF16, 3, 4, in, out)
	assert.False(t, ok, "a size smaller than the world made a call")
}
