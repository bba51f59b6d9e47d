package runtime_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

func TestStallString(t *testing.T) {
	op := &ir.Op{Code: ir.OpAllReduce, Pos: ir.NewPos("prog.hir", 12, 3)}
	for _, c := range []struct {
		s    runtime.Stall
		want string
	}{
		{runtime.Stall{Rank: 1, What: "all_reduce algo=ring (collective #0)", Label: op, Waited: 5 * time.Second, Waiting: []int{0, 3}},
			"rank 1 has waited 5s at prog.hir:12:3 (all_reduce) for ranks 0, 3"},
		{runtime.Stall{Rank: 0, What: "barrier #2", Waited: 4999871234 * time.Nanosecond, Waiting: []int{2}},
			"rank 0 has waited 5s in barrier #2 for rank 2"},
		{runtime.Stall{Rank: 0, What: `barrier "cuda/barrier/1"`, Waited: time.Second},
			`rank 0 has waited 1s in barrier "cuda/barrier/1" for its peers`},
		{runtime.Stall{Rank: 0, What: "barrier #0", Label: "not an op", Waited: time.Second, Waiting: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
			"rank 0 has waited 1s in barrier #0 for ranks 1, 2, 3, 4, 5, 6, 7, 8, and 2 more"},
	} {
		assert.Equal(t, c.want, c.s.String())
	}
}

func TestStallWatch(t *testing.T) {
	hook := func(runtime.Stall) {}
	assert.Nil(t, runtime.Config{}.StallWatch(), "no hook, no watch")
	w := runtime.Config{Stalled: hook}.StallWatch()
	if assert.NotNil(t, w) {
		assert.Equal(t, runtime.DefaultStallAfter, w.After)
	}
	assert.Nil(t, runtime.Config{Stalled: hook, Timeout: time.Second}.StallWatch(), "the timeout comes first")
	w = runtime.Config{Stalled: hook, Timeout: time.Second, StallAfter: 10 * time.Millisecond}.StallWatch()
	if assert.NotNil(t, w) {
		assert.Equal(t, 10*time.Millisecond, w.After)
	}
}
