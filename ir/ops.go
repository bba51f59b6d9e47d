package ir

import "math"

// Opcode names an operation.
type Opcode uint8

const (
	OpInvalid Opcode = iota

	// memory
	OpAlloc
	OpFree
	OpCopy

	// views
	OpSymmetricContiguousView
	OpSelect
	OpReshape

	// pointwise, unary
	OpNeg
	OpExp
	OpLog
	OpTanh
	OpRelu
	OpGelu
	OpSigmoid
	OpAbs
	OpCast
	// pointwise, binary
	OpAdd
	OpSub
	OpMul
	OpDiv
	OpMax
	OpMin
	// pointwise, ternary
	OpWhere

	// reductions
	OpSum
	OpMean
	OpReduceMax

	OpMatmul

	// collectives
	OpAllGather
	OpReduceScatter
	OpAllReduce
	OpAllToAll
	OpBroadcast
	OpReduce
	OpGather
	OpScatter

	// point to point
	OpSend
	OpRecv

	// one-sided
	OpRegister
	OpTransfer
	OpDeregister

	// sync and control
	OpWait
	OpBarrier
	OpStreamBarrier
	OpStream
	OpSetStream
	OpSyncStream
	OpPickStream
	OpWaitStream
	OpFor
	OpFusion
	OpYield

	numOpcodes
)

// Class groups opcodes that passes treat alike.
type Class uint8

const (
	ClassMemory Class = iota
	ClassView
	ClassPointwise
	ClassReduction
	ClassMatmul
	ClassCollective
	ClassP2P
	ClassOneSided
	ClassSync
	ClassControl
)

// Variadic marks an operand or result count with no upper bound.
const Variadic = -1

// AttrKind is the kind of value an attribute takes.
type AttrKind uint8

const (
	KindInt   AttrKind = iota // 3
	KindFloat                 // 2.5
	KindBool                  // true
	KindWord                  // ring, sum, bf16, symmetric
	KindInts                  // [0, 1]
	KindPeer                  // 1 (absolute rank) or +1 / -1 (relative to this rank, modulo the mesh)
)

func (k AttrKind) String() string {
	return [...]string{"an integer", "a number", "true or false", "a word", "a list of integers", "a rank (2) or a relative rank (+1, -1)"}[k]
}

// AttrSpec describes one attribute an opcode accepts.
type AttrSpec struct {
	Key      string
	Kind     AttrKind
	Required bool
	Words    []string // the words a KindWord attribute may take; nil means any
}

// Alias says whose storage an op's result lives in.
type Alias uint8

const (
	AliasNone  Alias = iota // the result owns its storage (or has none)
	AliasFirst              // operand 0: the tensor a view looks into, a registration keeps in use
	AliasDest               // the optional destination: the last operand, when the op has MaxOperands of them
)

// Layout is how a collective's local output shape follows from its input's.
type Layout uint8

const (
	LayoutNone     Layout = iota // not a collective
	LayoutSame                   // same shape (all_reduce, broadcast, reduce)
	LayoutGather                 // the output is the input's shard axis times the ranks (all_gather, gather)
	LayoutScatter                // the input is the output's shard axis times the ranks (reduce_scatter, scatter)
	LayoutAllToAll               // one axis split over the ranks, another concatenated (all_to_all)
)

