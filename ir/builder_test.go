package ir_test

import (
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

var update = flag.Bool("update", false, "rewrite golden files")

// buildExample makes, through the Builder, a program touching each of its
// methods: inputs, named and numbered results, every attribute setter, a for
// loop and a fusion.
func buildExample(t *testing.T) *ir.Program {
	t.Helper()
	b := ir.NewBuilder(ir.Mesh{Devices: []int{0, 2, 4, 6}})
	x := b.Input("x", ir.Tensor(ir.F32, 8, 16).Sharded(0).In(ir.Symmetric))
	w := b.Input("w", ir.Tensor(ir.BF16, 16, 16))
	a := b.Unary(ir.OpRelu, x)
	m := b.Binary(ir.OpMul, a, ir.Float(2))
	g := b.Collective(ir.OpAllGather, m, ir.AlgoRing).Type(ir.Tensor(ir.F32, 8, 16).In(ir.Symmetric)).Name("g").Value()
	s := b.Op(ir.OpSum, g).Ints("axes", 1).Bool("keepdim", false).Value()
	r := b.Collective(ir.OpReduceScatter, g, ir.AlgoAuto).Word("op", "max").Int("axis", 0).Value()
	c := b.Op(ir.OpCast, w).Word("dtype", "f32").Value()
	b.Op(ir.OpSend, m).Peer(1, true)
	y := b.Op(ir.OpRecv).Peer(-1, true).Type(ir.Tensor(ir.F32, 8, 16).Sharded(0)).Value()
	b.Op(ir.OpSend, y).Peer(3, false)
	buf := b.Alloc(ir.Tensor(ir.F32, 2, 16))
	b.For("i", 0, 8, 2, func(i *ir.Value) {
		b.Op(ir.OpSelect, g, i).Int("axis", 0).Name("row")
		b.Op(ir.OpCopy, x, buf)
	})
	outs := b.Fusion([]*ir.Value{x, c}, func() []*ir.Value {
		t1 := b.Binary(ir.OpAdd, x, ir.Float(-0.5))
		t2 := b.Op(ir.OpReduceMax, t1).Ints("axes", 1).Value()
		return []*ir.Value{t1, t2}
	})
	b.Op(ir.OpBarrier)
	b.Output(s, r, outs[0], outs[1], y)
	p, err := b.Program()
	require.NoError(t, err)
	return p
}

func TestBuilderGolden(t *testing.T) {
	got := buildExample(t).String()
	const golden = "testdata/builder.hir"
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "go test -update writes it")
	assert.Empty(t, cmp.Diff(string(want), got), "printed program differs from %s (-want +got)", golden)
}

func TestBuilderOutputParsesBack(t *testing.T) {
	built := buildExample(t)
	parsed, err := parser.Parse("built.hir", []byte(built.String()))
	require.NoError(t, err, "%s", built)
	parsed.File = built.File
	opts := cmp.Options{cmpopts.IgnoreTypes(ir.Pos{}), cmpopts.EquateEmpty()}
	assert.Empty(t, cmp.Diff(built, parsed, opts), "parsed program differs from the built one (-built +parsed)")
	assert.Equal(t, built.String(), parsed.String(), "printing the parsed program gives different text")
}

func TestBuilderRejectsInvalidProgram(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(2))
	x := b.Input("x", ir.Tensor(ir.F32, 4))
	b.Op(ir.OpAdd, x)
	_, err := b.Program()
	assert.EqualError(t, err, "<input>: add takes 2 operands, got 1")
}
