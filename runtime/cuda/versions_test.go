package cuda

import (
	"errors"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLibraryVersionString(t *testing.T) {
	assert.Equal(t, "NVRTC: 13.0 (libnvrtc.so.13)", LibraryVersion{Name: "NVRTC", Version: "13.0", Path: "libnvrtc.so.13"}.String())
	assert.Equal(t, "NCCL: not loaded: no libnccl", LibraryVersion{Name: "NCCL", Err: errors.New("no libnccl")}.String())
	assert.Equal(t, "driver: version unknown (libcuda.so.1): cuDriverGetVersion: CUDA_ERROR_UNKNOWN",
		LibraryVersion{Name: "driver", Path: "libcuda.so.1", Err: errors.New("cuDriverGetVersion: CUDA_ERROR_UNKNOWN")}.String())
	assert.Equal(t, "13.0", cudaVersionString(13000))
	assert.Equal(t, "12.8", cudaVersionString(12080))
}

// LibraryVersions names the four libraries, each with a version or why it
// did not load (on a machine without a GPU, every one of them).
func TestLibraryVersions(t *testing.T) {
	vs := LibraryVersions()
	require.Len(t, vs, 4)
	for i, name := range []string{"driver", "NVRTC", "cuBLAS", "NCCL"} {
		v := vs[i]
		assert.Equal(t, name, v.Name)
		if v.Err != nil {
			assert.Empty(t, v.Version, name)
			assert.NotEmpty(t, v.Err.Error(), name)
		} else {
			assert.NotEmpty(t, v.Version, name)
			assert.NotEmpty(t, v.Path, name)
		}
		t.Log(v)
	}
	if _, err := gpu.LoadDriver(); err != nil {
		assert.Error(t, vs[0].Err, "the driver does not load here")
		assert.Empty(t, vs[0].Path)
	}
}