// OpInfo is the schema of an opcode: its spelling, class, arity and
// attributes, and the facts the checker, codegen, the evaluator and the
// runtimes ask instead of switching on opcodes. The parser, Verify and
// the printer all read it.
type OpInfo struct {
	Name        string
	Class       Class
	MinOperands int
	MaxOperands int // Variadic for no bound
	Results     int // Variadic for as many as the op declares (fusion)
	Body        bool
	Attrs       []AttrSpec

	FloatOnly bool // pointwise: takes float tensors only (exp, log, tanh, sigmoid, gelu)
	// Scalar semantics of a unary or binary pointwise op (scalar.go): on
	// floats in float64, on integers in int64 (nil for float-only ops).
	F1      func(float64) float64
	F2      func(float64, float64) float64
	I1      func(int64) int64
	I2      func(int64, int64) int64
	Aliases Alias  // whose storage the result lives in (AliasedOperand)
	Layout  Layout // collectives: how the output's shape follows from the input's
	Reduces bool   // collectives: combines the ranks' values with a reduce op (op=)
	Rooted  bool   // collectives: has a root rank (root=)
	// RootOnly: a rooted collective that collects onto the root (reduce,
	// gather): only the root's output is written, the other ranks' are left
	// untouched. Set from Rooted, Reduces and Layout.
	RootOnly bool
	// Benchmarked: `hirrun bench` times the collective (every algorithm
	// and NCCL), and auto's measured table ranks its algorithms
	// (BenchmarkedCollectives).
	Benchmarked bool
	// Algos are a collective's algorithms, auto first, each with what it
	// touches remotely: the op's rows of the symmetric-heap table
	// (remote.go: Algorithms, LookupRule, SymmetricRules).
	Algos []AlgoAccess
	// HostWait says why the op waits on the host, not on a stream (on
	// GPUs): a graph cannot hold such an op, so graph mode runs it on the
	// host between two graphs (GraphSplits).
	HostWait string
	// Kernel: the op's work on the device is kernels or copies enqueued on
	// the current stream (compute, copies, zero-filled allocations,
	// collectives unless async), which --trace times with events.
	Kernel bool
	// OffStream says why the op puts work on, or orders, a stream other
	// than the current one: a device loop's body (DeviceLoopBlocker) is
	// one stream's work captured once.
	OffStream string
	// ReadsDestIf names a bool attribute that, when true, makes the
	// destination an input too: the op adds into it (matmul's accumulate).
	// Op.ReadsDestination asks it.
	ReadsDestIf string
	// PeersWrite: the op exposes its first operand's storage to the peers,
	// who may write it (register, for transfers with dir=write).
	PeersWrite bool
	// Meets: every rank's current stream meets here, in program order; no
	// rank goes past before every rank has reached it (barrier,
	// stream_barrier): traced as a collective, paired by the deadlock
	// pass, a point every rank passes for the transfer-race check.
	Meets bool
}

// AlgoAccess is one algorithm of a collective and what it touches through
// the symmetric heap: a row of the symmetric-heap table. auto is listed
// with the access the runtimes may rely on: they pick only algorithms
// whose needs the operands meet.
type AlgoAccess struct {
	Algo   Algo
	Access RemoteAccess
}

// What an algorithm touches remotely, for the table's rows.
var (
	none   = RemoteAccess{}
	reads  = RemoteAccess{ReadsInput: true}
	writes = RemoteAccess{WritesOutput: true}
	both   = RemoteAccess{ReadsInput: true, WritesOutput: true}
)

// AliasedOperand is the index of the operand whose storage the result of
// an op with n operands lives in, or -1 when it owns its storage.
func (info *OpInfo) AliasedOperand(n int) int {
	switch info.Aliases {
	case AliasFirst:
		if n > 0 {
			return 0
		}
	case AliasDest:
		if n > 0 && n == info.MaxOperands {
			return n - 1
		}
	}
	return -1
}

// Destination is the index of the destination operand an op with n
// operands writes its result into (copy, matmul, a collective, recv given
// one), or -1: that operand is the op's output, not one of its inputs.
func (info *OpInfo) Destination(n int) int {
	if info.Aliases != AliasDest {
		return -1
	}
	return info.AliasedOperand(n)
}

// Attr looks up the spec of attribute key.
func (info *OpInfo) Attr(key string) (AttrSpec, bool) {
	for _, a := range info.Attrs {
		if a.Key == key {
			return a, true
		}
	}
	return AttrSpec{}, false
}

// Algorithm words and reduce-op words.
var (
	AlgoWords     = algoNames[:]      // Algo's words (ir.ParseAlgo)
	ReduceOpWords = reduceOpNames[1:] // ReduceOp's words (ir.ParseReduceOp)
	DTypeWords    = []string{"f32", "f16", "bf16", "f64", "i32", "i64", "bool"}
	MemWords      = []string{"global", "symmetric", "host"}
	DirWords      = []string{"read", "write"}
	ShiftWords    = []string{"rank"}
)

