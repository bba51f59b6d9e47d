package evaluator_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
)

// An op result past the CPU runtime's memory limit is a
// *runtime.OutOfMemoryError that errors.As finds through the evaluator's
// wrapping (rank, op position).
func TestOutOfMemoryIsTypedEndToEnd(t *testing.T) {
	src := "mesh 2\ninput %x : f32[1024, 256]\n%y = add %x, 1.0\n%z = mul %y, %y\noutput %z\n"
	const limit = 2 << 20 // each rank's input is 1 MiB: no room for a result
	_, _, job := simJob(t, "oom.hir", src, runtime.Config{}, sim.Options{MemoryLimit: limit})
	_, err := job.Run(map[string]*host.Array{"x": host.Random(ir.F32, []int64{1024, 256}, 1)})
	var oom *runtime.OutOfMemoryError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, int64(limit), oom.Limit, "fields: %+v", oom)
	assert.Greater(t, oom.Asked, oom.Free, "fields: %+v", oom)
	assert.Equal(t, "the CPU runtime", oom.Where, "fields: %+v", oom)
	assert.ErrorContains(t, err, "out of memory: ", "message")
	assert.ErrorContains(t, err, "free of its 2.00 MiB limit", "message")
	// A kernel fails when its stream runs it, after the host has moved
	// on: the error still names the op that enqueued it. (Which allocation
	// fails first depends on how the ranks interleave: a rank that runs
	// ahead may leave its peer no room for its input or outputs, which
	// name the input or output instead.)
	var re *evaluator.RunError
	require.ErrorAs(t, err, &re, "want a RunError with a position")
	require.True(t, re.Pos.IsValid(), "want a RunError with a position, got %v", err)
	if re.Op != nil {
		assert.Equal(t, ir.OpFusion, re.Op.Code, "want a RunError naming the fused add/mul at oom.hir:3, got %v", err)
		assert.Equal(t, int32(3), re.Pos.Line, "want a RunError naming the fused add/mul at oom.hir:3, got %v", err)
		assert.True(t, strings.HasPrefix(err.Error(), "oom.hir:3:"), "want a RunError naming the fused add/mul at oom.hir:3, got %v", err)
	}
}

// The outputs read back to the host take from the CPU runtime's budget
// too (runtime.HostMemory), until the next Run: an output that fits as a
// buffer but not twice over is an out-of-memory error naming it, and a
// failed Run gives the budget back (the next fails the same way, no sooner).
func TestOutputsReadBackAreBudgeted(t *testing.T) {
	src := "mesh 2\ninput %x : f32[64, 1024]\n%y = copy %x\noutput %y\n"
	// each rank holds x and y (256 KiB each) on the device: 1 MiB in all;
	// reading y back on both ranks needs 512 KiB more
	const limit = 1<<20 + 256<<10
	_, _, job := simJob(t, "out.hir", src, runtime.Config{}, sim.Options{MemoryLimit: limit})
	in := map[string]*host.Array{"x": host.Random(ir.F32, []int64{64, 1024}, 1)}
	for run := 1; run <= 2; run++ {
		_, err := job.Run(in)
		var oom *runtime.OutOfMemoryError
		require.ErrorAs(t, err, &oom, "run %d: want an out-of-memory error reading %%y back", run)
		require.ErrorContains(t, err, "output %y read back to the host", "run %d", run)
		require.Equal(t, int64(256<<10), oom.Asked, "run %d: bytes asked to read %%y back", run)
	}
}
