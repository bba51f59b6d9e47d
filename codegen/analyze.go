package codegen

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
)

// valKind says where a value of the body comes from.
type valKind uint8

const (
	kindTensor   valKind = iota // an input tensor, loaded per element
	kindScalar                  // an i64 operand passed by value (a loop index)
	kindLiteral                 // a constant, passed as a parameter
	kindComputed                // the result of a body op
)

// val is what the analysis knows of one value of the body.
type val struct {
	kind  valKind
	dtype ir.DType
	shape []int64 // local shape; nil (rank 0) for scalars and literals
	input int     // kindTensor, kindScalar: index into plan.inputs
	lit   int     // kindLiteral: index into plan.literals
	op    int     // kindComputed: index into plan.ops
}

// literal is one constant operand with the dtype it takes from its op.
type literal struct {
	lit   *ir.Literal
	dtype ir.DType
}

// plan is an analysed op: everything emit needs, with shapes resolved.
type plan struct {
	op       *ir.Op
	ops      []*ir.Op // the compute ops in order; the reduction, if any, last
	red      *ir.Op
	redAxes  []bool // per iteration axis: reduced by red
	yields   []*val
	inputs   []*val // one per non-literal operand of op
	used     []bool // per input: read by the body or yielded
	literals []literal
	vals     map[*ir.Value]*val
	lits     map[*ir.Value]*val // literal operands, by occurrence
	outputs  []Shape
	iter     []int64 // the iteration shape: the reduction's input, or every value's broadcast
	shapes   bool    // false for Check: dtypes only
}