func collective(name string, layout Layout, algos []AlgoAccess, extra ...AttrSpec) OpInfo {
	attrs := []AttrSpec{
		{Key: "algo", Kind: KindWord, Words: AlgoWords},
		{Key: "async", Kind: KindBool},
	}
	info := OpInfo{Name: name, Class: ClassCollective, MinOperands: 1, MaxOperands: 2, Results: 1, Attrs: append(attrs, extra...),
		Aliases: AliasDest, Layout: layout, Algos: algos, Kernel: true}
	_, info.Reduces = info.Attr("op")
	_, info.Rooted = info.Attr("root")
	info.RootOnly = info.Rooted && (info.Reduces || layout == LayoutGather)
	return info
}

// benchmarked marks a collective `hirrun bench` times.
func benchmarked(info OpInfo) OpInfo {
	info.Benchmarked = true
	return info
}

var (
	opAttr   = AttrSpec{Key: "op", Kind: KindWord, Words: ReduceOpWords}
	rootAttr = AttrSpec{Key: "root", Kind: KindInt}
	axisAttr = AttrSpec{Key: "axis", Kind: KindInt}
	peerAttr = AttrSpec{Key: "peer", Kind: KindPeer, Required: true}
)

func pointwise(name string, n int, attrs ...AttrSpec) OpInfo {
	return OpInfo{Name: name, Class: ClassPointwise, MinOperands: n, MaxOperands: n, Results: 1, Attrs: attrs, Kernel: true}
}

func reduction(name string) OpInfo {
	return OpInfo{Name: name, Class: ClassReduction, MinOperands: 1, MaxOperands: 1, Results: 1, Kernel: true,
		Attrs: []AttrSpec{{Key: "axes", Kind: KindInts, Required: true}, {Key: "keepdim", Kind: KindBool}}}
}

