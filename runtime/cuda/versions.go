package cuda

import (
	"fmt"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"

	"github.com/hirlab/hir/runtime/nccl"
)

// LibraryVersion is one library the CUDA runtime loads: the version it
// reports and where it loaded from, or why it did not load.
type LibraryVersion struct {
	Name    string // "driver", "NVRTC", "cuBLAS" or "NCCL"
	Version string // e.g. "13.0" or "2.28.3"; empty when Err is set
	Path    string // the file (or soname) it loaded from; empty when it did not load
	Err     error  // why it did not load, or (Path set) why its version is unknown
}

// String is one line: "NVRTC: 13.0 (libnvrtc.so.13)";
// "NCCL: not loaded: <why>"; or, for a library that loaded but did not
// say its version, "driver: version unknown (libcuda.so.1): <why>".
func (v LibraryVersion) String() string {
	switch {
	case v.Err != nil && v.Path != "":
		return fmt.Sprintf("%s: version unknown (%s): %v", v.Name, v.Path, v.Err)
	case v.Err != nil:
		return fmt.Sprintf("%s: not loaded: %v", v.Name, v.Err)
	}
	return fmt.Sprintf("%s: %s (%s)", v.Name, v.Version, v.Path)
}

// LibraryVersions loads the driver (cuDriverGetVersion, which needs
// neither cuInit nor a device), NVRTC (nvrtcVersion), cuBLAS
// (cublasGetProperty) and NCCL (ncclGetVersion), each once per process as
// the runtime does, and says what each reported. It never panics: a
// library that does not load has Err set and no Path, and the others are
// still reported.
func LibraryVersions() []LibraryVersion {
	return []LibraryVersion{driverLibraryVersion(), nvrtcLibraryVersion(), cublasLibraryVersion(), ncclLibraryVersion()}
}

func driverLibraryVersion() LibraryVersion {
	v := LibraryVersion{Name: "driver"}
	d, err := gpu.LoadDriver()
	if err != nil {
		v.Err = err
		return v
	}
	v.Path = d.Path()
	n, err := d.DriverVersion()
	if err != nil {
		v.Err = fmt.Errorf("cuDriverGetVersion: %w", err)
		return v
	}
	v.Version = cudaVersionString(n)
	return v
}

// cudaVersionString writes a CUDA version code (1000*major + 10*minor,
// e.g. 13000) as "13.0".
func cudaVersionString(n int) string {
	return fmt.Sprintf("%d.%d", n/1000, n%1000/10)
}

func nvrtcLibraryVersion() LibraryVersion {
	v := LibraryVersion{Name: "NVRTC"}
	lib, err := gpu.LoadNVRTC()
	if err != nil {
		v.Err = err
		return v
	}
	v.Path = lib.Path()
	major, minor, err := gpu.NVRTCVersion()
	if err != nil {
		v.Err = fmt.Errorf("nvrtcVersion: %w", err)
		return v
	}
	v.Version = fmt.Sprintf("%d.%d", major, minor)
	return v
}

func cublasLibraryVersion() LibraryVersion {
	info := CUBLAS()
	return LibraryVersion{Name: "cuBLAS", Version: info.Version, Path: info.Path, Err: info.Err}
}

func ncclLibraryVersion() LibraryVersion {
	v := LibraryVersion{Name: "NCCL"}
	lib, err := nccl.Load()
	if err != nil {
		v.Err = err
		return v
	}
	v.Version, v.Path = lib.VersionString(), lib.Path()
	return v
}
