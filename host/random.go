package host

import (
	"math"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/numeric"
)

// splitMix64 is the SplitMix64 generator (Steele, Lea and Flood, 2014):
// a 64-bit state advanced by a fixed odd constant and a mixing function.
// It is written out here, rather than taken from math/rand, so the values
// a seed gives never change with the Go release or the platform: golden
// files and cross-backend comparisons rely on them.
type splitMix64 struct{ state uint64 }

func (g *splitMix64) next() uint64 {
	g.state += 0x9e3779b97f4a7c15
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
	g := splitMix64{state: seed}
	below1 := largestBelowOne(dt)
	n := a.Len()
	for i := int64(0); i < n; i++ {
		x := g.next()
		switch {
		case dt.IsFloat():
			u := float64(x>>11) * 0x1p-53
			v := numeric.RoundTo(dt, 2*u-1)
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
	return a
}

// largestBelowOne is 1 − 2^−p for a float dtype with p significand bits.
func largestBelowOne(dt ir.DType) float64 {
	bits := map[ir.DType]int{ir.F64: 53, ir.F32: 24, ir.F16: 11, ir.BF16: 8}[dt]
	return 1 - math.Ldexp(1, -bits)
}
