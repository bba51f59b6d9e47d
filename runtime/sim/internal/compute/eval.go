package compute

import (
	"fmt"
	"math"
	goruntime "runtime"
	"sync"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
)

// The interpreter's numerics follow docs/SEMANTICS.md: f32, f16 and bf16
// values are held as float64 rounded to float32 after every operation (so
// f16/bf16 intermediates stay in f32 and round to their dtype only when
// stored), f64 in float64, ints in int64 wrapped to their dtype after every
// operation, bool as 0/1.

// array is one value of a kernel: floats in f, ints and bools in i.
type array struct {
	f []float64
	i []int64
}

// computeRound rounds x to the precision dt computes in.
func computeRound(dt ir.DType, x float64) float64 {
	if dt == ir.F64 {
		return x
	}
	return float64(float32(x))
}

// Arena hands a kernel run its arrays, zeroed, reusing the storage of the
// stream's previous kernel runs (one stream runs one kernel at a time, and
// a kernel asks for the same sizes in the same order every run). Only
// small arrays are kept, so a large kernel's working memory is still the
// garbage collector's once the run ends (and held against the budget only
// while it runs).
type Arena struct {
	f    [][]float64
	i    [][]int64
	nf   int
	ni   int
	vals []array
}

// arenaKeep is the largest array (in elements) an arena keeps between runs.
const arenaKeep = 4096

func (a *Arena) reset(slots int) []array {
	a.nf, a.ni = 0, 0
	if cap(a.vals) < slots {
		a.vals = make([]array, slots)
	}
	a.vals = a.vals[:slots]
	clear(a.vals)
	return a.vals
}

// floats and ints are two typed copies on purpose: one generic take in
// their place cost 150 ns per IR op in BenchmarkOverheadPerOp.
func (a *Arena) floats(n int64) []float64 {
	if a == nil || n > arenaKeep {
		return make([]float64, n)
	}
	if a.nf < len(a.f) && int64(cap(a.f[a.nf])) >= n {
		b := a.f[a.nf][:n]
		clear(b)
		a.nf++
		return b
	}
	b := make([]float64, n)
	if a.nf < len(a.f) {
		a.f[a.nf] = b
	} else {
		a.f = append(a.f, b)
	}
	a.nf++
	return b
}

func (a *Arena) ints(n int64) []int64 {
	if a == nil || n > arenaKeep {
		return make([]int64, n)
	}
	if a.ni < len(a.i) && int64(cap(a.i[a.ni])) >= n {
		b := a.i[a.ni][:n]
		clear(b)
		a.ni++
		return b
	}
	b := make([]int64, n)
	if a.ni < len(a.i) {
		a.i[a.ni] = b
	} else {
		a.i = append(a.i, b)
	}
	a.ni++
	return b
}

// Run runs k on the input and output views (the kernel's inputs, then its
// outputs, of the shapes it was compiled for); a (nil: allocate afresh)
// holds its working arrays. Inputs are read whole before any output is
// written, so outputs may alias inputs.
func (k *Kernel) Run(ins, outs []*View, a *Arena) error {
	var vals []array
	if a != nil {
		vals = a.reset(len(k.slots))
	} else {
		vals = make([]array, len(k.slots))
	}
	for i, v := range ins {
		if isFloatClass(v.DT) {
			vals[i].f = loadFInto(a.floats(v.N), v)
		} else {
			vals[i].i = loadIInto(a.ints(v.N), v)
		}
	}
	for si := range k.steps {
		st := &k.steps[si]
		out, err := st.exec(vals, a)
		if err != nil {
			return err
		}
		vals[st.out] = out
	}
	for i, y := range k.yields {
		v := outs[i]
		if y.slot < 0 {
			if isFloatClass(v.DT) {
				xs := a.floats(v.N)
				for j := range xs {
					xs[j] = y.f
				}
				v.StoreF(0, xs)
			} else {
				xs := a.ints(v.N)
				for j := range xs {
					xs[j] = y.i
				}
				v.StoreI(0, xs)
			}
			continue
		}
		a := vals[y.slot]
		if isFloatClass(v.DT) {
			v.StoreF(0, a.f)
		} else {
			v.StoreI(0, a.i)
		}
	}
	return nil
}

