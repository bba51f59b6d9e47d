package passes

import (
	"math"

	"github.com/hirlab/hir/ir"
)

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
// copy (the inferred type may be the checker's scratch).
func (c *checker) settle(op *ir.Op, v *ir.Value, inf inferred) {
	got, isTensor := inf.t.(*ir.TensorType)
	if !isTensor {
		if v.Type != nil && !ir.TypesEqual(v.Type, inf.t) {
			c.errs.Add(op.Pos, "%s: %s is annotated %s, but %s gives %s", op.Code, v, v.Type, op.Code, inf.t)
			return
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
			return
		}
		if allocates {
			mem = ann.Mem
		}
		if !equalIn(ann, got.Mem, got) {
			c.errs.Add(op.Pos, "%s: %s is annotated %s, but %s gives %s", op.Code, v, ann, op.Code, withMem(got, mem))
			return
		}
		// Global is the unprinted default, so only a named other memory
		// type contradicts the storage an alias lives in.
		if inf.base != nil && ann.Mem != ir.Global && ann.Mem != mem {
			c.errs.Add(op.Pos, "%s: %s is annotated %s memory, but it aliases %s, which is in %s memory", op.Code, v, ann.Mem, inf.base, mem)
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
	case ir.OpBarrier, ir.OpYield:
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

// pointwise: operands broadcast as in NumPy and share one dtype; literals
// take it.
func (c *checker) pointwise(op *ir.Op) ([]inferred, bool) {
	name := op.Code.String()
	var dt ir.DType
	var first *ir.Value
	tensors, types := c.pwVals[:0], c.pwTypes[:0]
	ok := true
	for i, x := range op.Operands {
		if x.Lit != nil {
			if op.Code == ir.OpWhere && i == 0 {
				c.errs.Add(op.Pos, "where: the condition must be a bool tensor, not the literal %s", x)
				ok = false
			}
			continue
		}
		t, good := c.tensor(op, x)
		if !good {
			ok = false
			continue
		}
		tensors, types = append(tensors, x), append(types, t)
		if op.Code == ir.OpWhere && i == 0 {
			if t.DType != ir.Bool {
				c.errs.Add(op.Pos, "where: the condition %s is %s, not bool", x, t.DType)
				ok = false
			}
			continue
		}
		if first == nil {
			first, dt = x, t.DType
		} else if t.DType != dt {
			c.errs.Add(op.Pos, "%s: %s is %s but %s is %s; cast one of them", name, first, dt, x, t.DType)
			ok = false
		}
	}
	c.pwVals, c.pwTypes = tensors, types // for the next op to reuse
	if !ok {
		return nil, false
	}
	if len(tensors) == 0 {
		c.errs.Add(op.Pos, "%s needs at least one tensor operand", name)
		return nil, false
	}
	if first == nil { // where with two literal branches: the annotation says the dtype
		ann, isTensor := op.Results[0].Type.(*ir.TensorType)
		if !isTensor {
			c.errs.Add(op.Pos, "where: both branches are literals; annotate the result type")
			return nil, false
		}
		dt = ann.DType
	}
	switch {
	case op.Code.Info().FloatOnly && !dt.IsFloat():
		c.errs.Add(op.Pos, "%s: %s is %s; %s needs a float tensor (cast it first)", name, first, dt, name)
		return nil, false
	case op.Code != ir.OpCast && op.Code != ir.OpWhere && dt == ir.Bool:
		c.errs.Add(op.Pos, "%s: %s is bool; %s needs numbers (cast it first)", name, first, name)
		return nil, false
	}
	for i, x := range op.Operands {
		if x.Lit == nil || (op.Code == ir.OpWhere && i == 0) {
			continue
		}
		if !literalFits(x.Lit, dt) {
			c.errs.Add(op.Pos, "%s: the literal %s does not fit the dtype %s", name, x, dt)
			ok = false
		}
	}
	dims, good := c.broadcast(op, tensors, types)
	if !ok || !good {
		return nil, false
	}
	if op.Code == ir.OpCast {
		dt, _ = ir.ParseDType(op.WordAttr("dtype", ""))
	}
	return c.built(dt, dims), true
}

// literalFits reports whether a literal operand can take dtype dt.
func literalFits(l *ir.Literal, dt ir.DType) bool {
	if dt.IsFloat() {
		return true
	}
	v := l.Value()
	if math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v) {
		return false
	}
	switch dt {
	case ir.Bool:
		return v == 0 || v == 1
	case ir.I32:
		return v >= math.MinInt32 && v <= math.MaxInt32
	case ir.I64:
		// An integer literal is an int64 already; a float one must lie in
		// [-2^63, 2^63) (float64(MaxInt64) rounds up to 2^63, which does not).
		return !l.IsFloat || (v >= math.MinInt64 && v < math.MaxInt64)
	}
	return true
}

// broadcast right-aligns the shapes. A result axis is sharded when an
// operand's aligned axis of full extent is; those must all agree.
func (c *checker) broadcast(op *ir.Op, vals []*ir.Value, types []*ir.TensorType) ([]ir.Dim, bool) {
	rank := 0
	for _, t := range types {
		rank = max(rank, t.Rank())
	}
	dims := c.scratchDims(rank)[:rank]
	for j := range dims {
		dims[j] = ir.Dim{Extent: 1}
	}
	for i, t := range types {
		off := rank - t.Rank()
		for k, d := range t.Dims {
			r := &dims[off+k]
			switch {
			case d.Extent == r.Extent || d.Extent == 1:
			case r.Extent == 1:
				r.Extent = d.Extent
			default:
				w := c.widest(types, off+k, rank, r.Extent)
				c.errs.Add(op.Pos, "%s: the shapes of %s %s and %s %s do not broadcast", op.Code, vals[w], shapeString(types[w].Shape()), vals[i], shapeString(t.Shape()))
				return nil, false
			}
		}
	}
	sharded := -1
	for j := range dims {
		var on, off *ir.Value
		for i, t := range types {
			k := j - (rank - t.Rank())
			if k < 0 || t.Dims[k].Extent != dims[j].Extent {
				continue
			}
			if t.Dims[k].Parallel == ir.DIDx {
				on = vals[i]
			} else if off == nil {
				off = vals[i]
			}
		}
		if on == nil {
			continue
		}
		if off != nil {
			c.errs.Add(op.Pos, "%s: axis %d of the result is sharded on DIDx in %s but not in %s", op.Code, j, on, off)
			return nil, false
		}
		if sharded >= 0 {
			c.errs.Add(op.Pos, "%s: the result would be sharded on axes %d and %d, but the mesh has one dimension (DIDx), so at most one axis may be sharded; all_gather one of the operands first", op.Code, sharded, j)
			return nil, false
		}
		sharded = j
		dims[j].Parallel = ir.DIDx
	}
	return dims, true
}

// widest finds the operand that set a result axis's extent, for messages.
func (c *checker) widest(types []*ir.TensorType, j, rank int, extent int64) int {
	for i, t := range types {
		k := j - (rank - t.Rank())
		if k >= 0 && t.Dims[k].Extent == extent {
			return i
		}
	}
	return 0
}

// shapeString spells a shape as the text format does: [4, 8].
func shapeString(s []int64) string {
	return ir.FormatAttrValue(ir.AttrValue{Kind: ir.KindInts, Ints: s})
}

func (c *checker) reduction(op *ir.Op) ([]inferred, bool) {
	x := op.Operands[0]
	t, ok := c.tensor(op, x)
	if !ok {
		return nil, false
	}
	name := op.Code.String()
	switch {
	case t.DType == ir.Bool:
		c.errs.Add(op.Pos, "%s: %s is bool; %s needs numbers (cast it first)", name, x, name)
		return nil, false
	case op.Code == ir.OpMean && !t.DType.IsFloat():
		c.errs.Add(op.Pos, "mean: %s is %s; mean needs a float tensor (cast it first)", x, t.DType)
		return nil, false
	}
	reduced := map[int64]bool{}
	for _, a := range op.IntsAttr("axes") {
		switch {
		case a < 0 || a >= int64(t.Rank()):
			c.errs.Add(op.Pos, "%s: axis %d is out of range for %s of type %s (rank %d)", name, a, x, t, t.Rank())
			ok = false
		case reduced[a]:
			c.errs.Add(op.Pos, "%s: axis %d is listed twice", name, a)
			ok = false
		case t.Dims[a].Parallel == ir.DIDx:
			c.errs.Add(op.Pos, "%s: axis %d of %s is sharded on DIDx; reduce across ranks with all_reduce", name, a, x)
			ok = false
		}
		reduced[a] = true
	}
	if !ok {
		return nil, false
	}
	keep := op.BoolAttr("keepdim")
	dims := c.scratchDims(t.Rank())
	for i, d := range t.Dims {
		switch {
		case !reduced[int64(i)]:
			dims = append(dims, d)
		case keep:
			dims = append(dims, ir.Dim{Extent: 1})
		}
	}
	return c.built(t.DType, dims), true
}

// matmul: a[..., M, K] × b[K, N] or b[..., K, N] with a's batch dims.
func (c *checker) matmul(op *ir.Op) ([]inferred, bool) {
	ts, ok := c.tensors(op, 2)
	if !ok {
		return nil, false
	}
	a, b := ts[0], ts[1]
	x, y := op.Operands[0], op.Operands[1]
	fail := func(format string, args ...any) ([]inferred, bool) {
		c.errs.Add(op.Pos, "matmul: "+format, args...)
		return nil, false
	}
	switch {
	case !a.DType.IsFloat():
		return fail("%s is %s; matmul needs float tensors", x, a.DType)
	case a.DType != b.DType:
		return fail("%s is %s but %s is %s; cast one of them", x, a.DType, y, b.DType)
	case a.Rank() < 2:
		return fail("%s must have rank 2 or more ([..., M, K]); it is %s", x, a)
	case b.Rank() != 2 && b.Rank() != a.Rank():
		return fail("%s must be [K, N] or batched like %s; it is %s", y, x, b)
	case b.IsSharded():
		return fail("%s must be unsharded (all_gather it first); it is %s", y, b)
	case a.Dims[a.Rank()-1].Parallel == ir.DIDx:
		return fail("the contracted axis %d of %s must not be sharded", a.Rank()-1, x)
	}
	if k, kb := a.Dims[a.Rank()-1].Extent, b.Dims[b.Rank()-2].Extent; k != kb {
		return fail("%s is %s and %s is %s: the contracted extents %d and %d differ", x, a, y, b, k, kb)
	}
	if b.Rank() > 2 {
		for i := 0; i < b.Rank()-2; i++ {
			if a.Dims[i].Extent != b.Dims[i].Extent {
				return fail("the batch dims of %s %s and %s %s differ", x, shapeString(a.Shape()[:a.Rank()-2]), y, shapeString(b.Shape()[:b.Rank()-2]))
			}
			if a.Dims[i].Parallel == ir.DIDx {
				return fail("with a batched %s, the batch axis %d of %s must not be sharded", y, i, x)
			}
		}
	}
	dims := append(append(c.scratchDims(a.Rank()), a.Dims[:a.Rank()-1]...), ir.Dim{Extent: b.Dims[b.Rank()-1].Extent})
	return c.built(a.DType, dims), true
}

func (c *checker) copyOp(op *ir.Op) ([]inferred, bool) {
	x := op.Operands[0]
	t, ok := c.tensor(op, x)
	if len(op.Operands) == 1 {
		if !ok {
			return nil, false
		}
		res := t.Clone()
		if w, has := op.Attr("mem"); has {
			m, _ := ir.ParseMemoryType(w.Word)
			if ann, isTensor := op.Results[0].Type.(*ir.TensorType); isTensor && ann.Mem != ir.Global && ann.Mem != m {
				c.errs.Add(op.Pos, "copy: mem=%s but %s is annotated %s memory", m, op.Results[0], ann.Mem)
				return nil, false
			}
			// the attribute wins over an annotation that names no memory
			return []inferred{{t: res.In(m), memFixed: true}}, true
		}
		return c.one(res), true
	}
	dst := op.Operands[1]
	d, ok2 := c.tensor(op, dst)
	if !ok || !ok2 {
		return nil, false
	}
	if _, has := op.Attr("mem"); has {
		c.errs.Add(op.Pos, "copy: mem= cannot go with a destination; the result lives in %s's memory", dst)
		return nil, false
	}
	if !equalIn(t, d.Mem, d) {
		c.errs.Add(op.Pos, "copy: %s is %s but the destination %s is %s; they must agree in dtype, shape and sharding", x, t, dst, d)
		return nil, false
	}
	return []inferred{{t: d, base: dst}}, true
}

// collective gives the result type of the table in SEMANTICS.md.
func (c *checker) collective(op *ir.Op) ([]inferred, bool) {
	x := op.Operands[0]
	t, ok := c.tensor(op, x)
	if !ok {
		return nil, false
	}
	name := op.Code.String()
	fail := func(format string, args ...any) ([]inferred, bool) {
		c.errs.Add(op.Pos, name+": "+format, args...)
		return nil, false
	}
	if op.Code.Info().Reduces {
		switch {
		case t.DType == ir.Bool:
			return fail("%s is bool; reducing over ranks needs numbers", x)
		case op.ReduceOp() == ir.ReduceAvg && !t.DType.IsFloat():
			return fail("op=avg needs a float tensor; %s is %s", x, t.DType)
		}
	}
	axisIn := func(key string, def int64) (int, bool) {
		a := op.IntAttr(key, def)
		if a < 0 || a >= int64(t.Rank()) {
			c.errs.Add(op.Pos, "%s: %s=%d is out of range for %s of type %s (rank %d)", name, key, a, x, t, t.Rank())
			return 0, false
		}
		return int(a), true
	}
	res := t.Clone()
	switch op.Code.Info().Layout {
	case ir.LayoutGather:
		if !t.IsSharded() {
			return fail("%s is not sharded (%s); there is nothing to gather", x, t)
		}
		res = c.unsharded(t)
	case ir.LayoutScatter:
		if t.IsSharded() {
			return fail("%s is already sharded on axis %d; %s needs an unsharded tensor", x, t.ShardAxis(), name)
		}
		a, good := axisIn("axis", 0)
		if !good {
			return nil, false
		}
		res = t.Sharded(a)
	case ir.LayoutAllToAll:
		if !t.IsSharded() {
			return fail("%s is not sharded (%s); all_to_all moves the sharding from one axis to another", x, t)
		}
		b, good := axisIn("axis", 0)
		if !good {
			return nil, false
		}
		if b == t.ShardAxis() {
			return fail("%s is already sharded on axis %d; axis= must name another axis", x, b)
		}
		res = c.unsharded(t).Sharded(b)
	}
	if len(op.Operands) == 2 {
		out := op.Operands[1]
		o, good := c.tensor(op, out)
		if !good {
			return nil, false
		}
		if !equalIn(res, o.Mem, o) {
			return fail("the output buffer %s is %s, but %s gives %s", out, o, name, res.In(o.Mem))
		}
		return []inferred{{t: o, base: out}}, true
	}
	return c.one(res), true
}

func (c *checker) registration(op *ir.Op, h *ir.Value) bool {
	if h.Type == nil {
		return false
	}
	if h.Def == nil || h.Def.Code != ir.OpRegister {
		c.errs.Add(op.Pos, "%s: %s is not a registration handle (make one with register)", op.Code, h)
		return false
	}
	return true
}

func (c *checker) wait(op *ir.Op, st *blockState) bool {
	v := op.Operands[0]
	d := v.Def
	switch {
	case d != nil && d.Code.IsCollective() && d.Async():
		if pos, ok := st.waited[v]; ok {
			c.errs.Add(op.Pos, "wait: %s was already waited for at %s; wait once per async result", v, pos)
			return false
		}
		if st.outer[v] {
			c.errs.Add(op.Pos, "wait: %s is an async result from outside this for loop; waiting for it in the body would wait on every iteration (wait before or after the loop)", v)
			return false
		}
		delete(st.pending, v)
		st.waited[v] = op.Pos
		return true
	case d != nil && d.Code == ir.OpTransfer:
		return true
	case d != nil && d.Code.IsCollective():
		c.errs.Add(op.Pos, "wait: %s comes from %s without async=true; make it async or drop the wait", v, d.Code)
	default:
		c.errs.Add(op.Pos, "wait: %s is not the result of an async collective or a transfer", v)
	}
	return false
}

func (c *checker) forOp(op *ir.Op, st *blockState) {
	from, to, step := op.IntAttr("from", 0), op.IntAttr("to", 0), op.IntAttr("step", 1)
	idx := op.Body.Args[0]
	if idx.Type == nil {
		idx.Type = &ir.ScalarType{DType: ir.I64}
	}
	if s, ok := idx.Type.(*ir.ScalarType); !ok || s.DType != ir.I64 {
		c.errs.Add(op.Pos, "for: the index %s must be an i64 scalar, not %s", idx, idx.Type)
	}
	switch {
	case from > to:
		c.errs.Add(op.Pos, "for: the range %d to %d runs backwards (from must not exceed to)", from, to)
	case step > 0 && to > from:
		c.loops[idx] = loopRange{first: from, last: ir.LoopLast(from, to, step)}
	}
	c.block(op.Body, st.child())
}

// fusion: the body holds pointwise ops and at most one trailing reduction;
// the results are the yielded values, freshly allocated.
func (c *checker) fusion(op *ir.Op) ([]inferred, bool) {
	ok := true
	ops := op.Body.Ops
	for i, in := range ops {
		switch {
		case in.Code == ir.OpYield, in.Code.IsPointwise():
		case in.Code.IsReduction() && i == len(ops)-2:
		case in.Code.IsReduction():
			c.errs.Add(in.Pos, "fusion: the reduction %s must be the last op before yield", in.Code)
			ok = false
		default:
			c.errs.Add(in.Pos, "fusion: the body may hold only pointwise ops and one trailing reduction, not %s", in.Code)
			ok = false
		}
	}
	for _, x := range op.Operands {
		if _, good := c.tensor(op, x); !good {
			ok = false
		}
	}
	if !ok {
		return nil, false
	}
	before := len(c.errs)
	// The body holds no async op and no wait (rejected above): its state
	// stays empty, and maps that are only read may be nil.
	c.block(op.Body, &blockState{})
	if len(c.errs) > before {
		return nil, false
	}
	y := ops[len(ops)-1]
	res := make([]inferred, len(y.Operands))
	for i, v := range y.Operands {
		t, good := c.tensor(y, v)
		if !good {
			return nil, false
		}
		res[i] = inferred{t: t}
	}
	return res, true
}
