// Package codegen turns the compute ops of a lowered program (a fusion
// region, or a single pointwise op or reduction treated as a one-op fusion)
// into CUDA C kernels for NVRTC. The text is deterministic: the same op
// structure over the same local shapes gives the same source, byte for
// byte, and the kernel's name is a hash of that source, so a runtime can
// cache compiled modules by name.
//
// What a kernel computes follows docs/SEMANTICS.md: f16 and bf16 load into
// f32, compute in f32 and round to nearest even on store; f64 computes in
// double; integers wrap and x/0 is 0; casts truncate, saturate and send NaN
// to 0; max and min propagate NaN. See docs/CODEGEN.md.
package codegen

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/hirlab/hir/ir"
)

// Shape is a dtype and a local shape: what one rank holds. It has the same
// fields as runtime.TensorShape, so one converts to the other directly.
type Shape struct {
	DType ir.DType
	Shape []int64
}

func (s Shape) String() string {
	return s.DType.String() + fmtShape(s.Shape)
}

// ParamKind says how the launcher fills a kernel parameter.
type ParamKind uint8

const (
	// ParamPointer is a device address: the tensor args[Arg] of the
	// launch (inputs in operand order, then outputs).
	ParamPointer ParamKind = iota
	// ParamRuntimeScalar is a value known only at launch: args[Arg] is an
	// i64 operand (a loop index), passed as a long long.
	ParamRuntimeScalar
	// ParamLiteral is a constant of the op, already rounded to its dtype
	// and held in Bits; it is a parameter (not baked into the text) so
	// that ops differing only in constants share one compiled kernel.
	ParamLiteral
)

// Param is one kernel parameter, in the order the kernel declares them:
// input pointers, output pointers, literals, runtime scalars.
type Param struct {
	Name  string // the C name: in0, out0, c0, in2
	CType string // the C type: "const float* __restrict__", "float", "long long"
	Kind  ParamKind
	// Arg indexes the launch's arguments (inputs then outputs) for
	// pointers and runtime scalars; it is -1 for literals.
	Arg int
	// DType is the element type of a pointer's tensor, or the dtype whose
	// compute type a scalar has.
	DType ir.DType
	// Bits is a literal's value as the little-endian bits of its C type
	// (Size bytes of it count).
	Bits uint64
	// Size and Align are the parameter's size and alignment in bytes.
	Size, Align int
}

// Strategy is how a kernel spreads its work over threads.
type Strategy string

const (
	// Flat: every tensor has the iteration shape; a grid-stride loop over
	// 16-byte vectors when every pointer is aligned, then a scalar tail.
	Flat Strategy = "flat"
	// Broadcast: some input is broadcast; a grid-stride loop over elements
	// that maps each output index to the inputs' offsets.
	Broadcast Strategy = "broadcast"
	// RowsWarp: a reduction over the innermost axes with short rows; one
	// warp per output row, combined with shuffles.
	RowsWarp Strategy = "rows-warp"
	// RowsBlock: a reduction over the innermost axes with long rows; one
	// block per output row, shuffles then shared memory.
	RowsBlock Strategy = "rows-block"
	// Columns: a reduction over outer (or mixed) axes; one thread per
	// output element loops over the reduced elements in index order.
	Columns Strategy = "columns"
)

// BlockSize is the number of threads of every block the kernels use; the
// kernels declare it in __launch_bounds__.
const BlockSize = 256

// DefaultSMs is the multiprocessor count Launch assumes when told none.
const DefaultSMs = 132

// Kernel is one generated kernel.
type Kernel struct {
	// Name is the kernel's entry point: "hir_" and the first 16 hex digits
	// of the SHA-256 of the source (with the name left out).
	Name string
	// Source is the CUDA C translation unit, for NVRTC with CompileOptions.
	Source   string
	Params   []Param
	Strategy Strategy
	// Work is the number of independent work items: vectors and tail
	// elements (Flat), vectors or elements (Broadcast, Columns) or rows.
	Work int64
	// Vector is how many neighbouring elements a thread of a flat,
	// broadcast or columns kernel takes at once (16-byte vectors where
	// the operands allow, 1 otherwise).
	Vector int
	// NumInputs and NumOutputs are how many launch arguments the kernel
	// takes: one per non-literal operand, one per result.
	NumInputs, NumOutputs int
	// Tuning is what the kernel was generated with (its launch uses
	// BlocksPerSM).
	Tuning Tuning
}

// Tuning shapes the generated code and its launch: Unroll is how many
// 16-byte vectors a thread of a flat kernel loads before it computes and
// stores them (more loads in flight), BlocksPerSM how many blocks of
// BlockSize threads per multiprocessor the grid holds at most.
type Tuning struct {
	Unroll      int
	BlocksPerSM int
	// ScalarColumns turns off the 16-byte vectors of columns reductions
	// (columnsVector), for comparing the two on a GPU.
	ScalarColumns bool
	// ScalarRows turns off the 16-byte vectors of rows reductions
	// (rowsVector), for comparing the two on a GPU.
	ScalarRows bool
	// Capped: a flat or columns kernel's grid holds at most BlocksPerSM
	// blocks per multiprocessor, looping over its work, as every other
	// strategy's does. By default theirs covers the work once (a block per
	// 256 work items, × Unroll for flat): short-lived blocks the GPU hands
	// to whichever multiprocessor is free moved a fused chain over 1 GiB
	// at 101 % of a device copy on an H200, where the capped grid reached
	// 93 % (docs/bench/h200-fused-chain-tunings.txt), and an outer-axis sum
	// at 103 % against 101 % on an H100; a broadcast kernel lost with it
	// (28 % against 60 %: docs/bench/h100-fused-shapes.txt). For comparing.
	Capped bool
}

