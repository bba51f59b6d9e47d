package gpu

import (
	"os"
	"sync"
	"unsafe"

	"github.com/hirlab/hir/runtime/cuda/internal/cu"
)

// DriverLibrary is the file name the driver is loaded by. HIR_CUDA_LIBCUDA
// overrides it (a full path, or a bogus one to test the no-driver path).
const DriverLibrary = "libcuda.so.1"

// driver is the loaded libcuda: the entry points, resolved once when the
// library opens (internal/cu.Driver), and below, typed wrappers for those
// the package calls from more than one place. Hot paths call the entry
// points directly with the fixed-arity Call1..Call4 and Call11, which
// neither look anything up nor allocate.
type driver struct {
	*cu.Driver
}

var (
	defaultDriverOnce sync.Once
	defaultDriver     *driver
	defaultDriverErr  error
)

// loadDriver opens the process's driver once.
func LoadDriver() (*driver, error) {
	defaultDriverOnce.Do(func() {
		path := DriverLibrary
		if p := os.Getenv("HIR_CUDA_LIBCUDA"); p != "" {
			path = p
		}
		defaultDriver, defaultDriverErr = OpenDriver(path)
	})
	return defaultDriver, defaultDriverErr
}

func OpenDriver(path string) (*driver, error) {
	d, err := cu.OpenDriver(path)
	if err != nil {
		return nil, err
	}
	return &driver{d}, nil
}

// ---- thin wrappers, one per entry point used more than once ----

func (d *driver) init() error { return d.Init.Call1(0) }

func (d *driver) DriverVersion() (int, error) {
	var v int32
	err := d.DriverGetVersion.Call1(uintptr(unsafe.Pointer(&v)))
	return int(v), err
}

func (d *driver) deviceCount() (int, error) {
	var n int32
	err := d.DeviceGetCount.Call1(uintptr(unsafe.Pointer(&n)))
	return int(n), err
}

func (d *driver) GetDevice(ordinal int) (int32, error) {
	var dev int32
	err := d.DeviceGet.Call2(uintptr(unsafe.Pointer(&dev)), uintptr(ordinal))
	return dev, err
}

func (d *driver) deviceName(dev int32) (string, error) {
	buf := make([]byte, 256)
	if err := d.DeviceGetName.Call3(uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(dev)); err != nil {
		return "", err
	}
	return cu.GoString(&buf[0]), nil
}

func (d *driver) attribute(attr int, dev int32) (int, error) {
	var v int32
	err := d.DeviceGetAttribute.Call3(uintptr(unsafe.Pointer(&v)), uintptr(attr), uintptr(dev))
	return int(v), err
}

func (d *driver) totalMem(dev int32) (uint64, error) {
	var n uint64
	err := d.DeviceTotalMem.Call2(uintptr(unsafe.Pointer(&n)), uintptr(dev))
	return n, err
}

func (d *driver) memGetInfo() (free, total uint64, err error) {
	err = d.MemGetInfo.Call2(uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))
	return
}

func (d *driver) SetCurrent(ctx uintptr) error { return d.CtxSetCurrent.Call1(ctx) }

func (d *driver) SyncCtx() error { return d.CtxSynchronize.Call() }

func (d *driver) CreateMem(size uint64, prop *MemAllocationProp) (uint64, error) {
	var h uint64
	err := d.MemCreate.Call4(uintptr(unsafe.Pointer(&h)), uintptr(size), uintptr(unsafe.Pointer(prop)), 0)
	return h, err
}

func (d *driver) ReleaseMem(h uint64) error { return d.MemRelease.Call1(uintptr(h)) }

func (d *driver) granularity(prop *MemAllocationProp, option int) (uint64, error) {
	var g uint64
	err := d.MemGetAllocationGranularity.Call3(uintptr(unsafe.Pointer(&g)), uintptr(unsafe.Pointer(prop)), uintptr(option))
	return g, err
}

func (d *driver) ExportPosixFD(h uint64) (int, error) {
	var fd int32 = -1
	err := d.MemExportToShareableHandle.Call4(uintptr(unsafe.Pointer(&fd)), uintptr(h), HandleTypePosix, 0)
	return int(fd), err
}

func (d *driver) exportFabric(h uint64) (MemFabricHandle, error) {
	var fh MemFabricHandle
	err := d.MemExportToShareableHandle.Call4(uintptr(unsafe.Pointer(&fh)), uintptr(h), HandleTypeFabric, 0)
	return fh, err
}

// importPosixFD imports an exported allocation; the fd stays the caller's
// to close (the driver keeps its own reference).
func (d *driver) ImportPosixFD(fd int) (uint64, error) {
	var h uint64
	// The POSIX fd travels in the void* argument by value.
	err := d.MemImportFromShareableHandle.Call3(uintptr(unsafe.Pointer(&h)), uintptr(fd), HandleTypePosix)
	return h, err
}

func (d *driver) importFabric(fh *MemFabricHandle) (uint64, error) {
	var h uint64
	err := d.MemImportFromShareableHandle.Call3(uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(fh)), HandleTypeFabric)
	return h, err
}

func (d *driver) AddressReserve(size, align uint64) (uint64, error) {
	var p uint64
	err := d.MemAddressReserve.Call(uintptr(unsafe.Pointer(&p)), uintptr(size), uintptr(align), 0, 0)
	return p, err
}

func (d *driver) AddressFree(p, size uint64) error {
	return d.MemAddressFree.Call2(uintptr(p), uintptr(size))
}

func (d *driver) MapMem(p, size uint64, h uint64) error {
	return d.MemMap.Call(uintptr(p), uintptr(size), 0, uintptr(h), 0)
}

func (d *driver) UnmapMem(p, size uint64) error {
	return d.MemUnmap.Call2(uintptr(p), uintptr(size))
}

func (d *driver) SetAccess(p, size uint64, device int32) error {
	desc := MemAccessDesc{Location: MemLocation{Type: memLocationTypeDevice, ID: device}, Flags: memAccessFlagsProtReadWrite}
	return d.MemSetAccess.Call4(uintptr(p), uintptr(size), uintptr(unsafe.Pointer(&desc)), 1)
}
