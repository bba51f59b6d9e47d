package main

// TestGoldenReference checks the numbers in the success goldens of
// testdata/ against references computed here, independently of the passes,
// the evaluator and the CPU runtime: naive loops in float64 over the inputs
// the goldens use (host.Random with the seeds of each file's args line),
// rounded to the result's dtype where the semantics round. A golden that
// records wrong numbers fails here even when TestGolden accepts it.
//
// Every program whose golden exits 0 needs an entry in references.

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
)

// tens is a reference tensor: a dtype, a shape and float64 values in
// row-major order (every integer the testdata uses is exact in float64).
type tens struct {
	dt    ir.DType
	shape []int64
	v     []float64
}

func newTens(dt ir.DType, shape ...int64) tens {
	return tens{dt, append([]int64{}, shape...), make([]float64, ir.Product(shape))}
}

func fromArray(a *host.Array) tens {
	t := newTens(a.DType, a.Shape...)
	for i := range t.v {
		if a.DType.IsFloat() {
			t.v[i] = a.At(int64(i))
		} else {
			t.v[i] = float64(a.AtInt(int64(i)))
		}
	}
	return t
}

// strides of a row-major shape.
func strides(shape []int64) []int64 {
	s := make([]int64, len(shape))
	n := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = n
		n *= shape[i]
	}
	return s
}

// unravel turns a flat index into a multi-index.
func unravel(shape []int64, flat int64) []int64 {
	idx := make([]int64, len(shape))
	for i := len(shape) - 1; i >= 0; i-- {
		idx[i] = flat % shape[i]
		flat /= shape[i]
	}
	return idx
}

func (t tens) at(idx []int64) float64 {
	off, st := int64(0), strides(t.shape)
	for i, x := range idx {
		off += x * st[i]
	}
	return t.v[off]
}

