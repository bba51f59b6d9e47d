package codegen

import (
	"fmt"
	"strings"

	"github.com/hirlab/hir/ir"
)

// namePlaceholder stands for the kernel's name while the source is hashed.
const namePlaceholder = "HIR_KERNEL_NAME"

// rowsWarpLimit is the longest row a warp reduces alone (32 elements per
// lane); longer rows get a block.
const rowsWarpLimit = 1024

func computeType(dt ir.DType) string {
	switch dt {
	case ir.F64:
		return "double"
	case ir.I32:
		return "int"
	case ir.I64:
		return "long long"
	case ir.Bool:
		return "bool"
	}
	return "float" // f32, f16, bf16
}

func storageType(dt ir.DType) string {
	switch dt {
	case ir.F16:
		return "hir_f16"
	case ir.BF16:
		return "hir_bf16"
	case ir.Bool:
		return "unsigned char"
	}
	return computeType(dt)
}

// storeExpr converts a compute-typed expression to dt's storage type.
func storeExpr(dt ir.DType, e string) string {
	switch dt {
	case ir.F16:
		return "hir_st_f16(" + e + ")"
	case ir.BF16:
		return "hir_st_bf16(" + e + ")"
	case ir.Bool:
		return "(unsigned char)(" + e + ")"
	}
	return e
}

// castExpr converts a compute-typed expression of dtype from to dtype to
// by the cast rules of SEMANTICS.md.
func castExpr(from, to ir.DType, e string) string {
	switch {
	case from == to:
		return e
	case to == ir.Bool:
		return "(" + e + " != 0)"
	case from == ir.Bool:
		return "(" + computeType(to) + ")(" + e + ")"
	case to == ir.I32 && from.IsFloat():
		return "hir_f2i32(" + e + ")"
	case to == ir.I64 && from.IsFloat():
		return "hir_f2i64(" + e + ")"
	case to.IsInt():
		return "(" + computeType(to) + ")(" + e + ")"
	}
	// To a float. Integers go through double, exact for every i32 and
	// for i64 up to 2^53, so the result is rounded once, like the CPU's.
	if from.IsInt() {
		e = "(double)(" + e + ")"
	}
	wide := from.IsInt() || from == ir.F64
	switch to {
	case ir.F64:
		if from == ir.F64 {
			return e
		}
		return "(double)(" + e + ")"
	case ir.F32:
		if !wide {
			return e // f16/bf16 values are held exactly (or kept) in f32
		}
		return "(float)(" + e + ")"
	case ir.F16:
		return "hir_round_f16(" + e + ")"
	case ir.BF16:
		return "hir_round_bf16(" + e + ")"
	}
	return e
}

// emitter writes one kernel.
type emitter struct {
	p      *plan
	b      strings.Builder
	idx    string // the index type: int when every count fits, else long long
	params []Param
	n      int64 // elements of the iteration space
}

func (e *emitter) line(indent int, format string, args ...any) {
	e.b.WriteString(strings.Repeat("  ", indent))
	fmt.Fprintf(&e.b, format, args...)
	e.b.WriteByte('\n')
}

// expr is the compute-typed C expression of operand x of a body op, as
// dtype dt (literals and scalars take their op's dtype).
func (e *emitter) expr(x *ir.Value, dt ir.DType) string {
	if l := e.p.lits[x]; l != nil {
		if l.dtype == ir.Bool {
			return fmt.Sprintf("(c%d != 0)", l.lit)
		}
		return fmt.Sprintf("c%d", l.lit)
	}
	return e.valExpr(e.p.vals[x], dt)
}

func (e *emitter) valExpr(v *val, dt ir.DType) string {
	switch v.kind {
	case kindScalar:
		return castExpr(ir.I64, dt, fmt.Sprintf("in%d", v.input))
	case kindTensor:
		return fmt.Sprintf("x%d", v.input)
	}
	return fmt.Sprintf("t%d", v.op)
}

