package ir

import (
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMulChecked(t *testing.T) {
	tests := []struct {
		a, b int64
		want int64
		ok   bool
	}{
		{0, math.MaxInt64, 0, true},
		{math.MinInt64, 0, 0, true},
		{1 << 31, 1 << 31, 1 << 62, true},
		{1 << 32, 1 << 31, 0, false},
		{1 << 32, 1 << 32, 0, false}, // wraps to 0
		{math.MaxInt64, 1, math.MaxInt64, true},
		{math.MaxInt64, 2, 0, false},
		{math.MinInt64, -1, 0, false},
		{-1, math.MinInt64, 0, false},
		{math.MinInt64, 1, math.MinInt64, true},
		{-(1 << 31), 1 << 32, math.MinInt64, true},
		{3, -5, -15, true},
	}
	for _, tt := range tests {
		got, ok := MulChecked(tt.a, tt.b)
		assert.Equal(t, tt.want, got, "MulChecked(%d, %d)", tt.a, tt.b)
		assert.Equal(t, tt.ok, ok, "MulChecked(%d, %d) ok", tt.a, tt.b)
	}
}

func TestProductChecked(t *testing.T) {
	tests := []struct {
		shape []int64
		want  int64
		ok    bool
	}{
		{nil, 1, true},
		{[]int64{4, 8}, 32, true},
		{[]int64{1 << 32, 1 << 32}, 0, false}, // Product wraps this to 0
		{[]int64{1 << 32, (1 << 32) + 1}, 0, false},
		{[]int64{1 << 32, 1 << 32, 0}, 0, true}, // exactly 0
		{[]int64{0, -1}, 0, false},
		{[]int64{1 << 62, 2}, 0, false},
		{[]int64{1 << 61, 2, 2}, 0, false},
		{[]int64{1 << 61, 2}, 1 << 62, true},
		{[]int64{math.MaxInt64}, math.MaxInt64, true},
		{[]int64{-4}, 0, false},
	}
	for _, tt := range tests {
		got, ok := ProductChecked(tt.shape)
		assert.Equal(t, tt.want, got, "ProductChecked(%v)", tt.shape)
		assert.Equal(t, tt.ok, ok, "ProductChecked(%v) ok", tt.shape)
	}
	assert.Equal(t, "55340232221128654848", BigProduct([]int64{1 << 32, 1 << 32, 3}).String(), "BigProduct")
}

func TestSizeError(t *testing.T) {
	tests := []struct {
		t    *TensorType
		want string
	}{
		{Tensor(F32, 8, 16), ""},
		// 2^61 f32 elements are 2^63 bytes: one past the limit
		{Tensor(F32, 1<<30, 1<<30, 2), "9223372036854775808 bytes (2305843009213693952 elements of 4 bytes) do not fit in a 64-bit size"},
		{Tensor(F64, 1<<30, 1<<29), ""},   // 2^59 elements, 2^62 bytes
		{Tensor(Bool, math.MaxInt64), ""}, // one byte each: fits exactly
		{Tensor(I32, math.MaxInt64), "36893488147419103228 bytes (9223372036854775807 elements of 4 bytes) do not fit in a 64-bit size"},
		{Tensor(F32, 4611686018427387904, 4), "18446744073709551616 elements do not fit in a 64-bit size"},
		{Tensor(F16, 1<<62), "9223372036854775808 bytes (4611686018427387904 elements of 2 bytes) do not fit in a 64-bit size"},
		{Tensor(F32, 4, -2), "axis 1 has extent -2; an extent must be at least 1"},
		{Tensor(F32, 0, 1<<40, 1<<40), "axis 0 has extent 0; an extent must be at least 1"},
		{Tensor(F32), ""},
	}
	for _, tt := range tests {
		got := ""
		if err := tt.t.SizeError(); err != nil {
			got = err.Error()
		}
		assert.Equal(t, tt.want, got, "%s: SizeError()", tt.t)
	}
}

// TestLoopTrips compares the trip count and last index with a loop in
// big integers, near zero and at the int64 limits, where from + step and
// to - from overflow.
func TestLoopTrips(t *testing.T) {
	const maxI, minI = math.MaxInt64, math.MinInt64
	bounds := []int64{minI, minI + 1, minI + 2, -7, -1, 0, 1, 2, 7, maxI - 2, maxI - 1, maxI}
	steps := []int64{1, 2, 3, 7, 1 << 62, maxI - 1, maxI}
	for _, from := range bounds {
		for _, to := range bounds {
			for _, step := range steps {
				want, wantLast := bigLoop(from, to, step)
				assert.Equal(t, want, LoopTrips(from, to, step), "LoopTrips(%d, %d, %d)", from, to, step)
				if want > 0 {
					assert.Equal(t, wantLast, LoopLast(from, to, step), "LoopLast(%d, %d, %d)", from, to, step)
				}
			}
		}
	}
	for _, step := range []int64{0, -1, minI} {
		assert.Equal(t, uint64(0), LoopTrips(0, 10, step), "LoopTrips(0, 10, %d)", step)
	}
	assert.Equal(t, uint64(math.MaxUint64), LoopTrips(minI, maxI, 1), "LoopTrips over the whole range, want 2^64-1")
}

// bigLoop counts the trips of a loop exactly; the count and the last index
// (only for loops of at most a few trips: the others are computed).
func bigLoop(from, to, step int64) (uint64, int64) {
	if from >= to {
		return 0, 0
	}
	span := new(big.Int).Sub(big.NewInt(to), big.NewInt(from))
	span.Sub(span, big.NewInt(1))
	n := new(big.Int).Quo(span, big.NewInt(step))
	last := new(big.Int).Mul(n, big.NewInt(step))
	last.Add(last, big.NewInt(from))
	n.Add(n, big.NewInt(1))
	return n.Uint64(), last.Int64()
}

func TestPeerDoesNotOverflow(t *testing.T) {
	for _, tt := range []struct {
		off        int64
		rank, size int
		want       int
	}{
		{1, 3, 4, 0},
		{-1, 0, 4, 3},
		{math.MaxInt64, 3, 4, (3 + 3) % 4}, // MaxInt64 ≡ 3 mod 4
		{math.MinInt64, 1, 3, 2},           // -2^63 ≡ 1 mod 3
		{math.MaxInt64, 6, 7, 6},           // 2^63-1 ≡ 0 mod 7
	} {
		op := &Op{Code: OpSend, Attrs: []Attr{{Key: "peer", Value: AttrValue{Kind: KindPeer, Int: tt.off, Relative: true}}}}
		assert.Equal(t, tt.want, op.Peer(tt.rank, tt.size), "peer=%+d on rank %d of %d", tt.off, tt.rank, tt.size)
	}
}
