package cuda

import (
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestGraphNodeParamsLayout: graphNodeParams is cuda.h's CUgraphNodeParams
// (256 bytes) with CUDA_CONDITIONAL_NODE_PARAMS at offset 16: handle,
// type, size, phGraph_out, ctx.
func TestGraphNodeParamsLayout(t *testing.T) {
	var p gpu.GraphNodeParams
	assert.Equal(t, uintptr(256), unsafe.Sizeof(p))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(p.Handle))
	assert.Equal(t, uintptr(24), unsafe.Offsetof(p.CondType))
	assert.Equal(t, uintptr(28), unsafe.Offsetof(p.Size))
	assert.Equal(t, uintptr(32), unsafe.Offsetof(p.BodiesOut))
	assert.Equal(t, uintptr(40), unsafe.Offsetof(p.Ctx))
}
