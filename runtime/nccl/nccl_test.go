package nccl

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
)

// The binding is checked against the enums of nccl.h; the library itself
// is exercised on the GPU machine (runtime/cuda's multi-process tests).

func TestDataTypes(t *testing.T) {
	want := map[ir.DType]DataType{ir.F32: 7, ir.F16: 6, ir.BF16: 9, ir.F64: 8, ir.I32: 2, ir.I64: 4, ir.Bool: 1}
	for dt, w := range want {
		got, err := DataTypeOf(dt)
		if assert.NoErrorf(t, err, "DataTypeOf(%v)", dt) {
			assert.Equalf(t, w, got, "DataTypeOf(%v)", dt)
		}
	}
	_, err := DataTypeOf(ir.InvalidDType)
	assert.Error(t, err, "DataTypeOf(invalid) succeeded")
}

func TestRedOps(t *testing.T) {
	want := map[ir.ReduceOp]RedOp{ir.ReduceSum: 0, ir.ReduceProd: 1, ir.ReduceMax: 2, ir.ReduceMin: 3, ir.ReduceAvg: 4}
	for _, w := range ir.ReduceOps() {
		got, err := RedOpOf(w)
		if assert.NoErrorf(t, err, "RedOpOf(%q)", w) {
			assert.Equalf(t, want[w], got, "RedOpOf(%q)", w)
		}
	}
	_, err := RedOpOf(ir.ReduceOp(99))
	assert.Error(t, err, "RedOpOf(ReduceOp(99)) succeeded")
}

func TestErrorText(t *testing.T) {
	e := &Error{Call: "ncclAllReduce", Code: InvalidArgument, Detail: "invalid argument"}
	assert.Equal(t, "ncclAllReduce: ncclInvalidArgument (invalid argument)", e.Error())
	assert.Equal(t, "ncclResult_t(42)", Result(42).String())
}

// Without NCCL on the loader path, Load says so and nothing panics; with
// it (the GPU machine), it reports a version and sets NCCL_NVLS_ENABLE.
func TestLoad(t *testing.T) {
	l, err := Load()
	_, ok := os.LookupEnv("NCCL_NVLS_ENABLE")
	assert.True(t, ok, "NCCL_NVLS_ENABLE is unset after Load: NVLink multicast must be kept off")
	if err != nil {
		assert.ErrorIs(t, err, ErrUnavailable, "unexpected error")
		assert.ErrorContains(t, err, Library, "unexpected error")
		t.Skipf("no NCCL here: %v", err)
	}
	t.Logf("loaded %s, NCCL %s", l.Path(), l.VersionString())
	assert.GreaterOrEqual(t, l.Version(), 22300, "version")
	id, err := l.GetUniqueID()
	require.NoError(t, err)
	var zero UniqueID
	assert.NotEqual(t, zero, id, "unique id is all zeros")
}
