// Package codegentest holds the ops of codegen's golden tests, built with
// ir.Builder, so that the GPU tests of runtime/cuda run exactly the kernels
// the goldens show (every dtype, broadcasting, each reduction kind and
// placement, literals, one element, tails, empty tensors).
package codegentest

import "github.com/hirlab/hir/ir"

// Case is one op to generate. Build makes it with a Builder of a mesh of
// one (local shapes = logical shapes) and returns it; Strategy is the
// codegen strategy its kernel must use.
type Case struct {
	Name     string
	Build    func(b *ir.Builder) *ir.Op
	Strategy string
}

// In declares input name of the given dtype and shape.
func In(b *ir.Builder, name string, dt ir.DType, shape ...int64) *ir.Value {
	return b.Input(name, ir.Tensor(dt, shape...))
}

// Fusion builds a fusion op over inputs and returns it.
func Fusion(b *ir.Builder, inputs []*ir.Value, body func() []*ir.Value) *ir.Op {
	return b.Fusion(inputs, body)[0].Def
}

// Vals is its arguments as a slice.
func Vals(vs ...*ir.Value) []*ir.Value { return vs }

// Cast casts x to dt.
func Cast(b *ir.Builder, x *ir.Value, dt ir.DType) *ir.Value {
	return b.Op(ir.OpCast, x).Word("dtype", dt.String()).Value()
}

// Reduce reduces x over axes with code (sum, max, mean).
func Reduce(b *ir.Builder, code ir.Opcode, x *ir.Value, keep bool, axes ...int64) *ir.Value {
	ob := b.Op(code, x).Ints("axes", axes...)
	if keep {
		ob.Bool("keepdim", true)
	}
	return ob.Value()
}