// DefaultTuning is what Fusion generates with.
var DefaultTuning = Tuning{Unroll: 1, BlocksPerSM: 16}

// CompileOptions are the NVRTC options the kernels are written for. FMA
// contraction is off so that a*b+c rounds twice, as the CPU runtime does;
// no fast math. The runtime adds the architecture (--gpu-architecture).
func CompileOptions() []string {
	return []string{"--std=c++17", "--fmad=false"}
}

// Launch returns the grid and block for a device with numSMs
// multiprocessors (DefaultSMs when numSMs < 1). Every kernel loops over its
// work with a grid stride: a flat, columns or vectorised broadcast
// kernel's grid covers its work once (unless Tuning.Capped), every
// other's is capped at a few waves. The grid is at least 1, so a launch
// over an empty tensor is valid and does nothing.
func (k *Kernel) Launch(numSMs int) (grid, block [3]uint32) {
	if numSMs < 1 {
		numSMs = DefaultSMs
	}
	perBlock := int64(BlockSize) // work items one block takes per sweep
	switch k.Strategy {
	case RowsWarp:
		perBlock = BlockSize / 32
	case RowsBlock, MatmulTiled:
		perBlock = 1
	}
	if (k.Strategy == Flat || k.Strategy == Columns || k.Strategy == Broadcast && k.Vector > 1) && !k.Tuning.Capped {
		if k.Strategy == Flat {
			// each thread takes Unroll vectors, a grid's width apart
			perBlock *= int64(max(1, k.Tuning.Unroll))
		}
		blocks := max(1, (k.Work+perBlock-1)/perBlock)
		return [3]uint32{uint32(min(blocks, math.MaxInt32)), 1, 1}, [3]uint32{BlockSize, 1, 1}
	}
	blocks := (k.Work + perBlock - 1) / perBlock
	// 16 blocks of 256 threads per SM (the default) are two full waves at
	// 2048 threads per SM; more blocks only add scheduling.
	perSM := k.Tuning.BlocksPerSM
	if perSM < 1 {
		perSM = DefaultTuning.BlocksPerSM
	}
	if limit := int64(numSMs) * int64(perSM); blocks > limit {
		blocks = limit
	}
	if blocks < 1 {
		blocks = 1
	}
	return [3]uint32{uint32(blocks), 1, 1}, [3]uint32{BlockSize, 1, 1}
}

// PackArgs lays the kernel's parameters out as the C ABI does (each at its
// natural alignment) and returns the buffer and each parameter's offset:
// what cuLaunchKernel takes as kernelParams (pointers into buf) or as
// CU_LAUNCH_PARAM_BUFFER_POINTER. args holds one word per launch argument,
// inputs then outputs: a device address for a tensor, the int64 bits of a
// runtime scalar.
func (k *Kernel) PackArgs(args []uint64) (buf []byte, offsets []int, err error) {
	if len(args) != k.NumInputs+k.NumOutputs {
		return nil, nil, fmt.Errorf("kernel %s takes %d arguments (%d inputs, %d outputs), got %d", k.Name, k.NumInputs+k.NumOutputs, k.NumInputs, k.NumOutputs, len(args))
	}
	offsets = make([]int, len(k.Params))
	for i, p := range k.Params {
		off := (len(buf) + p.Align - 1) / p.Align * p.Align
		buf = append(buf, make([]byte, off-len(buf)+p.Size)...)
		offsets[i] = off
		bits := p.Bits
		if p.Kind != ParamLiteral {
			bits = args[p.Arg]
		}
		var word [8]byte
		binary.LittleEndian.PutUint64(word[:], bits)
		copy(buf[off:off+p.Size], word[:p.Size])
	}
	return buf, offsets, nil
}

// Fusion generates the kernel for op: an ir.OpFusion with its body, or a
// single pointwise op or reduction. inputs are the local shapes of op's
// non-literal operands in order (an i64 scalar operand, such as a loop
// index, is passed by value; its entry is ignored beyond the count);
// outputs are the local shapes of op's results. The shapes are baked into
// the kernel. Unsupported ops and dtypes are reported before any text is
// made, with the position of the op at fault.
func Fusion(op *ir.Op, inputs, outputs []Shape) (*Kernel, error) {
	return FusionTuned(op, inputs, outputs, DefaultTuning)
}

// FusionTuned is Fusion generating with t (fields below 1 take the
// default's).
func FusionTuned(op *ir.Op, inputs, outputs []Shape, t Tuning) (*Kernel, error) {
	if outputs == nil {
		outputs = []Shape{}
	}
	p, err := analyze(op, inputs, outputs, true)
	if err != nil {
		return nil, err
	}
	if t.Unroll < 1 {
		t.Unroll = DefaultTuning.Unroll
	}
	if t.BlocksPerSM < 1 {
		t.BlocksPerSM = DefaultTuning.BlocksPerSM
	}
	return emit(p, t), nil
}

// Check reports whether codegen can compile op, from the types its values
// carry (no shapes needed): the ops a fusion body holds, where its
// reduction sits, and every op's dtypes. A pass calls it before it forms or
// keeps a fusion. It returns nil or an ir.ErrorList.
func Check(op *ir.Op) error {
	_, err := analyze(op, nil, nil, false)
	return err
}

// nameOf hashes a source written with namePlaceholder as its entry point.
func nameOf(src string) string {
	sum := sha256.Sum256([]byte(src))
	return "hir_" + hex.EncodeToString(sum[:8])
}
