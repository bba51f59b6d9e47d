// Package numeric holds the element semantics of hir's dtypes, shared by the
// host arrays, the CPU runtime and codegen's literals: the 16-bit float
// formats (IEEE half and bfloat16) with exact round to nearest even, rounding
// a value to a dtype, the float-to-int cast (truncate, NaN 0, saturate) and
// integer wrapping of docs/SEMANTICS.md, and typed loads and stores of
// little-endian elements that follow those rules. It depends only on ir.
package numeric

import (
	"encoding/binary"
	"math"

	"github.com/hirlab/hir/ir"
)

// format describes a binary floating-point format narrower than float64.
type format struct {
	mantBits uint // stored fraction bits
	expBits  uint
	bias     int
}

var (
	halfFormat   = format{mantBits: 10, expBits: 5, bias: 15}
	bfloatFormat = format{mantBits: 7, expBits: 8, bias: 127}
)

// encode rounds v to the format (round to nearest, ties to even) and returns
// its bits. The rounding is done once, from the exact float64 value, so no
// double rounding can occur for values coming from float32 or float64.
func (f format) encode(v float64) uint16 {
	expMask := uint16(1)<<f.expBits - 1
	infBits := expMask << f.mantBits
	var sign uint16
	if math.Signbit(v) {
		sign = 1 << (f.mantBits + f.expBits)
		v = -v
	}
	switch {
	case math.IsNaN(v):
		// A quiet NaN: the top fraction bit set.
		return sign | infBits | 1<<(f.mantBits-1)
	case math.IsInf(v, 0):
		return sign | infBits
	case v == 0:
		return sign
	}
	minNormalExp := 1 - f.bias // exponent of the smallest normal, 2^minNormalExp
	// quantum is the spacing of representable values around v.
	_, e := math.Frexp(v) // v = frac * 2^e, frac in [0.5, 1)
	exp := e - 1          // v in [2^exp, 2^(exp+1))
	if exp < minNormalExp {
		exp = minNormalExp // subnormals share the smallest normal's spacing
	}
	quantum := math.Ldexp(1, exp-int(f.mantBits))
	// Scaling by a power of two is exact in float64 for these ranges.
	r := math.RoundToEven(v/quantum) * quantum
	maxExp := int(expMask) - 1 - f.bias
	maxFinite := math.Ldexp(2-math.Ldexp(1, -int(f.mantBits)), maxExp)
	if r > maxFinite {
		return sign | infBits
	}
	if r < math.Ldexp(1, minNormalExp) {
		// Subnormal (or the rounding reached the smallest normal: m equals
		// 1<<mantBits, which is exactly the smallest normal's encoding).
		m := uint16(r / math.Ldexp(1, minNormalExp-int(f.mantBits)))
		return sign | m
	}
	frac, e2 := math.Frexp(r)
	biased := uint16(e2 - 1 + f.bias)
	m := uint16((frac*2 - 1) * math.Ldexp(1, int(f.mantBits)))
	return sign | biased<<f.mantBits | m
}

// decode returns the exact value of bits in the format.
func (f format) decode(h uint16) float64 {
	expMask := uint16(1)<<f.expBits - 1
	sign := 1.0
	if h>>(f.mantBits+f.expBits)&1 != 0 {
		sign = -1
	}
	exp := h >> f.mantBits & expMask
	mant := h & (1<<f.mantBits - 1)
	switch exp {
	case 0:
		return sign * math.Ldexp(float64(mant), 1-f.bias-int(f.mantBits))
	case expMask:
		if mant != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(float64(mant)+math.Ldexp(1, int(f.mantBits)), int(exp)-f.bias-int(f.mantBits))
}

// F32ToF16 rounds f to IEEE half precision (nearest even; overflow gives
// infinity; subnormal results are exact roundings; NaN stays a quiet NaN
// keeping its sign and the top bits of its payload).
func F32ToF16(f float32) uint16 {
	if f != f {
		b := math.Float32bits(f)
		return uint16(b>>16)&0x8000 | 0x7e00 | uint16(b>>13)&0x03ff
	}
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127
	mant := b & 0x7fffff
	switch {
	case exp > 15: // beyond the largest binade, or infinity
		return sign | 0x7c00
	case exp < -25: // below half the smallest subnormal
		return sign
	}
	// Shift the significand down to units of the result's last place, then
	// round on the bits shifted out. A carry out of the fraction lands in
	// the exponent field, which is the right answer (up to infinity).
	var kept, rest, shift uint32
	var base uint16
	if exp >= -14 {
		shift = 13
		base = uint16(exp+15) << 10
		kept, rest = mant>>shift, mant&(1<<shift-1)
	} else {
		full := mant | 1<<23
		shift = uint32(-exp - 1) // 14..24: units of 2^-24
		kept, rest = full>>shift, full&(1<<shift-1)
	}
	halfway := uint32(1) << (shift - 1)
	if rest > halfway || rest == halfway && kept&1 != 0 {
		kept++
	}
	return sign | (base + uint16(kept))
}

// F16ToF32 widens a half to float32 (exact).
func F16ToF32(h uint16) float32 {
	if h&0x7c00 == 0x7c00 && h&0x03ff != 0 {
		// Keep NaN sign and payload bits rather than a canonical NaN.
		return math.Float32frombits(uint32(h&0x8000)<<16 | 0x7f800000 | uint32(h&0x03ff)<<13)
	}
	return float32(halfFormat.decode(h))
}

// F32ToBF16 rounds f to bfloat16 (nearest even; NaN stays a quiet NaN).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x0040
	}
	// bfloat16 is the top half of a float32: add half an ulp of the kept
	// part, plus one more when the kept part is odd, and truncate. A carry
	// into the exponent is the right answer, including overflow to inf.
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BF16ToF32 widens a bfloat16 to float32 (exact).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// RoundTo returns v as a dtype-typed element would hold it: rounded to the
// float format, or cast to the integer or bool by the cast rules.
func RoundTo(dt ir.DType, v float64) float64 {
	switch dt {
	case ir.F64:
		return v
	case ir.F32:
		return float64(float32(v))
	case ir.F16:
		if v != v {
			return v
		}
		return halfFormat.decode(halfFormat.encode(v))
	case ir.BF16:
		if v != v {
			return v
		}
		return bfloatFormat.decode(bfloatFormat.encode(v))
	case ir.I32, ir.I64, ir.Bool:
		return float64(FloatToInt(dt, v))
	}
	return v
}

