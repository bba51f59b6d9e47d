package host

import (
	"fmt"
	"math"
	"slices"
)

// Equal returns nil when a and b have the same dtype, shape and elements,
// else an error describing how many elements differ and the first one
// (multi-index and both values). NaN equals NaN here, and -0 equals 0: it
// compares results, not bit patterns.
func Equal(a, b *Array) error {
	if err := sameLayout(a, b, true); err != nil {
		return err
	}
	exact := !a.DType.IsFloat()
	return firstMismatch(a, b, func(i int64) bool {
		if exact {
			return a.AtInt(i) == b.AtInt(i)
		}
		x, y := a.At(i), b.At(i)
		return x == y || (x != x && y != y)
	}, "")
}

// AllClose returns nil when a and b have the same shape and every element
// satisfies |a - b| <= atol + rtol·|b| (b is the reference, as in NumPy);
// NaNs match NaNs and infinities match infinities of the same sign. The
// dtypes may differ (a bf16 result against an f64 reference). Otherwise the
// error says how many elements differ and describes the first.
func AllClose(a, b *Array, rtol, atol float64) error {
	if err := sameLayout(a, b, false); err != nil {
		return err
	}
	return firstMismatch(a, b, func(i int64) bool {
		return isClose(a.At(i), b.At(i), rtol, atol)
	}, fmt.Sprintf(" (rtol %g, atol %g)", rtol, atol))
}

func isClose(x, y, rtol, atol float64) bool {
	switch {
	case math.IsNaN(x) || math.IsNaN(y):
		return math.IsNaN(x) && math.IsNaN(y)
	case math.IsInf(x, 0) || math.IsInf(y, 0):
		return x == y
	}
	return math.Abs(x-y) <= atol+rtol*math.Abs(y)
}

func sameLayout(a, b *Array, sameDType bool) error {
	if a == nil || b == nil {
		return fmt.Errorf("comparing a nil array")
	}
	if (sameDType && a.DType != b.DType) || !slices.Equal(a.Shape, b.Shape) {
		return fmt.Errorf("got %s, want %s", a.TypeString(), b.TypeString())
	}
	return nil
}

func firstMismatch(a, b *Array, match func(i int64) bool, tolerance string) error {
	n := a.Len()
	first, count := int64(-1), int64(0)
	for i := int64(0); i < n; i++ {
		if !match(i) {
			if first < 0 {
				first = i
			}
			count++
		}
	}
	if count == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d elements differ%s; the first at %v: got %s, want %s",
		count, n, tolerance, Index(a.Shape, first), a.format(first), b.format(first))
}
