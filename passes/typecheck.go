package passes

import (
	"github.com/hirlab/hir/ir"
)

// The type-check pass: its driver, the checker's state and slabs, how an
// inferred type settles against a result's annotation, and the dispatch of
// each op to its type rule (the rules, by op class, are in typecheck_*.go
// and streamops.go).

// typecheck infers every result type (docs/SEMANTICS.md) and checks it
// against the result annotations. A type the text gives before this pass is
// an annotation: it must agree with the inferred type in dtype, shape and
// sharding, and its memory type is where an allocating op puts its result.
// After the pass every value has a type, so running it again changes nothing.
func typecheck(p *ir.Program, _ *Context) error {
	c := &checker{loops: map[*ir.Value]loopRange{}}
	top := newBlockState()
	for _, in := range p.Inputs {
		c.oneShardAxis(in.Pos, "input "+in.String()+" is declared", in.Type)
	}
	c.block(p.Body, top)
	for _, out := range p.Outputs {
		if out.Type != nil && out.Tensor() == nil {
			c.errs.Add(out.Pos, "%s is a %s, which cannot be a program output; a program outputs tensors", out, out.Type)
			continue
		}
		if op := top.pending[out]; op != nil {
			c.errs.Add(out.Pos, "output %s comes from an async %s that is never waited for; add `wait %s`", out, op.Code, out)
		}
	}
	return c.errs.Err()
}

type checker struct {
	errs  ir.ErrorList
	loops map[*ir.Value]loopRange
	// slabs for the types settle gives results (clone)
	types  []ir.TensorType
	dims   []ir.Dim
	oneBuf [1]inferred // one's
	// built's type and the dims it is built from (scratchDims): good until
	// the next op, as oneBuf
	scratch      ir.TensorType
	scratchBuf   []ir.Dim
	settledTypes map[typeKey]*ir.TensorType // settled's
	// pointwise's operands and their types, reused from op to op
	pwVals  []*ir.Value
	pwTypes []*ir.TensorType
}

// equalIn is a.In(m).Equal(b) without the copy of a's dims.
func equalIn(a *ir.TensorType, m ir.MemoryType, b *ir.TensorType) bool {
	c := *a
	c.Mem = m
	return c.Equal(b)
}

// unsharded is t.Unsharded, from the checker's slabs.
func (c *checker) unsharded(t *ir.TensorType) *ir.TensorType {
	u := c.clone(t)
	for i := range u.Dims {
		u.Dims[i].Parallel = ir.Serial
	}
	return u
}

// clone is t.Clone, from the checker's slabs.
func (c *checker) clone(t *ir.TensorType) *ir.TensorType {
	out := c.newType(t.DType, nil)
	out.Mem = t.Mem
	if len(t.Dims) > 0 { // nil for none, as Clone's
		out.Dims = append(c.dimSlice(len(t.Dims)), t.Dims...)
	}
	return out
}

// newType is a tensor type from the checker's slabs.
func (c *checker) newType(dt ir.DType, dims []ir.Dim) *ir.TensorType {
	if len(c.types) == cap(c.types) {
		c.types = make([]ir.TensorType, 0, 256)
	}
	c.types = c.types[:len(c.types)+1]
	out := &c.types[len(c.types)-1]
	out.DType, out.Dims = dt, dims
	return out
}

// dimSlice is an empty slice of capacity n from the checker's slabs.
func (c *checker) dimSlice(n int) []ir.Dim {
	if n > 64 {
		return make([]ir.Dim, 0, n)
	}
	if cap(c.dims)-len(c.dims) < n {
		c.dims = make([]ir.Dim, 0, 1024)
	}
	start := len(c.dims)
	c.dims = c.dims[:start+n]
	return c.dims[start : start : start+n]
}

