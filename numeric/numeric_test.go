package numeric

import (
	"math"
	"math/rand/v2"
	"testing"

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
				if w == w {
					t.Fatalf("%s %#04x: widened to %v, want NaN", f.name, h, w)
				}
				if got != h|f.quiet {
					t.Fatalf("%s %#04x: NaN came back as %#04x, want %#04x", f.name, h, got, h|f.quiet)
				}
				continue
			}
			if got != h {
				t.Fatalf("%s %#04x -> %v -> %#04x", f.name, h, w, got)
			}
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
			if float64(mid) != (loV+hiV)/2 {
				t.Fatalf("%s: midpoint of %#04x not exact in f32", f.name, lo)
			}
			even := lo
			if lo&1 != 0 {
				even = hi
			}
			for _, sign := range []float32{1, -1} {
				s := uint16(0)
				if sign < 0 {
					s = 0x8000
				}
				if got := f.to(sign * mid); got != even|s {
					t.Fatalf("%s: tie %v between %#04x and %#04x gave %#04x, want %#04x", f.name, sign*mid, lo, hi, got, even|s)
				}
				below := math.Nextafter32(mid, 0)
				if got := f.to(sign * below); got != lo|s {
					t.Fatalf("%s: %v just below the tie gave %#04x, want %#04x", f.name, sign*below, got, lo|s)
				}
				above := math.Nextafter32(mid, float32(math.Inf(1)))
				if got := f.to(sign * above); got != hi|s {
					t.Fatalf("%s: %v just above the tie gave %#04x, want %#04x", f.name, sign*above, got, hi|s)
				}
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
		if got := c.to(c.in); got != c.want {
			t.Errorf("%s: %v gave %#04x, want %#04x", c.name, c.in, got, c.want)
		}
	}
	if h := F32ToBF16(float32(math.NaN())); h&0x7f80 != 0x7f80 || h&0x0040 == 0 {
		t.Errorf("bf16 NaN gave %#04x, want a quiet NaN", h)
	}
	// A signalling f32 NaN whose payload lives only in the low bits must not
	// truncate to infinity.
	if h := F32ToBF16(math.Float32frombits(0x7f800001)); h != 0x7fc0 {
		t.Errorf("bf16 of signalling NaN gave %#04x, want 0x7fc0", h)
	}
	if h := F32ToF16(math.Float32frombits(0x7f800001)); h != 0x7e00 {
		t.Errorf("f16 of signalling NaN gave %#04x, want 0x7e00", h)
	}
}

// The bf16 bit trick and the general encoder agree on random float32s.
func TestBF16FastPathMatchesGeneral(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		f := math.Float32frombits(r.Uint32())
		if f != f {
			continue
		}
		if a, b := F32ToBF16(f), bfloatFormat.encode(float64(f)); a != b {
			t.Fatalf("%v (%#08x): fast %#04x, general %#04x", f, math.Float32bits(f), a, b)
		}
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
		if a, b := F32ToF16(f), halfFormat.encode(float64(f)); a != b {
			t.Fatalf("%v (%#08x): fast %#04x, general %#04x", f, math.Float32bits(f), a, b)
		}
	}
}

// Rounding straight from float64 is a single rounding: a value just above a
// tie in f64 but equal to the tie once rounded to f32 must still go up.
func TestStoreFloatRoundsOnceFromF64(t *testing.T) {
	b := make([]byte, 2)
	v := 1 + 0x1p-11 + 0x1p-40 // just above the f16 tie between 1 and 1+2^-10
	StoreFloat(ir.F16, b, 0, v)
	if got := LoadFloat(ir.F16, b, 0); got != 1+0x1p-10 {
		t.Errorf("f16 store of %v: got %v, want %v", v, got, 1+0x1p-10)
	}
	v = 1 + 0x1p-8 + 0x1p-40
	StoreFloat(ir.BF16, b, 0, v)
	if got := LoadFloat(ir.BF16, b, 0); got != 1+0x1p-7 {
		t.Errorf("bf16 store of %v: got %v, want %v", v, got, 1+0x1p-7)
	}
	if got := RoundTo(ir.BF16, v); got != 1+0x1p-7 {
		t.Errorf("RoundTo bf16 %v: got %v", v, got)
	}
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
		if got := LoadInt(c.dt, b, 0); got != c.want {
			t.Errorf("StoreFloat(%s, %v): read back %d, want %d", c.dt, c.in, got, c.want)
		}
		if got := RoundTo(c.dt, c.in); got != float64(c.want) {
			t.Errorf("RoundTo(%s, %v) = %v, want %d", c.dt, c.in, got, c.want)
		}
	}
	b := make([]byte, 8)
	StoreInt(ir.I32, b, 0, 1<<31)
	if got := LoadInt(ir.I32, b, 0); got != math.MinInt32 {
		t.Errorf("i32 store of 2^31 wraps to %d, want %d", got, math.MinInt32)
	}
	StoreInt(ir.I64, b, 0, math.MinInt64)
	if got := LoadInt(ir.I64, b, 0); got != math.MinInt64 {
		t.Errorf("i64 round trip: %d", got)
	}
	StoreInt(ir.F16, b, 0, 70000)
	if got := LoadFloat(ir.F16, b, 0); !math.IsInf(got, 1) {
		t.Errorf("f16 store of int 70000 = %v, want +inf", got)
	}
	StoreInt(ir.F32, b, 0, 1<<24+1)
	if got := LoadFloat(ir.F32, b, 0); got != 1<<24 {
		t.Errorf("f32 store of 2^24+1 = %v, want 2^24 (tie to even)", got)
	}
	StoreFloat(ir.F32, b, 0, 2.5)
	if got := LoadInt(ir.F32, b, 0); got != 2 {
		t.Errorf("LoadInt of f32 2.5 = %d, want 2", got)
	}
	if got := WrapInt(ir.I32, 1<<32+5); got != 5 {
		t.Errorf("WrapInt i32 = %d", got)
	}
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
			if got := LoadFloat(dt, b, i); got != want {
				t.Errorf("%s[%d] = %v, want %v", dt, i, got, want)
			}
		}
	}
	b := []byte{0x00, 0x3c, 0x00, 0xc0} // f16 1, -2
	if LoadFloat(ir.F16, b, 0) != 1 || LoadFloat(ir.F16, b, 1) != -2 {
		t.Errorf("f16 little-endian decode wrong: %v %v", LoadFloat(ir.F16, b, 0), LoadFloat(ir.F16, b, 1))
	}
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