// opExpr is the C expression of pointwise op b.
func (e *emitter) opExpr(b *ir.Op) string {
	res := e.p.vals[b.Results[0]]
	switch b.Code {
	case ir.OpWhere:
		return fmt.Sprintf("(%s ? %s : %s)", e.expr(b.Operands[0], ir.Bool), e.expr(b.Operands[1], res.dtype), e.expr(b.Operands[2], res.dtype))
	case ir.OpCast:
		x := b.Operands[0]
		from := e.p.vals[x].dtype
		if e.p.vals[x].kind == kindScalar {
			from = ir.I64
			return castExpr(from, res.dtype, fmt.Sprintf("in%d", e.p.vals[x].input))
		}
		return castExpr(from, res.dtype, e.expr(x, from))
	}
	args := make([]string, len(b.Operands))
	for i, x := range b.Operands {
		args[i] = e.expr(x, res.dtype)
	}
	return "hir_" + b.Code.String() + "(" + strings.Join(args, ", ") + ")"
}

// element writes the work for iteration index idx: coordinates where a
// broadcast operand needs them, the loads, the body and the stores of the
// pointwise results. load(k) and store(k, v) give the C for input k and
// output k; nil store means outputs are written by the caller. With guards,
// an output smaller than the iteration space (broadcast into it) is stored
// only where its stretched coordinates are 0, so each element once.
func (e *emitter) element(ind int, idx string, load func(k int) string, store func(k int, v string) string, guards bool) {
	p := e.p
	strides := ir.ContiguousStrides(p.iter)
	// Coordinates of the iteration axes that a broadcast input (or a
	// broadcast output's guard) needs.
	need := make([]bool, len(p.iter))
	inOffsets := map[int]string{}
	for k, in := range p.inputs {
		if in.kind != kindTensor || !p.used[k] || load != nil {
			continue
		}
		if ir.Product(in.shape) == e.n {
			inOffsets[k] = idx
			continue
		}
		inOffsets[k] = e.offset(in.shape, need)
	}
	outOffsets := map[int]string{}
	outGuards := map[int][]int{}
	for k, y := range p.yields {
		if y.kind == kindComputed && p.red != nil && y.op == len(p.ops)-1 {
			continue
		}
		if !guards || ir.Product(y.shape) == e.n {
			outOffsets[k] = idx
			continue
		}
		outOffsets[k] = e.offset(y.shape, need)
		off := len(p.iter) - len(y.shape)
		for a, ext := range p.iter {
			if ext > 1 && (a < off || y.shape[a-off] == 1) {
				need[a] = true
				outGuards[k] = append(outGuards[k], a)
			}
		}
	}
	first := true
	for a, ext := range p.iter {
		if !need[a] {
			if ext > 1 {
				first = false
			}
			continue
		}
		c := idx
		if strides[a] != 1 {
			c = fmt.Sprintf("%s / %d", c, strides[a])
		}
		if !first {
			c = fmt.Sprintf("%s %% %d", c, ext)
		}
		first = false
		e.line(ind, "const %s i%d = %s;", e.idx, a, c)
	}
	for k, in := range p.inputs {
		if in.kind != kindTensor || !p.used[k] {
			continue
		}
		if load != nil {
			e.line(ind, "const %s x%d = hir_ld(%s);", computeType(in.dtype), k, load(k))
		} else {
			e.line(ind, "const %s x%d = hir_ld(in%d[%s]);", computeType(in.dtype), k, k, inOffsets[k])
		}
	}
	for _, b := range p.ops {
		if b == p.red {
			continue
		}
		v := p.vals[b.Results[0]]
		e.line(ind, "const %s t%d = %s;", computeType(v.dtype), v.op, e.opExpr(b))
	}
	for k, y := range p.yields {
		off, ok := outOffsets[k]
		if !ok {
			continue
		}
		v := storeExpr(y.dtype, e.valExpr(y, y.dtype))
		if store != nil {
			e.line(ind, "%s", store(k, v))
			continue
		}
		st := fmt.Sprintf("out%d[%s] = %s;", k, off, v)
		if g := outGuards[k]; len(g) > 0 {
			conds := make([]string, len(g))
			for i, a := range g {
				conds[i] = fmt.Sprintf("i%d == 0", a)
			}
			st = "if (" + strings.Join(conds, " && ") + ") " + st
		}
		e.line(ind, "%s", st)
	}
}

