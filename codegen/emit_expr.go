package codegen

import (
	"fmt"
	"strings"

	"github.com/hirlab/hir/ir"
)

// C types and expressions: the compute and storage type of each dtype,
// stores and casts, and the expression of a body value and of a pointwise
// op.

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