// loadFInto reads v's elements as float64 into out (v.N long).
func loadFInto(out []float64, v *View) []float64 {
	if v.Contig {
		for k := range out {
			out[k] = numeric.LoadFloat(v.DT, v.Data, int64(k))
		}
		return out
	}
	v.Each(0, v.N, func(k, off int64) { out[k] = numeric.LoadFloat(v.DT, v.Data, off) })
	return out
}

// loadIInto reads v's elements as int64 into out (v.N long).
func loadIInto(out []int64, v *View) []int64 {
	v.Each(0, v.N, func(k, off int64) { out[k] = numeric.LoadInt(v.DT, v.Data, off) })
	return out
}

// argF returns element e of a float operand.
func argF(vals []array, o *operand, e int64) float64 {
	if o.slot < 0 {
		return o.f
	}
	if o.index != nil {
		e = o.index[e]
	}
	return vals[o.slot].f[e]
}

func argI(vals []array, o *operand, e int64) int64 {
	if o.slot < 0 {
		return o.i
	}
	if o.index != nil {
		e = o.index[e]
	}
	return vals[o.slot].i[e]
}

func (st *step) exec(vals []array, a *Arena) (array, error) {
	n := ir.Product(st.shape)
	switch {
	case st.code == ir.OpCast:
		return st.cast(vals, n, a), nil
	case st.code == ir.OpWhere:
		return st.where(vals, n, a), nil
	case st.code.IsPointwise():
		return st.pointwise(vals, n, a)
	case st.code.IsReduction():
		return st.reduce(vals, n, a), nil
	case st.code == ir.OpMatmul:
		return st.matmul(vals, n, a), nil
	}
	return array{}, fmt.Errorf("%s at %s: not supported by the interpreter", st.code, st.pos)
}

func (st *step) pointwise(vals []array, n int64, a *Arena) (array, error) {
	var out array
	info := st.code.Info() // the scalar semantics (ir/scalar.go)
	if isFloatClass(st.dt) {
		out.f = a.floats(n)
		if f := info.F1; len(st.args) == 1 {
			for e := int64(0); e < n; e++ {
				out.f[e] = computeRound(st.dt, f(argF(vals, &st.args[0], e)))
			}
			return out, nil
		}
		f := info.F2
		for e := int64(0); e < n; e++ {
			out.f[e] = computeRound(st.dt, f(argF(vals, &st.args[0], e), argF(vals, &st.args[1], e)))
		}
		return out, nil
	}
	out.i = a.ints(n)
	if f := info.I1; len(st.args) == 1 {
		for e := int64(0); e < n; e++ {
			out.i[e] = numeric.WrapInt(st.dt, f(argI(vals, &st.args[0], e)))
		}
		return out, nil
	}
	f := info.I2
	for e := int64(0); e < n; e++ {
		out.i[e] = numeric.WrapInt(st.dt, f(argI(vals, &st.args[0], e), argI(vals, &st.args[1], e)))
	}
	return out, nil
}

// cast follows the cast rules: float to float rounds to nearest even (a
// cast's result is its dtype's value even inside a fusion), float to int
// truncates and saturates with NaN as 0, to bool is x != 0, bool and ints
// to floats are exact or rounded to nearest.
func (st *step) cast(vals []array, n int64, a *Arena) array {
	var out array
	from, to := st.inDT, st.dt
	src := &st.args[0]
	if isFloatClass(to) {
		out.f = a.floats(n)
	} else {
		out.i = a.ints(n)
	}
	for e := int64(0); e < n; e++ {
		switch {
		case isFloatClass(from) && isFloatClass(to):
			out.f[e] = numeric.RoundTo(to, argF(vals, src, e))
		case isFloatClass(from):
			out.i[e] = numeric.FloatToInt(to, argF(vals, src, e))
		case isFloatClass(to):
			x := argI(vals, src, e)
			if to == ir.F32 {
				out.f[e] = float64(float32(x)) // one rounding from int64
			} else {
				out.f[e] = numeric.RoundTo(to, float64(x))
			}
		default:
			out.i[e] = numeric.WrapInt(to, argI(vals, src, e))
		}
	}
	return out
}

