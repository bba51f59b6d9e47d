package evaluator_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
)

// warmingRuntime's devices implement runtime.CollectiveWarmer and record
// what they were asked to warm, by rank.
type warmingRuntime struct {
	runtime.Runtime
	mu  sync.Mutex
	got map[int][]ir.DType
}

type warmingDevice struct {
	runtime.Device
	rt *warmingRuntime
}

func (w *warmingRuntime) Device(rank int) (runtime.Device, error) {
	d, err := w.Runtime.Device(rank)
	return warmingDevice{d, w}, err
}

func (d warmingDevice) WarmCollectives(dts []ir.DType) {
	d.rt.mu.Lock()
	defer d.rt.mu.Unlock()
	d.rt.got[d.Rank()] = append(d.rt.got[d.Rank()], dts...)
}

// TestJobWarmsCollectives: opening a job hands every rank's device the
// dtypes of the program's collectives once each (the cuda runtime
// compiles their kernel modules in the background), leaving out those
// that NCCL runs (no kernel of ours) and programs with no collective.
func TestJobWarmsCollectives(t *testing.T) {
	const src = `mesh 2
input %x : bf16[2/DIDx, 8]
input %y : f32[2/DIDx, 4]
input %z : f64[2/DIDx, 4]
%a = all_reduce %x
%b = all_gather %y algo=one_shot : f32[2, 4] symmetric
%c = all_reduce %x algo=ring op=max
%d = all_reduce %z algo=nccl
output %a, %b, %c, %d
`
	for _, tc := range []struct {
		src  string
		want []ir.DType
	}{
		{src, []ir.DType{ir.F32, ir.BF16}}, // sorted as the enum orders them
		{"mesh 2\ninput %x : f32[2/DIDx, 4]\n%y = relu %x\noutput %y\n", nil},
	} {
		prog, err := parser.Parse("warm.hir", []byte(tc.src))
		require.NoError(t, err)
		require.NoError(t, passes.Lower(prog, &passes.Context{}))
		rt := &warmingRuntime{Runtime: newSim(t, 2), got: map[int][]ir.DType{}}
		j, err := evaluator.NewJob(prog, rt, evaluator.Options{})
		require.NoError(t, err)
		require.NoError(t, j.Close())
		for r := range 2 {
			got := slices.Clone(rt.got[r])
			slices.Sort(got)
			require.Equal(t, tc.want, got, "rank %d", r)
		}
	}
}
