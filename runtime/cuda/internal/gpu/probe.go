package gpu

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/hirlab/hir/runtime/internal/dl"
)

// DeviceInfo is what the probe learned about one GPU.
type DeviceInfo struct {
	Ordinal           int
	Name              string
	ComputeCapability [2]int
	TotalMemory       uint64
	Multiprocessors   int
	UnifiedAddressing bool
	VMM               bool // virtual memory management (cuMemCreate, cuMemMap, ...)
	PosixFD           bool // allocations export to POSIX file descriptors
	Fabric            bool // allocations export to fabric handles
}

// ProbeResult says whether this machine can run the CUDA runtime, and if
// not, why, in words a user can act on.
type ProbeResult struct {
	Available bool
	Reason    string // empty when Available
	// Advice is what to do instead where this machine cannot run the
	// backend at all (no driver): run programs on the CPU runtime. Empty
	// otherwise; Unavailable joins it to Reason.
	Advice        string
	Library       string
	DriverVersion int // e.g. 13000 for CUDA 13.0
	Devices       []DeviceInfo
}

func (p ProbeResult) String() string {
	if !p.Available {
		return "cuda unavailable: " + p.Unavailable()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cuda available: driver %d.%d, %d device(s)", p.DriverVersion/1000, p.DriverVersion%1000/10, len(p.Devices))
	for _, d := range p.Devices {
		fmt.Fprintf(&b, "; %d: %s sm_%d%d %.0f GiB vmm=%v posix_fd=%v fabric=%v", d.Ordinal, d.Name,
			d.ComputeCapability[0], d.ComputeCapability[1], float64(d.TotalMemory)/(1<<30), d.VMM, d.PosixFD, d.Fabric)
	}
	return b.String()
}

// probeAPI is the part of the driver the probe uses; tests fake it to
// check the messages for drivers this machine does not have.
type probeAPI interface {
	init() error
	DriverVersion() (int, error)
	deviceCount() (int, error)
	GetDevice(ordinal int) (int32, error)
	deviceName(dev int32) (string, error)
	attribute(attr int, dev int32) (int, error)
	totalMem(dev int32) (uint64, error)
}

var (
	probeOnce   sync.Once
	probeResult ProbeResult
)

// Probe checks, once per process, that the driver loads, initialises and
// shows devices that support VMM and POSIX-fd handles. Nothing in it
// panics or exits: without a GPU it returns Available=false and a reason.
func Probe() ProbeResult {
	probeOnce.Do(func() {
		d, err := LoadDriver()
		if err != nil {
			probeResult = ProbeResult{Reason: NoDriverReason(err), Advice: RunOnCPU, Library: DriverLibrary}
			return
		}
		probeResult = ProbeWith(d, d.Path())
	})
	return probeResult
}

// runOnCPU is the probe's advice where there is no driver: what `hirrun
// run` can do instead (commands with no CPU runtime give their own).
const RunOnCPU = "use the CPU runtime (--backend sim, the default)"

// Unavailable is why the backend cannot run here, with the advice where
// there is one.
func (p ProbeResult) Unavailable() string {
	if p.Advice == "" {
		return p.Reason
	}
	return p.Reason + "; " + p.Advice
}

func NoDriverReason(err error) string {
	if errors.Is(err, dl.ErrNeedsLinux) {
		return dl.ErrNeedsLinux.Error()
	}
	return fmt.Sprintf("the NVIDIA driver library did not load (%v): this machine has no usable NVIDIA driver", err)
}

func ProbeWith(api probeAPI, lib string) ProbeResult {
	res := ProbeResult{Library: lib}
	fail := func(format string, args ...any) ProbeResult {
		res.Reason = fmt.Sprintf(format, args...)
		return res
	}
	if err := api.init(); err != nil {
		if IsResult(err, ErrNoDevice) {
			return fail("the driver loaded but sees no CUDA device (%v; CUDA_VISIBLE_DEVICES=%q)", err, os.Getenv("CUDA_VISIBLE_DEVICES"))
		}
		return fail("the driver loaded but did not initialise: %v", err)
	}
	v, err := api.DriverVersion()
	if err != nil {
		return fail("cuDriverGetVersion failed: %v", err)
	}
	res.DriverVersion = v
	n, err := api.deviceCount()
	if err != nil {
		return fail("cannot count devices: %v", err)
	}
	if n == 0 {
		return fail("the driver loaded but sees no CUDA device (CUDA_VISIBLE_DEVICES=%q)", os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	for i := 0; i < n; i++ {
		info, err := probeDevice(api, i)
		if err != nil {
			return fail("device %d: %v", i, err)
		}
		res.Devices = append(res.Devices, info)
	}
	for _, d := range res.Devices {
		ver := fmt.Sprintf("driver %d.%d", v/1000, v%1000/10)
		switch {
		case !d.VMM:
			return fail("device %d (%s) does not support virtual memory management (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED=0, %s); symmetric memory needs cuMemCreate/cuMemMap", d.Ordinal, d.Name, ver)
		case !d.PosixFD:
			return fail("device %d (%s) cannot export allocations to POSIX file descriptors (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED=0, %s); symmetric memory is shared between processes that way", d.Ordinal, d.Name, ver)
		case !d.UnifiedAddressing:
			return fail("device %d (%s) has no unified addressing, which peer copies through mappings rely on", d.Ordinal, d.Name)
		}
	}
	res.Available = true
	return res
}

func probeDevice(api probeAPI, ordinal int) (DeviceInfo, error) {
	info := DeviceInfo{Ordinal: ordinal}
	dev, err := api.GetDevice(ordinal)
	if err != nil {
		return info, err
	}
	if info.Name, err = api.deviceName(dev); err != nil {
		return info, err
	}
	if info.TotalMemory, err = api.totalMem(dev); err != nil {
		return info, err
	}
	attrs := []struct {
		attr int
		dst  *int
	}{
		{AttrComputeCapabilityMajor, &info.ComputeCapability[0]},
		{AttrComputeCapabilityMinor, &info.ComputeCapability[1]},
		{AttrMultiprocessorCount, &info.Multiprocessors},
	}
	for _, a := range attrs {
		if *a.dst, err = api.attribute(a.attr, dev); err != nil {
			return info, err
		}
	}
	flags := []struct {
		attr int
		dst  *bool
	}{
		{AttrUnifiedAddressing, &info.UnifiedAddressing},
		{AttrVirtualMemoryManagement, &info.VMM},
		{AttrHandleTypePosixFD, &info.PosixFD},
		{AttrHandleTypeFabric, &info.Fabric},
	}
	for _, f := range flags {
		v, err := api.attribute(f.attr, dev)
		if err != nil {
			// An attribute the driver does not know is a feature it lacks.
			if IsResult(err, ErrInvalidValue) {
				continue
			}
			return info, err
		}
		*f.dst = v != 0
	}
	return info, nil
}
