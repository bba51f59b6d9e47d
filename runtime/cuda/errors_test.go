package cuda

import (
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestErrorNames(t *testing.T) {
	cases := map[gpu.Result]string{
		0: "CUDA_SUCCESS", 2: "CUDA_ERROR_OUT_OF_MEMORY", 100: "CUDA_ERROR_NO_DEVICE",
		600: "CUDA_ERROR_NOT_READY", 801: "CUDA_ERROR_NOT_SUPPORTED", 12345: "CUresult(12345)",
	}
	for code, want := range cases {
		assert.Equal(t, want, gpu.ResultName(code), "resultName(%d)", code)
	}
}

func TestErrorMessageNamesCallAndCode(t *testing.T) {
	e := &gpu.Error{Call: "cuMemCreate", Code: gpu.ErrOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY", Desc: "out of memory"}
	assert.Equal(t, "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (out of memory)", e.Error())
	wrapped := fmt.Errorf("alloc: %w", e)
	assert.True(t, gpu.IsResult(wrapped, gpu.ErrOutOfMemory), "IsResult does not see through wrapping")
	assert.False(t, gpu.IsResult(wrapped, gpu.ErrNoDevice), "IsResult does not see through wrapping")
	err := gpu.Unsupported("collectives (all_gather)")
	assert.ErrorIs(t, err, gpu.ErrUnsupported, "unsupported")
	assert.EqualError(t, err, "unsupported on cuda yet: collectives (all_gather)", "unsupported")
}
