package cuda

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestErrorNames(t *testing.T) {
	cases := map[Result]string{
		0: "CUDA_SUCCESS", 2: "CUDA_ERROR_OUT_OF_MEMORY", 100: "CUDA_ERROR_NO_DEVICE",
		600: "CUDA_ERROR_NOT_READY", 801: "CUDA_ERROR_NOT_SUPPORTED", 12345: "CUresult(12345)",
	}
	for code, want := range cases {
		assert.Equal(t, want, resultName(code), "resultName(%d)", code)
	}
}

func TestErrorMessageNamesCallAndCode(t *testing.T) {
	e := &Error{Call: "cuMemCreate", Code: errOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY", Desc: "out of memory"}
	assert.Equal(t, "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (out of memory)", e.Error())
	wrapped := fmt.Errorf("alloc: %w", e)
	assert.True(t, IsResult(wrapped, errOutOfMemory), "IsResult does not see through wrapping")
	assert.False(t, IsResult(wrapped, errNoDevice), "IsResult does not see through wrapping")
	err := unsupported("collectives (all_gather)")
	assert.ErrorIs(t, err, ErrUnsupported, "unsupported")
	assert.EqualError(t, err, "unsupported on cuda yet: collectives (all_gather)", "unsupported")
}
