package cuda

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestGraphNodeParamsLayout: graphNodeParams is cuda.h's CUgraphNodeParams
// (256 bytes) with CUDA_CONDITIONAL_NODE_PARAMS at offset 16: handle,
// type, size, phGraph_out, ctx.
func TestGraphNodeParamsLayout(t *testing.T) {
	var p graphNodeParams
	assert.Equal(t, uintptr(256), unsafe.Sizeof(p))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(p.handle))
	assert.Equal(t, uintptr(24), unsafe.Offsetof(p.condType))
	assert.Equal(t, uintptr(28), unsafe.Offsetof(p.size))
	assert.Equal(t, uintptr(32), unsafe.Offsetof(p.bodiesOut))
	assert.Equal(t, uintptr(40), unsafe.Offsetof(p.ctx))
}