// scratchDims is an empty slice of capacity n for the dims of a type being
// built: good until the next op (settle copies what it keeps).
func (c *checker) scratchDims(n int) []ir.Dim {
	if cap(c.scratchBuf) < n {
		c.scratchBuf = make([]ir.Dim, 0, max(n, 8))
	}
	return c.scratchBuf[:0]
}

// built is the single result of an op that built its type from
// scratchDims: the type is the checker's scratch, good until the next op.
func (c *checker) built(dt ir.DType, dims []ir.Dim) []inferred {
	c.scratch = ir.TensorType{DType: dt, Dims: dims}
	return c.one(&c.scratch)
}

// loopRange is the first and last value a loop index takes.
type loopRange struct{ first, last int64 }

// blockState tracks the async results of a block not yet waited for, and
// those waited for already.
type blockState struct {
	pending map[*ir.Value]*ir.Op
	waited  map[*ir.Value]ir.Pos
	// outer marks pending results of an enclosing block: a loop body that
	// waited for one would wait on every iteration.
	outer map[*ir.Value]bool
}

func newBlockState() *blockState {
	return &blockState{pending: map[*ir.Value]*ir.Op{}, waited: map[*ir.Value]ir.Pos{}, outer: map[*ir.Value]bool{}}
}

func (s *blockState) child() *blockState {
	c := newBlockState()
	for v, op := range s.pending {
		c.pending[v] = op
		c.outer[v] = true
	}
	for v, pos := range s.waited {
		c.waited[v] = pos
	}
	return c
}

// inferred is what an op gives for one result.
type inferred struct {
	t ir.Type
	// base is set when the result aliases base's storage: its memory type is
	// the storage's, not the annotation's.
	base *ir.Value
	// memFixed says the op itself names the memory type (copy mem=M).
	memFixed bool
}

func (c *checker) block(b *ir.Block, st *blockState) {
	for _, op := range b.Ops {
		c.op(op, st)
	}
}

func (c *checker) op(op *ir.Op, st *blockState) {
	for _, r := range op.Results {
		if r.Type != nil && !oneShardAxisOK(r.Type) && !c.oneShardAxis(op.Pos, op.Code.String()+": "+r.String()+" is annotated", r.Type) {
			return
		}
	}
	for _, x := range op.Operands {
		if d := st.pending[x]; d != nil && op.Code != ir.OpWait {
			c.errs.Add(op.Pos, "%s: %s is the result of an async %s; it may be used only after `wait %s`", op.Code, x, d.Code, x)
		}
	}
	res, ok := c.infer(op, st)
	if !ok {
		return // the error is reported; results keep their annotations
	}
	for i, r := range res {
		if i < len(op.Results) {
			c.settle(op, op.Results[i], r)
		}
	}
	if op.Code.IsCollective() && op.Async() {
		st.pending[op.Results[0]] = op
	}
}

// secondShardAxis returns the first two axes a type written in the
// program splits over the mesh (ok false when it splits two: the mesh has
// one dimension, DIDx, so a tensor is split along one axis at most).
func secondShardAxis(t ir.Type) (first, second int, ok bool) {
	tt, isTensor := t.(*ir.TensorType)
	if !isTensor {
		return -1, -1, true
	}
	first = tt.ShardAxis()
	for i := first + 1; first >= 0 && i < tt.Rank(); i++ {
		if tt.Dims[i].Parallel == ir.DIDx {
			return first, i, false
		}
	}
	return first, -1, true
}

// oneShardAxisOK is oneShardAxis's test alone, without a report (so that
// the description is built only for a type it reports).
func oneShardAxisOK(t ir.Type) bool {
	_, _, ok := secondShardAxis(t)
	return ok
}

// oneShardAxis reports a type written in the program (an input's, a
// result annotation) that splits more than one axis over the mesh.
// Inferred types never do (broadcast rejects it).
func (c *checker) oneShardAxis(pos ir.Pos, what string, t ir.Type) bool {
	first, second, ok := secondShardAxis(t)
	if !ok {
		c.errs.Add(pos, "%s %s, which splits axes %d and %d over the mesh; the mesh has one dimension (DIDx), so at most one axis may be sharded: keep /DIDx on one axis", what, t, first, second)
	}
	return ok
}

