package numeric

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
)

type half16 struct {
	name    string
	to      func(float32) uint16
	from    func(uint16) float32
	expMask uint16 // exponent field bits in place
	quiet   uint16 // the quiet-NaN bit
}

var formats16 = []half16{
	{"f16", F32ToF16, F16ToF32, 0x7c00, 0x0200},
	{"bf16", F32ToBF16, BF16ToF32, 0x7f80, 0x0040},
}

func isNaN16(f half16, h uint16) bool { return h&f.expMask == f.expMask && h&^(f.expMask|0x8000) != 0 }

// Every one of the 65536 patterns widens and narrows back to itself; NaNs
// come back as quiet NaNs with the same sign and payload.
func TestRoundTripAllPatterns(t *testing.T) {
	for _, f := range formats16 {
		for i := 0; i < 1<<16; i++ {
			h := uint16(i)
			w := f.from(h)
			got := f.to(w)
			if isNaN16(f, h) {
				require.Truef(t, math.IsNaN(float64(w)), "%s %#04x: widened to %v, want NaN", f.name, h, w)
				require.Equalf(t, h|f.quiet, got, "%s %#04x: NaN came back quiet", f.name, h)
				continue
			}
			require.Equalf(t, h, got, "%s %#04x -> %v -> back", f.name, h, w)
		}
	}
}

// For every pair of adjacent finite values, the midpoint rounds to the even
// one and the float32 values just either side of it round to the nearer one.
// The reference here is "pick the nearer neighbour", not the encoder.
func TestRoundingAtEveryMidpoint(t *testing.T) {
	for _, f := range formats16 {
		for i := 0; i < 1<<16; i++ {
			lo := uint16(i)
			if lo&0x8000 != 0 || isNaN16(f, lo) || lo&f.expMask == f.expMask {
				continue
			}
			hi := lo + 1 // next larger magnitude; for the largest finite it is inf
			loV := float64(f.from(lo))
			var hiV float64
			if hi&f.expMask == f.expMask {
				// The virtual next value: one more ulp past the largest finite.
				hiV = loV + (loV - float64(f.from(lo-1)))
			} else {
				hiV = float64(f.from(hi))
			}
			mid := float32((loV + hiV) / 2)
			require.Equalf(t, (loV+hiV)/2, float64(mid), "%s: midpoint of %#04x not exact in f32", f.name, lo)
			even := lo
			if lo&1 != 0 {
				even = hi
			}
			for _, sign := range []float32{1, -1} {
				s := uint16(0)
				if sign < 0 {
					s = 0x8000
				}
				require.Equalf(t, even|s, f.to(sign*mid), "%s: tie %v between %#04x and %#04x", f.name, sign*mid, lo, hi)
				below := math.Nextafter32(mid, 0)
				require.Equalf(t, lo|s, f.to(sign*below), "%s: %v just below the tie", f.name, sign*below)
				above := math.Nextafter32(mid, float32(math.Inf(1)))
				require.Equalf(t, hi|s, f.to(sign*above), "%s: %v just above the tie", f.name, sign*above)
			}
		}
	}
}

