package host

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
)

func floats(dt ir.DType, shape []int64, vs ...float64) *Array {
	a := New(dt, shape)
	for i, v := range vs {
		a.Set(int64(i), v)
	}
	return a
}

func TestCompareFindsEveryMismatch(t *testing.T) {
	want := floats(ir.F32, []int64{2, 3}, 1, 2, 4, 0, -8, 16)
	got := floats(ir.F32, []int64{2, 3}, 1, 2.5, 4, 0.001, -8, 12)
	tol := Tolerance{Rtol: 0.1, Atol: 0.01}
	c, err := Compare(got, want, tol)
	require.NoError(t, err)
	// 2.5 vs 2: |0.5| > 0.01 + 0.2; 0.001 vs 0: within atol; 12 vs 16:
	// |4| > 0.01 + 1.6.
	assert.Equal(t, Closeness{
		Elements: 6, Mismatches: 2,
		First: []int64{0, 1}, Got: "2.5", Want: "2",
		MaxAbs: 4, MaxRel: 0.25, // 0.5/2 and 4/16; the 0 reference is left out
	}, c)
	assert.Equal(t, "2 of 6 elements differ (rtol 0.1, atol 0.01); the first at [0, 1]: got 2.5, want 2; max abs error 4, max rel error 0.25", c.String(tol))

	c, err = Compare(want, want, DefaultTolerance(ir.F32))
	require.NoError(t, err)
	assert.Equal(t, "6 elements within rtol 1.3e-06, atol 1e-05; max abs error 0, max rel error 0", c.String(DefaultTolerance(ir.F32)))

	_, err = Compare(got, floats(ir.F32, []int64{3, 2}), tol)
	assert.EqualError(t, err, "got f32[2, 3], want f32[3, 2]")
}

func TestCompareAllcloseIsAsymmetric(t *testing.T) {
	// |a - b| <= atol + rtol·|b| with b the reference: 1.05 is within 5%
	// of 1.1 (0.055), 1.1 is not within 5% of 1.05 (0.0525).
	tol := Tolerance{Rtol: 0.05}
	c, _ := Compare(floats(ir.F64, []int64{1}, 1.15), floats(ir.F64, []int64{1}, 1.1), tol)
	assert.Zero(t, c.Mismatches, "1.15 against 1.1")
	c, _ = Compare(floats(ir.F64, []int64{1}, 1.1), floats(ir.F64, []int64{1}, 1.05), tol)
	assert.Zero(t, c.Mismatches, "1.1 against 1.05")
	c, _ = Compare(floats(ir.F64, []int64{1}, 1.1), floats(ir.F64, []int64{1}, 1.0), tol)
	assert.Equal(t, int64(1), c.Mismatches, "1.1 against 1")
}

func TestCompareNaNAndInfinity(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	want := floats(ir.F64, []int64{6}, nan, inf, -inf, 1, nan, inf)
	got := floats(ir.F64, []int64{6}, nan, inf, -inf, 1, 0, -inf)
	c, err := Compare(got, want, DefaultTolerance(ir.F64))
	require.NoError(t, err)
	assert.Equal(t, int64(2), c.Mismatches, "a NaN matches a NaN, an infinity the same infinity")
	assert.Equal(t, []int64{4}, c.First)
	assert.Equal(t, "0", c.Got)
	assert.Equal(t, "nan", c.Want)
	assert.True(t, math.IsInf(c.MaxAbs, 1) && math.IsInf(c.MaxRel, 1), "an unmatched NaN or infinity is an infinite error: %v %v", c.MaxAbs, c.MaxRel)
	assert.Contains(t, c.String(Tolerance{}), "max abs error inf, max rel error inf")
}

func TestCompareIntegers(t *testing.T) {
	// Exact by default, even where float64 cannot tell the values apart.
	want, got := New(ir.I64, []int64{2}), New(ir.I64, []int64{2})
	want.SetInt(0, 1<<60)
	got.SetInt(0, 1<<60+1)
	c, err := Compare(got, want, DefaultTolerance(ir.I64))
	require.NoError(t, err)
	assert.Equal(t, int64(1), c.Mismatches)
	assert.Equal(t, "1152921504606846977", c.Got)
	assert.Equal(t, 1.0, c.MaxAbs)
	// A tolerance applies to integers as to floats.
	c, _ = Compare(got, want, Tolerance{Atol: 1})
	assert.Zero(t, c.Mismatches, "atol 1")

	b := New(ir.Bool, []int64{2, 2})
	b.SetInt(3, 1)
	c, _ = Compare(New(ir.Bool, []int64{2, 2}), b, DefaultTolerance(ir.Bool))
	assert.Equal(t, []int64{1, 1}, c.First)
	assert.Equal(t, "false", c.Got)
	assert.Equal(t, "true", c.Want)
}

func TestCompareBF16AgainstF32(t *testing.T) {
	// hir saves bf16 as f32: a bf16 result compared with an f32 reference
	// is within bf16's tolerance of it, not within f32's.
	want := floats(ir.F32, []int64{2}, 0.1, 3.14159)
	got := want.Convert(ir.BF16)
	c, _ := Compare(got, want, DefaultTolerance(ir.BF16))
	assert.Zero(t, c.Mismatches, "%s", c.String(DefaultTolerance(ir.BF16)))
	c, _ = Compare(got, want, DefaultTolerance(ir.F32))
	assert.Equal(t, int64(2), c.Mismatches)
	assert.Equal(t, "0.1", c.Got, "bf16 spelled shortest")

	s, _ := Compare(floats(ir.F32, nil, 2), floats(ir.F32, nil, 3), Tolerance{})
	assert.Equal(t, []int64{}, s.First, "a scalar's index")
	assert.Equal(t, "1 of 1 elements differ (rtol 0, atol 0); the first at []: got 2, want 3; max abs error 1, max rel error 0.333", s.String(Tolerance{}))
}

func TestDefaultTolerances(t *testing.T) {
	for dt, want := range map[ir.DType]Tolerance{
		ir.F64: {1e-7, 1e-7}, ir.F32: {1.3e-6, 1e-5}, ir.F16: {1e-3, 1e-5}, ir.BF16: {1.6e-2, 1e-5},
		ir.I32: {}, ir.I64: {}, ir.Bool: {},
	} {
		assert.Equal(t, want, DefaultTolerance(dt), "%v", dt)
	}
}