// offset is the flat offset into a tensor of shape s broadcast into the
// iteration space, from the coordinates i<axis>; it marks the axes it uses.
func (e *emitter) offset(s []int64, need []bool) string {
	iter := e.p.iter
	off := len(iter) - len(s)
	st := ir.ContiguousStrides(s)
	var terms []string
	for a := off; a < len(iter); a++ {
		if iter[a] <= 1 || s[a-off] != iter[a] {
			continue
		}
		need[a] = true
		if st[a-off] == 1 {
			terms = append(terms, fmt.Sprintf("i%d", a))
		} else {
			terms = append(terms, fmt.Sprintf("i%d * %d", a, st[a-off]))
		}
	}
	if len(terms) == 0 {
		return "0"
	}
	return strings.Join(terms, " + ")
}

// linearOffset maps a linear index j over the given iteration axes (in
// order) to its offset in the iteration space. Axes of extent 1 add
// nothing, and axes adjacent in memory merge into one.
func (e *emitter) linearOffset(j string, axes []int) string {
	iter := e.p.iter
	strides := ir.ContiguousStrides(iter)
	type group struct{ ext, stride int64 }
	var groups []group
	last := -1
	for _, a := range axes {
		if iter[a] == 1 {
			continue
		}
		adjacent := last >= 0
		for b := last + 1; adjacent && b < a; b++ {
			if iter[b] != 1 {
				adjacent = false
			}
		}
		if adjacent {
			g := &groups[len(groups)-1]
			g.ext *= iter[a]
			g.stride = strides[a]
		} else {
			groups = append(groups, group{ext: iter[a], stride: strides[a]})
		}
		last = a
	}
	var terms []string
	below := int64(1) // product of the extents of the later groups
	for gi := len(groups) - 1; gi >= 0; gi-- {
		g := groups[gi]
		c := j
		if below != 1 {
			c = fmt.Sprintf("%s / %d", c, below)
		}
		if gi > 0 {
			c = fmt.Sprintf("%s %% %d", c, g.ext)
		}
		if g.stride != 1 {
			if c != j {
				c = "(" + c + ")"
			}
			c = fmt.Sprintf("%s * %d", c, g.stride)
		}
		terms = append([]string{c}, terms...)
		below *= g.ext
	}
	if len(terms) == 0 {
		return "0"
	}
	return strings.Join(terms, " + ")
}

// reduction describes how the kernel combines the reduced values.
type reduction struct {
	acc     string // accumulator C type
	init    string
	combine func(a, b string) string
	finish  func(acc string) string // to the output's compute type
	count   int64
}

func (e *emitter) reduction() reduction {
	p := e.p
	dt := p.vals[p.red.Results[0]].dtype
	var count int64 = 1
	for a, r := range p.redAxes {
		if r {
			count *= p.iter[a]
		}
	}
	r := reduction{count: count}
	if p.red.Code == ir.OpReduceMax {
		r.acc = computeType(dt)
		switch dt {
		case ir.F64:
			r.init = "__longlong_as_double((long long)0xfff0000000000000ULL)"
		case ir.I32:
			r.init = "(-2147483647 - 1)"
		case ir.I64:
			r.init = "(-9223372036854775807LL - 1)"
		default:
			r.init = "__int_as_float(0xff800000)"
		}
		r.combine = func(a, b string) string { return "hir_max(" + a + ", " + b + ")" }
		r.finish = func(acc string) string { return acc }
		return r
	}
	switch {
	case dt == ir.F64:
		r.acc, r.init = "double", "0.0"
	case dt.IsInt():
		r.acc, r.init = "long long", "0LL"
	default:
		r.acc, r.init = "float", "0.0f"
	}
	r.combine = func(a, b string) string { return "hir_add(" + a + ", " + b + ")" }
	if dt.IsInt() {
		r.combine = func(a, b string) string { return "hir_add(" + a + ", (long long)(" + b + "))" }
	}
	r.finish = func(acc string) string {
		if dt.IsInt() {
			return "(" + computeType(dt) + ")(" + acc + ")"
		}
		return acc
	}
	if p.red.Code == ir.OpMean {
		r.finish = func(acc string) string { return fmt.Sprintf("%s / (%s)%dLL", acc, r.acc, count) }
	}
	return r
}

// storeReduced writes the finished accumulator to every output that
// yields the reduction.
func (e *emitter) storeReduced(ind int, r reduction, at, acc string) {
	p := e.p
	for k, y := range p.yields {
		if y.kind == kindComputed && y.op == len(p.ops)-1 {
			e.line(ind, "out%d[%s] = %s;", k, at, storeExpr(y.dtype, r.finish(acc)))
		}
	}
}

