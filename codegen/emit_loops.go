package codegen

import (
	"fmt"
	"strings"

	"github.com/hirlab/hir/ir"
)

// The loop of each strategy: flat (16-byte vectors, then a scalar tail),
// rows (a warp or a block per output row) and columns, and the reduction
// the reducing loops accumulate with.

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

// flat writes the all-shapes-equal loop: 16-byte vectors when every
// pointer is aligned for them, then the scalar tail.
func (e *emitter) flat(vec int) {
	start := "tid"
	if vec > 1 {
		e.line(1, "%s done = 0;", e.idx)
		e.line(1, "if (%s) {", e.aligned(vec, nil, nil))
		nv := e.n / int64(vec)
		if u := e.unroll; u > 1 {
			// u vectors a thread apart, all loaded before any is
			// computed and stored: u loads in flight per thread
			e.line(2, "%s v = tid;", e.idx)
			e.line(2, "for (; v + %d * nthreads < %d; v += %d * nthreads) {", u-1, nv, u)
			for j := range u {
				e.vectorLoads(3, vec, fmt.Sprintf("_%d", j), fmt.Sprintf("(v + %d * nthreads) * %d", j, vec))
			}
			for j := range u {
				e.vectorBody(3, vec, fmt.Sprintf("_%d", j), fmt.Sprintf("(v + %d * nthreads)", j))
			}
			e.line(2, "}")
			e.line(2, "for (; v < %d; v += nthreads) {", nv)
		} else {
			e.line(2, "for (%s v = tid; v < %d; v += nthreads) {", e.idx, nv)
		}
		e.vectorLoads(3, vec, "", fmt.Sprintf("v * %d", vec))
		e.vectorBody(3, vec, "", "v")
		e.line(2, "}")
		e.line(2, "done = %d;", nv*int64(vec))
		e.line(1, "}")
		start = "done + tid"
	}
	e.line(1, "for (%s i = %s; i < %d; i += nthreads) {", e.idx, start, e.n)
	e.element(2, "i", nil, nil, false)
	e.line(1, "}")
}

// broadcast writes the loop of a kernel whose inputs broadcast into the
// iteration space: with vec > 1 (broadcastVector) and every vector
// pointer aligned, vec neighbouring elements a thread, each input loaded
// once per vector (a vector where it runs along the innermost axis, one
// element where it is broadcast along it); else one element a thread.
func (e *emitter) broadcast(vec int) {
	p := e.p
	ind := 1
	if vec > 1 {
		last := len(p.iter) - 1
		vector := func(k int) bool {
			s := p.inputs[k].shape
			return len(s) > 0 && s[len(s)-1] == p.iter[last]
		}
		e.line(1, "if (%s) {", e.aligned(vec, vector, nil))
		e.line(2, "for (%s v = tid; v < %d; v += nthreads) {", e.idx, e.n/int64(vec))
		e.line(3, "const %s i = v * %d;", e.idx, vec)
		need := make([]bool, len(p.iter))
		offs := map[int]string{}
		for k, in := range p.inputs {
			if in.kind != kindTensor || !p.used[k] {
				continue
			}
			offs[k] = "i"
			if ir.Product(in.shape) != e.n {
				offs[k] = e.offset(in.shape, need)
			}
		}
		e.coords(3, "i", need)
		for k, in := range p.inputs {
			if in.kind != kindTensor || !p.used[k] {
				continue
			}
			if vector(k) {
				vt := fmt.Sprintf("hir_vec<%s, %d>", storageType(in.dtype), vec)
				e.line(3, "const %s a%d = *reinterpret_cast<const %s*>(in%d + %s);", vt, k, vt, k, offs[k])
			} else {
				e.line(3, "const %s s%d = in%d[%s];", storageType(in.dtype), k, k, offs[k])
			}
		}
		for k, y := range p.yields {
			e.line(3, "hir_vec<%s, %d> b%d;", storageType(y.dtype), vec, k)
		}
		e.line(0, "#pragma unroll")
		e.line(3, "for (int e = 0; e < %d; ++e) {", vec)
		e.element(4, "e",
			func(k int) string {
				if vector(k) {
					return fmt.Sprintf("a%d.v[e]", k)
				}
				return fmt.Sprintf("s%d", k)
			},
			func(k int, v string) string { return fmt.Sprintf("b%d.v[e] = %s;", k, v) }, false)
		e.line(3, "}")
		for k, y := range p.yields {
			e.line(3, "*reinterpret_cast<hir_vec<%s, %d>*>(out%d + i) = b%d;", storageType(y.dtype), vec, k, k)
		}
		e.line(2, "}")
		e.line(1, "} else {")
		ind = 2
	}
	e.line(ind, "for (%s i = tid; i < %d; i += nthreads) {", e.idx, e.n)
	e.element(ind+1, "i", nil, nil, true)
	e.line(ind, "}")
	if vec > 1 {
		e.line(1, "}")
	}
}

