// Package compute is the CPU runtime's arithmetic, with no knowledge of
// devices, streams or ranks: typed strided views over bytes (View), the
// compute-kernel interpreter (Compile turns a pointwise op, a reduction,
// matmul or a fusion into a Kernel; Kernel.Run runs it over views), and
// what the reducing collectives do to the values they gather (Reducer).
// runtime/sim checks tensors against its buffers, runs kernels on its
// streams and moves the collectives' data between ranks, and calls this
// package for the numbers.
package compute

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
	"github.com/hirlab/hir/runtime"
)

// Compile turns a compute op into a plan the interpreter runs: a list of
// steps over value slots (the kernel's inputs, then every intermediate),
// with every dtype, shape and broadcast resolved up front so a launch only
// checks its arguments and runs. A fusion's body becomes one step per op.

// Kernel is a compiled compute op.
type Kernel struct {
	name    string
	Inputs  []runtime.TensorShape
	Outputs []runtime.TensorShape
	slots   []slotInfo // inputs first
	steps   []step
	yields  []operand // what each output gets
}

var _ runtime.Kernel = (*Kernel)(nil)

// Name names the kernel for messages: the op, or the fusion's ops.
func (k *Kernel) Name() string { return k.name }

type slotInfo struct {
	dt    ir.DType
	shape []int64
}

// operand is a slot or a literal already converted to the dtype it is used
// at.
type operand struct {
	slot  int // -1 for a literal
	f     float64
	i     int64
	index []int64 // broadcast map: output element -> operand element; nil when shapes match
}

type step struct {
	code  ir.Opcode
	pos   ir.Pos
	args  []operand
	out   int
	dt    ir.DType // result dtype
	inDT  ir.DType // operand dtype (cast's source, a reduction's input)
	shape []int64

	// reductions: output element of every input element, and how many
	// input elements each output gets.
	reduceIndex []int64
	count       int64

	// matmul: a[batch, m, k] x b[batch or 1, k, n]
	batch, m, kk, n int64
	bBatched        bool
}

type compiler struct {
	check  func(n int64, what string) error // broadcast and reduction maps are checked against it before they are made
	k      *Kernel
	byPtr  map[*ir.Value]int
	byName map[string]int
}

// Compile prepares a kernel for a pointwise op, a reduction, matmul or a
// whole fusion over the spec's local shapes. fits (nil: anything fits)
// says whether n bytes the kernel keeps outside its arguments (its
// broadcast and reduction maps) fit now.
func Compile(spec *runtime.KernelSpec, fits func(n int64, what string) error) (*Kernel, error) {
	op := spec.Op
	c := &compiler{check: fits, k: &Kernel{name: op.Code.String(), Inputs: cloneShapes(spec.Inputs), Outputs: cloneShapes(spec.Outputs)},
		byPtr: map[*ir.Value]int{}, byName: map[string]int{}}
	var tensors []*ir.Value
	for i, v := range op.Operands { // the inputs: not a destination it only writes
		if v.Lit == nil && op.InputOperand(i) {
			tensors = append(tensors, v)
		}
	}
	if len(tensors) != len(spec.Inputs) {
		return nil, fmt.Errorf("the op has %d tensor operands but the spec gives %d input shapes", len(tensors), len(spec.Inputs))
	}
	for i, v := range tensors {
		in := spec.Inputs[i]
		if !in.DType.Valid() {
			return nil, fmt.Errorf("input %d has invalid dtype %v", i, in.DType)
		}
		c.bind(v, c.newSlot(in.DType, in.Shape))
	}
	var yields []*ir.Value
	switch {
	case op.Code == ir.OpFusion:
		if op.Body == nil || len(op.Body.Ops) == 0 {
			return nil, fmt.Errorf("fusion has no body")
		}
		for _, bop := range op.Body.Ops {
			if bop.Code == ir.OpYield {
				yields = bop.Operands
				break
			}
			if err := c.addStep(bop); err != nil {
				return nil, err
			}
		}
		c.k.name = "fusion[" + fusionSummary(op.Body) + "]"
	case op.Code.IsPointwise(), op.Code.IsReduction(), op.Code == ir.OpMatmul:
		if err := c.addStep(op); err != nil {
			return nil, err
		}
		yields = op.Results
	default:
		return nil, fmt.Errorf("%s is not a compute op the sim can compile", op.Code)
	}
	if len(yields) != len(spec.Outputs) {
		return nil, fmt.Errorf("the op yields %d values but the spec gives %d output shapes", len(yields), len(spec.Outputs))
	}
	for i, y := range yields {
		want := spec.Outputs[i]
		if y.Lit != nil {
			// A literal yield fills the output.
			c.k.yields = append(c.k.yields, literalAs(y.Lit, want.DType))
			continue
		}
		s, ok := c.lookup(y)
		if !ok {
			return nil, fmt.Errorf("yield of %s, which the body does not define", y)
		}
		got := c.k.slots[s]
		if got.dt != want.DType || !slices.Equal(got.shape, want.Shape) {
			return nil, fmt.Errorf("output %d is %s%v but the spec wants %s%v", i, got.dt, got.shape, want.DType, want.Shape)
		}
		c.k.yields = append(c.k.yields, operand{slot: s})
	}
	return c.k, nil
}