func TestHandComputedCases(t *testing.T) {
	cases := []struct {
		name string
		to   func(float32) uint16
		in   float32
		want uint16
	}{
		{"f16 one", F32ToF16, 1, 0x3c00},
		{"f16 tie 1+2^-11 to even 1", F32ToF16, 1 + 0x1p-11, 0x3c00},
		{"f16 tie 1+3*2^-11 to even 1+2^-9", F32ToF16, 1 + 3*0x1p-11, 0x3c02},
		{"f16 max finite", F32ToF16, 65504, 0x7bff},
		{"f16 below overflow tie", F32ToF16, 65519.996, 0x7bff},
		{"f16 overflow tie to inf", F32ToF16, 65520, 0x7c00},
		{"f16 large to inf", F32ToF16, 1e10, 0x7c00},
		{"f16 -inf", F32ToF16, float32(math.Inf(-1)), 0xfc00},
		{"f16 smallest subnormal", F32ToF16, 0x1p-24, 0x0001},
		{"f16 half smallest subnormal ties to 0", F32ToF16, 0x1p-25, 0x0000},
		{"f16 -half smallest subnormal ties to -0", F32ToF16, -0x1p-25, 0x8000},
		{"f16 1.5 smallest subnormal", F32ToF16, 1.5 * 0x1p-24, 0x0002},
		{"f16 2.5 smallest subnormal ties to 2", F32ToF16, 2.5 * 0x1p-24, 0x0002},
		{"f16 largest subnormal rounds to smallest normal", F32ToF16, 0x1p-14 - 0x1p-26, 0x0400},
		{"f16 smallest normal", F32ToF16, 0x1p-14, 0x0400},
		{"f16 0.1", F32ToF16, 0.1, 0x2e66},
		{"f16 -2", F32ToF16, -2, 0xc000},
		{"bf16 one", F32ToBF16, 1, 0x3f80},
		{"bf16 tie 1+2^-8 to even 1", F32ToBF16, 1 + 0x1p-8, 0x3f80},
		{"bf16 tie 1+3*2^-8 to even", F32ToBF16, 1 + 3*0x1p-8, 0x3f82},
		{"bf16 0.1", F32ToBF16, 0.1, 0x3dcd},
		{"bf16 f32 max to inf", F32ToBF16, math.MaxFloat32, 0x7f80},
		{"bf16 pi", F32ToBF16, math.Pi, 0x4049},
		{"bf16 smallest f32 subnormal to 0", F32ToBF16, math.SmallestNonzeroFloat32, 0x0000},
		{"bf16 -0", F32ToBF16, float32(math.Copysign(0, -1)), 0x8000},
	}
	for _, c := range cases {
		assert.Equalf(t, c.want, c.to(c.in), "%s: %v", c.name, c.in)
	}
	h := F32ToBF16(float32(math.NaN()))
	assert.Truef(t, h&0x7f80 == 0x7f80 && h&0x0040 != 0, "bf16 NaN gave %#04x, want a quiet NaN", h)
	// A signalling f32 NaN whose payload lives only in the low bits must not
	// truncate to infinity.
	assert.Equal(t, uint16(0x7fc0), F32ToBF16(math.Float32frombits(0x7f800001)), "bf16 of signalling NaN")
	assert.Equal(t, uint16(0x7e00), F32ToF16(math.Float32frombits(0x7f800001)), "f16 of signalling NaN")
}

// The bf16 bit trick and the general encoder agree on random float32s.
func TestBF16FastPathMatchesGeneral(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		f := math.Float32frombits(r.Uint32())
		if f != f {
			continue
		}
		require.Equalf(t, bfloatFormat.encode(float64(f)), F32ToBF16(f), "%v (%#08x): general (expected) vs fast (actual)", f, math.Float32bits(f))
	}
}

// The f16 bit path and the general encoder agree on random float32s.
func TestF16FastPathMatchesGeneral(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200000; i++ {
		f := math.Float32frombits(r.Uint32())
		if i%2 == 0 {
			// Concentrate on the f16 range, subnormals included.
			f = math.Float32frombits(r.Uint32()&0x807fffff | (uint32(100+r.IntN(45)) << 23))
		}
		if f != f {
			continue
		}
		require.Equalf(t, halfFormat.encode(float64(f)), F32ToF16(f), "%v (%#08x): general (expected) vs fast (actual)", f, math.Float32bits(f))
	}
}

