package ir

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFormatFloat(t *testing.T) {
	cases := map[float64]string{
		2:                    "2.0",
		-3:                   "-3.0",
		0.1:                  "0.1",
		1e21:                 "1e+21",
		1e-7:                 "1e-07",
		123456789:            "1.23456789e+08",
		math.Copysign(0, -1): "-0.0",
		math.Inf(1):          "inf",
		math.Inf(-1):         "-inf",
		math.NaN():           "nan",
	}
	for f, want := range cases {
		assert.Equal(t, want, FormatAttrValue(AttrValue{Kind: KindFloat, Float: f}), "float %v", f)
		assert.Equal(t, want, Float(f).String(), "literal %v", f)
	}
	assert.Equal(t, "-7", Int(-7).String(), "int literal")
}

func TestFormatAttrValue(t *testing.T) {
	cases := []struct {
		v    AttrValue
		want string
	}{
		{AttrValue{Kind: KindPeer, Int: 1, Relative: true}, "+1"},
		{AttrValue{Kind: KindPeer, Int: -1, Relative: true}, "-1"},
		{AttrValue{Kind: KindPeer, Int: 0, Relative: true}, "+0"},
		{AttrValue{Kind: KindPeer, Int: 2}, "2"},
		{AttrValue{Kind: KindInt, Int: -4}, "-4"},
		{AttrValue{Kind: KindBool, Bool: true}, "true"},
		{AttrValue{Kind: KindWord, Word: "ring"}, "ring"},
		{AttrValue{Kind: KindInts, Ints: []int64{0, -1}}, "[0, -1]"},
		{AttrValue{Kind: KindInts}, "[]"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, FormatAttrValue(c.v), "%+v", c.v)
	}
}

func TestPrintMesh(t *testing.T) {
	for _, c := range []struct {
		mesh Mesh
		want string
	}{
		{LinearMesh(4), "mesh 4\n"},
		{Mesh{Devices: []int{1, 3, 5}}, "mesh [1, 3, 5]\n"},
		{Mesh{Devices: []int{1, 0}}, "mesh [1, 0]\n"},
	} {
		p := &Program{Mesh: c.mesh, Body: &Block{}}
		got := p.String()
		assert.True(t, strings.HasPrefix(got, c.want), "mesh %v prints %q, want prefix %q", c.mesh.Devices, got, c.want)
	}
}

func TestPrintOpDetails(t *testing.T) {
	x := &Value{Name: "x", Type: Tensor(F32, 4)}
	op := &Op{Code: OpAllGather, Operands: []*Value{x}}
	op.SetAttr("async", AttrValue{Kind: KindBool, Bool: true})
	op.SetAttr("algo", AttrValue{Kind: KindWord, Word: "ring"})
	op.Results = []*Value{{Name: "g", Def: op}}
	// Attributes print sorted; no type annotation while a result has none.
	assert.Equal(t, "%g = all_gather %x algo=ring async=true", op.String())
	op.Results[0].Type = Tensor(F32, 4).In(Symmetric)
	assert.Equal(t, "%g = all_gather %x algo=ring async=true : f32[4] symmetric", op.String())
	// A partly annotated multi-result op prints no annotation at all.
	f := &Op{Code: OpFusion, Operands: []*Value{x}, Body: &Block{}}
	f.Results = []*Value{{Name: "a", Def: f, Type: Tensor(F32, 4)}, {Name: "b", Def: f}}
	f.Body.Ops = []*Op{{Code: OpYield, Operands: []*Value{x, x}}}
	assert.Equal(t, "%a, %b = fusion %x {\n  yield %x, %x\n}", f.String())
	s := &Op{Code: OpStream}
	s.Results = []*Value{{Name: "s", Def: s, Type: &StreamType{}}}
	assert.Equal(t, "%s = stream : stream", s.String())
}

// TestPrintLines: the lines PrintLines gives, indented and joined, are
// what Print writes, and each says what it holds.
func TestPrintLines(t *testing.T) {
	x := &Value{Name: "x", Type: Tensor(F32, 4)}
	loop := &Op{Code: OpFor, Body: &Block{Args: []*Value{{Name: "i"}}}}
	loop.SetAttr("from", AttrValue{Kind: KindInt, Int: 0})
	loop.SetAttr("to", AttrValue{Kind: KindInt, Int: 2})
	inner := &Op{Code: OpRelu, Operands: []*Value{x}}
	inner.Results = []*Value{{Name: "r", Def: inner}}
	loop.Body.Ops = []*Op{inner}
	barrier := &Op{Code: OpBarrier}
	p := &Program{Mesh: LinearMesh(2), Inputs: []*Value{x}, Body: &Block{Ops: []*Op{loop, barrier}}, Outputs: []*Value{x}}

	var b strings.Builder
	var kinds []LineKind
	var ops []*Op
	PrintLines(p, func(l Line) {
		b.WriteString(strings.Repeat("  ", l.Depth) + l.Text + "\n")
		kinds = append(kinds, l.Kind)
		ops = append(ops, l.Op)
		if l.Kind == LineInput {
			assert.Same(t, x, l.Value)
		}
	})
	assert.Equal(t, p.String(), b.String())
	assert.Equal(t, "mesh 2\n\ninput %x : f32[4]\nfor %i = 0 to 2 {\n  %r = relu %x\n}\nbarrier\noutput %x\n", b.String())
	assert.Equal(t, []LineKind{LineMesh, LineBlank, LineInput, LineOp, LineOp, LineClose, LineOp, LineOutput}, kinds)
	assert.Equal(t, []*Op{nil, nil, nil, loop, inner, loop, barrier, nil}, ops)
}
