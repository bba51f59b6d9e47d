package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

func newLimited(t *testing.T, D int, limit int64) *Runtime {
	t.Helper()
	rt, err := NewWithOptions(runtime.Config{WorldSize: D, Timeout: 10 * time.Second}, Options{MemoryLimit: limit})
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	return rt
}

func asOOM(t *testing.T, err error) *runtime.OutOfMemoryError {
	t.Helper()
	var oom *runtime.OutOfMemoryError
	require.ErrorAs(t, err, &oom)
	return oom
}

func TestAllocOutOfMemoryIsTyped(t *testing.T) {
	rt := newLimited(t, 2, 1<<20)
	d0, _ := rt.Device(0)
	_, err := d0.Alloc(1<<62, ir.Global)
	oom := asOOM(t, err)
	assert.Equal(t, int64(1<<62), oom.Asked, "fields: %+v", oom)
	assert.Equal(t, int64(1<<20), oom.Free, "fields: %+v", oom)
	assert.Equal(t, int64(1<<20), oom.Limit, "fields: %+v", oom)
	assert.Greater(t, oom.Asked, oom.Limit, "fields: %+v", oom)
	want := "rank 0: out of memory: 4.00 EiB for alloc in global memory does not fit: the CPU runtime has 1.00 MiB free of its 1.00 MiB limit (set HIR_SIM_MEMORY_LIMIT or sim.Options.MemoryLimit to change the limit)"
	assert.EqualError(t, err, want)
	// A symmetric alloc asks for every rank's shard (rounded up to the
	// granularity) at once.
	errs := onAll(rt, func(d *Device) error { _, err := d.Alloc(1<<19+1, ir.Symmetric); return err })
	for r, err := range errs {
		oom := asOOM(t, err)
		assert.Equal(t, int64(2*(1<<19+256)), oom.Asked, "rank %d: %+v", r, oom)
		assert.Equal(t, int64(1<<20), oom.Limit, "rank %d: %+v", r, oom)
		assert.ErrorContains(t, err, "symmetric alloc #0 (512.00 KiB per rank on 2 ranks)", "rank %d", r)
	}
}

func TestReserveCountsAgainstTheBudget(t *testing.T) {
	rt := newLimited(t, 1, 1<<20)
	release, err := rt.Reserve("the inputs", 768<<10)
	require.NoError(t, err)
	d0, _ := rt.Device(0)
	_, err = d0.Alloc(512<<10, ir.Global)
	oom := asOOM(t, err)
	assert.Equal(t, int64(256<<10), oom.Free, "free after the reservation: %+v", oom)
	_, err = rt.Reserve("more", 1<<20)
	assert.Error(t, err, "a second reservation past the limit was granted")
	release()
	release() // twice gives back once
	b, err := d0.Alloc(1<<20, ir.Global)
	require.NoError(t, err, "after release")
	d0.Free(b)
}

// The staging of a staged collective and a kernel's working memory come
// out of the budget: too little memory is a typed error on every rank,
// not a crash and not a rank left waiting for a peer.
func TestCollectiveAndKernelScratchAreBudgeted(t *testing.T) {
	const n = 1 << 14 // f32 elements per rank: 64 KiB
	rt := newLimited(t, 2, 4*n*4+n*4)
	ins := make([]runtime.Tensor, 2)
	mustAll(t, onAll(rt, func(d *Device) error {
		b, err := d.Alloc(n*4, ir.Symmetric)
		ins[d.rank] = tensorOf(b, ir.F32, n)
		return err
	}))
	errs := onAll(rt, func(d *Device) error {
		call := &runtime.CollectiveCall{Op: ir.OpAllReduce, Algo: ir.AlgoNCCL, ReduceOp: ir.ReduceSum, In: ins[d.rank], Out: ins[d.rank]}
		if err := d.Collective(call, nil); err != nil {
			return err
		}
		return d.DefaultStream().Synchronize()
	})
	for r, err := range errs {
		oom := asOOM(t, err)
		assert.Greater(t, oom.Asked, oom.Free, "rank %d: %+v", r, oom)
		assert.ErrorContains(t, err, "all_reduce algo=nccl (collective #0) staging and scratch", "rank %d", r)
	}
	d := rt.devices[0]
	x, y := val("x"), val("y")
	k, err := d.Compile(&runtime.KernelSpec{Op: &ir.Op{Code: ir.OpAdd, Operands: []*ir.Value{x, ir.Float(1)}, Results: []*ir.Value{y}},
		Inputs: out(ir.F32, n), Outputs: out(ir.F32, n)})
	require.NoError(t, err)
	require.NoError(t, d.Launch(k, []runtime.Tensor{ins[0], ins[0]}, nil))
	err = d.DefaultStream().Synchronize()
	oom := asOOM(t, err)
	assert.Equal(t, int64(2*n*8), oom.Asked, "kernel: %+v", oom)
	assert.ErrorContains(t, err, "add's working memory", "kernel")
	mustAll(t, onAll(rt, func(d *Device) error { return d.Free(ins[d.rank].Buf) }))
}

func TestMemoryLimitEnv(t *testing.T) {
	for s, want := range map[string]int64{"6GiB": 6 << 30, "512 MiB": 512 << 20, "1048576": 1 << 20, "1.5G": 3 << 29, "2kb": 2048} {
		got, err := ParseBytes(s)
		if assert.NoError(t, err, "ParseBytes(%q)", s) {
			assert.Equal(t, want, got, "ParseBytes(%q)", s)
		}
	}
	t.Setenv(MemoryLimitEnv, "3MiB")
	assert.Equal(t, int64(3<<20), DefaultMemoryLimit(), "DefaultMemoryLimit with %s=3MiB", MemoryLimitEnv)
	t.Setenv(MemoryLimitEnv, "lots")
	_, err := New(runtime.Config{WorldSize: 1})
	assert.ErrorContains(t, err, `HIR_SIM_MEMORY_LIMIT: "lots" is not a positive size`, "a bad %s", MemoryLimitEnv)
}
