package gpu

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/runtime/internal/dl"
)

func TestProbeWithoutDriverSaysWhy(t *testing.T) {
	_, err := OpenDriver("/nonexistent/libcuda.so.1")
	require.Error(t, err, "a missing library loaded")
	msg := ProbeResult{Reason: NoDriverReason(err), Advice: RunOnCPU}.Unavailable()
	want := []string{"/nonexistent/libcuda.so.1", "no usable NVIDIA driver", "--backend sim"}
	if goruntime.GOOS != "linux" {
		want = []string{"the cuda backend needs linux", "--backend sim"}
	}
	for _, w := range want {
		assert.Contains(t, msg, w, "reason")
	}
}

// Off linux no NVIDIA library is ever loaded, and the probe says so first.
func TestProbeOffLinuxSaysItNeedsLinux(t *testing.T) {
	err := fmt.Errorf("cannot load libcuda.so.1: %w", dl.ErrNeedsLinux)
	assert.Equal(t, "the cuda backend needs linux (this hirrun is built for "+goruntime.GOOS+"/"+goruntime.GOARCH+
		")", NoDriverReason(err))
	if goruntime.GOOS != "linux" {
		assert.Equal(t, NoDriverReason(err), Probe().Reason, "Probe")
	}
}

// On a machine without a GPU, opening the backend is a plain error.
type fakeDriver struct {
	initErr error
	devices int
	attrs   map[int]int
}

func (f *fakeDriver) init() error                      { return f.initErr }
func (f *fakeDriver) DriverVersion() (int, error)      { return 13000, nil }
func (f *fakeDriver) deviceCount() (int, error)        { return f.devices, nil }
func (f *fakeDriver) GetDevice(o int) (int32, error)   { return int32(o), nil }
func (f *fakeDriver) deviceName(int32) (string, error) { return "Fake GPU", nil }
func (f *fakeDriver) totalMem(int32) (uint64, error)   { return 80 << 30, nil }
func (f *fakeDriver) attribute(a int, _ int32) (int, error) {
	v, ok := f.attrs[a]
	if !ok {
		return 0, &Error{Call: "cuDeviceGetAttribute", Code: ErrInvalidValue, Name: "CUDA_ERROR_INVALID_VALUE"}
	}
	return v, nil
}

func goodAttrs() map[int]int {
	return map[int]int{AttrComputeCapabilityMajor: 9, AttrComputeCapabilityMinor: 0, AttrMultiprocessorCount: 132,
		AttrUnifiedAddressing: 1, AttrVirtualMemoryManagement: 1, AttrHandleTypePosixFD: 1, AttrHandleTypeFabric: 1}
}

func TestProbeMessages(t *testing.T) {
	noVMM, noFD, noFabric := goodAttrs(), goodAttrs(), goodAttrs()
	noVMM[AttrVirtualMemoryManagement] = 0
	noFD[AttrHandleTypePosixFD] = 0
	delete(noFabric, AttrHandleTypeFabric) // an old driver that does not know the attribute
	cases := []struct {
		name string
		drv  *fakeDriver
		want string // "" means available
	}{
		{"good", &fakeDriver{devices: 2, attrs: goodAttrs()}, ""},
		{"old driver without fabric", &fakeDriver{devices: 1, attrs: noFabric}, ""},
		{"no device", &fakeDriver{initErr: &Error{Call: "cuInit", Code: ErrNoDevice, Name: "CUDA_ERROR_NO_DEVICE"}}, "sees no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE"},
		{"init fails", &fakeDriver{initErr: errors.New("boom")}, "did not initialise: boom"},
		{"zero devices", &fakeDriver{devices: 0}, "sees no CUDA device"},
		{"no VMM", &fakeDriver{devices: 1, attrs: noVMM}, "device 0 (Fake GPU) does not support virtual memory management"},
		{"no POSIX fds", &fakeDriver{devices: 1, attrs: noFD}, "cannot export allocations to POSIX file descriptors"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := ProbeWith(c.drv, "fake")
			if c.want == "" {
				require.True(t, res.Available, "want available with %d devices, got %+v", c.drv.devices, res)
				require.Len(t, res.Devices, c.drv.devices, "want available with %d devices, got %+v", c.drv.devices, res)
				return
			}
			require.False(t, res.Available, "reason %q, want it to contain %q", res.Reason, c.want)
			require.Contains(t, res.Reason, c.want, "reason")
		})
	}
}