func (st *step) where(vals []array, n int64, ar *Arena) array {
	var out array
	c, a, b := &st.args[0], &st.args[1], &st.args[2]
	if isFloatClass(st.dt) {
		out.f = ar.floats(n)
		for e := int64(0); e < n; e++ {
			if argI(vals, c, e) != 0 {
				out.f[e] = argF(vals, a, e)
			} else {
				out.f[e] = argF(vals, b, e)
			}
		}
		return out
	}
	out.i = ar.ints(n)
	for e := int64(0); e < n; e++ {
		if argI(vals, c, e) != 0 {
			out.i[e] = argI(vals, a, e)
		} else {
			out.i[e] = argI(vals, b, e)
		}
	}
	return out
}

// reduce walks the input in row-major order, so each output accumulates its
// elements in index order: floats in f32 (f64 for f64), ints in int64.
func (st *step) reduce(vals []array, n int64, a *Arena) array {
	in := vals[st.args[0].slot]
	var out array
	if isFloatClass(st.dt) {
		out.f = a.floats(n)
		if st.code == ir.OpReduceMax {
			for j := range out.f {
				out.f[j] = math.Inf(-1)
			}
		}
		for e, x := range in.f {
			j := st.reduceIndex[e]
			if st.code == ir.OpReduceMax {
				out.f[j] = ir.MaxFloat(out.f[j], x)
			} else {
				out.f[j] = computeRound(st.dt, out.f[j]+x)
			}
		}
		if st.code == ir.OpMean {
			for j := range out.f {
				out.f[j] = computeRound(st.dt, out.f[j]/float64(st.count))
			}
		}
		return out
	}
	out.i = a.ints(n)
	if st.code == ir.OpReduceMax {
		lowest := int64(math.MinInt64)
		if st.dt == ir.I32 {
			lowest = math.MinInt32
		}
		for j := range out.i {
			out.i[j] = lowest
		}
	}
	for e, x := range in.i {
		j := st.reduceIndex[e]
		if st.code == ir.OpReduceMax {
			out.i[j] = max(out.i[j], x)
		} else {
			out.i[j] += x
		}
	}
	for j := range out.i {
		out.i[j] = numeric.WrapInt(st.dt, out.i[j])
	}
	return out
}

// matmul accumulates each output over k in order, in f32 (f64 for f64):
// the product is rounded, then the sum (no fused multiply-add). The loops
// run i, k, j (each output row accumulated in place, both operands read
// along their rows), which adds every output's terms in the same order as
// i, j, k would, so the sums are the same to the bit; large ones split
// their rows over goroutines.
func (st *step) matmul(vals []array, n int64, ar *Arena) array {
	a, b := vals[st.args[0].slot].f, vals[st.args[1].slot].f
	var c []float64 // accumulate=true: what the destination held
	if len(st.args) == 3 {
		c = vals[st.args[2].slot].f
	}
	out := array{f: ar.floats(n)} // zeroed: every sum starts at 0
	m, kk, nn := st.m, st.kk, st.n
	rows := func(r0, r1 int64) {
		for r := r0; r < r1; r++ {
			bt := r / m
			bOff := int64(0)
			if st.bBatched {
				bOff = bt * kk * nn
			}
			acc := out.f[r*nn : (r+1)*nn]
			for k, aik := range a[r*kk : (r+1)*kk] {
				bRow := b[bOff+int64(k)*nn : bOff+int64(k+1)*nn]
				acc := acc[:len(bRow)] // one bounds check, not one per j
				if st.dt == ir.F64 {
					for j, bkj := range bRow {
						acc[j] += float64(aik * bkj)
					}
					continue
				}
				for j, bkj := range bRow {
					acc[j] = float64(float32(acc[j] + float64(float32(aik*bkj))))
				}
			}
			if c != nil { // accumulate: the destination is added once the sum is done, as cuBLAS's beta = 1
				for j, cj := range c[r*nn : (r+1)*nn] {
					if st.dt == ir.F64 {
						acc[j] += cj
					} else {
						acc[j] = float64(float32(acc[j] + cj))
					}
				}
			}
		}
	}
	total := st.batch * m
	workers := int64(goruntime.GOMAXPROCS(0))
	if workers < 2 || total < 2 || total*kk*nn < matmulSplitMin {
		rows(0, total)
		return out
	}
	workers = min(workers, total)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows(total*w/workers, total*(w+1)/workers)
		}()
	}
	wg.Wait()
	return out
}

// matmulSplitMin is the multiply-adds from which a matmul splits its rows
// over goroutines (below it the start-up costs more than it saves).
const matmulSplitMin = 1 << 20
