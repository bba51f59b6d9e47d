package ir

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// verifyCase builds a program around one mistake; want is the one message
// Verify must give.
type verifyCase struct {
	name  string
	build func(p *Program, x *Value)
	want  string
}

func newOp(code Opcode, operands []*Value, results ...string) *Op {
	op := &Op{Code: code, Operands: operands, Pos: NewPos("v.hir", 9, 1)}
	for _, r := range results {
		op.Results = append(op.Results, &Value{Name: r, Def: op})
	}
	return op
}

func add(p *Program, ops ...*Op) { p.Body.Ops = append(p.Body.Ops, ops...) }

func fusionOf(operands []*Value, body ...*Op) *Op {
	f := newOp(OpFusion, operands, "f")
	f.Body = &Block{Ops: body}
	return f
}

func forLoop(index string, body ...*Op) *Op {
	op := newOp(OpFor, nil)
	op.SetAttr("from", AttrValue{Kind: KindInt})
	op.SetAttr("to", AttrValue{Kind: KindInt, Int: 4})
	op.Body = &Block{Ops: body}
	if index != "" {
		op.Body.Args = []*Value{{Name: index, Type: &ScalarType{DType: I64}}}
	}
	return op
}

func withAttr(op *Op, key string, v AttrValue) *Op {
	op.Attrs = append(op.Attrs, Attr{Key: key, Value: v})
	return op
}