// aligned is the condition that every pointer a vector loop goes through
// is aligned for vec elements: every input tensor the kernel uses (those
// in takes, when in is not nil) and every output (those out takes).
func (e *emitter) aligned(vec int, in, out func(k int) bool) string {
	var conds []string
	for k, x := range e.p.inputs {
		if x.kind == kindTensor && e.p.used[k] && (in == nil || in(k)) {
			conds = append(conds, fmt.Sprintf("hir_aligned(in%d, %d)", k, vec*x.dtype.Size()))
		}
	}
	for k, y := range e.p.yields {
		if out == nil || out(k) {
			conds = append(conds, fmt.Sprintf("hir_aligned(out%d, %d)", k, vec*y.dtype.Size()))
		}
	}
	if len(conds) == 0 {
		return "true"
	}
	return strings.Join(conds, " && ")
}

// vectorLoads declares the vectors of every input the kernel uses, the
// vec elements from element offset at on, named a<k><suffix>.
func (e *emitter) vectorLoads(ind, vec int, suffix, at string) {
	for k, in := range e.p.inputs {
		if in.kind == kindTensor && e.p.used[k] {
			vt := fmt.Sprintf("hir_vec<%s, %d>", storageType(in.dtype), vec)
			e.line(ind, "const %s a%d%s = *reinterpret_cast<const %s*>(in%d + %s);", vt, k, suffix, vt, k, at)
		}
	}
}

// vectorBody computes the loaded vectors a<k><suffix> element by element
// into b<k><suffix> and stores them at vector index at.
func (e *emitter) vectorBody(ind, vec int, suffix, at string) {
	for k, y := range e.p.yields {
		e.line(ind, "hir_vec<%s, %d> b%d%s;", storageType(y.dtype), vec, k, suffix)
	}
	e.line(0, "#pragma unroll")
	e.line(ind, "for (int e = 0; e < %d; ++e) {", vec)
	e.element(ind+1, "e",
		func(k int) string { return fmt.Sprintf("a%d%s.v[e]", k, suffix) },
		func(k int, v string) string { return fmt.Sprintf("b%d%s.v[e] = %s;", k, suffix, v) }, false)
	e.line(ind, "}")
	for k, y := range e.p.yields {
		e.line(ind, "*reinterpret_cast<hir_vec<%s, %d>*>(out%d + %s * %d) = b%d%s;", storageType(y.dtype), vec, k, at, vec, k, suffix)
	}
}

