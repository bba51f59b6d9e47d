package cuda

import (
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The sizes and offsets cuda.h gives these structs on 64-bit Linux.
func TestStructLayoutsMatchCudaH(t *testing.T) {
	var prop gpu.MemAllocationProp
	var desc gpu.MemAccessDesc
	cases := []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(CUmemLocation)", unsafe.Sizeof(gpu.MemLocation{}), 8},
		{"sizeof(CUmemAllocationProp)", unsafe.Sizeof(prop), 32},
		{"offsetof(CUmemAllocationProp, requestedHandleTypes)", unsafe.Offsetof(prop.RequestedHandleTypes), 4},
		{"offsetof(CUmemAllocationProp, location)", unsafe.Offsetof(prop.Location), 8},
		{"offsetof(CUmemAllocationProp, win32HandleMetaData)", unsafe.Offsetof(prop.Win32HandleMetaData), 16},
		{"offsetof(CUmemAllocationProp, allocFlags)", unsafe.Offsetof(prop.CompressionType), 24},
		{"offsetof(CUmemAllocationProp, allocFlags.usage)", unsafe.Offsetof(prop.Usage), 26},
		{"sizeof(CUmemAccessDesc)", unsafe.Sizeof(desc), 12},
		{"offsetof(CUmemAccessDesc, flags)", unsafe.Offsetof(desc.Flags), 8},
		{"sizeof(CUmemFabricHandle)", unsafe.Sizeof(gpu.MemFabricHandle{}), 64},
		{"sizeof(CUmemGenericAllocationHandle)", unsafe.Sizeof(uint64(0)), 8},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, c.got, "%s, as cuda.h says", c.name)
	}
	assert.Equal(t, 0x1, gpu.HandleTypePosix, "handle type posix, as cuda.h says")
	assert.Equal(t, 0x8, gpu.HandleTypeFabric, "handle type fabric, as cuda.h says")
}

func TestHandleInfoRoundTrip(t *testing.T) {
	in := gpu.HandleInfo{OK: true, Fabric: true, Size: 1000, Rounded: 2 << 20, Err: "none"}
	in.Handle.Data[0], in.Handle.Data[63] = 7, 9
	out, err := gpu.DecodeHandleInfo(in.Encode())
	require.NoError(t, err, "round trip")
	require.Equal(t, in, out, "round trip")
	_, err = gpu.DecodeHandleInfo([]byte{1, 2})
	require.Error(t, err, "short record decoded")
}