// round gives every element the value the dtype stores: floats round to
// nearest even, integers wrap, bools are 0 or 1.
func (t tens) as(dt ir.DType) tens {
	out := newTens(dt, t.shape...)
	for i, x := range t.v {
		switch {
		case dt.IsFloat():
			out.v[i] = numeric.RoundTo(dt, x)
		case dt == ir.Bool:
			out.v[i] = b2f(x != 0)
		case dt == ir.I32:
			out.v[i] = float64(int32(int64(x)))
		default:
			out.v[i] = float64(int64(x))
		}
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// f32 rounds x to float32, the precision f16, bf16 and f32 compute in.
func f32(x float64) float64 { return float64(float32(x)) }

// scalar is a literal operand.
func scalar(x float64) tens { return tens{v: []float64{x}} }

// pw applies f elementwise with NumPy broadcasting; the result has dtype dt.
func pw(dt ir.DType, f func(x ...float64) float64, args ...tens) tens {
	rank := 0
	for _, a := range args {
		rank = max(rank, len(a.shape))
	}
	shape := make([]int64, rank)
	for i := range shape {
		shape[i] = 1
	}
	for _, a := range args {
		for i, e := range a.shape {
			j := rank - len(a.shape) + i
			if e != 1 {
				shape[j] = e
			}
		}
	}
	out := newTens(dt, shape...)
	xs := make([]float64, len(args))
	for flat := range out.v {
		idx := unravel(shape, int64(flat))
		for k, a := range args {
			sub := make([]int64, len(a.shape))
			for i, e := range a.shape {
				if e != 1 {
					sub[i] = idx[rank-len(a.shape)+i]
				}
			}
			xs[k] = a.at(sub)
		}
		out.v[flat] = f(xs...)
	}
	return out
}

// reduce folds the listed axes with f, starting from init.
func reduce(t tens, axes []int, keep bool, init float64, f func(acc, x float64) float64) tens {
	drop := map[int]bool{}
	for _, a := range axes {
		drop[a] = true
	}
	var shape, kept []int64
	for i, e := range t.shape {
		switch {
		case !drop[i]:
			shape = append(shape, e)
			kept = append(kept, e)
		case keep:
			kept = append(kept, 1)
		}
	}
	out := newTens(t.dt, shape...)
	for i := range out.v {
		out.v[i] = init
	}
	ost := strides(shape)
	for flat, x := range t.v {
		idx := unravel(t.shape, int64(flat))
		off, k := int64(0), 0
		for i, e := range idx {
			if !drop[i] {
				off += e * ost[k]
				k++
			}
		}
		out.v[off] = f(out.v[off], x)
	}
	out.shape = kept
	return out
}

func sum(t tens, keep bool, axes ...int) tens {
	return reduce(t, axes, keep, 0, func(a, x float64) float64 { return a + x })
}

func maxOver(t tens, keep bool, axes ...int) tens {
	return reduce(t, axes, keep, math.Inf(-1), math.Max)
}

// matmul is a[..., M, K] × b[K, N] or a batched b with a's batch dims.
func matmul(a, b tens) tens {
	r := len(a.shape)
	m, k, n := a.shape[r-2], a.shape[r-1], b.shape[len(b.shape)-1]
	batch := ir.Product(a.shape[:r-2])
	out := newTens(a.dt, append(append([]int64{}, a.shape[:r-2]...), m, n)...)
	for bi := int64(0); bi < batch; bi++ {
		boff := int64(0)
		if len(b.shape) > 2 {
			boff = bi * k * n
		}
		for i := int64(0); i < m; i++ {
			for j := int64(0); j < n; j++ {
				acc := 0.0
				for kk := int64(0); kk < k; kk++ {
					acc += a.v[bi*m*k+i*k+kk] * b.v[boff+kk*n+j]
				}
				out.v[bi*m*n+i*n+j] = acc
			}
		}
	}
	return out
}

// slice takes [lo, lo+n) along axis.
func slice(t tens, axis int, lo, n int64) tens {
	shape := append([]int64{}, t.shape...)
	shape[axis] = n
	out := newTens(t.dt, shape...)
	for flat := range out.v {
		idx := unravel(shape, int64(flat))
		idx[axis] += lo
		out.v[flat] = t.at(idx)
	}
	return out
}

// pick is select: index i of axis, which is dropped.
func pick(t tens, axis int, i int64) tens {
	s := slice(t, axis, i, 1)
	s.shape = append(s.shape[:axis:axis], s.shape[axis+1:]...)
	return s
}

// chunk is rank r's shard of t along axis, of D.
func chunk(t tens, axis, r, D int) tens {
	n := t.shape[axis] / int64(D)
	return slice(t, axis, int64(r)*n, n)
}

// concat joins ts along axis.
func concat(axis int, ts ...tens) tens {
	shape := append([]int64{}, ts[0].shape...)
	shape[axis] = 0
	for _, t := range ts {
		shape[axis] += t.shape[axis]
	}
	out := newTens(ts[0].dt, shape...)
	for flat := range out.v {
		idx := unravel(shape, int64(flat))
		for _, t := range ts {
			if idx[axis] < t.shape[axis] {
				out.v[flat] = t.at(idx)
				break
			}
			idx[axis] -= t.shape[axis]
		}
	}
	return out
}

func reshape(t tens, shape ...int64) tens {
	return tens{t.dt, shape, append([]float64{}, t.v...)}
}

func zeros(like tens) tens { return newTens(like.dt, like.shape...) }

// overRanks folds the ranks' tensors elementwise in rank order.
func overRanks(ts []tens, f func(acc, x float64) float64) tens {
	out := tens{ts[0].dt, ts[0].shape, append([]float64{}, ts[0].v...)}
	for _, t := range ts[1:] {
		for i := range out.v {
			out.v[i] = f(out.v[i], t.v[i])
		}
	}
	return out
}

func add(a, b float64) float64 { return a + b }
func mul(a, b float64) float64 { return a * b }

func gelu(x float64) float64 { return x * (1 + math.Erf(x/math.Sqrt2)) / 2 }

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// truncDiv is integer division toward zero, with x / 0 = 0.
func truncDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return float64(int64(a) / int64(b))
}

// refCtx is what a reference sees: the mesh size, the logical inputs and
// each input's rank-r shard.
type refCtx struct {
	D      int
	in     map[string]tens
	shards map[string][]tens // by rank; replicated inputs repeat
}

func (c *refCtx) local(name string, r int) tens { return c.shards[name][r] }

// each runs f for every rank.
func (c *refCtx) each(f func(r int) map[string]tens) []map[string]tens {
	out := make([]map[string]tens, c.D)
	for r := range out {
		out[r] = f(r)
	}
	return out
}

// allLocal lists input name's shards in rank order.
func (c *refCtx) allLocal(name string) []tens { return c.shards[name] }

// reference computes every rank's outputs (local shards) of one program.
type reference func(c *refCtx) []map[string]tens

var references = map[string]reference{
	"pointwise": func(c *refCtx) []map[string]tens {
		return c.each(func(r int) map[string]tens {
			x := c.local("x", r)
			y := pw(ir.F32, func(v ...float64) float64 { return math.Max(f32(f32(2*v[0])+1), 0) }, x)
			return map[string]tens{"y": y, "z": pw(ir.F32, func(v ...float64) float64 { return v[0] * v[0] }, y)}
		})
	},
	"transfer_ring": func(c *refCtx) []map[string]tens {
		xs := c.allLocal("x")
		D := c.D
		return c.each(func(r int) map[string]tens {
			// A read of the right neighbour's shard; the left neighbour's write.
			return map[string]tens{"left": xs[(r+1)%D], "box": xs[(r+D-1)%D]}
		})
	},
	"transfer_pair": func(c *refCtx) []map[string]tens {
		xs := c.allLocal("x")
		return c.each(func(r int) map[string]tens {
			// Three rounds of acc = the peer's acc + 1, each rounded to f32:
			// the value crosses over three times, so it ends with the peer's x.
			acc := []tens{xs[0], xs[1]}
			for range 3 {
				acc = []tens{
					pw(ir.F32, func(v ...float64) float64 { return f32(v[0] + 1) }, acc[1]),
					pw(ir.F32, func(v ...float64) float64 { return f32(v[0] + 1) }, acc[0]),
				}
			}
			return map[string]tens{"acc": acc[r]}
		})
	},
	"all_gather_ring": func(c *refCtx) []map[string]tens {
		return c.each(func(int) map[string]tens { return map[string]tens{"g": c.in["x"]} })
	},
	"all_reduce_two_shot": func(c *refCtx) []map[string]tens {
		// Every rank holds the whole x, so the sum over 4 ranks is 4x.
		s := overRanks([]tens{c.in["x"], c.in["x"], c.in["x"], c.in["x"]}, add)
		return c.each(func(int) map[string]tens { return map[string]tens{"s": s} })
	},
	"symmetric_contiguous_view": func(c *refCtx) []map[string]tens {
		x := c.in["x"]
		return c.each(func(int) map[string]tens { return map[string]tens{"v": x, "s": sum(x, false, 0)} })
	},
	"unary_f64": func(c *refCtx) []map[string]tens {
		x := c.in["x"]
		un := func(f func(float64) float64) tens {
			return pw(ir.F64, func(v ...float64) float64 { return f(v[0]) }, x)
		}
		neg := func(v float64) float64 { return -v }
		return c.each(func(int) map[string]tens {
			return map[string]tens{
				"n": un(neg),
				"e": un(func(v float64) float64 { return math.Exp(-v) }),
				"l": un(neg), // log(exp(-x)), up to rounding
				"t": un(math.Tanh),
				"r": un(func(v float64) float64 { return math.Max(v, 0) }),
				"g": un(gelu),
				"s": un(sigmoid),
				"a": un(math.Abs),
			}
		})
	},
	"binary_f16": func(c *refCtx) []map[string]tens {
		b := c.in["b"]
		return c.each(func(r int) map[string]tens {
			x := c.local("x", r)
			bin := func(f func(a, b float64) float64, l, rr tens) tens {
				return pw(ir.F16, func(v ...float64) float64 { return f(v[0], v[1]) }, l, rr).as(ir.F16)
			}
			return map[string]tens{
				"a":  bin(add, x, b),
				"s":  bin(func(a, b float64) float64 { return a - b }, scalar(1), x),
				"m":  bin(mul, x, b),
				"d":  bin(func(a, b float64) float64 { return a / b }, x, b),
				"hi": bin(math.Max, x, b),
				"lo": bin(math.Min, x, scalar(-0.5)),
			}
		})
	},
	"cast_where_bf16": func(c *refCtx) []map[string]tens {
		return c.each(func(r int) map[string]tens {
			x, cond := c.local("x", r), c.local("c", r)
			h := x.as(ir.BF16)
			// In the fused chain the product stays in f32: %i truncates it unrounded.
			y32 := pw(ir.F32, func(v ...float64) float64 { return f32(v[0] * 3) }, h)
			i := pw(ir.I32, func(v ...float64) float64 { return math.Trunc(v[0]) }, y32)
			return map[string]tens{
				"h":  h,
				"y":  y32.as(ir.BF16),
				"i":  i,
				"nz": i.as(ir.Bool),
				"w": pw(ir.BF16, func(v ...float64) float64 {
					if v[0] != 0 {
						return v[1]
					}
					return -1
				}, cond, h),
				"f": cond.as(ir.F32),
			}
		})
	},
	"int_i32": func(c *refCtx) []map[string]tens {
		return c.each(func(r int) map[string]tens {
			a, b := c.local("a", r), c.local("b", r)
			op := func(f func(x, y float64) float64, l, rr tens) tens {
				return pw(ir.I32, func(v ...float64) float64 { return f(v[0], v[1]) }, l, rr).as(ir.I32)
			}
			un := func(f func(x float64) float64) tens {
				return pw(ir.I32, func(v ...float64) float64 { return f(v[0]) }, a).as(ir.I32)
			}
			return map[string]tens{
				"s":  op(add, a, b),
				"d":  op(func(x, y float64) float64 { return x - y }, a, scalar(100)),
				"m":  op(mul, a, b),
				"w":  op(mul, a, scalar(1e9)), // as(I32) wraps
				"q":  op(truncDiv, a, b),
				"z":  op(truncDiv, a, scalar(0)),
				"n":  un(func(x float64) float64 { return -x }),
				"ab": pw(ir.I32, func(v ...float64) float64 { return math.Abs(v[0]) }, b),
				"r":  un(func(x float64) float64 { return math.Max(x, 0) }),
				"hi": op(math.Max, a, b),
				"lo": op(math.Min, a, scalar(3)),
			}
		})
	},
	"reductions": func(c *refCtx) []map[string]tens {
		return c.each(func(r int) map[string]tens {
			x, k, h := c.local("x", r), c.local("k", r), c.local("h", r)
			m := sum(x, true, 1, 2)
			for i := range m.v {
				m.v[i] /= 15
			}
			return map[string]tens{
				"s":  sum(x, false, 1),
				"m":  m,
				"mx": maxOver(x, false, 2),
				"ks": sum(k, true, 0, 2),
				"km": maxOver(k, false, 0),
				"hs": sum(h, false, 1).as(ir.BF16),
			}
		})
	},
	"matmul": func(c *refCtx) []map[string]tens {
		w, q := c.in["w"], c.in["q"]
		return c.each(func(r int) map[string]tens {
			a, p := c.local("a", r), c.local("p", r)
			return map[string]tens{
				"y":  matmul(a, w),
				"pq": matmul(p, q),
				"pw": matmul(p, w),
				"yb": matmul(a.as(ir.BF16), w.as(ir.BF16)).as(ir.BF16),
			}
		})
	},
	"memory": func(c *refCtx) []map[string]tens {
		return c.each(func(r int) map[string]tens {
			x := c.local("x", r)
			return map[string]tens{
				"z": zeros(x), "s": x, "h": x, "g": x, "d": x,
				"e":  pw(ir.F16, func(v ...float64) float64 { return math.Exp(v[0]) }, x).as(ir.F16),
				"z2": zeros(x),
			}
		})
	},
	"select_reshape": func(c *refCtx) []map[string]tens {
		u := c.in["u"]
		return c.each(func(r int) map[string]tens {
			m := c.local("m", r)
			col := pick(m, 2, 0)
			return map[string]tens{
				"row": pick(m, 1, 2),
				"col": col,
				"c1":  pw(ir.I64, func(v ...float64) float64 { return v[0] + 1 }, col),
				"f":   reshape(u, 2, 6),
				"g":   reshape(u, 12),
				"e":   pick(reshape(u, 12), 0, 7),
			}
		})
	},
	"send_recv": func(c *refCtx) []map[string]tens {
		xs := c.allLocal("x")
		D := c.D
		y := func(r int) tens { return xs[(r-1+D)%D] } // the left neighbour's shard
		return c.each(func(r int) map[string]tens {
			return map[string]tens{"y": y(r), "z": y((r + 1) % D)} // shifted back: x's own shard
		})
	},
	"stream_barrier": func(c *refCtx) []map[string]tens {
		xs, D := c.allLocal("x"), c.D
		return c.each(func(r int) map[string]tens {
			return map[string]tens{"got": xs[(r-1+D)%D]} // the left neighbour's row
		})
	},
	"alloc_uninit": func(c *refCtx) []map[string]tens {
		xs, D := c.allLocal("x"), c.D
		g := matmul(c.in["x"], c.in["w"]) // every rank's product, gathered
		return c.each(func(r int) map[string]tens {
			return map[string]tens{"got": xs[(r-1+D)%D], "g": g} // the left neighbour's row
		})
	},
	"all_gather_algos": func(c *refCtx) []map[string]tens {
		x := c.in["x"]
		return c.each(func(int) map[string]tens { return map[string]tens{"a": x, "b": x, "c": x, "d": x, "e": x} })
	},
	"all_reduce_algos": func(c *refCtx) []map[string]tens {
		xs, is := c.allLocal("x"), c.allLocal("i")
		s := overRanks(xs, add)
		avg := overRanks(xs, add)
		for i := range avg.v {
			avg.v[i] /= float64(c.D)
		}
		out := map[string]tens{
			"sum": s, "two": s, "avg": avg,
			"max":   overRanks(xs, math.Max),
			"min":   overRanks(xs, math.Min),
			"prod":  overRanks(xs, mul),
			"isum":  overRanks(is, add).as(ir.I32),
			"llmax": overRanks(xs, math.Max),
			"llsum": overRanks(is, add).as(ir.I32),
		}
		return c.each(func(int) map[string]tens { return out })
	},
	"reduce_scatter": func(c *refCtx) []map[string]tens {
		xs, D := c.allLocal("x"), c.D
		us := make([]tens, D)
		for r := range us {
			us[r] = xs[(r-1+D)%D] // what rank r received from its left neighbour
		}
		avg := overRanks(us, add)
		for i := range avg.v {
			avg.v[i] /= float64(D)
		}
		return c.each(func(r int) map[string]tens {
			return map[string]tens{
				"u": us[r],
				"a": chunk(overRanks(us, add), 0, r, D),
				"b": chunk(overRanks(us, math.Max), 1, r, D),
				"c": chunk(overRanks(us, math.Min), 0, r, D),
				"d": chunk(avg, 1, r, D),
				"e": chunk(overRanks(us, mul), 0, r, D),
				"f": chunk(overRanks(us, add), 1, r, D),
				"g": chunk(avg, 0, r, D),
				"h": chunk(overRanks(us, math.Max), 0, r, D),
				"i": chunk(overRanks(us, add), 1, r, D),
			}
		})
	},
	"all_to_all": func(c *refCtx) []map[string]tens {
		t, v := c.in["t"], c.in["v"]
		return c.each(func(r int) map[string]tens {
			// The logical tensor does not change; the sharded axis does.
			return map[string]tens{
				"a":    chunk(t, 1, r, c.D),
				"b":    chunk(t, 1, r, c.D),
				"back": chunk(t, 0, r, c.D),
				"c":    chunk(v, 2, r, c.D),
				"d":    chunk(t, 1, r, c.D),
				"e":    chunk(v, 2, r, c.D),
			}
		})
	},
	"rooted": func(c *refCtx) []map[string]tens {
		xs, x := c.allLocal("x"), c.in["x"]
		onRoot := func(r, root int, t tens) tens {
			if r == root {
				return t
			}
			return zeros(t)
		}
		return c.each(func(r int) map[string]tens {
			return map[string]tens{
				"b":  xs[2],
				"b1": xs[0],
				"b2": xs[3],
				"b3": xs[1],
				"r":  onRoot(r, 1, overRanks(xs, math.Max)),
				"r1": onRoot(r, 0, overRanks(xs, add)),
				"r2": onRoot(r, 2, overRanks(xs, mul)),
				"g":  onRoot(r, 3, x),
				"g1": onRoot(r, 0, x),
				"g2": onRoot(r, 1, x),
				// Scattered back from the root that gathered them.
				"s":  xs[r],
				"s1": chunk(x, 1, r, c.D),
				"s2": xs[r],
			}
		})
	},
	"async_wait": func(c *refCtx) []map[string]tens {
		x := c.in["x"]
		s := pw(ir.F32, func(v ...float64) float64 { return v[0] + 1 }, x)
		r := overRanks(c.allLocal("y"), add)
		return c.each(func(rk int) map[string]tens {
			z := pw(ir.F32, func(v ...float64) float64 { return math.Max(v[0], 0) }, c.local("y", rk))
			return map[string]tens{"g": x, "r": r, "z": z, "s": s}
		})
	},
	"streams": func(c *refCtx) []map[string]tens {
		e := pw(ir.F32, func(v ...float64) float64 { return math.Exp(v[0]) }, c.in["x"])
		nb := pw(ir.F32, func(v ...float64) float64 { return -v[0] }, e)
		return c.each(func(r int) map[string]tens {
			return map[string]tens{"a": chunk(e, 0, r, c.D), "g": e, "b": nb}
		})
	},
	"streams_join": func(c *refCtx) []map[string]tens {
		b := c.in["b"]
		var prods []tens
		for r := range c.D {
			prods = append(prods, matmul(c.local("a", r), b))
		}
		f := pw(ir.F32, func(v ...float64) float64 { return math.Max(v[0], 0) }, overRanks(prods, add))
		return c.each(func(r int) map[string]tens {
			g := pw(ir.F32, func(v ...float64) float64 { return math.Exp(v[0]) * 0.5 }, c.local("a", r))
			return map[string]tens{"f": f, "g": g}
		})
	},
	"device_loop": func(c *refCtx) []map[string]tens {
		x := c.in["x"]
		sum := overRanks([]tens{x, x}, add) // every rank holds the whole x
		acc := pw(ir.I32, func(v ...float64) float64 { return v[0] + 600*v[1] }, x, sum)
		return c.each(func(int) map[string]tens { return map[string]tens{"acc": acc} })
	},
	// 200 trips of acc = tanh(0.25 * (acc w summed over the 2 ranks) + x)
	"device_loop_matmul": func(c *refCtx) []map[string]tens {
		x, w := c.in["x"], c.in["w"]
		acc := x
		for range 200 {
			h := matmul(acc, w)
			s := overRanks([]tens{h, h}, add)
			acc = pw(ir.F32, func(v ...float64) float64 { return math.Tanh(v[0]*0.25 + v[1]) }, s, x)
		}
		return c.each(func(int) map[string]tens { return map[string]tens{"acc": acc} })
	},
	"for_pipeline": func(c *refCtx) []map[string]tens {
		x, w := c.in["x"], c.in["w"]
		var parts, accs []tens
		for i := int64(0); i < 4; i++ {
			y := matmul(pick(x, 0, i), w) // the gathered chunk times w
			y.shape = append([]int64{1}, y.shape...)
			parts = append(parts, y)
			if i%2 == 0 {
				y = pw(ir.F32, func(v ...float64) float64 { return v[0] + 1 }, y)
			}
			accs = append(accs, y)
		}
		out, acc := concat(0, parts...), concat(0, accs...)
		return c.each(func(int) map[string]tens { return map[string]tens{"out": out, "acc": acc} })
	},
	"tp_all_gather_matmul": func(c *refCtx) []map[string]tens {
		y := matmul(c.in["x"], c.in["w"]) // every decomposition: the gathered rows times w
		return c.each(func(int) map[string]tens { return map[string]tens{"ref": y, "chunked": y, "ring": y} })
	},
	// every chunk multiplied into its place: the gathered rows times w,
	// and nothing but zeros in the difference from the whole product
	"matmul_into": func(c *refCtx) []map[string]tens {
		y := matmul(c.in["x"], c.in["w"])
		return c.each(func(int) map[string]tens { return map[string]tens{"chunked": y, "diff": zeros(y)} })
	},
	// two halves of the contraction, the second accumulated onto the
	// first in a strided slot; a bf16 product accumulated twice
	"matmul_accumulate": func(c *refCtx) []map[string]tens {
		y := matmul(c.in["x"], c.in["w"])
		col := y
		col.shape = []int64{4, 1, 3}
		out := concat(1, zeros(col), col)
		hv := matmul(c.in["h"], c.in["v"])
		twice := pw(ir.BF16, func(v ...float64) float64 { return 2 * v[0] }, hv)
		return c.each(func(int) map[string]tens { return map[string]tens{"out": out, "y2": twice} })
	},
	"tp_matmul_reduce_scatter": func(c *refCtx) []map[string]tens {
		p := matmul(c.in["a"], c.in["w"]) // the same on every rank: a and w are not sharded
		total := overRanks([]tens{p, p, p, p}, add)
		return c.each(func(r int) map[string]tens {
			mine := chunk(total, 0, r, 4)
			return map[string]tens{"ref": mine, "chunked": mine, "ring": mine}
		})
	},
	// the loops of for_pipeline, with streams: the same numbers
	"stream_parallel_pipeline": func(c *refCtx) []map[string]tens {
		x, w := c.in["x"], c.in["w"]
		var parts, accs []tens
		for i := int64(0); i < 4; i++ {
			y := matmul(pick(x, 0, i), w)
			y.shape = append([]int64{1}, y.shape...)
			parts = append(parts, y)
			if i%2 == 0 {
				y = pw(ir.F32, func(v ...float64) float64 { return v[0] + 1 }, y)
			}
			accs = append(accs, y)
		}
		out, acc := concat(0, parts...), concat(0, accs...)
		return c.each(func(int) map[string]tens { return map[string]tens{"out": out, "acc": acc} })
	},
	"stream_parallel_reduce_scatter": func(c *refCtx) []map[string]tens {
		xs, D, w := c.allLocal("x"), c.D, c.in["w"]
		// chunk i of every rank's partial products (rank r holds what its
		// left neighbour sent), summed over the ranks
		sums := make([]tens, 4)
		for i := range sums {
			var prods []tens
			for r := range D {
				prods = append(prods, matmul(pick(xs[(r-1+D)%D], 0, int64(i)), w))
			}
			sums[i] = overRanks(prods, add)
		}
		return c.each(func(r int) map[string]tens {
			var rows []tens
			for _, s := range sums {
				part := chunk(s, 0, r, D) // [1, 4]: this rank's row of chunk i
				rows = append(rows, reshape(part, 1, part.shape[0], part.shape[1]))
			}
			return map[string]tens{"out": concat(0, rows...)}
		})
	},
	"fusion_explicit": func(c *refCtx) []map[string]tens {
		b := c.in["b"]
		return c.each(func(r int) map[string]tens {
			// f16 intermediates stay in f32 inside the fusion; rounded where yielded.
			u := pw(ir.F16, func(v ...float64) float64 { return f32(gelu(f32(v[0] + v[1]))) }, c.local("x", r), b)
			return map[string]tens{"y": u.as(ir.F16), "m": maxOver(u, false, 1).as(ir.F16)}
		})
	},
}

// tolerance for comparing a runtime result with a float64 reference: a
// couple of units in the last place of the dtype (f16/bf16/f32 compute in
// f32, in another order than the reference), exact for integers and bools.
func tolerance(dt ir.DType) (rtol, atol float64) {
	switch dt {
	case ir.F64:
		return 1e-12, 1e-14
	case ir.F32:
		return 1e-5, 1e-6
	case ir.F16:
		return 2e-3, 1e-4
	case ir.BF16:
		return 1.6e-2, 1e-3
	}
	return 0, 0
}

func compareTens(got *host.Array, want tens) error {
	if got.DType != want.dt {
		return fmt.Errorf("dtype %s, want %s", got.DType, want.dt)
	}
	if fmt.Sprint(got.Shape) != fmt.Sprint(want.shape) {
		return fmt.Errorf("shape %v, want %v", got.Shape, want.shape)
	}
	rtol, atol := tolerance(want.dt)
	g := fromArray(got)
	for i, w := range want.v {
		x := g.v[i]
		if math.IsNaN(w) && math.IsNaN(x) {
			continue
		}
		if math.Abs(x-w) > atol+rtol*math.Abs(w) {
			return fmt.Errorf("element %d %v: got %v, want %v", i, unravel(want.shape, int64(i)), x, w)
		}
	}
	return nil
}

// randomSeeds reads the --input NAME=random:seed=N specs of an args line.
func randomSeeds(t *testing.T, args []string) map[string]uint64 {
	seeds := map[string]uint64{}
	for i := 0; i < len(args); i++ {
		if args[i] != "--input" || i+1 == len(args) {
			continue
		}
		name, spec, _ := strings.Cut(args[i+1], "=")
		s, ok := strings.CutPrefix(spec, "random:seed=")
		require.True(t, ok, "--input %s: the reference test knows only random:seed=N inputs", args[i+1])
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seeds[name] = n
	}
	return seeds
}

func TestGoldenReference(t *testing.T) {
	files, err := filepath.Glob("../../testdata/*.hir")
	require.NoError(t, err)
	checked := 0
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".hir")
		golden, err := os.ReadFile(strings.TrimSuffix(file, ".hir") + ".golden")
		require.NoError(t, err)
		if !strings.Contains(string(golden), "\nexit 0\n") {
			continue // an error case: TestGolden checks its message
		}
		ref, ok := references[name]
		if !assert.True(t, ok, "testdata/%s.hir succeeds but has no reference in cmd/hirrun/testdata_reference_test.go: add one that computes its outputs independently", name) {
			continue
		}
		checked++
		t.Run(name, func(t *testing.T) { checkReference(t, file, golden, ref) })
	}
	assert.GreaterOrEqual(t, checked, len(references), "%d references but only %d testdata programs to check: a reference names a program that is gone or fails", len(references), checked)
}

