package evaluator_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
)

// Example is the README's tour of the Go API: build a program, lower it,
// run it on the CPU runtime and join the gathered output.
func Example() {
	b := ir.NewBuilder(ir.LinearMesh(4))
	x := b.Input("x", ir.Tensor(ir.F32, 8, 4).Sharded(0).In(ir.Symmetric))
	y := b.Unary(ir.OpRelu, x)
	g := b.Collective(ir.OpAllGather, y, ir.AlgoRing).Type(ir.Tensor(ir.F32, 8, 4).In(ir.Symmetric)).Value()
	b.Output(g)
	prog, err := b.Program()
	check(err)
	check(passes.Lower(prog, &passes.Context{}))

	rt, err := runtime.Open("sim", runtime.Config{WorldSize: 4})
	check(err)
	defer rt.Close()
	job, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	check(err)
	defer job.Close()
	in := host.Random(ir.F32, []int64{8, 4}, 1)
	res, err := job.Run(map[string]*host.Array{"x": in})
	check(err)
	whole, err := res.Logical(prog, g.Name)
	check(err)

	same := true
	for i := int64(0); i < in.Len(); i++ {
		same = same && whole.At(i) == max(in.At(i), 0)
	}
	fmt.Println(whole.Shape, "relu(x) on every rank:", same)
	// Output: [8 4] relu(x) on every rank: true
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}

// TestExamplesRun keeps every program under examples/ working: each parses,
// lowers and runs on the CPU runtime with random inputs.
func TestExamplesRun(t *testing.T) {
	files, err := filepath.Glob("../examples/*.hir")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			require.NoError(t, err)
			prog, err := parser.Parse(file, src)
			require.NoError(t, err)
			inputs := map[string]*host.Array{}
			for i, in := range prog.Inputs {
				tt := in.Tensor()
				inputs[in.Name] = host.Random(tt.DType, tt.Shape(), uint64(i+1))
			}
			_, err = job(t, prog, evaluator.Options{}).Run(inputs)
			require.NoError(t, err)
		})
	}
}
