// Package kernels holds the CUDA C that runtime/cuda compiles with NVRTC:
// the .cu files of this directory, embedded byte for byte.
package kernels

import (
	_ "embed"
	"text/template"
)

// The CUDA C the runtime compiles itself lives in kernels/*.cu, embedded
// here byte for byte (each file begins with the newline its source has
// always begun with); TestKernelSourcesGolden pins the sources assembled
// from them.

//go:embed collective.cu
var collective string

// Collective is the common part of every collective module: pdl.cu, then
// collective.cu's CollArgs, the signal-pad protocol, copies, barriers,
// the all_gather ring and the point-to-point kernels. Its
// /* LAYOUT_ASSERTS */ line is replaced by runtime/cuda's commonSource
// with static_asserts on CollArgs's size and the pad geometry.
var Collective = pdl + collective

// pdl is pdl_begin, the programmatic-launch wait every entry point of
// Collective and StridedCopy begins with (gpu.Device.LaunchOwn).
//
//go:embed pdl.cu
var pdl string

// Reduce is the per-dtype part of a reducing module: storage type T,
// compute type C, the reduce ops, and the reducing kernel templates
// (instantiated per op by ReduceEntries).
//
//go:embed reduce.cu
var Reduce string

// ReduceEntries instantiates the reducing kernels' entry points for one
// dtype, one group per reduce op (a list of ReduceEntry).
//
//go:embed reduce_entries.cu.tmpl
var reduceEntriesText string

var ReduceEntries = template.Must(template.New("reduce_entries.cu.tmpl").Parse(reduceEntriesText))

// ReduceEntry is one reduce op's group of entry points in ReduceEntries.
type ReduceEntry struct {
	DT, Op  string // the dtype and reduce op, as kernel names spell them
	T, C    string // storage and compute types
	Code, V int    // reduce op code and vector width
}

// StridedCopy is the one kernel the runtime itself compiles outside
// the collectives: an elementwise copy between two strided layouts (either
// side may be a peer's memory mapped here), one instance per element size.
//
//go:embed strided_copy.cu
var stridedCopy string

// StridedCopy is pdl.cu then strided_copy.cu.
var StridedCopy = pdl + stridedCopy

// GraphLoop is the kernel that ends a device loop's body in graph
// mode: it counts the trip and sets the WHILE node's condition.
//
//go:embed graph_loop.cu
var GraphLoop string
