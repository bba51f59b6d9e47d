package cu

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Driver is libcuda: one Proc per entry point runtime/cuda uses, resolved
// when the library opens. Where cuda.h maps the plain name to a versioned
// symbol (cuMemAlloc to cuMemAlloc_v2, ...), the tag lists that symbol
// first; errors name the entry point by its plain name.
type Driver struct {
	library

	// Probe and devices.
	Init                Proc `cu:"cuInit"`
	DriverGetVersion    Proc `cu:"cuDriverGetVersion"`
	DeviceGetCount      Proc `cu:"cuDeviceGetCount"`
	DeviceGet           Proc `cu:"cuDeviceGet"`
	DeviceGetName       Proc `cu:"cuDeviceGetName"`
	DeviceGetAttribute  Proc `cu:"cuDeviceGetAttribute"`
	DeviceTotalMem      Proc `cu:"cuDeviceTotalMem_v2 cuDeviceTotalMem"`
	DeviceCanAccessPeer Proc `cu:"cuDeviceCanAccessPeer"`
	GetErrorName        Proc `cu:"cuGetErrorName"`
	GetErrorString      Proc `cu:"cuGetErrorString"`

	// Contexts.
	DevicePrimaryCtxRetain  Proc `cu:"cuDevicePrimaryCtxRetain"`
	DevicePrimaryCtxRelease Proc `cu:"cuDevicePrimaryCtxRelease_v2 cuDevicePrimaryCtxRelease"`
	CtxSetCurrent           Proc `cu:"cuCtxSetCurrent"`
	CtxSynchronize          Proc `cu:"cuCtxSynchronize"`

	// Memory.
	MemGetInfo                   Proc `cu:"cuMemGetInfo_v2 cuMemGetInfo"`
	MemAlloc                     Proc `cu:"cuMemAlloc_v2 cuMemAlloc"`
	MemFree                      Proc `cu:"cuMemFree_v2 cuMemFree"`
	MemAllocAsync                Proc `cu:"cuMemAllocAsync"`
	DeviceGetDefaultMemPool      Proc `cu:"cuDeviceGetDefaultMemPool"`
	MemPoolSetAttribute          Proc `cu:"cuMemPoolSetAttribute"`
	MemFreeAsync                 Proc `cu:"cuMemFreeAsync"`
	MemHostAlloc                 Proc `cu:"cuMemHostAlloc"`
	MemFreeHost                  Proc `cu:"cuMemFreeHost"`
	MemHostGetDevicePointer      Proc `cu:"cuMemHostGetDevicePointer_v2 cuMemHostGetDevicePointer"`
	MemsetD8                     Proc `cu:"cuMemsetD8_v2 cuMemsetD8"`
	MemsetD8Async                Proc `cu:"cuMemsetD8Async"`
	MemcpyAsync                  Proc `cu:"cuMemcpyAsync"`
	MemcpyHtoDAsync              Proc `cu:"cuMemcpyHtoDAsync_v2 cuMemcpyHtoDAsync"`
	MemcpyDtoHAsync              Proc `cu:"cuMemcpyDtoHAsync_v2 cuMemcpyDtoHAsync"`
	MemCreate                    Proc `cu:"cuMemCreate"`
	MemRelease                   Proc `cu:"cuMemRelease"`
	MemGetAllocationGranularity  Proc `cu:"cuMemGetAllocationGranularity"`
	MemExportToShareableHandle   Proc `cu:"cuMemExportToShareableHandle"`
	MemImportFromShareableHandle Proc `cu:"cuMemImportFromShareableHandle"`
	MemAddressReserve            Proc `cu:"cuMemAddressReserve"`
	MemAddressFree               Proc `cu:"cuMemAddressFree"`
	MemMap                       Proc `cu:"cuMemMap"`
	MemUnmap                     Proc `cu:"cuMemUnmap"`
	MemSetAccess                 Proc `cu:"cuMemSetAccess"`

	// Streams and events.
	StreamCreate      Proc `cu:"cuStreamCreate"`
	StreamDestroy     Proc `cu:"cuStreamDestroy_v2 cuStreamDestroy"`
	StreamSynchronize Proc `cu:"cuStreamSynchronize"`
	StreamWaitEvent   Proc `cu:"cuStreamWaitEvent"`
	EventCreate       Proc `cu:"cuEventCreate"`
	EventDestroy      Proc `cu:"cuEventDestroy_v2 cuEventDestroy"`
	EventRecord       Proc `cu:"cuEventRecord"`
	EventSynchronize  Proc `cu:"cuEventSynchronize"`
	EventQuery        Proc `cu:"cuEventQuery"`
	EventElapsedTime  Proc `cu:"cuEventElapsedTime_v2 cuEventElapsedTime"`

	// Modules and launches.
	ModuleLoadData    Proc `cu:"cuModuleLoadData"`
	ModuleUnload      Proc `cu:"cuModuleUnload"`
	ModuleGetFunction Proc `cu:"cuModuleGetFunction"`
	LaunchKernel      Proc `cu:"cuLaunchKernel"`
	LaunchKernelEx    Proc `cu:"cuLaunchKernelEx"` // CUDA 12.0: launch attributes (programmatic dependent launch)

	// Graphs: stream capture, instantiation, launch.
	StreamBeginCapture        Proc `cu:"cuStreamBeginCapture_v2 cuStreamBeginCapture"`
	StreamEndCapture          Proc `cu:"cuStreamEndCapture"`
	StreamIsCapturing         Proc `cu:"cuStreamIsCapturing"`
	GraphInstantiateWithFlags Proc `cu:"cuGraphInstantiateWithFlags"`
	GraphLaunch               Proc `cu:"cuGraphLaunch"`
	GraphGetNodes             Proc `cu:"cuGraphGetNodes"`
	GraphExecDestroy          Proc `cu:"cuGraphExecDestroy"`
	GraphDestroy              Proc `cu:"cuGraphDestroy"`

	// Device loops (graph_loop.go): conditional nodes, CUDA 12.4 and later.
	StreamGetCaptureInfo            Proc `cu:"cuStreamGetCaptureInfo_v3"`
	StreamUpdateCaptureDependencies Proc `cu:"cuStreamUpdateCaptureDependencies"`
	StreamBeginCaptureToGraph       Proc `cu:"cuStreamBeginCaptureToGraph"`
	GraphConditionalHandleCreate    Proc `cu:"cuGraphConditionalHandleCreate"`
	GraphAddNode                    Proc `cu:"cuGraphAddNode_v2"`
}

// OpenDriver opens the driver library at path and resolves its entry
// points. Only a library that does not load is an error here.
func OpenDriver(path string) (*Driver, error) {
	h, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot load %s: %w", path, err)
	}
	d := &Driver{library: library{path: path, handle: h}}
	d.fail = d.errorFor
	d.resolve(d)
	return d, nil
}

// errorFor builds the error for a failed call, naming the code through
// cuGetErrorName (and cuGetErrorString) when the driver has them.
func (d *Driver) errorFor(call string, r uintptr) error {
	res := Result(int32(r))
	e := &Error{Call: call, Code: res, Name: ResultName(res)}
	if p := d.GetErrorName.addr; p != 0 {
		var s *byte
		if r, _, _ := purego.SyscallN(p, uintptr(res), uintptr(unsafe.Pointer(&s))); r == 0 && s != nil {
			e.Name = GoString(s)
		}
	}
	if p := d.GetErrorString.addr; p != 0 {
		var s *byte
		if r, _, _ := purego.SyscallN(p, uintptr(res), uintptr(unsafe.Pointer(&s))); r == 0 && s != nil {
			e.Desc = GoString(s)
		}
	}
	return e
}
