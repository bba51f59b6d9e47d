package cuda

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// The auto table's choosing, on the CPU: parsing and loading it, and what
// auto then picks for operands that do or do not meet an algorithm's
// symmetric-heap needs (cudabench's tests build, save and merge tables).

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
	// A table as hirrun bench saves it (cudabench builds and saves them).
	saved, err := json.MarshalIndent(&AutoTable{Version: AutoTableVersion, Device: "GPU X", Entries: []AutoEntry{
		{Op: "all_reduce", World: 2, Class: "16bit", Bytes: 8 << 10, Ranked: []string{"one_shot", "nccl"}},
	}}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(saved, '\n'), 0o600); err != nil {
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

func TestBenchCallShapes(t *testing.T) {
	d := fakeDevice(0, 4)
	in, out := fakeBuf(d, 1<<20, ir.Symmetric), fakeBuf(d, 1<<20, ir.Symmetric)
	for _, op := range []ir.Opcode{ir.OpAllReduce, ir.OpAllGather, ir.OpReduceScatter, ir.OpAllToAll} {
		c, ok := BenchCall(op, ir.BF16, 4096, 4, in, out)
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
	if _, ok := BenchCall(ir.OpAllGather, ir.BF16, 3, 4, in, out); ok {
		t.Errorf("a size smaller than the world made a call")
	}
}
