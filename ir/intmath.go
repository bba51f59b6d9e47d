package ir

import (
	"fmt"
	"math"
	"math/big"
)

// Sizes and loop bounds are int64 everywhere (shapes, byte counts, offsets,
// loop indexes). The helpers here do that arithmetic exactly: they report
// when a result does not fit instead of wrapping. The passes reject every
// program whose numbers do not fit (docs/SEMANTICS.md, "Sizes and
// integers"), so the runtimes may then use plain int64 arithmetic.

// MulChecked returns a·b and whether it fits in an int64.
func MulChecked(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return c, true
}

// ProductChecked multiplies the extents of a shape (1 for a scalar shape).
// ok is false when an extent is negative or the product does not fit in an
// int64. A zero extent makes the product 0, however large the others are.
func ProductChecked(shape []int64) (n int64, ok bool) {
	zero := false
	for _, e := range shape {
		if e < 0 {
			return 0, false
		}
		zero = zero || e == 0
	}
	if zero {
		return 0, true
	}
	n = 1
	for _, e := range shape {
		if n, ok = MulChecked(n, e); !ok {
			return 0, false
		}
	}
	return n, true
}

// BigProduct is the exact product of a shape's extents, for messages about
// products that do not fit in an int64.
func BigProduct(shape []int64) *big.Int {
	n := big.NewInt(1)
	for _, e := range shape {
		n.Mul(n, big.NewInt(e))
	}
	return n
}

// SizeError says why a tensor type's size does not fit in an int64, or is
// nil when it does: an extent below 1 (the text format has none; a program
// built in Go may), or a logical element count or byte size (element count ×
// dtype size) beyond 2^63-1. A rank's local shape is never larger than the
// logical one, so every local size then fits too.
func (t *TensorType) SizeError() error {
	for i, d := range t.Dims {
		if d.Extent < 1 {
			return fmt.Errorf("axis %d has extent %d; an extent must be at least 1", i, d.Extent)
		}
	}
	shape := t.Shape()
	n, ok := ProductChecked(shape)
	if !ok {
		return fmt.Errorf("%s elements do not fit in a 64-bit size", BigProduct(shape))
	}
	if _, ok := MulChecked(n, int64(t.DType.Size())); !ok {
		bytes := BigProduct(shape)
		bytes.Mul(bytes, big.NewInt(int64(t.DType.Size())))
		return fmt.Errorf("%s bytes (%d elements of %d bytes) do not fit in a 64-bit size", bytes, n, t.DType.Size())
	}
	return nil
}

// LoopTrips is the number of times `for %i = from to to step step` runs its
// body: the i = from, from+step, … below to. It is exact for every int64
// bound (the count of a loop over the whole int64 range needs 64 bits
// unsigned); a step below 1 gives 0 (the verifier rejects it).
func LoopTrips(from, to, step int64) uint64 {
	if step < 1 || from >= to {
		return 0
	}
	span := uint64(to) - uint64(from) // exact: to > from
	return (span-1)/uint64(step) + 1
}

// LoopLast is the last value a loop index takes, for a loop with at least
// one trip: from + (LoopTrips-1)·step, computed without overflow.
func LoopLast(from, to, step int64) int64 {
	n := LoopTrips(from, to, step)
	if n == 0 {
		return from
	}
	// (n-1)·step ≤ to-1-from < 2^64, and the sum lies in [from, to): the
	// unsigned arithmetic wraps back to the exact int64.
	return int64(uint64(from) + (n-1)*uint64(step))
}
