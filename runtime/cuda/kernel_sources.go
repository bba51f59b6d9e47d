package cuda

import (
	_ "embed"
	"text/template"
)

// The CUDA C the package compiles itself lives in kernels/*.cu, embedded
// here byte for byte (each file begins with the newline its source has
// always begun with); TestKernelSourcesGolden pins the sources assembled
// from them.

// collectiveSource is the common part of every collective module: CollArgs,
// the signal-pad protocol, copies, barriers, the all_gather ring and the
// point-to-point kernels. Its /* LAYOUT_ASSERTS */ line is replaced by
// commonSource with static_asserts on CollArgs's size and the pad geometry.
//
//go:embed kernels/collective.cu
var collectiveSource string

// reduceSource is the per-dtype part of a reducing module: storage type T,
// compute type C, the reduce ops, and the reducing kernel templates
// (instantiated per op by reduceEntries).
//
//go:embed kernels/reduce.cu
var reduceSource string

// reduceEntries instantiates the reducing kernels' entry points for one
// dtype, one group per reduce op (a list of reduceEntry).
//
//go:embed kernels/reduce_entries.cu.tmpl
var reduceEntriesText string

var reduceEntries = template.Must(template.New("reduce_entries.cu.tmpl").Parse(reduceEntriesText))

// reduceEntry is one reduce op's group of entry points in reduceEntries.
type reduceEntry struct {
	DT, Op  string // the dtype and reduce op, as kernel names spell them
	T, C    string // storage and compute types
	Code, V int    // reduce op code and vector width
}

// stridedCopySource is the one kernel the runtime itself compiles outside
// the collectives: an elementwise copy between two strided layouts (either
// side may be a peer's memory mapped here), one instance per element size.
//
//go:embed kernels/strided_copy.cu
var stridedCopySource string

// graphLoopSource is the kernel that ends a device loop's body in graph
// mode: it counts the trip and sets the WHILE node's condition.
//
//go:embed kernels/graph_loop.cu
var graphLoopSource string