var opInfos = [numOpcodes]OpInfo{
	OpInvalid: {Name: "invalid"},

	// uninit=true: no zero-fill (contents undefined until written), for a
	// buffer the program overwrites whole before it reads it.
	OpAlloc: {Name: "alloc", Class: ClassMemory, Results: 1, Kernel: true,
		Attrs: []AttrSpec{{Key: "uninit", Kind: KindBool}}},
	OpFree: {Name: "free", Class: ClassMemory, MinOperands: 1, MaxOperands: 1},
	OpCopy: {Name: "copy", Class: ClassMemory, MinOperands: 1, MaxOperands: 2, Results: 1, Aliases: AliasDest, Kernel: true,
		Attrs: []AttrSpec{{Key: "mem", Kind: KindWord, Words: MemWords}}},

	OpSymmetricContiguousView: {Name: "symmetric_contiguous_view", Class: ClassView, MinOperands: 1, MaxOperands: 1, Results: 1, Aliases: AliasFirst},
	OpSelect: {Name: "select", Class: ClassView, MinOperands: 2, MaxOperands: 2, Results: 1, Aliases: AliasFirst,
		Attrs: []AttrSpec{{Key: "axis", Kind: KindInt}, {Key: "shift", Kind: KindWord, Words: ShiftWords}}},
	OpReshape: {Name: "reshape", Class: ClassView, MinOperands: 1, MaxOperands: 1, Results: 1, Aliases: AliasFirst,
		Attrs: []AttrSpec{{Key: "shape", Kind: KindInts, Required: true}}},

	// pointwise: the scalar semantics (scalar.go), float then integer
	OpNeg:     unary("neg", func(x float64) float64 { return -x }, func(x int64) int64 { return -x }),
	OpExp:     unary("exp", math.Exp, nil),
	OpLog:     unary("log", math.Log, nil),
	OpTanh:    unary("tanh", math.Tanh, nil),
	OpRelu:    unary("relu", relu, func(x int64) int64 { return max(x, 0) }),
	OpGelu:    unary("gelu", gelu, nil),
	OpSigmoid: unary("sigmoid", sigmoid, nil),
	OpAbs:     unary("abs", math.Abs, absInt),
	OpCast:    pointwise("cast", 1, AttrSpec{Key: "dtype", Kind: KindWord, Required: true, Words: DTypeWords}),
	OpAdd:     binary("add", func(a, b float64) float64 { return a + b }, func(a, b int64) int64 { return a + b }),
	OpSub:     binary("sub", func(a, b float64) float64 { return a - b }, func(a, b int64) int64 { return a - b }),
	OpMul:     binary("mul", func(a, b float64) float64 { return a * b }, func(a, b int64) int64 { return a * b }),
	OpDiv:     binary("div", func(a, b float64) float64 { return a / b }, divInt),
	OpMax:     binary("max", MaxFloat, func(a, b int64) int64 { return max(a, b) }),
	OpMin:     binary("min", MinFloat, func(a, b int64) int64 { return min(a, b) }),
	OpWhere:   pointwise("where", 3),

	OpSum:       reduction("sum"),
	OpMean:      reduction("mean"),
	OpReduceMax: reduction("max"), // spelled max with one operand

	// matmul %a, %b[, %dst]: with a destination the product is written
	// into it (a view of a larger tensor: no copy afterwards); with
	// accumulate=true it is added to what the destination holds.
	OpMatmul: {Name: "matmul", Class: ClassMatmul, MinOperands: 2, MaxOperands: 3, Results: 1, Aliases: AliasDest, Kernel: true,
		Attrs: []AttrSpec{{Key: "accumulate", Kind: KindBool}}, ReadsDestIf: "accumulate"},

	// collectives: the layout, the algorithms (auto first) with what each
	// touches remotely (the symmetric-heap table, remote.go), the attributes
	OpAllGather: benchmarked(collective("all_gather", LayoutGather,
		[]AlgoAccess{{AlgoAuto, writes}, {AlgoOneShot, writes}, {AlgoRing, writes}, {AlgoCopyEngine, reads}, {AlgoNCCL, none}, {AlgoLL, none}})),
	OpReduceScatter: benchmarked(collective("reduce_scatter", LayoutScatter,
		[]AlgoAccess{{AlgoAuto, reads}, {AlgoOneShot, reads}, {AlgoRing, none}, {AlgoCopyEngine, reads}, {AlgoNCCL, none}, {AlgoLL, none}}, opAttr, axisAttr)),
	OpAllReduce: benchmarked(collective("all_reduce", LayoutSame,
		[]AlgoAccess{{AlgoAuto, reads}, {AlgoOneShot, reads}, {AlgoTwoShot, both}, {AlgoRing, none}, {AlgoNCCL, none}, {AlgoLL, none}}, opAttr)),
	OpAllToAll: benchmarked(collective("all_to_all", LayoutAllToAll,
		[]AlgoAccess{{AlgoAuto, both}, {AlgoOneShot, both}, {AlgoNCCL, none}, {AlgoLL, none}}, AttrSpec{Key: "axis", Kind: KindInt, Required: true})),
	OpBroadcast: collective("broadcast", LayoutSame,
		[]AlgoAccess{{AlgoAuto, reads}, {AlgoOneShot, reads}, {AlgoNCCL, none}, {AlgoLL, none}}, rootAttr),
	OpReduce: collective("reduce", LayoutSame,
		[]AlgoAccess{{AlgoAuto, reads}, {AlgoOneShot, reads}, {AlgoNCCL, none}}, opAttr, rootAttr),
	OpGather: collective("gather", LayoutGather,
		[]AlgoAccess{{AlgoAuto, reads}, {AlgoOneShot, reads}, {AlgoNCCL, none}}, rootAttr),
	OpScatter: collective("scatter", LayoutScatter,
		[]AlgoAccess{{AlgoAuto, reads}, {AlgoOneShot, reads}, {AlgoNCCL, none}}, rootAttr, axisAttr),

	OpSend: {Name: "send", Class: ClassP2P, MinOperands: 1, MaxOperands: 1, Attrs: []AttrSpec{peerAttr}},
	OpRecv: {Name: "recv", Class: ClassP2P, MinOperands: 0, MaxOperands: 1, Results: 1, Aliases: AliasDest, Attrs: []AttrSpec{peerAttr}},

	OpRegister: {Name: "register", Class: ClassOneSided, MinOperands: 1, MaxOperands: 1, Results: 1, Aliases: AliasFirst, PeersWrite: true,
		HostWait: "register waits on the host for the tensor's producers, then for the peers"},
	OpTransfer: {Name: "transfer", Class: ClassOneSided, MinOperands: 2, MaxOperands: 2, Results: 1, Aliases: AliasDest,
		OffStream: "posts on the communication stream",
		Attrs:     []AttrSpec{{Key: "dir", Kind: KindWord, Required: true, Words: DirWords}, peerAttr}},
	OpDeregister: {Name: "deregister", Class: ClassOneSided, MinOperands: 1, MaxOperands: 1,
		HostWait: "deregister waits on the host for the peers' transfers"},

	OpWait:    {Name: "wait", Class: ClassSync, MinOperands: 1, MaxOperands: 1, OffStream: "orders the stream after another stream's work"},
	OpBarrier: {Name: "barrier", Class: ClassSync, Meets: true, HostWait: "barrier waits on the host for the peers"},
	// stream_barrier: every rank's current stream meets on the device (a
	// barrier kernel), the host goes on at once; a graph holds it.
	OpStreamBarrier: {Name: "stream_barrier", Class: ClassSync, Meets: true, Kernel: true},
	OpStream:        {Name: "stream", Class: ClassSync, Results: 1, OffStream: "makes a stream"},
	OpSetStream:     {Name: "set_stream", Class: ClassSync, MinOperands: 0, MaxOperands: 1, OffStream: "changes the current stream"},
	OpSyncStream: {Name: "sync_stream", Class: ClassSync, MinOperands: 0, MaxOperands: 1,
		HostWait: "sync_stream waits on the host for the stream"},
	// pick_stream %s0, ..., %sN-1, %i: the stream of iteration i of a loop
	// from=F step=S (iteration (i-F)/S, modulo N); wait_stream: the
	// current stream waits for the work enqueued on each stream so far
	// (the default stream's, without operands). stream-parallel emits both.
	OpPickStream: {Name: "pick_stream", Class: ClassSync, MinOperands: 2, MaxOperands: Variadic, Results: 1, OffStream: "picks a stream",
		Attrs: []AttrSpec{{Key: "from", Kind: KindInt}, {Key: "step", Kind: KindInt}}},
	OpWaitStream: {Name: "wait_stream", Class: ClassSync, MinOperands: 0, MaxOperands: Variadic, OffStream: "orders the stream after other streams"},
	// streams=N: the iterations rotate over N streams (the stream-parallel pass)
	OpFor: {Name: "for", Class: ClassControl, Body: true,
		Attrs: []AttrSpec{{Key: "from", Kind: KindInt, Required: true}, {Key: "to", Kind: KindInt, Required: true}, {Key: "step", Kind: KindInt},
			{Key: "streams", Kind: KindInt}}},
	OpFusion: {Name: "fusion", Class: ClassControl, MinOperands: 0, MaxOperands: Variadic, Results: Variadic, Body: true, Kernel: true},
	OpYield:  {Name: "yield", Class: ClassControl, MinOperands: 0, MaxOperands: Variadic},
}

