package host

import (
	"encoding/binary"
	"math"
	goruntime "runtime"
	"sync"
	"sync/atomic"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
)

// splitMix64 is the SplitMix64 generator (Steele, Lea and Flood, 2014):
// a 64-bit state advanced by a fixed odd constant and a mixing function.
// It is written out here, rather than taken from math/rand, so the values
// a seed gives never change with the Go release or the platform: golden
// files and cross-backend comparisons rely on them.
type splitMix64 struct{ state uint64 }

// splitMixGamma is the constant the state advances by.
const splitMixGamma = 0x9e3779b97f4a7c15

func (g *splitMix64) next() uint64 {
	g.state += splitMixGamma
	z := g.state
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Random returns an array filled from SplitMix64 seeded with seed, one
// 64-bit draw per element in row-major order:
//   - floats: the top 53 bits give u uniform in [0, 1); the element is
//     2u − 1 rounded to the dtype (nearest even), and a value that rounds up
//     to 1 becomes the dtype's largest value below 1, so all lie in [−1, 1);
//   - i32, i64: the top 4 bits minus 8, uniform in [−8, 8);
//   - bool: the top bit.
//
// The same seed, dtype and shape give the same array on every platform.
func Random(dt ir.DType, shape []int64, seed uint64) *Array {
	a := New(dt, shape)
	n := a.Len()
	// Draw i is the generator's (i+1)-th output whatever came before it
	// (the state only advances by a constant), so chunks of the array are
	// filled in parallel from their own starting states, every element
	// exactly as one pass would make it: a 64 MiB bf16 input took 2.9 s to
	// make one element at a time (hirrun run's start-up, issue 22).
	fill := randomFiller(dt, a)
	workers := int64(goruntime.GOMAXPROCS(0))
	chunks := (n + randomChunk - 1) / randomChunk
	if workers <= 1 || chunks <= 1 {
		fill(0, n, seed)
		return a
	}
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range min(workers, chunks) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := next.Add(1) - 1; c < chunks; c = next.Add(1) - 1 {
				lo := c * randomChunk
				fill(lo, min(lo+randomChunk, n), seed+uint64(lo)*splitMixGamma)
			}
		}()
	}
	wg.Wait()
	return a
}

// randomChunk is the elements one worker of Random fills at a time.
const randomChunk = 1 << 16

// randomFiller returns what fills elements [lo, hi) of a from a generator
// whose state is start: a loop of its own per dtype, the common ones
// storing bits directly, the rest through numeric's rounding and stores
// (TestRandomChunksEqualOnePass holds every path equal to that one).
func randomFiller(dt ir.DType, a *Array) func(lo, hi int64, start uint64) {
	below1 := largestBelowOne(dt)
	b := a.Data
	switch dt {
	case ir.BF16, ir.F16:
		// 16-bit floats: our own nearest-even from float64, and the bits of
		// 1.0 (a draw that rounds up to it) replaced by the top below 1.
		nearest, one := bf16Nearest, uint16(0x3f80)
		if dt == ir.F16 {
			nearest, one = f16Nearest, 0x3c00
		}
		top := nearest(below1)
		return func(lo, hi int64, start uint64) {
			g := splitMix64{state: start}
			for i := lo; i < hi; i++ {
				h := nearest(2*(float64(g.next()>>11)*0x1p-53) - 1)
				if h == one {
					h = top
				}
				binary.LittleEndian.PutUint16(b[2*i:], h)
			}
		}
	case ir.F32:
		top := float32(below1)
		return func(lo, hi int64, start uint64) {
			g := splitMix64{state: start}
			for i := lo; i < hi; i++ {
				v := float32(2*(float64(g.next()>>11)*0x1p-53) - 1)
				if v >= 1 {
					v = top
				}
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
			}
		}
	case ir.F64:
		return func(lo, hi int64, start uint64) {
			g := splitMix64{state: start}
			for i := lo; i < hi; i++ {
				// 2u − 1 ≤ 1 − 2^−52: never 1.
				binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(2*(float64(g.next()>>11)*0x1p-53)-1))
			}
		}
	}
	return func(lo, hi int64, start uint64) {
		g := splitMix64{state: start}
		for i := lo; i < hi; i++ {
			x := g.next()
			switch {
			case dt.IsFloat():
				v := numeric.RoundTo(dt, 2*(float64(x>>11)*0x1p-53)-1)
				if v >= 1 {
					v = below1
				}
				a.Set(i, v)
			case dt == ir.Bool:
				a.SetInt(i, int64(x>>63))
			default:
				a.SetInt(i, int64(x>>60)-8)
			}
		}
	}
}

// f16Nearest is v's f16 bits, rounded to nearest even straight from
// float64, for |v| < 2 (Random's 2u − 1 and 1 − 2^−11): below 2^−14 onto
// the subnormals' grid of 2^−24 (1024 of it is the smallest normal, and
// its bits say so), else dropping 42 of float64's 52 fraction bits.
func f16Nearest(v float64) uint16 {
	bits := math.Float64bits(v)
	sign := uint16(bits>>63) << 15
	a := math.Abs(v)
	if a < 0x1p-14 {
		return sign | uint16(math.RoundToEven(a*0x1p24))
	}
	const drop = 52 - 10
	bits += 1<<(drop-1) - 1 + (bits>>drop)&1
	exp := int64(bits>>52&0x7ff) - 1023 + 15
	return sign | uint16(exp)<<10 | uint16(bits>>drop&0x3ff)
}

// bf16Nearest is v's bf16 bits, rounded to nearest even straight from
// float64 (one rounding: through float32 would round twice). v is 0 or a
// normal number of magnitude at least 2^−53 (Random's 2u − 1), so its
// bf16 is normal too and the exponent needs no care beyond the carry a
// rounding may make into it.
func bf16Nearest(v float64) uint16 {
	bits := math.Float64bits(v)
	if bits<<1 == 0 {
		return uint16(bits >> 48) // ±0
	}
	const drop = 52 - 7 // float64's 52 fraction bits down to bf16's 7
	bits += 1<<(drop-1) - 1 + (bits>>drop)&1
	sign := uint16(bits>>63) << 15
	exp := int64(bits>>52&0x7ff) - 1023 + 127
	return sign | uint16(exp)<<7 | uint16(bits>>drop&0x7f)
}

// largestBelowOne is 1 − 2^−p for a float dtype with p significand bits.
func largestBelowOne(dt ir.DType) float64 {
	bits := map[ir.DType]int{ir.F64: 53, ir.F32: 24, ir.F16: 11, ir.BF16: 8}[dt]
	return 1 - math.Ldexp(1, -bits)
}