var verifyCases = []verifyCase{
	{"no mesh", func(p *Program, x *Value) { p.Mesh = Mesh{} }, "the program declares no mesh"},
	{"negative device", func(p *Program, x *Value) { p.Mesh = Mesh{Devices: []int{0, -1}} }, "mesh device -1 is negative"},
	{"device twice", func(p *Program, x *Value) { p.Mesh = Mesh{Devices: []int{3, 3}} }, "mesh device 3 is listed twice"},
	{"input type", func(p *Program, x *Value) { x.Type = &ScalarType{DType: F32} }, "input %x needs a tensor type"},
	{"input with def", func(p *Program, x *Value) { x.Def = newOp(OpRelu, nil) }, "input %x must not have a defining op"},
	{"defined twice", func(p *Program, x *Value) { add(p, newOp(OpRelu, []*Value{x}, "x")) }, "%x is defined twice"},
	{"unnamed result", func(p *Program, x *Value) { add(p, newOp(OpRelu, []*Value{x}, "")) }, "a defined value needs a name"},
	{"nil block argument", func(p *Program, x *Value) {
		loop := forLoop("")
		loop.Body.Args = []*Value{nil}
		add(p, loop)
	}, "nil value"},
	{"output undefined", func(p *Program, x *Value) { p.Outputs = []*Value{{Name: "ghost"}} }, "output %ghost is not defined at the top level"},
	{"output from a body", func(p *Program, x *Value) {
		r := newOp(OpRelu, []*Value{x}, "r")
		add(p, forLoop("i", r))
		p.Outputs = []*Value{r.Results[0]}
	}, "output %r is not defined at the top level"},
	{"invalid opcode", func(p *Program, x *Value) { add(p, newOp(OpInvalid, nil)) }, "invalid opcode 0"},
	{"exact arity", func(p *Program, x *Value) { add(p, newOp(OpAdd, []*Value{x}, "a")) }, "add takes 2 operands, got 1"},
	{"minimum arity", func(p *Program, x *Value) { add(p, newOp(OpCopy, nil, "c")) }, "copy takes at least 1 operand, got 0"},
	{"maximum arity", func(p *Program, x *Value) { add(p, newOp(OpCopy, []*Value{x, x, x}, "c")) }, "copy takes at most 2 operands, got 3"},
	{"nil operand", func(p *Program, x *Value) { add(p, newOp(OpRelu, []*Value{nil}, "r")) }, "relu: operand 0 is nil"},
	{"literal where a value is needed", func(p *Program, x *Value) { add(p, newOp(OpSelect, []*Value{Int(1), Int(0)}, "s")) }, "select: operand 0 must be a value, not the literal 1"},
	{"operand not defined", func(p *Program, x *Value) { add(p, newOp(OpRelu, []*Value{{Name: "ghost"}}, "r")) }, "relu: %ghost is not defined here"},
	{"use before definition", func(p *Program, x *Value) {
		later := newOp(OpRelu, []*Value{x}, "later")
		add(p, newOp(OpNeg, []*Value{later.Results[0]}, "n"), later)
	}, "neg: %later is not defined here"},
	{"fusion body sees only its operands", func(p *Program, x *Value) {
		y := newOp(OpRelu, []*Value{x}, "y")
		inner := newOp(OpAdd, []*Value{x, y.Results[0]}, "t")
		add(p, y, fusionOf([]*Value{x}, inner, newOp(OpYield, inner.Results)))
	}, "add: %y is not defined here"},
	{"attribute twice", func(p *Program, x *Value) {
		add(p, withAttr(withAttr(newOp(OpAllReduce, []*Value{x}, "r"), "op", AttrValue{Kind: KindWord, Word: "sum"}), "op", AttrValue{Kind: KindWord, Word: "max"}))
	}, "all_reduce: attribute op is given twice"},
	{"no attributes", func(p *Program, x *Value) { add(p, withAttr(newOp(OpRelu, []*Value{x}, "r"), "k", AttrValue{})) }, "relu takes no attributes, got k"},
	{"unknown attribute", func(p *Program, x *Value) {
		add(p, withAttr(newOp(OpAllGather, []*Value{x}, "g"), "k", AttrValue{}))
	}, "all_gather has no attribute k (it takes algo or async)"},
	{"attribute kind", func(p *Program, x *Value) {
		add(p, withAttr(newOp(OpAllGather, []*Value{x}, "g"), "async", AttrValue{Kind: KindInt, Int: 1}))
	}, "all_gather: attribute async takes true or false, got 1"},
	{"integer for a list", func(p *Program, x *Value) {
		add(p, withAttr(newOp(OpSum, []*Value{x}, "s"), "axes", AttrValue{Kind: KindInt, Int: 0}))
	}, "sum: attribute axes takes a list of integers, got 0 (write axes=[0])"},
	{"word not allowed", func(p *Program, x *Value) {
		add(p, withAttr(newOp(OpCast, []*Value{x}, "c"), "dtype", AttrValue{Kind: KindWord, Word: "f8"}))
	}, "cast: dtype=f8 is not one of f32, f16, bf16, f64, i32, i64 or bool"},
	{"required attribute", func(p *Program, x *Value) { add(p, newOp(OpReshape, []*Value{x}, "r")) }, "reshape needs attribute shape (a list of integers)"},
	{"relative peer on a non-peer", func(p *Program, x *Value) {
		add(p, withAttr(newOp(OpBroadcast, []*Value{x}, "b"), "root", AttrValue{Kind: KindPeer, Int: 1, Relative: true}))
	}, "broadcast: attribute root takes an integer, got +1"},
	{"variadic results", func(p *Program, x *Value) {
		f := fusionOf([]*Value{x}, newOp(OpYield, nil))
		f.Results = nil
		add(p, f)
	}, "fusion needs at least one result"},
	{"unexpected result", func(p *Program, x *Value) {
		add(p, withAttr(newOp(OpSend, []*Value{x}, "s"), "peer", AttrValue{Kind: KindInt}))
	}, "send has no result, but 1 is named"},
	{"result count", func(p *Program, x *Value) { add(p, newOp(OpRelu, []*Value{x}, "a", "b")) }, "relu has 1 result, but 2 are named"},
	{"result points elsewhere", func(p *Program, x *Value) {
		op := newOp(OpRelu, []*Value{x}, "r")
		op.Results[0].Def = nil
		add(p, op)
	}, "relu: result %r does not point back to its op"},
	{"body required", func(p *Program, x *Value) {
		f := fusionOf([]*Value{x})
		f.Body = nil
		add(p, f)
	}, "fusion needs a body"},
	{"body not allowed", func(p *Program, x *Value) {
		op := newOp(OpRelu, []*Value{x}, "r")
		op.Body = &Block{}
		add(p, op)
	}, "relu takes no body"},
	{"fusion block arguments", func(p *Program, x *Value) {
		f := fusionOf([]*Value{x}, newOp(OpYield, []*Value{x}))
		f.Body.Args = []*Value{{Name: "i"}}
		add(p, f)
	}, "fusion takes no block arguments"},
	{"for index", func(p *Program, x *Value) { add(p, forLoop("")) }, "for needs exactly one index"},
	{"for step", func(p *Program, x *Value) {
		add(p, withAttr(forLoop("i"), "step", AttrValue{Kind: KindInt, Int: -1}))
	}, "for: step must be positive, got -1"},
	{"yield outside fusion", func(p *Program, x *Value) { add(p, newOp(OpYield, []*Value{x})) }, "yield may only end a fusion body"},
	{"yield not last", func(p *Program, x *Value) {
		add(p, fusionOf([]*Value{x}, newOp(OpYield, []*Value{x}), newOp(OpRelu, []*Value{x}, "r"), newOp(OpYield, []*Value{x})))
	}, "yield must be the last op of a fusion body"},
	{"fusion without yield", func(p *Program, x *Value) { add(p, fusionOf([]*Value{x}, newOp(OpRelu, []*Value{x}, "r"))) }, "v.hir:9:1: a fusion body must end with yield"},
	{"yield count", func(p *Program, x *Value) { add(p, fusionOf([]*Value{x}, newOp(OpYield, []*Value{x, x}))) }, "fusion has 1 result but yields 2 values"},
}