// Info returns the schema of op.
func (op Opcode) Info() *OpInfo {
	if op < numOpcodes {
		return &opInfos[op]
	}
	return &opInfos[OpInvalid]
}

// Name is the opcode's spelling in the text format.
func (op Opcode) String() string { return op.Info().Name }

// Class is the opcode's group.
func (op Opcode) Class() Class { return op.Info().Class }

// IsCollective reports whether op is one of the collectives.
func (op Opcode) IsCollective() bool { return op.Class() == ClassCollective }

// IsPointwise reports whether op is elementwise.
func (op Opcode) IsPointwise() bool { return op.Class() == ClassPointwise }

// IsReduction reports whether op reduces over axes.
func (op Opcode) IsReduction() bool { return op.Class() == ClassReduction }

// Opcodes lists every valid opcode.
func Opcodes() []Opcode {
	ops := make([]Opcode, 0, numOpcodes-1)
	for op := OpInvalid + 1; op < numOpcodes; op++ {
		ops = append(ops, op)
	}
	return ops
}

// LookupOpcode finds the opcode spelled name with n operands. Only max is
// spelled two ways: with two operands it is pointwise, with one a reduction.
func LookupOpcode(name string, n int) (Opcode, bool) {
	if name == "max" && n == 1 {
		return OpReduceMax, true
	}
	op, ok := opcodeByName[name]
	return op, ok
}

// opcodeByName is each name's first opcode but OpReduceMax (which
// LookupOpcode picks by arity).
var opcodeByName = func() map[string]Opcode {
	m := map[string]Opcode{}
	for op := OpInvalid + 1; op < numOpcodes; op++ {
		if _, dup := m[opInfos[op].Name]; op != OpReduceMax && !dup {
			m[opInfos[op].Name] = op
		}
	}
	return m
}()