// FloatToInt casts a float to an integer dtype (or bool) by the cast rules:
// truncate toward zero, NaN is 0, out-of-range values saturate; bool is
// v != 0 (so NaN is true).
func FloatToInt(dt ir.DType, v float64) int64 {
	switch dt {
	case ir.Bool:
		if v != 0 {
			return 1
		}
		return 0
	case ir.I32:
		switch {
		case v != v:
			return 0
		case v >= math.MaxInt32:
			return math.MaxInt32
		case v <= math.MinInt32:
			return math.MinInt32
		}
		return int64(v)
	default:
		switch {
		case v != v:
			return 0
		case v >= 0x1p63:
			return math.MaxInt64
		case v <= -0x1p63:
			return math.MinInt64
		}
		return int64(v)
	}
}

// WrapInt returns v wrapped (two's complement) to an integer dtype, or 0/1
// for bool.
func WrapInt(dt ir.DType, v int64) int64 {
	switch dt {
	case ir.I32:
		return int64(int32(v))
	case ir.Bool:
		if v != 0 {
			return 1
		}
		return 0
	}
	return v
}

// LoadFloat reads element i of a little-endian dt array as a float64.
func LoadFloat(dt ir.DType, b []byte, i int64) float64 {
	switch dt {
	case ir.F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[i*4:])))
	case ir.F64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b[i*8:]))
	case ir.F16:
		return float64(F16ToF32(binary.LittleEndian.Uint16(b[i*2:])))
	case ir.BF16:
		return float64(BF16ToF32(binary.LittleEndian.Uint16(b[i*2:])))
	case ir.I32:
		return float64(int32(binary.LittleEndian.Uint32(b[i*4:])))
	case ir.I64:
		return float64(int64(binary.LittleEndian.Uint64(b[i*8:])))
	case ir.Bool:
		if b[i] != 0 {
			return 1
		}
		return 0
	}
	return 0
}

// StoreFloat writes v as element i of a little-endian dt array, rounding to
// nearest even for floats and casting by the cast rules for ints and bool.
func StoreFloat(dt ir.DType, b []byte, i int64, v float64) {
	switch dt {
	case ir.F32:
		binary.LittleEndian.PutUint32(b[i*4:], math.Float32bits(float32(v)))
	case ir.F64:
		binary.LittleEndian.PutUint64(b[i*8:], math.Float64bits(v))
	case ir.F16:
		var h uint16
		if f := float32(v); v != v || float64(f) == v {
			h = F32ToF16(f) // exact in f32: the fast path rounds once
		} else {
			h = halfFormat.encode(v)
		}
		binary.LittleEndian.PutUint16(b[i*2:], h)
	case ir.BF16:
		var h uint16
		if f := float32(v); v != v || float64(f) == v {
			h = F32ToBF16(f)
		} else {
			h = bfloatFormat.encode(v)
		}
		binary.LittleEndian.PutUint16(b[i*2:], h)
	case ir.I32, ir.I64, ir.Bool:
		StoreInt(dt, b, i, FloatToInt(dt, v))
	}
}

// LoadInt reads element i as an int64: exact for integer dtypes, 0/1 for
// bool, and by the float-to-int cast rule for floats.
func LoadInt(dt ir.DType, b []byte, i int64) int64 {
	switch dt {
	case ir.I32:
		return int64(int32(binary.LittleEndian.Uint32(b[i*4:])))
	case ir.I64:
		return int64(binary.LittleEndian.Uint64(b[i*8:]))
	case ir.Bool:
		if b[i] != 0 {
			return 1
		}
		return 0
	}
	return FloatToInt(ir.I64, LoadFloat(dt, b, i))
}

// StoreInt writes v as element i: wrapped to i32, exact for i64, 0/1 for
// bool, and rounded to nearest for floats.
func StoreInt(dt ir.DType, b []byte, i int64, v int64) {
	switch dt {
	case ir.I32:
		binary.LittleEndian.PutUint32(b[i*4:], uint32(int32(v)))
	case ir.I64:
		binary.LittleEndian.PutUint64(b[i*8:], uint64(v))
	case ir.Bool:
		if v != 0 {
			b[i] = 1
		} else {
			b[i] = 0
		}
	case ir.F32:
		// float32(int64) rounds once, exactly.
		StoreFloat(dt, b, i, float64(float32(v)))
	default:
		// float64(v) is exact for |v| <= 2^53, and f16 overflows long before;
		// a bf16 store of a larger integer rounds twice (to f64, then bf16),
		// which can differ from one rounding only on exact ties.
		StoreFloat(dt, b, i, float64(v))
	}
}