// analyze checks op and resolves what emit needs. With shapes false (Check)
// it works from the types the values carry and ignores inputs and outputs;
// with shapes true, nil outputs are not checked (the tests derive them).
func analyze(op *ir.Op, inputs, outputs []Shape, shapes bool) (*plan, error) {
	if !shapes {
		inputs, outputs = nil, nil
	} else if inputs == nil {
		inputs = []Shape{}
	}
	var errs ir.ErrorList
	if op == nil {
		errs.Add(ir.Pos{}, "codegen: no op")
		return nil, errs.Err()
	}
	p := &plan{op: op, vals: map[*ir.Value]*val{}, lits: map[*ir.Value]*val{}, shapes: shapes, outputs: outputs}
	var body []*ir.Op
	var yields []*ir.Value
	switch {
	case op.Code == ir.OpFusion:
		if op.Body == nil || len(op.Body.Ops) == 0 || op.Body.Ops[len(op.Body.Ops)-1].Code != ir.OpYield {
			errs.Add(op.Pos, "fusion: the body must end with yield")
			return nil, errs.Err()
		}
		body = op.Body.Ops[:len(op.Body.Ops)-1]
		yields = op.Body.Ops[len(op.Body.Ops)-1].Operands
	case op.Code.IsPointwise() || op.Code.IsReduction():
		body = []*ir.Op{op}
		yields = op.Results
	default:
		errs.Add(op.Pos, "codegen compiles fusions, pointwise ops and reductions, not %s", op.Code)
		return nil, errs.Err()
	}

	// Inputs: the non-literal operands, in order.
	for _, v := range op.Operands {
		if v == nil {
			errs.Add(op.Pos, "%s: nil operand", op.Code)
			return nil, errs.Err()
		}
		if v.Lit != nil {
			if op.Code == ir.OpFusion {
				errs.Add(op.Pos, "fusion: operand %s is a literal; literals belong in the body", v)
				return nil, errs.Err()
			}
			continue
		}
		k := len(p.inputs)
		in := &val{kind: kindTensor, input: k}
		switch t := v.Type.(type) {
		case *ir.ScalarType:
			in.kind, in.dtype = kindScalar, t.DType
			if t.DType != ir.I64 {
				errs.Add(op.Pos, "%s: scalar operand %s is %s; only i64 scalars (loop indexes) can be kernel parameters", op.Code, v, t.DType)
			}
		case *ir.TensorType:
			in.dtype = t.DType
		case nil:
			if inputs == nil {
				errs.Add(op.Pos, "%s: operand %s has no type yet (run type inference first)", op.Code, v)
			}
		default:
			errs.Add(op.Pos, "%s: operand %s is a %s, not a tensor", op.Code, v, t)
		}
		if in.kind == kindTensor && inputs != nil && k < len(inputs) {
			if in.dtype != ir.InvalidDType && inputs[k].DType != in.dtype {
				errs.Add(op.Pos, "%s: operand %s is %s, but input %d was given as %s", op.Code, v, in.dtype, k, inputs[k])
			}
			in.dtype = inputs[k].DType
			in.shape = append([]int64{}, inputs[k].Shape...)
			for _, e := range in.shape {
				if e < 0 {
					errs.Add(op.Pos, "%s: input %d has a negative extent: %s", op.Code, k, inputs[k])
				}
			}
		}
		if in.kind == kindTensor && in.dtype != ir.InvalidDType && !in.dtype.Valid() {
			errs.Add(op.Pos, "%s: operand %s has an invalid dtype", op.Code, v)
		}
		p.inputs = append(p.inputs, in)
		if _, dup := p.vals[v]; !dup {
			p.vals[v] = in
		}
	}
	if inputs != nil && len(inputs) != len(p.inputs) {
		errs.Add(op.Pos, "%s has %d non-literal operands, but %d input shapes were given", op.Code, len(p.inputs), len(inputs))
	}
	if outputs != nil && len(outputs) != len(op.Results) {
		errs.Add(op.Pos, "%s has %d results, but %d output shapes were given", op.Code, len(op.Results), len(outputs))
	}
	if len(errs) > 0 {
		return nil, errs.Err()
	}

	for i, b := range body {
		if err := p.addOp(b, i, op.Code == ir.OpFusion); err != nil {
			errs = append(errs, err)
			continue
		}
	}
	if len(errs) > 0 {
		return nil, errs.Err()
	}
	p.ops = body
	p.used = make([]bool, len(p.inputs))
	for _, b := range body {
		for _, x := range b.Operands {
			if v := p.vals[x]; v != nil && (v.kind == kindTensor || v.kind == kindScalar) {
				p.used[v.input] = true
			}
		}
	}

	// One reduction at most, and it ends the chain: nothing uses its result
	// but the yield.
	for i, b := range body {
		if !b.Code.IsReduction() {
			continue
		}
		if p.red != nil {
			errs.Add(b.Pos, "a fusion holds at most one reduction; %s follows the %s at %s", b.Code, p.red.Code, p.red.Pos)
			continue
		}
		p.red = b
		if i != len(body)-1 {
			errs.Add(body[i+1].Pos, "%s follows the reduction %s; a reduction must be the last op of a fusion", body[i+1].Code, b.Code)
		}
	}

	for i, y := range yields {
		v := p.vals[y]
		if y == nil || y.Lit != nil || v == nil {
			errs.Add(op.Pos, "%s: yielded value %d is not a tensor of the body", op.Code, i)
			continue
		}
		if v.kind == kindScalar {
			errs.Add(op.Pos, "%s: yields the scalar %s; a kernel's outputs are tensors", op.Code, y)
			continue
		}
		p.yields = append(p.yields, v)
		if v.kind == kindTensor {
			p.used[v.input] = true
		}
		if outputs != nil && i < len(outputs) {
			got := Shape{DType: v.dtype, Shape: v.shape}
			if v.dtype != outputs[i].DType || !slices.Equal(v.shape, outputs[i].Shape) {
				errs.Add(op.Pos, "%s: result %d is %s, but its output was given as %s", op.Code, i, got, outputs[i])
			}
		}
	}
	if len(yields) != len(op.Results) && op.Code == ir.OpFusion {
		errs.Add(op.Pos, "fusion has %d results but yields %d values", len(op.Results), len(yields))
	}
	if len(errs) > 0 {
		return nil, errs.Err()
	}
	if p.shapes {
		if err := p.iterationSpace(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// addOp types one body op and records its result.
func (p *plan) addOp(b *ir.Op, index int, inFusion bool) *ir.Error {
	name := b.Code.String()
	switch {
	case b.Code == ir.OpFusion, b.Code == ir.OpFor, b.Code == ir.OpYield:
		return ir.Errorf(b.Pos, "%s cannot be nested in a fusion", name)
	case !b.Code.IsPointwise() && !b.Code.IsReduction():
		return ir.Errorf(b.Pos, "%s cannot be fused: a fusion holds pointwise ops and one trailing reduction", name)
	}
	if len(b.Results) != 1 || b.Results[0] == nil {
		return ir.Errorf(b.Pos, "%s must have one result", name)
	}
	info := b.Code.Info()
	if len(b.Operands) < info.MinOperands || len(b.Operands) > info.MaxOperands {
		return ir.Errorf(b.Pos, "%s takes %d operands, got %d", name, info.MinOperands, len(b.Operands))
	}
	operand := func(i int) (*val, *ir.Error) {
		x := b.Operands[i]
		if x == nil {
			return nil, ir.Errorf(b.Pos, "%s: operand %d is nil", name, i)
		}
		if x.Lit != nil {
			return nil, nil
		}
		v := p.vals[x]
		if v == nil {
			if inFusion {
				return nil, ir.Errorf(b.Pos, "%s: %s is neither a fusion operand nor defined before in the body", name, x)
			}
			return nil, ir.Errorf(b.Pos, "%s: %s is not an operand", name, x)
		}
		return v, nil
	}
	res := &val{kind: kindComputed, op: index}

	if b.Code.IsReduction() {
		x, err := operand(0)
		if err != nil {
			return err
		}
		if x == nil || x.kind == kindScalar {
			return ir.Errorf(b.Pos, "%s reduces a tensor, not %s", name, b.Operands[0])
		}
		switch {
		case !x.dtype.IsFloat() && !x.dtype.IsInt():
			return ir.Errorf(b.Pos, "%s does not take %s (it takes f32, f16, bf16, f64, i32 or i64)", name, x.dtype)
		case b.Code == ir.OpMean && !x.dtype.IsFloat():
			return ir.Errorf(b.Pos, "mean does not take %s (it takes f32, f16, bf16 or f64; cast first)", x.dtype)
		}
		res.dtype = x.dtype
		if p.shapes {
			shape, err := reducedShape(b, x.shape)
			if err != nil {
				return err
			}
			res.shape = shape
		}
		return p.define(b, res)
	}

	// Pointwise: the data operands share one dtype; literals take it.
	data := []int{}
	for i := range b.Operands {
		if b.Code != ir.OpWhere || i > 0 {
			data = append(data, i)
		}
	}
	var dt ir.DType
	var first *ir.Value
	for _, i := range data {
		x, err := operand(i)
		if err != nil {
			return err
		}
		if x == nil || x.kind == kindScalar {
			continue
		}
		if dt == ir.InvalidDType {
			dt, first = x.dtype, b.Operands[i]
		} else if x.dtype != dt {
			return ir.Errorf(b.Pos, "%s: %s is %s but %s is %s; operands share one dtype (insert a cast)", name, first, dt, b.Operands[i], x.dtype)
		}
	}
	if dt == ir.InvalidDType {
		// Only literals and scalars: the declared result type decides.
		t := b.Results[0].Tensor()
		if t == nil {
			return ir.Errorf(b.Pos, "%s has no tensor operand and no result type to take a dtype from", name)
		}
		dt = t.DType
		if b.Code == ir.OpCast {
			return ir.Errorf(b.Pos, "cast of a literal: write the literal in the target dtype instead")
		}
	}
	switch {
	case b.Code == ir.OpCast, b.Code == ir.OpWhere:
	case dt == ir.Bool:
		return ir.Errorf(b.Pos, "%s does not take bool (cast to a number first)", name)
	case b.Code.Info().FloatOnly && !dt.IsFloat():
		return ir.Errorf(b.Pos, "%s does not take %s (it takes f32, f16, bf16 or f64)", name, dt)
	}
	for _, i := range data {
		p.literal(b, i, dt)
	}
	res.dtype = dt
	if b.Code == ir.OpWhere {
		c, err := operand(0)
		if err != nil {
			return err
		}
		if c != nil && c.kind != kindScalar && c.dtype != ir.Bool {
			return ir.Errorf(b.Pos, "where: the condition %s is %s, not bool", b.Operands[0], c.dtype)
		}
		if c != nil && c.kind == kindScalar {
			return ir.Errorf(b.Pos, "where: the condition %s is a scalar; use a bool tensor", b.Operands[0])
		}
		p.literal(b, 0, ir.Bool)
	}
	if b.Code == ir.OpCast {
		w, ok := b.Attr("dtype")
		to, known := ir.ParseDType(w.Word)
		if !ok || !known {
			return ir.Errorf(b.Pos, "cast needs dtype= one of %s", strings.Join(ir.DTypeWords, ", "))
		}
		res.dtype = to
	}
	if p.shapes {
		var shape []int64
		for i := range b.Operands {
			x, _ := operand(i)
			if x == nil {
				continue
			}
			s, ok := ir.BroadcastShapes(shape, x.shape)
			if !ok {
				return ir.Errorf(b.Pos, "%s: shapes %s and %s do not broadcast", name, fmtShape(shape), fmtShape(x.shape))
			}
			shape = s
		}
		res.shape = shape
	}
	return p.define(b, res)
}

// literal records operand i of b, when it is a literal, as a constant of dtype dt.
func (p *plan) literal(b *ir.Op, i int, dt ir.DType) {
	x := b.Operands[i]
	if x == nil || x.Lit == nil {
		return
	}
	p.lits[x] = &val{kind: kindLiteral, dtype: dt, lit: len(p.literals)}
	p.literals = append(p.literals, literal{lit: x.Lit, dtype: dt})
}

// define records b's result, checking it against the declared type.
func (p *plan) define(b *ir.Op, res *val) *ir.Error {
	r := b.Results[0]
	if t := r.Tensor(); t != nil && t.DType != res.dtype {
		return ir.Errorf(b.Pos, "%s: the result %s is declared %s, but the operands give %s", b.Code, r, t.DType, res.dtype)
	}
	p.vals[r] = res
	return nil
}

// reducedShape is the shape of reduction b over an input of shape in.
func reducedShape(b *ir.Op, in []int64) ([]int64, *ir.Error) {
	axes, ok := b.Attr("axes")
	if !ok || axes.Kind != ir.KindInts {
		return nil, ir.Errorf(b.Pos, "%s needs axes=[...]", b.Code)
	}
	reduced, errs := ir.ReducedAxes(axes.Ints, len(in))
	if len(errs) > 0 {
		return nil, ir.Errorf(b.Pos, "%s: %v", b.Code, errs[0])
	}
	return ir.ReducedShape(in, reduced, b.BoolAttr("keepdim")), nil
}

// iterationSpace fixes the shape the kernel iterates over and checks that
// every value maps into it.
func (p *plan) iterationSpace() error {
	var errs ir.ErrorList
	if p.red != nil {
		x := p.vals[p.red.Operands[0]]
		p.iter = x.shape
		p.redAxes, _ = ir.ReducedAxes(p.red.IntsAttr("axes"), len(p.iter)) // checked by reducedShape
		for _, b := range p.ops[:len(p.ops)-1] {
			v := p.vals[b.Results[0]]
			if s, ok := ir.BroadcastShapes(p.iter, v.shape); !ok || !slices.Equal(s, p.iter) {
				errs.Add(b.Pos, "%s: its shape %s does not fit the reduction's input %s", b.Code, fmtShape(v.shape), fmtShape(p.iter))
			}
		}
		// A value yielded beside the reduction is stored as it is visited;
		// one smaller than the reduction's input (broadcast into it) is
		// stored where its stretched coordinates are 0.
		red := p.vals[p.red.Results[0]]
		for i, y := range p.yields {
			if y == red {
				continue
			}
			if s, ok := ir.BroadcastShapes(p.iter, y.shape); !ok || !slices.Equal(s, p.iter) {
				errs.Add(p.op.Pos, "%s: result %d of shape %s does not fit the reduction's input %s", p.op.Code, i, fmtShape(y.shape), fmtShape(p.iter))
			}
		}
		for k, in := range p.inputs {
			if in.kind != kindTensor || !p.used[k] {
				continue
			}
			if s, ok := ir.BroadcastShapes(p.iter, in.shape); !ok || !slices.Equal(s, p.iter) {
				errs.Add(p.op.Pos, "%s: input %d of shape %s does not fit the reduction's input %s", p.op.Code, k, fmtShape(in.shape), fmtShape(p.iter))
			}
		}
		return errs.Err()
	}
	var shape []int64
	for _, b := range p.ops {
		shape, _ = ir.BroadcastShapes(shape, p.vals[b.Results[0]].shape)
	}
	for _, y := range p.yields {
		s, ok := ir.BroadcastShapes(shape, y.shape)
		if !ok {
			errs.Add(p.op.Pos, "%s: results of shapes %s and %s do not broadcast to one iteration space", p.op.Code, fmtShape(shape), fmtShape(y.shape))
			return errs.Err()
		}
		shape = s
	}
	p.iter = shape
	return nil
}

func fmtShape(s []int64) string {
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = fmt.Sprint(e)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// literalBits is a literal's value as dtype dt holds it, as the bits of the
// C parameter that carries it (float for f16/bf16/f32, double, int, long
// long; int 0/1 for bool).
func literalBits(l *ir.Literal, dt ir.DType) uint64 {
	switch dt {
	case ir.F64:
		return math.Float64bits(l.Value())
	case ir.F32:
		return uint64(math.Float32bits(float32(l.Value())))
	case ir.F16:
		return uint64(math.Float32bits(float32(numeric.RoundTo(ir.F16, l.Value()))))
	case ir.BF16:
		return uint64(math.Float32bits(float32(numeric.RoundTo(ir.BF16, l.Value()))))
	case ir.I32:
		if l.IsFloat {
			return uint64(uint32(int32(numeric.FloatToInt(ir.I32, l.Float))))
		}
		return uint64(uint32(int32(l.Int)))
	case ir.I64:
		if l.IsFloat {
			return uint64(numeric.FloatToInt(ir.I64, l.Float))
		}
		return uint64(l.Int)
	case ir.Bool:
		if l.Value() != 0 {
			return 1
		}
	}
	return 0
}