func fusionSummary(b *ir.Block) string {
	var names []string
	for _, op := range b.Ops {
		if op.Code != ir.OpYield {
			names = append(names, op.Code.String())
		}
	}
	return strings.Join(names, ",")
}

func cloneShapes(ts []runtime.TensorShape) []runtime.TensorShape {
	out := make([]runtime.TensorShape, len(ts))
	for i, t := range ts {
		out[i] = runtime.TensorShape{DType: t.DType, Shape: append([]int64(nil), t.Shape...)}
	}
	return out
}

func (c *compiler) newSlot(dt ir.DType, shape []int64) int {
	c.k.slots = append(c.k.slots, slotInfo{dt: dt, shape: append([]int64(nil), shape...)})
	return len(c.k.slots) - 1
}

func (c *compiler) bind(v *ir.Value, slot int) {
	c.byPtr[v] = slot
	if v.Name != "" {
		c.byName[v.Name] = slot
	}
}

// lookup finds a value by identity, or by name when the body refers to the
// fusion's operands through values of its own.
func (c *compiler) lookup(v *ir.Value) (int, bool) {
	if s, ok := c.byPtr[v]; ok {
		return s, true
	}
	s, ok := c.byName[v.Name]
	return s, ok && v.Name != ""
}

// literalAs converts a literal to a dtype as the spec says literals take
// the tensor operands' dtype.
func literalAs(l *ir.Literal, dt ir.DType) operand {
	o := operand{slot: -1}
	switch {
	case dt.IsFloat():
		o.f = computeRound(dt, numeric.RoundTo(dt, l.Value()))
	case l.IsFloat:
		o.i = numeric.FloatToInt(dt, l.Float)
	default:
		o.i = numeric.WrapInt(dt, l.Int)
	}
	return o
}

func (c *compiler) addStep(op *ir.Op) error {
	info := op.Code.Info()
	if n := len(op.Operands); n < info.MinOperands || (info.MaxOperands >= 0 && n > info.MaxOperands) {
		return fmt.Errorf("%s at %s: %d operands", op.Code, op.Pos, n)
	}
	if len(op.Results) != 1 {
		return fmt.Errorf("%s at %s: want one result, have %d", op.Code, op.Pos, len(op.Results))
	}
	var st step
	var err error
	switch {
	case op.Code.IsPointwise():
		st, err = c.pointwise(op)
	case op.Code.IsReduction():
		st, err = c.reduction(op)
	case op.Code == ir.OpMatmul:
		st, err = c.matmul(op)
	default:
		err = fmt.Errorf("%s cannot be part of a compute kernel", op.Code)
	}
	if err != nil {
		return fmt.Errorf("%s at %s: %v", op.Code, op.Pos, err)
	}
	st.code, st.pos = op.Code, op.Pos
	st.out = c.newSlot(st.dt, st.shape)
	c.bind(op.Results[0], st.out)
	c.k.steps = append(c.k.steps, st)
	return nil
}

