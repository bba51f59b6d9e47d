package ir

import (
	"math"
	"strings"
	"testing"
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
		if got := FormatAttrValue(AttrValue{Kind: KindFloat, Float: f}); got != want {
			t.Errorf("float %v prints %q, want %q", f, got, want)
		}
		if got := Float(f).String(); got != want {
			t.Errorf("literal %v prints %q, want %q", f, got, want)
		}
	}
	if got := Int(-7).String(); got != "-7" {
		t.Errorf("int literal prints %q", got)
	}
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
		if got := FormatAttrValue(c.v); got != c.want {
			t.Errorf("%+v prints %q, want %q", c.v, got, c.want)
		}
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
		if got := p.String(); !strings.HasPrefix(got, c.want) {
			t.Errorf("mesh %v prints %q, want prefix %q", c.mesh.Devices, got, c.want)
		}
	}
}

func TestPrintOpDetails(t *testing.T) {
	x := &Value{Name: "x", Type: Tensor(F32, 4)}
	op := &Op{Code: OpAllGather, Operands: []*Value{x}}
	op.SetAttr("async", AttrValue{Kind: KindBool, Bool: true})
	op.SetAttr("algo", AttrValue{Kind: KindWord, Word: "ring"})
	op.Results = []*Value{{Name: "g", Def: op}}
	// Attributes print sorted; no type annotation while a result has none.
	if got, want := op.String(), "%g = all_gather %x algo=ring async=true"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	op.Results[0].Type = Tensor(F32, 4).In(Symmetric)
	if got, want := op.String(), "%g = all_gather %x algo=ring async=true : f32[4] symmetric"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// A partly annotated multi-result op prints no annotation at all.
	f := &Op{Code: OpFusion, Operands: []*Value{x}, Body: &Block{}}
	f.Results = []*Value{{Name: "a", Def: f, Type: Tensor(F32, 4)}, {Name: "b", Def: f}}
	f.Body.Ops = []*Op{{Code: OpYield, Operands: []*Value{x, x}}}
	if got, want := f.String(), "%a, %b = fusion %x {\n  yield %x, %x\n}"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	s := &Op{Code: OpStream}
	s.Results = []*Value{{Name: "s", Def: s, Type: &StreamType{}}}
	if got, want := s.String(), "%s = stream : stream"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
