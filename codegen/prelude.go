package codegen

import _ "embed" // the prelude's CUDA C lives in prelude/*.cu

// The helpers every kernel starts with (prelude/core.cu). Overloads on the
// compute types (float for f16/bf16/f32, double, int, long long) let the
// generator write hir_add(a, b) whatever the dtype. Integer arithmetic goes
// through the unsigned types, where overflow wraps by definition
// (SEMANTICS.md: integers wrap), instead of signed overflow, which C++
// leaves undefined. hir_pdl_begin, which every kernel calls first, is the
// same six lines as the runtime's own kernels' pdl_begin
// (runtime/cuda/kernels/pdl.cu): codegen does not import the runtime.
//
//go:embed prelude/core.cu
var preludeCore string

// The 16-bit floats are plain structs converted with PTX cvt instructions
// (round to nearest even), so kernels need no header: NVRTC as shipped on
// the GPU machines has no cuda_fp16.h on its search path. cvt.rn.bf16.f32
// needs sm_80 or newer.
//
// hir_narrow (prelude/narrow.cu) rounds a double to float toward zero and
// sets the last bit when that was inexact (round to odd): rounding that
// float once more to f16 or bf16 then equals rounding the double directly,
// since float keeps more than two extra bits of either format.
//
//go:embed prelude/narrow.cu
var preludeNarrow string

// preludeF16 loads and stores IEEE half.
//
//go:embed prelude/f16.cu
var preludeF16 string

// preludeBF16 loads and stores bfloat16 (the top half of a float).
//
//go:embed prelude/bf16.cu
var preludeBF16 string
