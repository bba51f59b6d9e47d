package cuda

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// The auto table's choosing, on the CPU: building it from figures,
// buckets, saving and loading, merging, and what auto then picks for
// operands that do or do not meet an algorithm's symmetric-heap needs.

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
	if tb.Version != AutoTableVersion || tb.Device != "GPU X" || len(tb.Entries) != 3 {
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
	var nilTable *AutoTable
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
	if err := old.Save(path); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v %v", st.Mode(), err)
	}
	back, err := LoadAutoTable(path)
	if err != nil || !reflect.DeepEqual(back, old) {
		t.Fatalf("loaded %+v, %v; saved %+v", back, err, old)
	}
	// A new bf16 run on 2 ranks replaces the bf16/2-rank all_reduce
	// entries, and keeps f32's and 4 ranks'.
	fresh := BuildAutoTable("GPU X", "", []CollFigure{{Op: "all_reduce", Algo: "nccl", DType: "bf16", World: 2, Bytes: 8 << 10, Micros: 1}})
	m := fresh.Merge(back)
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
	other := BuildAutoTable("GPU Y", "", nil).Merge(back)
	if len(other.Entries) != 0 {
		t.Errorf("another device's entries were kept: %v", other.Entries)
	}
	if tb, err := LoadAutoTable(filepath.Join(dir, "missing.json")); tb != nil || err != nil {
		t.Errorf("missing file: %v %v", tb, err)
	}
}