// settle reconciles an inferred result type with the result's annotation.
// The result keeps its annotation when that is the type inferred, else a
// copy (the inferred type may be the checker's scratch). An annotation
// that contradicts the op is reported, and the result takes the type the
// op gives, so the ops that use it are checked against what they will get
// rather than failing again for the same mistake.
func (c *checker) settle(op *ir.Op, v *ir.Value, inf inferred) {
	got, isTensor := inf.t.(*ir.TensorType)
	if !isTensor {
		if v.Type != nil && !ir.TypesEqual(v.Type, inf.t) {
			c.errs.Add(op.Pos, "%s: %s is annotated %s, but %s gives %s", op.Code, v, v.Type, op.Code, inf.t)
		}
		v.Type = inf.t
		return
	}
	// Where the result lives: an alias in its storage's memory, a copy in
	// the memory it names, an allocating op's result where its annotation
	// says (global by default).
	allocates := inf.base == nil && !inf.memFixed
	mem := got.Mem
	if allocates {
		mem = ir.Global
	}
	if v.Type != nil {
		ann, ok := v.Type.(*ir.TensorType)
		if !ok {
			c.errs.Add(op.Pos, "%s: %s is annotated %s, but %s gives %s", op.Code, v, v.Type, op.Code, withMem(got, mem))
			v.Type = c.settled(got, mem)
			return
		}
		if allocates {
			mem = ann.Mem
		}
		if !equalIn(ann, got.Mem, got) {
			c.errs.Add(op.Pos, "%s: %s is annotated %s, but %s gives %s", op.Code, v, ann, op.Code, withMem(got, mem))
			v.Type = c.settled(got, mem)
			return
		}
		// Global is the unprinted default, so only a named other memory
		// type contradicts the storage an alias lives in.
		if inf.base != nil && ann.Mem != ir.Global && ann.Mem != mem {
			c.errs.Add(op.Pos, "%s: %s is annotated %s memory, but it aliases %s, which is in %s memory", op.Code, v, ann.Mem, inf.base, mem)
			v.Type = c.settled(got, mem)
			return
		}
		if ann.Mem == mem {
			return // the annotation is the type inferred
		}
	}
	v.Type = c.settled(got, mem)
}

// typeKey is a tensor type of rank at most 4 as a map key.
type typeKey struct {
	dt      ir.DType
	mem     ir.MemoryType
	rank    int
	nilDims bool
	dims    [4]ir.Dim
}

// settled is a copy of got in memory mem, for a result to keep: one copy
// for every equal result, since a program gives a few types to many
// results and types are never changed in place.
func (c *checker) settled(got *ir.TensorType, mem ir.MemoryType) *ir.TensorType {
	var k typeKey
	if len(got.Dims) > len(k.dims) {
		t := c.clone(got)
		t.Mem = mem
		return t
	}
	k = typeKey{dt: got.DType, mem: mem, rank: len(got.Dims), nilDims: got.Dims == nil}
	copy(k.dims[:], got.Dims)
	if t, ok := c.settledTypes[k]; ok {
		return t
	}
	t := c.clone(got)
	t.Mem = mem
	if c.settledTypes == nil {
		c.settledTypes = map[typeKey]*ir.TensorType{}
	}
	c.settledTypes[k] = t
	return t
}

// withMem is t in memory type m, for a message (it shares t's dims).
func withMem(t *ir.TensorType, m ir.MemoryType) *ir.TensorType {
	c := *t
	c.Mem = m
	return &c
}