func TestVerifyErrors(t *testing.T) {
	for _, c := range verifyCases {
		t.Run(c.name, func(t *testing.T) {
			x := &Value{Name: "x", Type: Tensor(F32, 8, 4)}
			p := &Program{File: "v.hir", Mesh: LinearMesh(2), Inputs: []*Value{x}, Body: &Block{}}
			c.build(p, x)
			err := Verify(p)
			require.Error(t, err, "Verify accepted the program; want %q\n%s", c.want, p)
			require.IsType(t, ErrorList(nil), err)
			list := err.(ErrorList)
			if assert.Len(t, list, 1, "want one error containing %q", c.want) {
				assert.ErrorContains(t, list[0], c.want)
			}
		})
	}
}

func TestVerifyAcceptsPlainIntegerPeer(t *testing.T) {
	x := &Value{Name: "x", Type: Tensor(F32, 8)}
	p := &Program{Mesh: LinearMesh(2), Inputs: []*Value{x}, Body: &Block{}}
	add(p, withAttr(newOp(OpSend, []*Value{x}), "peer", AttrValue{Kind: KindInt, Int: 1}))
	add(p, withAttr(newOp(OpSend, []*Value{x}), "peer", AttrValue{Kind: KindPeer, Int: -1, Relative: true}))
	require.NoError(t, Verify(p))
}

func TestErrorListSortsAndJoins(t *testing.T) {
	var l ErrorList
	require.NoError(t, l.Err(), "empty list should be no error")
	l.Add(NewPos("b.hir", 1, 1), "third")
	l.Add(NewPos("a.hir", 2, 5), "second")
	l.Add(NewPos("a.hir", 2, 1), "first %d", 1)
	want := "a.hir:2:1: first 1\na.hir:2:5: second\nb.hir:1:1: third"
	assert.EqualError(t, l.Err(), want)
	assert.Equal(t, "<input>", Pos{}.String(), "zero Pos")
}

func TestPosJSON(t *testing.T) {
	for _, p := range []Pos{{}, FilePos("a.hir"), NewPos("dir/b.hir", 3, 14)} {
		raw, err := json.Marshal(p)
		require.NoError(t, err)
		var back Pos
		require.NoError(t, json.Unmarshal(raw, &back))
		assert.Equal(t, p, back, "%s", raw)
		assert.Equal(t, p.String(), back.String())
	}
}

// TestVerifyLongAttrLists: errors about a long list of attributes, in
// whatever order their positions are (the parser's, sorted by key, may be
// the reverse of the text's), are those Verify gives when it adds each one
// as it meets it (attrErrorsPast off): the same first MaxErrors, worded
// alike, and the same count.
func TestVerifyLongAttrLists(t *testing.T) {
	const n = 700
	orders := map[string]func(k int) int{
		"ascending":  func(k int) int { return k },
		"descending": func(k int) int { return n - k },
		"shuffled":   func(k int) int { return (k * 7919) % n },
		"few places": func(k int) int { return k % 3 },
		"turns late": func(k int) int {
			if k < n/3 {
				return k
			}
			return 2*n - k
		},
	}
	for name, col := range orders {
		for _, invalid := range []bool{false, true} {
			for _, sorted := range []bool{false, true} {
				p := &Program{File: "v.hir", Mesh: LinearMesh(2), Body: &Block{}}
				x := &Value{Name: "x", Type: Tensor(F32, 8, 4)}
				p.Inputs = []*Value{x}
				ag := newOp(OpAllGather, []*Value{x}, "g")
				for k := range n {
					a := Attr{Key: "k" + string(rune('a'+k%5)), Value: AttrValue{Kind: KindInt, Int: int64(k)}, Pos: NewPos("v.hir", 9, 10+col(k))}
					switch k % 4 {
					case 1:
						a.Key = "async" // given twice, or a wrong kind
					case 2:
						a.Key = "algo"
						a.Value = AttrValue{Kind: KindWord, Word: "nosuch"}
					}
					if invalid && k%2 == 0 {
						a.Pos = Pos{}
					}
					ag.Attrs = append(ag.Attrs, a)
				}
				if sorted {
					slices.SortStableFunc(ag.Attrs, func(a, b Attr) int { return strings.Compare(a.Key, b.Key) })
				}
				add(p, ag)
				got := Verify(p)
				cut := attrCutMin
				attrCutMin = math.MaxInt
				want := Verify(p)
				attrCutMin = cut
				require.Error(t, want)
				assert.Equal(t, want.Error(), got.Error(), "%s, invalid positions %v, sorted %v", name, invalid, sorted)
				assert.Equal(t, want.(ErrorList).Count(), got.(ErrorList).Count())
			}
		}
	}
}
