package evaluator_test

import (
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
	if _, again := d.rt.got[d.Rank()]; again {
		panic("warmed twice")
	}
	d.rt.got[d.Rank()] = dts
}

// TestJobWarmsCollectives: opening a job whose program has collectives
// tells every rank's device, with the dtypes its reducing collectives
// reduce, once each (the cuda runtime compiles their kernel modules in
// the background); those NCCL runs (no kernel of ours) count for nothing,
// and a program with no collective warms nothing.
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
	const gatherOnly = "mesh 2\ninput %y : f32[2/DIDx, 4]\n%b = all_gather %y : f32[2, 4] symmetric\noutput %b\n"
	const ncclOnly = "mesh 2\ninput %z : f64[2/DIDx, 4]\n%d = all_reduce %z algo=nccl\noutput %d\n"
	for _, tc := range []struct {
		src    string
		warmed bool
		want   []ir.DType
	}{
		{src, true, []ir.DType{ir.BF16}},
		{gatherOnly, true, nil}, // the data-movement kernels only
		{ncclOnly, false, nil},
		{"mesh 2\ninput %x : f32[2/DIDx, 4]\n%y = relu %x\noutput %y\n", false, nil},
	} {
		prog, err := parser.Parse("warm.hir", []byte(tc.src))
		require.NoError(t, err)
		require.NoError(t, passes.Lower(prog, &passes.Context{}))
		rt := &warmingRuntime{Runtime: newSim(t, 2), got: map[int][]ir.DType{}}
		j, err := evaluator.NewJob(prog, rt, evaluator.Options{})
		require.NoError(t, err)
		require.NoError(t, j.Close())
		for r := range 2 {
			got, warmed := rt.got[r]
			require.Equal(t, tc.warmed, warmed, "rank %d warmed", r)
			require.Equal(t, tc.want, got, "rank %d", r)
		}
	}
}
