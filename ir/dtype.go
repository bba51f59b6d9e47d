// Package ir holds hir programs: tensor types with sharding and memory types,
// SSA values, operations, the Builder used to make programs from Go, the
// canonical Printer and the structural Verify.
package ir

import "fmt"

// DType is the element type of a tensor.
type DType uint8

const (
	InvalidDType DType = iota
	F32
	F16
	BF16
	F64
	I32
	I64
	Bool
)

var dtypeNames = [...]string{InvalidDType: "invalid", F32: "f32", F16: "f16", BF16: "bf16", F64: "f64", I32: "i32", I64: "i64", Bool: "bool"}
var dtypeSizes = [...]int{InvalidDType: 0, F32: 4, F16: 2, BF16: 2, F64: 8, I32: 4, I64: 8, Bool: 1}

// AllDTypes lists every valid dtype in declaration order.
var AllDTypes = []DType{F32, F16, BF16, F64, I32, I64, Bool}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size is the number of bytes one element takes.
func (d DType) Size() int {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == F32 || d == F16 || d == BF16 || d == F64 }

// IsInt reports whether d is a signed integer type.
func (d DType) IsInt() bool { return d == I32 || d == I64 }

// Valid reports whether d names a real dtype.
func (d DType) Valid() bool { return d > InvalidDType && d <= Bool }

// ParseDType returns the dtype spelled s ("f32", "bf16", ...).
func ParseDType(s string) (DType, bool) {
	for i, n := range dtypeNames {
		if i > 0 && n == s {
			return DType(i), true
		}
	}
	return InvalidDType, false
}

// MemoryType says where a tensor lives.
type MemoryType uint8

const (
	// Global is an ordinary device allocation (the default).
	Global MemoryType = iota
	// Symmetric is allocated at the same offset of every rank's symmetric
	// heap, so peers can map and address each other's copy.
	Symmetric
	// Host is pinned host memory.
	Host
)

var memNames = [...]string{Global: "global", Symmetric: "symmetric", Host: "host"}

func (m MemoryType) String() string {
	if int(m) < len(memNames) {
		return memNames[m]
	}
	return fmt.Sprintf("memory(%d)", uint8(m))
}

// ParseMemoryType returns the memory type spelled s.
func ParseMemoryType(s string) (MemoryType, bool) {
	for i, n := range memNames {
		if n == s {
			return MemoryType(i), true
		}
	}
	return Global, false
}

// ParallelType says how an axis is spread over the mesh.
type ParallelType uint8

const (
	// Serial axes are not split: every rank holds the whole extent.
	Serial ParallelType = iota
	// DIDx splits the axis over the mesh's device dimension.
	DIDx
)

func (p ParallelType) String() string {
	switch p {
	case Serial:
		return "serial"
	case DIDx:
		return "DIDx"
	}
	return fmt.Sprintf("parallel(%d)", uint8(p))
}
