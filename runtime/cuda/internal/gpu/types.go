package gpu

// Layouts and constants of cuda.h that this package passes to the driver.
// The structs are built by hand; types_test.go checks their sizes and
// field offsets against the values cuda.h gives on x86-64 and arm64.

// CUdevice_attribute values.
const (
	AttrMultiprocessorCount        = 16
	AttrUnifiedAddressing          = 41
	AttrComputeCapabilityMajor     = 75
	AttrComputeCapabilityMinor     = 76
	AttrVirtualMemoryManagement    = 102
	AttrHandleTypePosixFD          = 103
	AttrHandleTypeFabric           = 128
	ctxSchedBlockingSync           = 0x4
	memHostAllocPortable           = 0x1
	memHostAllocDeviceMap          = 0x2
	streamNonBlocking              = 0x1
	eventDefault                   = 0x0
	memAllocationTypePinned        = 0x1
	memLocationTypeDevice          = 0x1
	memAccessFlagsProtReadWrite    = 0x3
	memAllocGranularityMinimum     = 0x0
	memAllocGranularityRecommended = 0x1
)

// CUmemAllocationHandleType values (a bit mask in requestedHandleTypes).
const (
	handleTypeNone   = 0x0
	HandleTypePosix  = 0x1 // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	HandleTypeFabric = 0x8 // CU_MEM_HANDLE_TYPE_FABRIC
)

// memLocation is CUmemLocation.
type MemLocation struct {
	Type int32 // CUmemLocationType
	ID   int32
}

// memAllocationProp is CUmemAllocationProp.
type MemAllocationProp struct {
	Type                 int32 // CUmemAllocationType
	RequestedHandleTypes int32 // CUmemAllocationHandleType
	Location             MemLocation
	Win32HandleMetaData  uintptr // void*
	// allocFlags
	CompressionType      uint8
	GPUDirectRDMACapable uint8
	Usage                uint16
	Reserved             [4]uint8
}

// memAccessDesc is CUmemAccessDesc.
type MemAccessDesc struct {
	Location MemLocation
	Flags    int32 // CUmemAccess_flags
}

// memFabricHandle is CUmemFabricHandle: an opaque 64-byte handle that can
// travel as plain bytes (through the store), unlike a file descriptor.
type MemFabricHandle struct {
	Data [64]byte
}

// Event flags (cuEventCreate).
const (
	EventDisableTiming = 0x2 // CU_EVENT_DISABLE_TIMING: cheaper to record
)
