package ir

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// pick_stream numbers iterations, not index values: (i-from)/step rounded
// down, modulo the streams, for every int64.
func TestPickedStream(t *testing.T) {
	pick := func(from, step int64) *Op {
		op := &Op{Code: OpPickStream}
		if from != 0 {
			op.SetAttr("from", AttrValue{Kind: KindInt, Int: from})
		}
		if step != 1 {
			op.SetAttr("step", AttrValue{Kind: KindInt, Int: step})
		}
		return op
	}
	for _, tc := range []struct {
		from, step, i int64
		n, want       int
	}{
		{0, 1, 0, 2, 0}, {0, 1, 1, 2, 1}, {0, 1, 5, 2, 1}, {0, 1, 7, 3, 1},
		{-4, 4, -4, 3, 0}, {-4, 4, 0, 3, 1}, {-4, 4, 4, 3, 2}, {-4, 4, 8, 3, 0},
		{2, 2, 3, 2, 0},                         // between iterations: rounded down
		{0, 1, -1, 3, 2},                        // before the first iteration: modulo, never negative
		{4, 3, 0, 4, 2},                         // (0-4)/3 rounds down to -2, -2 mod 4 = 2
		{math.MinInt64, 1, math.MaxInt64, 2, 1}, // 2^64-1 iterations on: exact
		{math.MaxInt64, 1, math.MinInt64, 3, 0}, // -(2^64-1) mod 3 = 0
		{0, 1, 9, 1, 0},
	} {
		got := pick(tc.from, tc.step).PickedStream(tc.i, tc.n)
		require.Equal(t, tc.want, got, "from=%d step=%d i=%d n=%d", tc.from, tc.step, tc.i, tc.n)
	}
}

func TestVerifyLoopStreams(t *testing.T) {
	b := NewBuilder(LinearMesh(1))
	loop := b.For("i", 0, 4, 1, func(*Value) {})
	for _, n := range []int64{0, -2} {
		loop.SetAttr("streams", AttrValue{Kind: KindInt, Int: n})
		_, err := b.Program()
		require.Error(t, err)
		require.Contains(t, err.Error(), "for: streams must be at least 1")
	}
	loop.SetAttr("streams", AttrValue{Kind: KindInt, Int: 2})
	_, err := b.Program()
	require.NoError(t, err)
	require.Equal(t, int64(2), loop.Streams())
	require.Equal(t, "for %i = 0 to 4 streams 2 {\n}", loop.String())
}
