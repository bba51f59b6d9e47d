package ir_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

// nestedLoops is a program of depth loops of trips trips each around a
// tiny body.
func nestedLoops(depth, trips int) string {
	var b strings.Builder
	b.WriteString("mesh 1\ninput %x : f32[4]\n%acc = copy %x mem=global\n")
	for i := range depth {
		fmt.Fprintf(&b, "%sfor %%i%d = 0 to %d {\n", strings.Repeat("  ", i), i, trips)
	}
	fmt.Fprintf(&b, "%s%%y = mul %%acc, 1.5\n%s%%c = copy %%y, %%acc\n", strings.Repeat("  ", depth), strings.Repeat("  ", depth))
	for i := depth - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "%s}\n", strings.Repeat("  ", i))
	}
	b.WriteString("output %acc\n")
	return b.String()
}

// TestDeviceLoopFacts: which loops run on the device, how far they
// unroll, and what stops a loop, on loops nested 1 to 40 deep (the facts
// are worked out once per loop: nesting 40 deep answers at once, where
// asking each inner loop again at every level took minutes past 18).
func TestDeviceLoopFacts(t *testing.T) {
	for _, depth := range []int{1, 2, 3, 40} {
		prog, err := parser.Parse("nested.hir", []byte(nestedLoops(depth, 1000)))
		require.NoError(t, err)
		loops := ir.DeviceLoops(prog)
		require.Len(t, loops, 1, "depth %d", depth)
		inner := loops[0].Op
		assert.Equal(t, uint64(32), ir.DeviceLoopUnroll(inner), "depth %d: a 2-op body unrolled to 64 ops", depth)
		assert.Empty(t, inner.Body.Ops[0].Body, "depth %d: the device loop is the innermost", depth)
		if depth == 1 {
			assert.Empty(t, ir.CaptureBlockers(prog))
			continue
		}
		outer := prog.Body.Ops[1]
		assert.False(t, ir.IsDeviceLoop(outer), "depth %d", depth)
		assert.Contains(t, ir.DeviceLoopBlocker(outer), "device loops do not nest", "depth %d", depth)
		if depth >= 3 { // 1000 x 1000 trips of the inner loop's node: too many
			blockers := ir.CaptureBlockers(prog)
			require.Len(t, blockers, 1, "depth %d", depth)
			assert.Same(t, outer, blockers[0].Op)
		}
	}
	// a body reading the index unrolls, saying why
	prog, err := parser.Parse("indexed.hir", []byte("mesh 1\ninput %x : f32[1000, 4]\n%acc = alloc : f32[4]\nfor %i = 0 to 1000 {\n  %v = select %x, %i axis=0\n  %c = copy %v, %acc\n}\noutput %acc\n"))
	require.NoError(t, err)
	loop := prog.Body.Ops[1]
	assert.False(t, ir.IsDeviceLoop(loop))
	assert.Equal(t, "indexed.hir:5:8: select reads the loop index %i", ir.DeviceLoopBlocker(loop))
}
