package host

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/hirlab/hir/ir"
)

// Tolerance is NumPy's allclose test: got is close to want when
// |got - want| <= Atol + Rtol·|want|, want being the reference.
type Tolerance struct{ Rtol, Atol float64 }

// DefaultTolerance is the tolerance for results of dtype dt: PyTorch's
// torch.testing.assert_close defaults, a few units in the last place of
// each float type, and exact for integers and bools.
func DefaultTolerance(dt ir.DType) Tolerance {
	switch dt {
	case ir.F64:
		return Tolerance{Rtol: 1e-7, Atol: 1e-7}
	case ir.F32:
		return Tolerance{Rtol: 1.3e-6, Atol: 1e-5}
	case ir.F16:
		return Tolerance{Rtol: 1e-3, Atol: 1e-5}
	case ir.BF16:
		return Tolerance{Rtol: 1.6e-2, Atol: 1e-5}
	}
	return Tolerance{}
}

func (t Tolerance) String() string { return fmt.Sprintf("rtol %g, atol %g", t.Rtol, t.Atol) }

// Closeness is what comparing an array with a reference found.
type Closeness struct {
	Elements   int64
	Mismatches int64
	// First is the multi-index of the first mismatch (row-major order),
	// with the two values there; nil when every element is close.
	First     []int64
	Got, Want string
	// MaxAbs is the largest |got - want|; MaxRel the largest
	// |got - want| / |want| over elements whose reference is not 0 (as
	// NumPy's assert_allclose reports). A NaN or infinity that does not
	// match counts as an infinite error.
	MaxAbs, MaxRel float64
}

// Compare compares got with the reference want element by element under
// tol. The shapes must agree; the dtypes may differ (a bf16 result against
// an f32 reference), values being compared as float64, except integers
// against integers, compared exactly before any tolerance. A NaN matches a
// NaN, an infinity only the same infinity.
func Compare(got, want *Array, tol Tolerance) (Closeness, error) {
	if !slices.Equal(got.Shape, want.Shape) {
		return Closeness{}, fmt.Errorf("got %s, want %s", got.TypeString(), want.TypeString())
	}
	c := Closeness{Elements: got.Len()}
	ints := !got.DType.IsFloat() && !want.DType.IsFloat()
	for i := int64(0); i < c.Elements; i++ {
		var close bool
		var abs, rel float64
		if ints {
			x, y := got.AtInt(i), want.AtInt(i)
			abs, rel = intAbsRel(x, y)
			close = x == y || (tol != Tolerance{} && abs <= tol.Atol+tol.Rtol*math.Abs(float64(y)))
		} else {
			close, abs, rel = closeFloats(got.At(i), want.At(i), tol)
		}
		c.MaxAbs = math.Max(c.MaxAbs, abs)
		if !math.IsNaN(rel) {
			c.MaxRel = math.Max(c.MaxRel, rel)
		}
		if close {
			continue
		}
		if c.Mismatches == 0 {
			c.First = Index(got.Shape, i)
			c.Got, c.Want = got.format(i), want.format(i)
		}
		c.Mismatches++
	}
	return c, nil
}

// closeFloats says whether x is close to the reference y, and the absolute
// and relative errors (the latter NaN where y is 0: not counted).
func closeFloats(x, y float64, tol Tolerance) (close bool, abs, rel float64) {
	switch {
	case math.IsNaN(x) || math.IsNaN(y):
		if math.IsNaN(x) && math.IsNaN(y) {
			return true, 0, 0
		}
		return false, math.Inf(1), math.Inf(1)
	case math.IsInf(x, 0) || math.IsInf(y, 0):
		if x == y {
			return true, 0, 0
		}
		return false, math.Inf(1), math.Inf(1)
	}
	abs, rel = absRel(x, y)
	return abs <= tol.Atol+tol.Rtol*math.Abs(y), abs, rel
}

// intAbsRel is absRel of integers, the difference taken exactly (float64
// would lose it between large i64 values).
func intAbsRel(x, y int64) (abs, rel float64) {
	d := uint64(x) - uint64(y)
	if x < y {
		d = uint64(y) - uint64(x)
	}
	abs = float64(d)
	if y == 0 {
		return abs, math.NaN()
	}
	return abs, abs / math.Abs(float64(y))
}

// absRel are |x - y| and |x - y| / |y|, the latter NaN where y is 0.
func absRel(x, y float64) (abs, rel float64) {
	abs = math.Abs(x - y)
	if y == 0 {
		return abs, math.NaN()
	}
	return abs, abs / math.Abs(y)
}

// String says it in one line: "12 elements within rtol .., atol ..; max
// abs error 2.4e-07, max rel error 1.2e-07", or "3 of 12 elements differ
// (...); the first at [1, 2]: got 4.5, want 4; max abs error ...".
func (c Closeness) String(tol Tolerance) string {
	errs := fmt.Sprintf("max abs error %s, max rel error %s", formatError(c.MaxAbs), formatError(c.MaxRel))
	if c.Mismatches == 0 {
		return fmt.Sprintf("%d element%s within %s; %s", c.Elements, plural(c.Elements), tol, errs)
	}
	return fmt.Sprintf("%d of %d elements differ (%s); the first at %s: got %s, want %s; %s",
		c.Mismatches, c.Elements, tol, FormatIndex(c.First), c.Got, c.Want, errs)
}

func formatError(v float64) string {
	if math.IsInf(v, 1) {
		return "inf"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// FormatIndex spells a multi-index as the text format spells shapes:
// [3, 17] ([] for a scalar).
func FormatIndex(idx []int64) string {
	parts := make([]string, len(idx))
	for i, v := range idx {
		parts[i] = strconv.FormatInt(v, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