func TestParseAutoTableDropsWhatItCannotUse(t *testing.T) {
	tb, err := ParseAutoTable([]byte(`{"version": 1, "device": "GPU X", "entries": [
		{"collective": "all_reduce", "world": 2, "dtype_class": "16bit", "bytes": 8192, "ranked": ["warp_drive", "two_shot", "auto"]},
		{"collective": "frobnicate", "world": 2, "dtype_class": "16bit", "bytes": 8192, "ranked": ["one_shot"]},
		{"collective": "all_gather", "world": 2, "dtype_class": "16bit", "bytes": 8192, "ranked": ["two_shot"]},
		{"collective": "all_gather", "world": 0, "dtype_class": "16bit", "bytes": 8192, "ranked": ["one_shot"]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Entries) != 1 || !reflect.DeepEqual(tb.Entries[0].Ranked, []string{"two_shot"}) {
		t.Errorf("entries %+v", tb.Entries)
	}
	for _, bad := range []string{`{"version": 2, "entries": []}`, `not json`} {
		if _, err := ParseAutoTable([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestAutoTablePath(t *testing.T) {
	t.Setenv(AutoTableEnv, "/x/y.json")
	if p, err := AutoTablePath(); p != "/x/y.json" || err != nil {
		t.Errorf("%q %v", p, err)
	}
	t.Setenv(AutoTableEnv, "off")
	if p, err := AutoTablePath(); p != "" || err != nil {
		t.Errorf("off: %q %v", p, err)
	}
	t.Setenv(AutoTableEnv, "")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	if p, err := AutoTablePath(); p != "/cache/hir/collectives.json" || err != nil {
		t.Errorf("default: %q %v", p, err)
	}
}

func TestLoadAutoTableFor(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.json")
	t.Setenv(AutoTableEnv, path)
	if tb, dg, note := loadAutoTableFor("GPU X"); tb != nil || dg != "none" || !strings.Contains(note, "hirrun bench") {
		t.Errorf("no file: %v %q %q", tb, dg, note)
	}
	if err := BuildAutoTable("GPU X", "", benchFigs()).Save(path); err != nil {
		t.Fatal(err)
	}
	tb, dg, note := loadAutoTableFor("GPU X")
	if tb == nil || len(dg) != 16 || !strings.Contains(note, path) {
		t.Errorf("same device: %v %q %q", tb, dg, note)
	}
	if tb, dg, note := loadAutoTableFor("GPU Y"); tb != nil || dg != "none" || !strings.Contains(note, "measured on GPU X") {
		t.Errorf("other device: %v %q %q", tb, dg, note)
	}
	os.WriteFile(path, []byte("{"), 0o600)
	if tb, _, note := loadAutoTableFor("GPU X"); tb != nil || !strings.Contains(note, "auto table") {
		t.Errorf("corrupt: %v %q", tb, note)
	}
	t.Setenv(AutoTableEnv, "off")
	if tb, _, note := loadAutoTableFor("GPU X"); tb != nil || !strings.Contains(note, "turned off") {
		t.Errorf("off: %v %q", tb, note)
	}
}

// auto follows the table where the operands allow, else the next ranked
// algorithm that fits, else the compiled-in choice.
func TestAutoFollowsTable(t *testing.T) {
	d := fakeDevice(0, 2)
	sym := fakeBuf(d, 64<<20, ir.Symmetric)
	sym2 := fakeBuf(d, 64<<20, ir.Symmetric)
	glob := fakeBuf(d, 64<<20, ir.Global)
	glob2 := fakeBuf(d, 64<<20, ir.Global)
	entry := func(op string, bytes int64, ranked ...string) AutoEntry {
		return AutoEntry{Op: op, World: 2, Class: "16bit", Bytes: bytes, Ranked: ranked}
	}
	d.comm.table = &AutoTable{Version: AutoTableVersion, Entries: []AutoEntry{
		entry("all_reduce", 8<<10, "two_shot", "ring", "one_shot"),
		entry("all_reduce", 1<<20, "one_shot"),
		entry("all_gather", 1<<20, "copy_engine", "one_shot"),
		entry("all_gather", 64<<20, "copy_engine"),
	}}
	plan := func(op ir.Opcode, in, out *buffer, nIn, nOut int64) string {
		t.Helper()
		p, err := d.planCollective(&runtime.CollectiveCall{Op: op, Algo: ir.AlgoAuto, ReduceOp: ir.ReduceSum, In: tensor(in, ir.BF16, nIn), Out: tensor(out, ir.BF16, nOut)})
		if err != nil {
			t.Fatal(err)
		}
		return p.impl.String()
	}
	for _, c := range []struct {
		name    string
		op      ir.Opcode
		in, out *buffer
		nIn     int64
		want    string
	}{
		{"first fits", ir.OpAllReduce, sym, sym2, 1024, "two_shot"},
		{"two_shot needs a symmetric output: the next one", ir.OpAllReduce, sym, glob, 1024, "ring"},
		{"one entry, fits", ir.OpAllReduce, sym, glob, 256 << 10, "one_shot"},
		{"copy_engine reads the input remotely", ir.OpAllGather, glob, sym2, 1024, "one_shot"},
		{"copy_engine fits", ir.OpAllGather, sym, sym2, 1024, "copy_engine"},
		{"nothing fits: compiled-in choice", ir.OpAllGather, glob, sym2, 16 << 20, "one_shot"},
		{"no entry: compiled-in choice", ir.OpReduceScatter, sym, glob2, 1024, "one_shot"},
	} {
		nOut := c.nIn
		switch c.op {
		case ir.OpAllGather:
			nOut = c.nIn * 2
		case ir.OpReduceScatter:
			nOut = c.nIn / 2
		}
		if got := plan(c.op, c.in, c.out, c.nIn, nOut); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	// Without a table: the compiled-in choices.
	d.comm.table = nil
	if got := plan(ir.OpAllReduce, sym, sym2, 1024, 1024); got != "one_shot" {
		t.Errorf("no table, small all_reduce: %s", got)
	}
	if got := plan(ir.OpAllReduce, sym, sym2, 4<<20, 4<<20); got != "two_shot" {
		t.Errorf("no table, large all_reduce: %s", got)
	}
	if got := plan(ir.OpAllGather, sym, sym2, 16<<20, 32<<20); got != "copy_engine" {
		t.Errorf("no table, large all_gather of a symmetric input: %s", got)
	}
	if got := plan(ir.OpAllGather, glob, sym2, 16<<20, 32<<20); got != "one_shot" {
		t.Errorf("no table, large all_gather of a global input: %s", got)
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

func TestBenchCallShapes(t *testing.T) {
	d := fakeDevice(0, 4)
	in, out := fakeBuf(d, 1<<20, ir.Symmetric), fakeBuf(d, 1<<20, ir.Symmetric)
	for _, op := range []ir.Opcode{ir.OpAllReduce, ir.OpAllGather, ir.OpReduceScatter, ir.OpAllToAll} {
		c, ok := benchCall(op, ir.BF16, 4096, 4, in, out)
		if !ok {
			t.Fatalf("%s: no call", op)
		}
		for _, algo := range ir.Algorithms(op) {
			c.Algo = algo
			if _, err := d.planCollective(&c); err != nil {
				t.Errorf("%s algo=%s: %v", op, algo, err)
			}
		}
		if got := benchBytes(op, c.In, c.Out); got != 8192 {
			t.Errorf("%s: files under %d bytes, want 8192", op, got)
		}
	}
	if _, ok := benchCall(ir.OpAllGather, ir.BF16, 3, 4, in, out); ok {
		t.Errorf("a size smaller than the world made a call")
	}
}
