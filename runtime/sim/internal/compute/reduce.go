package compute

import (
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
)

// The collectives' arithmetic: what a reducing collective does to the
// values it has gathered, whatever moved them.

// Acc holds values being reduced: floats in F (in compute precision), ints
// in I.
type Acc struct {
	F []float64
	I []int64
}

// Load reads elements [lo, hi) of v into an Acc.
func Load(v *View, lo, hi int64) Acc {
	if isFloatClass(v.DT) {
		return Acc{F: v.LoadF(lo, hi)}
	}
	return Acc{I: v.LoadI(lo, hi)}
}

// Store writes a as elements [lo, lo+len) of v.
func Store(v *View, lo int64, a Acc) {
	if a.F != nil {
		v.StoreF(lo, a.F)
	} else {
		v.StoreI(lo, a.I)
	}
}

// Reducer folds values of dtype DT with Op over Ranks contributions.
type Reducer struct {
	Op    ir.ReduceOp
	DT    ir.DType
	Ranks int // what avg divides by
}

// Combine folds b into a: a = a op b, rounded to the compute precision.
func (r Reducer) Combine(a, b Acc) {
	dt := r.DT
	if a.F != nil || b.F != nil {
		for e := range a.F {
			x, y := a.F[e], b.F[e]
			var v float64
			switch r.Op {
			case ir.ReduceSum, ir.ReduceAvg:
				v = x + y
			case ir.ReduceProd:
				v = x * y
			case ir.ReduceMax:
				v = ir.MaxFloat(x, y)
			case ir.ReduceMin:
				v = ir.MinFloat(x, y)
			}
			a.F[e] = computeRound(dt, v)
		}
		return
	}
	for e := range a.I {
		x, y := a.I[e], b.I[e]
		var v int64
		switch r.Op {
		case ir.ReduceSum:
			v = x + y
		case ir.ReduceProd:
			v = x * y
		case ir.ReduceMax:
			v = max(x, y)
		case ir.ReduceMin:
			v = min(x, y)
		}
		a.I[e] = numeric.WrapInt(dt, v)
	}
}

// Finalize divides by the world size for avg.
func (r Reducer) Finalize(a Acc) {
	if r.Op != ir.ReduceAvg {
		return
	}
	D := float64(r.Ranks)
	for e := range a.F {
		a.F[e] = computeRound(r.DT, a.F[e]/D)
	}
}

// ChunkBounds splits n elements into D contiguous chunks as evenly as
// possible: chunk c is [b[c], b[c+1]).
func ChunkBounds(n int64, D int) []int64 {
	b := make([]int64, D+1)
	for c := 0; c <= D; c++ {
		b[c] = int64(c) * n / int64(D)
	}
	return b
}