// rows writes an innermost reduction: a warp (RowsWarp) or a block
// (RowsBlock) per output row, each thread striding over the row, then a
// shuffle tree (and shared memory across a block's warps). With vec > 1
// (rowsVector) and every pointer aligned, a thread takes vec neighbouring
// elements of the row at a time, as 16-byte vectors (pointwise values
// yielded beside the reduction stored so too); else one.
func (e *emitter) rows(s Strategy, rows, cols int64, vec int) {
	p := e.p
	r := e.reduction()
	red := p.vals[p.red.Operands[0]]
	shuffle := func(ind int) {
		e.line(0, "#pragma unroll")
		e.line(ind, "for (int off = 16; off > 0; off >>= 1) acc = %s;", r.combine("acc", "__shfl_xor_sync(0xffffffffu, acc, off)"))
	}
	// the yields stored as the row is visited: all but the reduction's
	elementwise := func(k int) bool {
		y := p.yields[k]
		return !(y.kind == kindComputed && y.op == len(p.ops)-1)
	}
	e.line(1, "const int lane = threadIdx.x & 31;")
	first, step := "lane", "32"
	if s == RowsBlock {
		first, step = "threadIdx.x", "blockDim.x"
	}
	if vec > 1 {
		e.line(1, "const bool vectors = %s;", e.aligned(vec, nil, elementwise))
	}
	if s == RowsWarp {
		e.line(1, "for (%s row = tid >> 5; row < %d; row += nthreads >> 5) {", e.idx, rows)
	} else {
		e.line(1, "const int warp = threadIdx.x >> 5;")
		e.line(1, "__shared__ %s partial[%d];", r.acc, BlockSize/32)
		e.line(1, "for (%s row = blockIdx.x; row < %d; row += gridDim.x) {", e.idx, rows)
	}
	e.line(2, "%s acc = %s;", r.acc, r.init)
	ind := 2
	if vec > 1 {
		e.line(2, "if (vectors) {")
		e.line(3, "for (%s cv = %s; cv < %d; cv += %s) {", e.idx, first, cols/int64(vec), step)
		e.line(4, "const %s i = row * %d + cv * %d;", e.idx, cols, vec)
		e.vectorLoads(4, vec, "", "i")
		for k, y := range p.yields {
			if elementwise(k) {
				e.line(4, "hir_vec<%s, %d> b%d;", storageType(y.dtype), vec, k)
			}
		}
		e.line(0, "#pragma unroll")
		e.line(4, "for (int e = 0; e < %d; ++e) {", vec)
		e.element(5, "e",
			func(k int) string { return fmt.Sprintf("a%d.v[e]", k) },
			func(k int, v string) string { return fmt.Sprintf("b%d.v[e] = %s;", k, v) }, false)
		e.line(5, "acc = %s;", r.combine("acc", e.valExpr(red, red.dtype)))
		e.line(4, "}")
		for k, y := range p.yields {
			if elementwise(k) {
				e.line(4, "*reinterpret_cast<hir_vec<%s, %d>*>(out%d + i) = b%d;", storageType(y.dtype), vec, k, k)
			}
		}
		e.line(3, "}")
		e.line(2, "} else {")
		ind = 3
	}
	e.line(ind, "for (%s col = %s; col < %d; col += %s) {", e.idx, first, cols, step)
	e.line(ind+1, "const %s i = row * %d + col;", e.idx, cols)
	e.element(ind+1, "i", nil, nil, true)
	e.line(ind+1, "acc = %s;", r.combine("acc", e.valExpr(red, red.dtype)))
	e.line(ind, "}")
	if vec > 1 {
		e.line(2, "}")
	}
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
// output element, looping over the reduced elements in index order. With
// vec > 1 (columnsVector) a thread first takes vec neighbouring outputs
// at a time, loading each input and storing each output as 16-byte
// vectors, where every pointer is aligned for them; the scalar loop does
// the rest.
func (e *emitter) columns(outs int64, kept, reduced []int, vec int) {
	r := e.reduction()
	red := e.p.vals[e.p.red.Operands[0]]
	start := "tid"
	if vec > 1 && e.n > 0 {
		e.line(1, "%s done = 0;", e.idx)
		e.line(1, "if (%s) {", e.aligned(vec, nil, nil))
		e.line(2, "for (%s ov = tid; ov < %d; ov += nthreads) {", e.idx, outs/int64(vec))
		e.line(3, "const %s o = ov * %d;", e.idx, vec)
		e.line(3, "%s acc[%d];", r.acc, vec)
		e.line(0, "#pragma unroll")
		e.line(3, "for (int e = 0; e < %d; ++e) acc[e] = %s;", vec, r.init)
		e.line(3, "const %s base = %s;", e.idx, e.linearOffset("o", kept))
		e.line(3, "for (%s j = 0; j < %d; ++j) {", e.idx, r.count)
		e.line(4, "const %s i = base + %s;", e.idx, e.linearOffset("j", reduced))
		e.vectorLoads(4, vec, "", "i")
		e.line(0, "#pragma unroll")
		e.line(4, "for (int e = 0; e < %d; ++e) {", vec)
		e.element(5, "(i + e)", func(k int) string { return fmt.Sprintf("a%d.v[e]", k) }, nil, true)
		e.line(5, "acc[e] = %s;", r.combine("acc[e]", e.valExpr(red, red.dtype)))
		e.line(4, "}")
		e.line(3, "}")
		// one 16-byte store per output: scalar stores a vector apart
		// split every 32-byte sector across eight store instructions
		// (tp.PeersFirst's sum of slots ran slower so than unvectorised)
		for k, y := range e.p.yields {
			vt := fmt.Sprintf("hir_vec<%s, %d>", storageType(y.dtype), vec)
			e.line(3, "%s r%d;", vt, k)
			e.line(0, "#pragma unroll")
			e.line(3, "for (int e = 0; e < %d; ++e) r%d.v[e] = %s;", vec, k, storeExpr(y.dtype, r.finish("acc[e]")))
			e.line(3, "*reinterpret_cast<%s*>(out%d + o) = r%d;", vt, k, k)
		}
		e.line(2, "}")
		e.line(2, "done = %d;", outs)
		e.line(1, "}")
		start = "done + tid"
	}
	e.line(1, "for (%s o = %s; o < %d; o += nthreads) {", e.idx, start, outs)
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
