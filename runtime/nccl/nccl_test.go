package nccl

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/hirlab/hir/ir"
)

// The binding is checked against the enums of nccl.h; the library itself
// is exercised on the GPU machine (runtime/cuda's multi-process tests).

func TestDataTypes(t *testing.T) {
	want := map[ir.DType]DataType{ir.F32: 7, ir.F16: 6, ir.BF16: 9, ir.F64: 8, ir.I32: 2, ir.I64: 4, ir.Bool: 1}
	for dt, w := range want {
		got, err := DataTypeOf(dt)
		if err != nil || got != w {
			t.Errorf("DataTypeOf(%v) = %v, %v; want %v", dt, got, err, w)
		}
	}
	if _, err := DataTypeOf(ir.InvalidDType); err == nil {
		t.Error("DataTypeOf(invalid) succeeded")
	}
}

func TestRedOps(t *testing.T) {
	want := map[ir.ReduceOp]RedOp{ir.ReduceSum: 0, ir.ReduceProd: 1, ir.ReduceMax: 2, ir.ReduceMin: 3, ir.ReduceAvg: 4}
	for _, w := range ir.ReduceOps() {
		got, err := RedOpOf(w)
		if err != nil || got != want[w] {
			t.Errorf("RedOpOf(%q) = %v, %v; want %v", w, got, err, want[w])
		}
	}
	if _, err := RedOpOf(ir.ReduceOp(99)); err == nil {
		t.Error("RedOpOf(ReduceOp(99)) succeeded")
	}
}

func TestErrorText(t *testing.T) {
	e := &Error{Call: "ncclAllReduce", Code: InvalidArgument, Detail: "invalid argument"}
	if got := e.Error(); got != "ncclAllReduce: ncclInvalidArgument (invalid argument)" {
		t.Errorf("got %q", got)
	}
	if got := Result(42).String(); got != "ncclResult_t(42)" {
		t.Errorf("got %q", got)
	}
}

// Without NCCL on the loader path, Load says so and nothing panics; with
// it (the GPU machine), it reports a version and sets NCCL_NVLS_ENABLE.
func TestLoad(t *testing.T) {
	l, err := Load()
	if _, ok := os.LookupEnv("NCCL_NVLS_ENABLE"); !ok {
		t.Error("NCCL_NVLS_ENABLE is unset after Load: NVLink multicast must be kept off")
	}
	if err != nil {
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), Library) {
			t.Errorf("unexpected error: %v", err)
		}
		t.Skipf("no NCCL here: %v", err)
	}
	t.Logf("loaded %s, NCCL %s", l.Path(), l.VersionString())
	if l.Version() < 22300 {
		t.Errorf("version %d", l.Version())
	}
	id, err := l.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	var zero UniqueID
	if id == zero {
		t.Error("unique id is all zeros")
	}
}
