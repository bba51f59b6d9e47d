package evaluator_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
)

// An op result past the CPU runtime's memory limit is a
// *runtime.OutOfMemoryError that errors.As finds through the evaluator's
// wrapping (rank, op position).
func TestOutOfMemoryIsTypedEndToEnd(t *testing.T) {
	src := "mesh 2\ninput %x : f32[1024, 256]\n%y = add %x, 1.0\n%z = mul %y, %y\noutput %z\n"
	prog, err := parser.Parse("oom.hir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := passes.Lower(prog, &passes.Context{}); err != nil {
		t.Fatal(err)
	}
	const limit = 2 << 20 // each rank's input is 1 MiB: no room for a result
	rt, err := sim.NewWithOptions(runtime.Config{WorldSize: 2}, sim.Options{MemoryLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	job, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	_, err = job.Run(map[string]*host.Array{"x": host.Random(ir.F32, []int64{1024, 256}, 1)})
	var oom *runtime.OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("want a *runtime.OutOfMemoryError, got %v", err)
	}
	if oom.Limit != limit || oom.Asked <= oom.Free || oom.Where != "the CPU runtime" {
		t.Errorf("fields: %+v", oom)
	}
	if !strings.Contains(err.Error(), "out of memory: ") || !strings.Contains(err.Error(), "free of its 2.00 MiB limit") {
		t.Errorf("message: %v", err)
	}
}