func (c *compiler) tensorOperand(v *ir.Value) (int, slotInfo, error) {
	if v.Lit != nil {
		return -1, slotInfo{}, fmt.Errorf("operand %s must be a tensor", v)
	}
	s, ok := c.lookup(v)
	if !ok {
		return -1, slotInfo{}, fmt.Errorf("operand %s is not defined in the kernel (a fusion sees only its operands and its own values)", v)
	}
	return s, c.k.slots[s], nil
}

func (c *compiler) pointwise(op *ir.Op) (step, error) {
	var st step
	// Find the operands' dtype: tensor operands agree (where's condition
	// is bool and apart).
	first := 0
	if op.Code == ir.OpWhere {
		first = 1
	}
	dt := ir.InvalidDType
	var shapes [][]int64
	for i, v := range op.Operands {
		if v.Lit != nil {
			continue
		}
		_, info, err := c.tensorOperand(v)
		if err != nil {
			return st, err
		}
		shapes = append(shapes, info.shape)
		if i < first {
			if info.dt != ir.Bool {
				return st, fmt.Errorf("the condition %s is %s, want bool", v, info.dt)
			}
			continue
		}
		if dt == ir.InvalidDType {
			dt = info.dt
		} else if info.dt != dt {
			return st, fmt.Errorf("operands have different dtypes %s and %s (insert a cast)", dt, info.dt)
		}
	}
	if dt == ir.InvalidDType {
		return st, fmt.Errorf("needs at least one tensor operand")
	}
	shape, ok := ir.BroadcastShapes(shapes...)
	if !ok {
		return st, fmt.Errorf("shapes %v do not broadcast", shapes)
	}
	st.inDT, st.dt, st.shape = dt, dt, shape
	switch {
	case op.Code == ir.OpCast:
		w := op.WordAttr("dtype", "")
		to, ok := ir.ParseDType(w)
		if !ok {
			return st, fmt.Errorf("cast to unknown dtype %q", w)
		}
		st.dt = to
	case op.Code.Info().FloatOnly:
		if !dt.IsFloat() {
			return st, fmt.Errorf("takes a float tensor, not %s", dt)
		}
	case op.Code == ir.OpWhere:
	default:
		if dt == ir.Bool {
			return st, fmt.Errorf("takes a numeric tensor, not bool")
		}
	}
	for i, v := range op.Operands {
		at := dt
		if i < first {
			at = ir.Bool
		}
		if v.Lit != nil {
			st.args = append(st.args, literalAs(v.Lit, at))
			continue
		}
		s, info, _ := c.tensorOperand(v)
		if !slices.Equal(shape, info.shape) {
			if err := c.fits(shape, "broadcast map"); err != nil {
				return st, err
			}
		}
		st.args = append(st.args, operand{slot: s, index: broadcastIndex(shape, info.shape)})
	}
	return st, nil
}

// fits checks that an index map of one int64 per element of shape fits the
// memory budget now (the map lives as long as the kernel, outside any
// buffer, so it is checked rather than taken).
func (c *compiler) fits(shape []int64, what string) error {
	if c.check == nil {
		return nil
	}
	n := ir.Product(shape)
	if n > math.MaxInt64/8 {
		n = math.MaxInt64 / 8
	}
	return c.check(8*n, "the kernel's "+what)
}

// ScratchBytes is the memory a run of k holds besides its arguments: every
// slot (inputs and intermediates) is held as float64 or int64, and a
// literal yield is spread over the output first.
func (k *Kernel) ScratchBytes() int64 {
	var n int64
	for _, s := range k.slots {
		n += ir.Product(s.shape)
	}
	for i, y := range k.yields {
		if y.slot < 0 && i < len(k.Outputs) {
			n += ir.Product(k.Outputs[i].Shape)
		}
	}
	if n > math.MaxInt64/8 {
		return math.MaxInt64
	}
	return 8 * n
}

// broadcastIndex maps each element of out to the element of an operand of
// shape s (right-aligned, extent 1 stretched); nil when s is out.
func broadcastIndex(out, s []int64) []int64 {
	if slices.Equal(out, s) {
		return nil
	}
	strides := make([]int64, len(out))
	acc := int64(1)
	for j := 0; j < len(s); j++ {
		i, e := len(out)-1-j, s[len(s)-1-j]
		if e != 1 {
			strides[i] = acc
		}
		acc *= e
	}
	return odometer(out, strides)
}

