package ir

import "fmt"

// Builder makes programs from Go code:
//
//	b := ir.NewBuilder(ir.LinearMesh(4))
//	x := b.Input("x", ir.Tensor(ir.F32, 8, 16).Sharded(0).In(ir.Symmetric))
//	y := b.Op(ir.OpAllGather, x).Word("algo", "ring").Type(ir.Tensor(ir.F32, 8, 16).In(ir.Symmetric)).Value()
//	b.Output(y)
//	prog, err := b.Program()
//
// Results are named %0, %1, ... unless named with Name. Types may be left for
// the type-inference pass.
type Builder struct {
	prog  *Program
	block *Block
	next  int
	used  map[string]bool
}

// NewBuilder starts a program on mesh.
func NewBuilder(mesh Mesh) *Builder {
	p := &Program{Mesh: mesh, Body: &Block{}}
	return &Builder{prog: p, block: p.Body, used: map[string]bool{}}
}

func (b *Builder) fresh() string {
	for {
		name := fmt.Sprint(b.next)
		b.next++
		if !b.used[name] {
			b.used[name] = true
			return name
		}
	}
}

// claim takes name for a value, or name.1, name.2, … when a value has it
// already (helpers that build loops, called twice, name their indexes
// alike), so every name is defined once.
func (b *Builder) claim(name string) string {
	if name == "" {
		return b.fresh()
	}
	base := name
	for n := 1; b.used[name]; n++ {
		name = fmt.Sprintf("%s.%d", base, n)
	}
	b.used[name] = true
	return name
}

// Mesh is the mesh of the program being built.
func (b *Builder) Mesh() Mesh { return b.prog.Mesh }

// Input declares a program input.
func (b *Builder) Input(name string, t *TensorType) *Value {
	v := &Value{Name: b.claim(name), Type: t}
	b.prog.Inputs = append(b.prog.Inputs, v)
	return v
}

// Output marks values as the program's outputs.
func (b *Builder) Output(vs ...*Value) { b.prog.Outputs = append(b.prog.Outputs, vs...) }

// Int returns an integer literal operand.
func Int(i int64) *Value { return &Value{Lit: &Literal{Int: i}} }

// Float returns a float literal operand.
func Float(f float64) *Value { return &Value{Lit: &Literal{IsFloat: true, Float: f}} }

// OpBuilder sets an op's attributes, names and types as it is made.
type OpBuilder struct {
	b  *Builder
	op *Op
}

// Op appends an op with the results its schema gives (one for a fusion) and
// returns a builder to finish it.
func (b *Builder) Op(code Opcode, operands ...*Value) *OpBuilder {
	op := &Op{Code: code, Operands: operands}
	n := code.Info().Results
	if n == Variadic {
		n = 1
	}
	for i := 0; i < n; i++ {
		op.Results = append(op.Results, &Value{Name: b.fresh(), Def: op})
	}
	b.block.Ops = append(b.block.Ops, op)
	return &OpBuilder{b: b, op: op}
}

// Name names the op's results in order.
func (ob *OpBuilder) Name(names ...string) *OpBuilder {
	for i, n := range names {
		if i < len(ob.op.Results) {
			ob.op.Results[i].Name = ob.b.claim(n)
		}
	}
	return ob
}

// Type sets the types of the op's results in order.
func (ob *OpBuilder) Type(ts ...Type) *OpBuilder {
	for i, t := range ts {
		if i < len(ob.op.Results) {
			ob.op.Results[i].Type = t
		}
	}
	return ob
}

// Attr sets an attribute.
func (ob *OpBuilder) Attr(key string, v AttrValue) *OpBuilder {
	ob.op.SetAttr(key, v)
	return ob
}

// Int sets an integer attribute.
func (ob *OpBuilder) Int(key string, i int64) *OpBuilder {
	return ob.Attr(key, AttrValue{Kind: KindInt, Int: i})
}

// Ints sets an integer-list attribute.
func (ob *OpBuilder) Ints(key string, xs ...int64) *OpBuilder {
	return ob.Attr(key, AttrValue{Kind: KindInts, Ints: xs})
}