func checkReference(t *testing.T, file string, golden []byte, ref reference) {
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	prog, err := parser.Parse(file, src)
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	seeds := randomSeeds(t, argsLine(src))
	D := prog.Mesh.Size()
	c := &refCtx{D: D, in: map[string]tens{}, shards: map[string][]tens{}}
	inputs := map[string]*host.Array{}
	for _, in := range prog.Inputs {
		seed, ok := seeds[in.Name]
		require.True(t, ok, "no --input %s=random:seed=N in the args line", in.Name)
		ty := in.Tensor()
		a := host.Random(ty.DType, ty.Shape(), seed)
		inputs[in.Name] = a
		whole := fromArray(a)
		c.in[in.Name] = whole
		for r := 0; r < D; r++ {
			s := whole
			if axis := ty.ShardAxis(); axis >= 0 {
				s = chunk(whole, axis, r, D)
			}
			c.shards[in.Name] = append(c.shards[in.Name], s)
		}
	}

	rt, err := runtime.Open("sim", runtime.Config{WorldSize: D, Devices: prog.Mesh.Devices, Rank: -1})
	require.NoError(t, err)
	defer rt.Close()
	job, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	require.NoError(t, err)
	defer job.Close()
	res, err := job.Run(inputs)
	require.NoError(t, err)

	want := ref(c)
	for _, rr := range res.Ranks {
		for _, out := range prog.Outputs {
			got := rr.Outputs[out.Name]
			w, ok := want[rr.Rank][out.Name]
			if !assert.True(t, ok, "rank %d: the reference has no %s", rr.Rank, out) ||
				!assert.NotNil(t, got, "rank %d: %s was not produced", rr.Rank, out) {
				continue
			}
			// compareTens holds the dtype's mixed rtol+atol tolerance, which
			// assert.InDelta/InEpsilon alone do not express; its error names
			// the element.
			assert.NoError(t, compareTens(got, w.as(w.dt)), "rank %d: %s", rr.Rank, out)
			// The golden must hold exactly these numbers.
			line := fmt.Sprintf("rank %d: %s = %s\n", rr.Rank, out, got.Summary())
			// Not assert.Contains: its message would hold the whole golden.
			assert.True(t, goldenHasLine(string(golden), line), "the golden lacks the line %q", line)
		}
	}
}

// goldenHasLine reports whether golden holds line: exactly, or (off amd64,
// sameOutput) with its numbers up to their last printed digits.
func goldenHasLine(golden, line string) bool {
	if strings.Contains(golden, line) {
		return true
	}
	for _, l := range strings.SplitAfter(golden, "\n") {
		if sameOutput(l, line) {
			return true
		}
	}
	return false
}