// odometer lists, for each row-major element of shape, the sum of its
// indices times strides.
func odometer(shape, strides []int64) []int64 {
	n := ir.Product(shape)
	out := make([]int64, n)
	idx := make([]int64, len(shape))
	off := int64(0)
	for k := int64(0); k < n; k++ {
		out[k] = off
		for i := len(shape) - 1; i >= 0; i-- {
			idx[i]++
			off += strides[i]
			if idx[i] < shape[i] {
				break
			}
			off -= idx[i] * strides[i]
			idx[i] = 0
		}
	}
	return out
}

func (c *compiler) reduction(op *ir.Op) (step, error) {
	var st step
	s, in, err := c.tensorOperand(op.Operands[0])
	if err != nil {
		return st, err
	}
	if in.dt == ir.Bool || (op.Code == ir.OpMean && !in.dt.IsFloat()) {
		return st, fmt.Errorf("cannot reduce a %s tensor", in.dt)
	}
	reduced, axisErrs := ir.ReducedAxes(op.IntsAttr("axes"), len(in.shape))
	if len(axisErrs) > 0 {
		return st, axisErrs[0]
	}
	keep := op.BoolAttr("keepdim")
	outShape := ir.ReducedShape(in.shape, reduced, keep)
	strides := make([]int64, len(in.shape)) // output stride of each input axis
	st.count = 1
	for i, e := range in.shape {
		if reduced[i] {
			st.count *= e
		}
	}
	acc := int64(1)
	for i := len(in.shape) - 1; i >= 0; i-- {
		if !reduced[i] {
			strides[i] = acc
			acc *= in.shape[i]
		}
	}
	st.args = []operand{{slot: s}}
	st.inDT, st.dt, st.shape = in.dt, in.dt, outShape
	if err := c.fits(in.shape, "reduction map"); err != nil {
		return st, err
	}
	st.reduceIndex = odometer(in.shape, strides)
	return st, nil
}

func (c *compiler) matmul(op *ir.Op) (step, error) {
	var st step
	sa, a, err := c.tensorOperand(op.Operands[0])
	if err != nil {
		return st, err
	}
	sb, b, err := c.tensorOperand(op.Operands[1])
	if err != nil {
		return st, err
	}
	if a.dt != b.dt || !a.dt.IsFloat() {
		return st, fmt.Errorf("takes two float tensors of one dtype, got %s and %s", a.dt, b.dt)
	}
	ra, rb := len(a.shape), len(b.shape)
	if ra < 2 || rb < 2 {
		return st, fmt.Errorf("operands must have rank >= 2, got %v and %v", a.shape, b.shape)
	}
	st.m, st.kk = a.shape[ra-2], a.shape[ra-1]
	if b.shape[rb-2] != st.kk {
		return st, fmt.Errorf("contraction extents differ: %v x %v", a.shape, b.shape)
	}
	st.n = b.shape[rb-1]
	batchDims := a.shape[:ra-2]
	st.batch = ir.Product(batchDims)
	if rb > 2 {
		if !slices.Equal(b.shape[:rb-2], batchDims) {
			return st, fmt.Errorf("batch dims differ: %v x %v", a.shape, b.shape)
		}
		st.bBatched = true
	}
	st.args = []operand{{slot: sa}, {slot: sb}}
	st.inDT, st.dt = a.dt, a.dt
	st.shape = append(append([]int64(nil), batchDims...), st.m, st.n)
	if op.ReadsDestination() { // accumulate=true: the product is added to the destination
		sc, d, err := c.tensorOperand(op.Operands[2])
		if err != nil {
			return st, err
		}
		if d.dt != a.dt || !slices.Equal(d.shape, st.shape) {
			return st, fmt.Errorf("accumulates into %s%v, want the product's %s%v", d.dt, d.shape, a.dt, st.shape)
		}
		st.args = append(st.args, operand{slot: sc})
	}
	return st, nil
}
