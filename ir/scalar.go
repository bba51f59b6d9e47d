package ir

import "math"

// Scalar semantics of the pointwise arithmetic ops (OpInfo.F1, F2, I1,
// I2): one element, as docs/SEMANTICS.md defines it and the CPU runtime
// computes it. Floats compute in float64 (the caller rounds to the dtype),
// integers in int64 (the caller wraps to the dtype). Generated CUDA
// computes the same with the `hir_<name>` device functions of
// codegen/prelude.go; adding a pointwise op is a row of the table in
// ops.go and such a function.

func relu(x float64) float64 {
	if x != x || x > 0 {
		return x // NaN stays NaN
	}
	return 0
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// gelu is the exact erf form.
func gelu(x float64) float64 { return x * (1 + math.Erf(x/math.Sqrt2)) / 2 }

// MaxFloat and MinFloat propagate NaN and order -0 below +0 (max, min, and
// the max reduction and reduce op).
func MaxFloat(a, b float64) float64 {
	switch {
	case a != a || b != b:
		return math.NaN()
	case a > b:
		return a
	case b > a:
		return b
	case math.Signbit(a):
		return b
	}
	return a
}

func MinFloat(a, b float64) float64 {
	switch {
	case a != a || b != b:
		return math.NaN()
	case a < b:
		return a
	case b < a:
		return b
	case math.Signbit(a):
		return a
	}
	return b
}

func absInt(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// divInt truncates toward zero, and x / 0 is 0.
func divInt(a, b int64) int64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// unary and binary give a pointwise op its scalar semantics; i is nil for
// a float-only op.
func unary(name string, f func(float64) float64, i func(int64) int64) OpInfo {
	info := pointwise(name, 1)
	info.F1, info.I1, info.FloatOnly = f, i, i == nil
	return info
}

func binary(name string, f func(float64, float64) float64, i func(int64, int64) int64) OpInfo {
	info := pointwise(name, 2)
	info.F2, info.I2 = f, i
	return info
}