func emit(p *plan) *Kernel {
	e := &emitter{p: p, n: ir.Product(p.iter)}
	k := &Kernel{NumInputs: len(p.inputs), NumOutputs: len(p.yields)}
	outs := e.n
	var rows, cols int64
	var keptAxes, redAxesList []int
	if p.red != nil {
		outs, cols = 1, 1
		for a, ext := range p.iter {
			if p.redAxes[a] {
				cols *= ext
				redAxesList = append(redAxesList, a)
			} else {
				outs *= ext
				keptAxes = append(keptAxes, a)
			}
		}
		rows = outs
	}
	e.idx = "int"
	if e.n > 1<<30 || outs > 1<<30 {
		e.idx = "long long"
	}

	// Pick the strategy.
	vec := 1
	switch {
	case p.red == nil:
		k.Strategy, k.Work = Flat, e.n
		maxSize := 1
		for i, in := range p.inputs {
			if in.kind == kindTensor && p.used[i] {
				if ir.Product(in.shape) != e.n {
					k.Strategy = Broadcast
				}
				maxSize = max(maxSize, in.dtype.Size())
			}
		}
		for _, y := range p.yields {
			if ir.Product(y.shape) != e.n {
				k.Strategy = Broadcast
			}
			maxSize = max(maxSize, y.dtype.Size())
		}
		if e.n == 0 {
			k.Strategy = Flat
		}
		if k.Strategy == Flat && e.n/int64(16/maxSize) > 0 {
			vec = 16 / maxSize
			k.Work = (e.n + int64(vec) - 1) / int64(vec)
		}
	case e.n > 0 && innermost(p.iter, p.redAxes) && cols > 1:
		k.Strategy, k.Work = RowsWarp, rows
		if cols > rowsWarpLimit {
			k.Strategy = RowsBlock
		}
	default:
		k.Strategy, k.Work = Columns, outs
	}

	// Header: a summary that names no values, so equal structure gives
	// equal text.
	var opNames []string
	dtypes := map[ir.DType]bool{}
	for _, b := range p.ops {
		opNames = append(opNames, b.Code.String())
		dtypes[p.vals[b.Results[0]].dtype] = true
	}
	var ins, outShapes []string
	for i, in := range p.inputs {
		if in.kind == kindScalar {
			ins = append(ins, "i64 scalar")
			continue
		}
		ins = append(ins, Shape{DType: in.dtype, Shape: in.shape}.String())
		if p.used[i] {
			dtypes[in.dtype] = true
		}
	}
	for _, y := range p.yields {
		outShapes = append(outShapes, Shape{DType: y.dtype, Shape: y.shape}.String())
		dtypes[y.dtype] = true
	}
	for _, l := range p.literals {
		dtypes[l.dtype] = true
	}
	e.line(0, "// Generated by hir codegen; do not edit.")
	e.line(0, "// ops: %s", strings.Join(opNames, " "))
	e.line(0, "// inputs: %s", orNone(ins))
	e.line(0, "// outputs: %s", orNone(outShapes))
	e.line(0, "// iteration space: %s; strategy: %s", fmtShape(p.iter), k.Strategy)
	e.line(0, "")
	e.b.WriteString(preludeCore)
	if dtypes[ir.F16] || dtypes[ir.BF16] {
		e.b.WriteString(preludeNarrow)
	}
	if dtypes[ir.F16] {
		e.b.WriteString(preludeF16)
	}
	if dtypes[ir.BF16] {
		e.b.WriteString(preludeBF16)
	}
	e.line(0, "")

	// Parameters: input pointers, output pointers, literals, scalars.
	for i, in := range p.inputs {
		if in.kind == kindTensor {
			e.params = append(e.params, Param{Name: fmt.Sprintf("in%d", i), CType: "const " + storageType(in.dtype) + "* __restrict__", Kind: ParamPointer, Arg: i, DType: in.dtype, Size: 8, Align: 8})
		}
	}
	for i, y := range p.yields {
		e.params = append(e.params, Param{Name: fmt.Sprintf("out%d", i), CType: storageType(y.dtype) + "* __restrict__", Kind: ParamPointer, Arg: len(p.inputs) + i, DType: y.dtype, Size: 8, Align: 8})
	}
	for i, l := range p.literals {
		ct := computeType(l.dtype)
		if l.dtype == ir.Bool {
			ct = "int"
		}
		size := 4
		if ct == "double" || ct == "long long" {
			size = 8
		}
		e.params = append(e.params, Param{Name: fmt.Sprintf("c%d", i), CType: ct, Kind: ParamLiteral, Arg: -1, DType: l.dtype, Bits: literalBits(l.lit, l.dtype), Size: size, Align: size})
	}
	for i, in := range p.inputs {
		if in.kind == kindScalar {
			e.params = append(e.params, Param{Name: fmt.Sprintf("in%d", i), CType: "long long", Kind: ParamRuntimeScalar, Arg: i, DType: ir.I64, Size: 8, Align: 8})
		}
	}
	decl := make([]string, len(e.params))
	for i, prm := range e.params {
		decl[i] = prm.CType + " " + prm.Name
	}
	e.line(0, "extern \"C\" __global__ void __launch_bounds__(%d) %s(%s) {", BlockSize, namePlaceholder, strings.Join(decl, ", "))
	if !(p.red == nil && e.n == 0) && k.Strategy != RowsBlock {
		e.line(1, "const %[1]s tid = (%[1]s)blockIdx.x * (%[1]s)blockDim.x + (%[1]s)threadIdx.x;", e.idx)
		e.line(1, "const %[1]s nthreads = (%[1]s)gridDim.x * (%[1]s)blockDim.x;", e.idx)
	}
	switch {
	case p.red == nil && e.n == 0:
		e.line(1, "// The iteration space is empty: nothing to do.")
	case k.Strategy == Flat:
		e.flat(vec)
	case k.Strategy == Broadcast:
		e.line(1, "for (%s i = tid; i < %d; i += nthreads) {", e.idx, e.n)
		e.element(2, "i", nil, nil, true)
		e.line(1, "}")
	case k.Strategy == RowsWarp || k.Strategy == RowsBlock:
		e.rows(k.Strategy, rows, cols)
	default:
		e.columns(outs, keptAxes, redAxesList)
	}
	e.line(0, "}")

	src := e.b.String()
	k.Name = nameOf(src)
	k.Source = strings.Replace(src, namePlaceholder, k.Name, 1)
	k.Params = e.params
	return k
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// innermost reports whether the reduced axes of extent > 1 come after
// every kept axis of extent > 1: each output is a contiguous row.
func innermost(iter []int64, reduced []bool) bool {
	seenReduced := false
	for a, ext := range iter {
		if ext == 1 {
			continue
		}
		if reduced[a] {
			seenReduced = true
		} else if seenReduced {
			return false
		}
	}
	return true
}

// flat writes the all-shapes-equal loop: 16-byte vectors when every
// pointer is aligned for them, then the scalar tail.
func (e *emitter) flat(vec int) {
	p := e.p
	start := "tid"
	if vec > 1 {
		var conds []string
		for k, in := range p.inputs {
			if in.kind == kindTensor && p.used[k] {
				conds = append(conds, fmt.Sprintf("hir_aligned(in%d, %d)", k, vec*in.dtype.Size()))
			}
		}
		for k, y := range p.yields {
			conds = append(conds, fmt.Sprintf("hir_aligned(out%d, %d)", k, vec*y.dtype.Size()))
		}
		e.line(1, "%s done = 0;", e.idx)
		e.line(1, "if (%s) {", strings.Join(conds, " && "))
		e.line(2, "for (%s v = tid; v < %d; v += nthreads) {", e.idx, e.n/int64(vec))
		for k, in := range p.inputs {
			if in.kind == kindTensor && p.used[k] {
				vt := fmt.Sprintf("hir_vec<%s, %d>", storageType(in.dtype), vec)
				e.line(3, "const %s a%d = *reinterpret_cast<const %s*>(in%d + v * %d);", vt, k, vt, k, vec)
			}
		}
		for k, y := range p.yields {
			e.line(3, "hir_vec<%s, %d> b%d;", storageType(y.dtype), vec, k)
		}
		e.line(0, "#pragma unroll")
		e.line(3, "for (int e = 0; e < %d; ++e) {", vec)
		e.element(4, "e",
			func(k int) string { return fmt.Sprintf("a%d.v[e]", k) },
			func(k int, v string) string { return fmt.Sprintf("b%d.v[e] = %s;", k, v) }, false)
		e.line(3, "}")
		for k, y := range p.yields {
			e.line(3, "*reinterpret_cast<hir_vec<%s, %d>*>(out%d + v * %d) = b%d;", storageType(y.dtype), vec, k, vec, k)
		}
		e.line(2, "}")
		e.line(2, "done = %d;", e.n/int64(vec)*int64(vec))
		e.line(1, "}")
		start = "done + tid"
	}
	e.line(1, "for (%s i = %s; i < %d; i += nthreads) {", e.idx, start, e.n)
	e.element(2, "i", nil, nil, false)
	e.line(1, "}")
}

// rows writes an innermost reduction: a warp (RowsWarp) or a block
// (RowsBlock) per output row, each thread striding over the row, then a
// shuffle tree (and shared memory across a block's warps).
func (e *emitter) rows(s Strategy, rows, cols int64) {
	r := e.reduction()
	red := e.p.vals[e.p.red.Operands[0]]
	shuffle := func(ind int) {
		e.line(0, "#pragma unroll")
		e.line(ind, "for (int off = 16; off > 0; off >>= 1) acc = %s;", r.combine("acc", "__shfl_xor_sync(0xffffffffu, acc, off)"))
	}
	e.line(1, "const int lane = threadIdx.x & 31;")
	if s == RowsWarp {
		e.line(1, "for (%s row = tid >> 5; row < %d; row += nthreads >> 5) {", e.idx, rows)
		e.line(2, "%s acc = %s;", r.acc, r.init)
		e.line(2, "for (%s col = lane; col < %d; col += 32) {", e.idx, cols)
	} else {
		e.line(1, "const int warp = threadIdx.x >> 5;")
		e.line(1, "__shared__ %s partial[%d];", r.acc, BlockSize/32)
		e.line(1, "for (%s row = blockIdx.x; row < %d; row += gridDim.x) {", e.idx, rows)
		e.line(2, "%s acc = %s;", r.acc, r.init)
		e.line(2, "for (%s col = threadIdx.x; col < %d; col += blockDim.x) {", e.idx, cols)
	}
	e.line(3, "const %s i = row * %d + col;", e.idx, cols)
	e.element(3, "i", nil, nil, true)
	e.line(3, "acc = %s;", r.combine("acc", e.valExpr(red, red.dtype)))
	e.line(2, "}")
	shuffle(2)
	if s == RowsWarp {
		e.line(2, "if (lane == 0) {")
		e.storeReduced(3, r, "row", "acc")
		e.line(2, "}")
		e.line(1, "}")
		return
	}
	e.line(2, "if (lane == 0) partial[warp] = acc;")
	e.line(2, "__syncthreads();")
	e.line(2, "if (warp == 0) {")
	e.line(3, "acc = lane < (int)(blockDim.x >> 5) ? partial[lane] : %s;", r.init)
	shuffle(3)
	e.line(3, "if (lane == 0) {")
	e.storeReduced(4, r, "row", "acc")
	e.line(3, "}")
	e.line(2, "}")
	e.line(2, "__syncthreads();")
	e.line(1, "}")
}

// columns writes a reduction over outer (or mixed) axes: a thread per
// output element, looping over the reduced elements in index order.
func (e *emitter) columns(outs int64, kept, reduced []int) {
	r := e.reduction()
	red := e.p.vals[e.p.red.Operands[0]]
	e.line(1, "for (%s o = tid; o < %d; o += nthreads) {", e.idx, outs)
	e.line(2, "%s acc = %s;", r.acc, r.init)
	if e.n == 0 {
		e.line(2, "// Nothing to reduce: every output is the identity.")
	} else {
		e.line(2, "const %s base = %s;", e.idx, e.linearOffset("o", kept))
		e.line(2, "for (%s j = 0; j < %d; ++j) {", e.idx, r.count)
		e.line(3, "const %s i = base + %s;", e.idx, e.linearOffset("j", reduced))
		e.element(3, "i", nil, nil, true)
		e.line(3, "acc = %s;", r.combine("acc", e.valExpr(red, red.dtype)))
		e.line(2, "}")
	}
	e.storeReduced(2, r, "o", "acc")
	e.line(1, "}")
}
