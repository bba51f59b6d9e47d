package runtime

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOutOfMemoryErrorText(t *testing.T) {
	cause := errors.New("cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY")
	for _, c := range []struct {
		e    *OutOfMemoryError
		want string
	}{
		{&OutOfMemoryError{Where: "the CPU runtime", What: "alloc in global memory", Asked: 3 << 20, Free: 1 << 20, Limit: 4 << 20, Hint: "raise it"},
			"out of memory: 3.00 MiB for alloc in global memory does not fit: the CPU runtime has 1.00 MiB free of its 4.00 MiB limit (raise it)"},
		{&OutOfMemoryError{Where: "the host", Asked: 2048, Free: -1, Limit: 1024},
			"out of memory: 2.00 KiB does not fit: the host has a 1.00 KiB limit"},
		{&OutOfMemoryError{Where: "device 0 (H100)", What: "alloc", Asked: 100, Free: -1, Limit: -1, Err: cause},
			"out of memory: 100 bytes for alloc does not fit in device 0 (H100): cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY"},
	} {
		assert.Equal(t, c.want, c.e.Error())
	}
	wrapped := fmt.Errorf("rank 3: %w", &OutOfMemoryError{Asked: 1, Err: cause})
	var oom *OutOfMemoryError
	if assert.ErrorAs(t, wrapped, &oom, "errors.As through wrapping") {
		assert.Equal(t, int64(1), oom.Asked)
	}
	assert.ErrorIs(t, wrapped, cause, "errors.Is through wrapping")
}