// tensor returns operand x's tensor type. ok is false when x is no tensor;
// an operand with no type at all failed earlier and is not reported again.
func (c *checker) tensor(op *ir.Op, x *ir.Value) (*ir.TensorType, bool) {
	switch t := x.Type.(type) {
	case *ir.TensorType:
		return t, true
	case nil:
		if x.Lit != nil {
			c.errs.Add(op.Pos, "%s: the literal %s is not a tensor", op.Code, x)
		}
		return nil, false
	default:
		c.errs.Add(op.Pos, "%s: %s is not a tensor (its type is %s)", op.Code, x, t)
		return nil, false
	}
}

// tensors returns the types of the first n operands, all tensors.
func (c *checker) tensors(op *ir.Op, n int) ([]*ir.TensorType, bool) {
	ts := make([]*ir.TensorType, n)
	ok := true
	for i := 0; i < n; i++ {
		t, good := c.tensor(op, op.Operands[i])
		ts[i], ok = t, ok && good
	}
	return ts, ok
}

// one is a single result, in the checker's buffer: it is good until the
// next call (op settles it at once).
func (c *checker) one(t ir.Type) []inferred {
	c.oneBuf[0] = inferred{t: t}
	return c.oneBuf[:]
}

func (c *checker) infer(op *ir.Op, st *blockState) ([]inferred, bool) {
	switch op.Code.Class() {
	case ir.ClassPointwise:
		return c.pointwise(op)
	case ir.ClassReduction:
		return c.reduction(op)
	case ir.ClassMatmul:
		return c.matmul(op)
	case ir.ClassView:
		return c.view(op)
	case ir.ClassCollective:
		return c.collective(op)
	}
	switch op.Code {
	case ir.OpAlloc:
		if _, ok := op.Results[0].Type.(*ir.TensorType); !ok {
			c.errs.Add(op.Pos, "alloc needs a result type: %s = alloc : f32[8, 16]", op.Results[0])
			return nil, false
		}
		return []inferred{{t: op.Results[0].Type}}, true
	case ir.OpFree, ir.OpSend:
		_, ok := c.tensor(op, op.Operands[0])
		return nil, ok
	case ir.OpCopy:
		return c.copyOp(op)
	case ir.OpRecv:
		if len(op.Operands) == 1 {
			t, ok := c.tensor(op, op.Operands[0])
			return []inferred{{t: t, base: op.Operands[0]}}, ok
		}
		if _, ok := op.Results[0].Type.(*ir.TensorType); !ok {
			c.errs.Add(op.Pos, "recv needs a result type (%s = recv peer=-1 : f32[8]) or a buffer operand", op.Results[0])
			return nil, false
		}
		return []inferred{{t: op.Results[0].Type}}, true
	case ir.OpRegister:
		_, ok := c.tensor(op, op.Operands[0])
		return c.one(&ir.HandleType{}), ok
	case ir.OpTransfer:
		ok := c.registration(op, op.Operands[0])
		_, ok2 := c.tensor(op, op.Operands[1])
		return c.one(&ir.HandleType{}), ok && ok2
	case ir.OpDeregister:
		return nil, c.registration(op, op.Operands[0])
	case ir.OpWait:
		return nil, c.wait(op, st)
	case ir.OpStream:
		return c.one(&ir.StreamType{}), true
	case ir.OpSetStream, ir.OpSyncStream:
		for _, x := range op.Operands {
			if _, ok := x.Type.(*ir.StreamType); !ok && x.Type != nil {
				c.errs.Add(op.Pos, "%s: %s is not a stream (its type is %s)", op.Code, x, x.Type)
				return nil, false
			}
		}
		return nil, true
	case ir.OpPickStream, ir.OpWaitStream:
		return c.streamOp(op) // streamops.go
	case ir.OpBarrier, ir.OpStreamBarrier, ir.OpYield:
		return nil, true
	case ir.OpFor:
		c.forOp(op, st)
		return nil, true
	case ir.OpFusion:
		return c.fusion(op)
	}
	c.errs.Add(op.Pos, "%s: no type rule", op.Code)
	return nil, false
}