// Rounding straight from float64 is a single rounding: a value just above a
// tie in f64 but equal to the tie once rounded to f32 must still go up.
func TestStoreFloatRoundsOnceFromF64(t *testing.T) {
	b := make([]byte, 2)
	v := 1 + 0x1p-11 + 0x1p-40 // just above the f16 tie between 1 and 1+2^-10
	StoreFloat(ir.F16, b, 0, v)
	assert.Equalf(t, 1+0x1p-10, LoadFloat(ir.F16, b, 0), "f16 store of %v", v)
	v = 1 + 0x1p-8 + 0x1p-40
	StoreFloat(ir.BF16, b, 0, v)
	assert.Equalf(t, 1+0x1p-7, LoadFloat(ir.BF16, b, 0), "bf16 store of %v", v)
	assert.Equalf(t, 1+0x1p-7, RoundTo(ir.BF16, v), "RoundTo bf16 %v", v)
}

func TestCastRules(t *testing.T) {
	cases := []struct {
		dt   ir.DType
		in   float64
		want int64
	}{
		{ir.I32, 3.9, 3},
		{ir.I32, -3.9, -3},
		{ir.I32, math.NaN(), 0},
		{ir.I32, 1e10, math.MaxInt32},
		{ir.I32, -1e10, math.MinInt32},
		{ir.I32, math.Inf(1), math.MaxInt32},
		{ir.I64, 1e19, math.MaxInt64},
		{ir.I64, -1e19, math.MinInt64},
		{ir.I64, -0.5, 0},
		{ir.Bool, 0.5, 1},
		{ir.Bool, 0, 0},
		{ir.Bool, math.Copysign(0, -1), 0},
		{ir.Bool, math.NaN(), 1},
	}
	for _, c := range cases {
		b := make([]byte, 8)
		StoreFloat(c.dt, b, 0, c.in)
		assert.Equalf(t, c.want, LoadInt(c.dt, b, 0), "StoreFloat(%s, %v): read back", c.dt, c.in)
		assert.Equalf(t, float64(c.want), RoundTo(c.dt, c.in), "RoundTo(%s, %v)", c.dt, c.in)
	}
	b := make([]byte, 8)
	StoreInt(ir.I32, b, 0, 1<<31)
	assert.Equal(t, int64(math.MinInt32), LoadInt(ir.I32, b, 0), "i32 store of 2^31 wraps")
	StoreInt(ir.I64, b, 0, math.MinInt64)
	assert.Equal(t, int64(math.MinInt64), LoadInt(ir.I64, b, 0), "i64 round trip")
	StoreInt(ir.F16, b, 0, 70000)
	assert.Equal(t, math.Inf(1), LoadFloat(ir.F16, b, 0), "f16 store of int 70000")
	StoreInt(ir.F32, b, 0, 1<<24+1)
	assert.Equal(t, float64(1<<24), LoadFloat(ir.F32, b, 0), "f32 store of 2^24+1 (tie to even)")
	StoreFloat(ir.F32, b, 0, 2.5)
	assert.Equal(t, int64(2), LoadInt(ir.F32, b, 0), "LoadInt of f32 2.5")
	assert.Equal(t, int64(5), WrapInt(ir.I32, 1<<32+5), "WrapInt i32")
}

// Elements are little-endian at index i, whatever the dtype.
func TestLoadStoreIndexing(t *testing.T) {
	for _, dt := range ir.AllDTypes {
		b := make([]byte, 4*dt.Size())
		for i := int64(0); i < 4; i++ {
			StoreFloat(dt, b, i, float64(i))
		}
		for i := int64(0); i < 4; i++ {
			want := float64(i)
			if dt == ir.Bool && i > 0 {
				want = 1
			}
			assert.Equalf(t, want, LoadFloat(dt, b, i), "%s[%d]", dt, i)
		}
	}
	b := []byte{0x00, 0x3c, 0x00, 0xc0} // f16 1, -2
	assert.Equal(t, []float64{1, -2}, []float64{LoadFloat(ir.F16, b, 0), LoadFloat(ir.F16, b, 1)}, "f16 little-endian decode")
}

func BenchmarkF32ToF16(b *testing.B) {
	x := float32(0.1234)
	var s uint16
	for i := 0; i < b.N; i++ {
		s += F32ToF16(x)
		x += 1e-3
	}
	_ = s
}