// Word sets a word attribute (algo=ring, op=sum, dtype=bf16).
func (ob *OpBuilder) Word(key, w string) *OpBuilder {
	return ob.Attr(key, AttrValue{Kind: KindWord, Word: w})
}

// Bool sets a boolean attribute.
func (ob *OpBuilder) Bool(key string, x bool) *OpBuilder {
	return ob.Attr(key, AttrValue{Kind: KindBool, Bool: x})
}

// Peer sets the peer attribute: an absolute rank, or relative to this rank.
// An absolute rank is stored as a plain integer, as the parser reads
// `peer=2`, so that a built program and its printed text parse back equal.
func (ob *OpBuilder) Peer(n int64, relative bool) *OpBuilder {
	if !relative {
		return ob.Int("peer", n)
	}
	return ob.Attr("peer", AttrValue{Kind: KindPeer, Int: n, Relative: true})
}

// Op returns the op.
func (ob *OpBuilder) Op() *Op { return ob.op }

// Value returns the op's single result (nil for an op without one).
func (ob *OpBuilder) Value() *Value { return ob.op.Result() }

// Unary appends a one-operand op and returns its result.
func (b *Builder) Unary(code Opcode, x *Value) *Value { return b.Op(code, x).Value() }

// Binary appends a two-operand op and returns its result.
func (b *Builder) Binary(code Opcode, x, y *Value) *Value { return b.Op(code, x, y).Value() }

// Alloc appends an allocation of type t.
func (b *Builder) Alloc(t *TensorType) *Value { return b.Op(OpAlloc).Type(t).Value() }

// AllocUninit appends `alloc uninit=true : t`: a tensor whose contents are
// undefined until written (no zero-fill), for one the program overwrites
// whole before reading it.
func (b *Builder) AllocUninit(t *TensorType) *Value {
	return b.Op(OpAlloc).Bool("uninit", true).Type(t).Value()
}

// Collective appends a collective with algorithm algo (no algo attribute
// for AlgoAuto).
func (b *Builder) Collective(code Opcode, x *Value, algo Algo) *OpBuilder {
	ob := b.Op(code, x)
	if algo != AlgoAuto {
		ob.Word("algo", algo.String())
	}
	return ob
}

// For appends `for %i = from to to step step` and builds its body with body,
// which receives the index.
func (b *Builder) For(index string, from, to, step int64, body func(i *Value)) *Op {
	op := &Op{Code: OpFor, Body: &Block{}}
	op.SetAttr("from", AttrValue{Kind: KindInt, Int: from})
	op.SetAttr("to", AttrValue{Kind: KindInt, Int: to})
	if step != 1 {
		op.SetAttr("step", AttrValue{Kind: KindInt, Int: step})
	}
	i := &Value{Name: b.claim(index), Type: &ScalarType{DType: I64}}
	op.Body.Args = []*Value{i}
	b.block.Ops = append(b.block.Ops, op)
	b.within(op.Body, func() { body(i) })
	return op
}

// Fusion appends a fusion of the given inputs; body builds the ops and
// returns the values to yield, which become the fusion's results.
func (b *Builder) Fusion(inputs []*Value, body func() []*Value) []*Value {
	op := &Op{Code: OpFusion, Operands: inputs, Body: &Block{}}
	b.block.Ops = append(b.block.Ops, op)
	var yields []*Value
	b.within(op.Body, func() {
		yields = body()
		op.Body.Ops = append(op.Body.Ops, &Op{Code: OpYield, Operands: yields})
	})
	for range yields {
		op.Results = append(op.Results, &Value{Name: b.fresh(), Def: op})
	}
	return op.Results
}

func (b *Builder) within(blk *Block, f func()) {
	saved := b.block
	b.block = blk
	defer func() { b.block = saved }()
	f()
}

// Program verifies and returns the program.
func (b *Builder) Program() (*Program, error) {
	if err := Verify(b.prog); err != nil {
		return nil, err
	}
	return b.prog, nil
}
