package evaluator

import (
	"fmt"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// The plan is the program numbered once, at NewJob, so a Run indexes slices
// instead of hashing pointers: every value gets a dense id (the frame's
// slots are a slice indexed by it), every op a dense id (the kernel, stream
// and statistics caches are slices indexed by it), and every block becomes
// a list of opPlans carrying the ids of their operands and results.
//
// Op results are numbered first, in program order (ir.Program.Walk), so a
// result's id is its definition order (releaseFrame frees by it); then the
// inputs, loop indexes and any other value an op or output names.

// opPlan is one op with its operands and results numbered.
type opPlan struct {
	op   *ir.Op
	id   int   // dense op id
	args []int // value id of each operand (literals included: they are never bound)
	res  []int // value id of each result
	body []*opPlan
	// bodyArgs are the value ids of a loop body's arguments (its index).
	bodyArgs []int
	// unroll: in graph mode the loop's body is captured once and the
	// device repeats it (a device loop), unrolled unroll times a trip; 0
	// for any other loop.
	unroll uint64
	// for Options.Trace, made at NewJob
	code, pos string
	// coll is a collective's call with its attributes read once (the
	// algorithm, reduce op, root, axes from the operand types), and what
	// that algorithm touches remotely; Run fills in the tensors.
	coll       runtime.CollectiveCall
	collAccess ir.RemoteAccess
	// uninit: an alloc with uninit=true (no zero-fill), read once
	uninit bool
	// dest is the value id of the destination the op writes into (copy,
	// matmul, a collective or recv given one), or -1: the op becomes that
	// value's producer too (rank.block), so a later use of it on another
	// stream waits for the write.
	dest int
}

// localType is a tensor value's local (per-rank) shape and size, worked out
// once; err is LocalShape's error, reported where the value is allocated.
type localType struct {
	t     *ir.TensorType
	shape []int64
	bytes int64
	err   error
}

// plan numbers prog; mesh is the number of ranks (for local shapes).
type plan struct {
	values  []*ir.Value // by value id
	local   []localType // by value id (zero for non-tensors)
	ops     []*opPlan   // by op id
	body    []*opPlan
	inputs  []int // value id of each prog.Inputs
	outputs []int // value id of each prog.Outputs
	// what the host-memory budget calls each input's shard and output
	inputWhat, outputWhat []string
	nResult               int // value ids below nResult are op results, in program order
}

func newPlan(prog *ir.Program, mesh int, trace bool) *plan {
	p := &plan{}
	ids := map[*ir.Value]int{}
	id := func(v *ir.Value) int {
		if i, ok := ids[v]; ok {
			return i
		}
		i := len(p.values)
		ids[v] = i
		p.values = append(p.values, v)
		return i
	}
	prog.Walk(func(op *ir.Op) {
		for _, res := range op.Results {
			id(res)
		}
	})
	p.nResult = len(p.values)
	for _, in := range prog.Inputs {
		p.inputs = append(p.inputs, id(in))
		p.inputWhat = append(p.inputWhat, fmt.Sprintf("the host copy of input %s's shard", in))
	}
	var block func(b *ir.Block) []*opPlan
	block = func(b *ir.Block) []*opPlan {
		if b == nil {
			return nil
		}
		out := make([]*opPlan, 0, len(b.Ops))
		for _, op := range b.Ops {
			o := &opPlan{op: op, id: len(p.ops)}
			p.ops = append(p.ops, o)
			if trace {
				o.code, o.pos = op.Code.String(), op.Pos.String()
			}
			for _, v := range op.Operands {
				o.args = append(o.args, id(v))
			}
			for _, v := range op.Results {
				o.res = append(o.res, id(v))
			}
			o.uninit = op.Uninit()
			o.dest = -1
			if i := op.Code.Info().Destination(len(op.Operands)); i >= 0 && op.Operands[i].Lit == nil {
				o.dest = o.args[i]
			}
			if op.Code.IsCollective() {
				o.coll = runtime.CollectiveCall{Op: op.Code, Algo: op.Algo(), ReduceOp: op.ReduceOp(), Root: op.Root()}
				if in, out := op.Operands[0].Tensor(), op.Result().Tensor(); in != nil && out != nil {
					o.coll.Axis, o.coll.ConcatAxis = op.Code.Info().Layout.CallAxes(in, out)
				}
				o.collAccess, _ = ir.LookupRule(op.Code, o.coll.Algo)
			}
			// A fusion's body is the runtime's (Compile); a loop's is run
			// here.
			if op.Code == ir.OpFor && op.Body != nil {
				for _, a := range op.Body.Args {
					o.bodyArgs = append(o.bodyArgs, id(a))
				}
				o.body = block(op.Body)
				o.unroll = ir.DeviceLoopUnroll(op) // 0: not a device loop
			}
			out = append(out, o)
		}
		return out
	}
	p.body = block(prog.Body)
	for _, v := range prog.Outputs {
		p.outputs = append(p.outputs, id(v))
		p.outputWhat = append(p.outputWhat, fmt.Sprintf("output %s read back to the host", v))
	}
	p.local = make([]localType, len(p.values))
	for i, v := range p.values {
		t := v.Tensor()
		if t == nil {
			continue
		}
		shape, err := t.LocalShape(mesh)
		p.local[i] = localType{t: t, shape: shape, err: err}
		if err == nil {
			p.local[i].bytes = bytesOf(t.DType, shape)
		}
	}
	return p
}