// Cases are the golden cases, in the order of codegen/testdata.
var Cases = []Case{
	{"add_f32", func(b *ir.Builder) *ir.Op {
		x, y := In(b, "x", ir.F32, 8, 16), In(b, "y", ir.F32, 8, 16)
		return b.Op(ir.OpAdd, x, y).Op()
	}, "flat"},
	{"chain_f16_literal_tail", func(b *ir.Builder) *ir.Op {
		x, y := In(b, "x", ir.F16, 1003), In(b, "y", ir.F16, 1003)
		return Fusion(b, Vals(x, y), func() []*ir.Value {
			t := b.Binary(ir.OpMul, x, ir.Float(0.1))
			u := b.Binary(ir.OpAdd, t, y)
			return Vals(b.Unary(ir.OpRelu, u))
		})
	}, "flat"},
	{"transcendental_bf16_odd", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.BF16, 3, 5)
		return Fusion(b, Vals(x), func() []*ir.Value {
			g := b.Unary(ir.OpGelu, x)
			s := b.Unary(ir.OpSigmoid, g)
			return Vals(b.Unary(ir.OpTanh, s), g)
		})
	}, "flat"},
	{"exp_log_f64", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.F64, 7)
		return Fusion(b, Vals(x), func() []*ir.Value {
			e := b.Unary(ir.OpExp, x)
			l := b.Unary(ir.OpLog, e)
			d := b.Binary(ir.OpDiv, b.Binary(ir.OpSub, l, ir.Float(1.5)), ir.Int(3))
			return Vals(b.Unary(ir.OpAbs, b.Unary(ir.OpNeg, d)))
		})
	}, "flat"},
	{"int_ops_i32", func(b *ir.Builder) *ir.Op {
		x, y := In(b, "x", ir.I32, 33), In(b, "y", ir.I32, 33)
		return Fusion(b, Vals(x, y), func() []*ir.Value {
			s := b.Binary(ir.OpAdd, x, y)
			m := b.Binary(ir.OpMul, s, ir.Int(3000000000)) // wraps to i32
			q := b.Binary(ir.OpDiv, m, y)
			n := b.Unary(ir.OpNeg, b.Unary(ir.OpAbs, q))
			mx := b.Binary(ir.OpMax, n, b.Binary(ir.OpMin, x, ir.Int(-2)))
			return Vals(b.Unary(ir.OpRelu, mx), b.Binary(ir.OpSub, x, y))
		})
	}, "flat"},
	{"div_i64_literal", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.I64, 2, 9)
		return Fusion(b, Vals(x), func() []*ir.Value {
			return Vals(b.Binary(ir.OpDiv, b.Binary(ir.OpSub, x, ir.Int(7)), ir.Float(2.9)))
		})
	}, "flat"},
	{"where_bool", func(b *ir.Builder) *ir.Op {
		c, x, y := In(b, "c", ir.Bool, 100), In(b, "x", ir.F32, 100), In(b, "y", ir.F32, 100)
		return Fusion(b, Vals(c, x, y), func() []*ir.Value {
			w := b.Op(ir.OpWhere, c, x, y).Value()
			z := b.Op(ir.OpWhere, c, ir.Float(0), w).Value()
			return Vals(z, Cast(b, z, ir.Bool))
		})
	}, "flat"},
	{"casts", func(b *ir.Builder) *ir.Op {
		x, i, h, d, c, l := In(b, "x", ir.F32, 5), In(b, "i", ir.I32, 5), In(b, "h", ir.F16, 5), In(b, "d", ir.F64, 5), In(b, "c", ir.Bool, 5), In(b, "l", ir.I64, 5)
		return Fusion(b, Vals(x, i, h, d, c, l), func() []*ir.Value {
			return Vals(Cast(b, x, ir.I32), Cast(b, i, ir.F16), Cast(b, d, ir.BF16), Cast(b, c, ir.F32),
				Cast(b, h, ir.F64), Cast(b, l, ir.I32), Cast(b, x, ir.I64), Cast(b, Cast(b, x, ir.F16), ir.F32))
		})
	}, "flat"},
	{"broadcast_bias", func(b *ir.Builder) *ir.Op {
		x, bias, scale := In(b, "x", ir.F32, 4, 8), In(b, "bias", ir.F32, 8), In(b, "scale", ir.F32, 4, 1)
		return Fusion(b, Vals(x, bias, scale), func() []*ir.Value {
			return Vals(b.Binary(ir.OpMul, b.Binary(ir.OpAdd, x, bias), scale))
		})
	}, "broadcast"},
	// 16-byte vectors of eight bf16 along the innermost axis: bias loaded
	// as a vector, scale one element for the whole vector.
	{"broadcast_vector_bf16", func(b *ir.Builder) *ir.Op {
		x, bias, scale := In(b, "x", ir.BF16, 6, 16), In(b, "bias", ir.BF16, 16), In(b, "scale", ir.BF16, 6, 1)
		return Fusion(b, Vals(x, bias, scale), func() []*ir.Value {
			return Vals(b.Unary(ir.OpRelu, b.Binary(ir.OpMul, b.Binary(ir.OpAdd, x, bias), scale)))
		})
	}, "broadcast"},
	// An innermost axis the vector does not divide (12 by 8): one element
	// a thread.
	{"broadcast_odd_inner_bf16", func(b *ir.Builder) *ir.Op {
		x, bias := In(b, "x", ir.BF16, 5, 12), In(b, "bias", ir.BF16, 12)
		return Fusion(b, Vals(x, bias), func() []*ir.Value {
			return Vals(b.Binary(ir.OpAdd, x, bias))
		})
	}, "broadcast"},
	{"broadcast_yield_smaller", func(b *ir.Builder) *ir.Op {
		x, bias := In(b, "x", ir.BF16, 3, 4, 8), In(b, "bias", ir.BF16, 4, 1)
		return Fusion(b, Vals(x, bias), func() []*ir.Value {
			e := b.Unary(ir.OpExp, bias)
			return Vals(b.Binary(ir.OpSub, x, e), e)
		})
	}, "broadcast"},
	{"sum_rows_warp_f32", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.F32, 64, 100)
		return b.Op(ir.OpSum, x).Ints("axes", 1).Op()
	}, "rows-warp"},
	{"sum_rows_block_f16", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.F16, 4, 4097)
		return Fusion(b, Vals(x), func() []*ir.Value {
			return Vals(Reduce(b, ir.OpSum, b.Binary(ir.OpMul, x, x), false, 1))
		})
	}, "rows-block"},
	{"mean_outer_keepdim_f32", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.F32, 32, 64)
		return Fusion(b, Vals(x), func() []*ir.Value {
			return Vals(Reduce(b, ir.OpMean, x, true, 0))
		})
	}, "columns"},
	{"max_middle_bf16", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.BF16, 2, 3, 5)
		return Fusion(b, Vals(x), func() []*ir.Value {
			return Vals(Reduce(b, ir.OpReduceMax, b.Unary(ir.OpNeg, x), false, 1))
		})
	}, "columns"},
	{"sum_middle_vector_bf16", func(b *ir.Builder) *ir.Op {
		// the innermost axis kept and a multiple of 8: 16-byte loads
		x, y := In(b, "x", ir.BF16, 2, 4, 3, 16), In(b, "y", ir.BF16, 2, 4, 3, 16)
		return Fusion(b, Vals(x, y), func() []*ir.Value {
			return Vals(Reduce(b, ir.OpSum, b.Binary(ir.OpAdd, x, y), false, 1))
		})
	}, "columns"},
	{"max_mixed_axes_i64", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.I64, 2, 3, 4, 5)
		return Fusion(b, Vals(x), func() []*ir.Value {
			return Vals(Reduce(b, ir.OpReduceMax, x, false, 0, 2, 3))
		})
	}, "columns"},
	{"sum_all_i32", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.I32, 16, 16)
		return Fusion(b, Vals(x), func() []*ir.Value {
			return Vals(Reduce(b, ir.OpSum, x, false, 0, 1))
		})
	}, "rows-warp"},
	{"mean_rows_block_f64", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.F64, 10, 3000)
		return b.Op(ir.OpMean, x).Ints("axes", 1).Bool("keepdim", true).Op()
	}, "rows-block"},
	{"centered_square_sum_broadcast", func(b *ir.Builder) *ir.Op {
		x, m := In(b, "x", ir.F32, 8, 16), In(b, "m", ir.F32, 8, 1)
		return Fusion(b, Vals(x, m), func() []*ir.Value {
			c := b.Binary(ir.OpSub, x, m)
			s := Reduce(b, ir.OpSum, b.Binary(ir.OpMul, c, c), false, 1)
			return Vals(s, c)
		})
	}, "rows-warp"},
	{"sum_rows_yield_broadcast_f32", func(b *ir.Builder) *ir.Op {
		x, y := In(b, "x", ir.F32, 4, 8), In(b, "y", ir.F32, 8)
		return Fusion(b, Vals(x, y), func() []*ir.Value {
			e := b.Unary(ir.OpExp, y)
			return Vals(Reduce(b, ir.OpSum, b.Binary(ir.OpMul, x, e), false, 1), e)
		})
	}, "rows-warp"},
	{"mean_outer_yield_keepdim_bf16", func(b *ir.Builder) *ir.Op {
		x, m := In(b, "x", ir.BF16, 6, 5), In(b, "m", ir.BF16, 1, 5)
		return Fusion(b, Vals(x, m), func() []*ir.Value {
			n := b.Unary(ir.OpNeg, m)
			return Vals(n, Reduce(b, ir.OpMean, b.Binary(ir.OpAdd, x, n), true, 0))
		})
	}, "columns"},
	{"scalar_tensor_exp", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.F32)
		return b.Op(ir.OpExp, x).Op()
	}, "flat"},
	{"one_element_i64", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.I64, 1)
		return b.Op(ir.OpMul, x, ir.Int(-3)).Op()
	}, "flat"},
	{"empty_add", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.F32, 0, 4)
		return b.Op(ir.OpAdd, x, ir.Float(1)).Op()
	}, "flat"},
	{"empty_reduction", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.F32, 3, 0)
		return Fusion(b, Vals(x), func() []*ir.Value {
			return Vals(Reduce(b, ir.OpSum, x, true, 1))
		})
	}, "columns"},
	{"empty_max_i32", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.I32, 0, 5)
		return b.Op(ir.OpReduceMax, x).Ints("axes", 0).Op()
	}, "columns"},
	{"loop_index_scalar", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.F32, 6, 8)
		var op *ir.Op
		b.For("i", 0, 4, 1, func(i *ir.Value) {
			op = Fusion(b, Vals(x, i), func() []*ir.Value {
				return Vals(b.Binary(ir.OpMul, x, i), b.Binary(ir.OpAdd, Cast(b, x, ir.I64), i))
			})
		})
		return op
	}, "flat"},
	{"large_long_index", func(b *ir.Builder) *ir.Op {
		x := In(b, "x", ir.F32, 3, 1<<30)
		return b.Op(ir.OpSigmoid, x).Op()
	}, "flat"},
}
