package cuda

import (
	"github.com/hirlab/hir/runtime/cuda/internal/coll"
	"github.com/hirlab/hir/runtime/cuda/internal/gpu"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/codegen"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// TestKernelParamsMatchPackArgs: the parameter block a kernel keeps, filled
// for a launch, holds the bytes codegen.PackArgs lays out for the same
// arguments (literals included), each kernelParams pointer points at its
// parameter, and filling allocates nothing.
func TestKernelParamsMatchPackArgs(t *testing.T) {
	c := chainCase(t, ir.F32, 16)
	gen, err := codegen.Fusion(c.op, c.ins, c.outs)
	require.NoError(t, err)
	kp, err := newKernelParams(gen, 132)
	require.NoError(t, err)
	grid, block := gen.Launch(132)
	assert.Equal(t, grid, kp.grid)
	assert.Equal(t, block, kp.block)
	for _, words := range [][]uint64{{0x7f0000001000, 0x7f0000002000}, {0xdead0000, 0xbeef0000}} {
		la := []launchArg{{addr: words[0]}, {addr: words[1]}}
		kp.fill(la)
		want, offsets, err := gen.PackArgs(words)
		require.NoError(t, err)
		require.Equal(t, want, kp.buf[:len(want)], "the block for %#x", words)
		require.Len(t, kp.ptrs, len(offsets)+1)
		for i, off := range offsets {
			assert.Equal(t, unsafe.Pointer(&kp.buf[off]), kp.ptrs[i], "parameter %d", i)
		}
		assert.Nil(t, kp.ptrs[len(offsets)], "the list ends with nil")
		assert.Zero(t, testing.AllocsPerRun(100, func() { kp.fill(la) }), "fill allocates")
	}
}

// TestLaunchSpansAllocateNothing: the address checks a launch makes on a
// contiguous tensor (spanOf, byteSpan) allocate nothing and give the
// bytes it spans; a strided one spans its extremes.
func TestLaunchSpansAllocateNothing(t *testing.T) {
	d := &Device{Comm: &coll.Comm{Device: &gpu.Device{}}}
	b := &gpu.Buffer{Dev: d.Device, Bytes: 4096, Ptr: 0x10000}
	tens := runtime.Tensor{Buf: b, Offset: 64, DType: ir.F32, Shape: []int64{4, 8}}
	what := func() string { return "test" }
	ptr, err := d.SpanOf(tens, what)
	require.NoError(t, err)
	assert.Equal(t, uint64(0x10000+64), ptr)
	lo, hi := byteSpan(tens, ptr)
	assert.Equal(t, [2]uint64{ptr, ptr + 4*8*4}, [2]uint64{lo, hi})
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		p, _ := d.SpanOf(tens, what)
		byteSpan(tens, p)
	}), "a contiguous tensor's span allocates")
	strided := tens
	strided.Shape, strided.Strides = []int64{4, 2}, []int64{8, 1} // a [4, 2] window of [4, 8]
	p, err := d.SpanOf(strided, what)
	require.NoError(t, err)
	lo, hi = byteSpan(strided, p)
	assert.Equal(t, [2]uint64{p, p + (3*8+1+1)*4}, [2]uint64{lo, hi})
	tooFar := tens
	tooFar.Offset = 4096 - 64
	_, err = d.SpanOf(tooFar, what)
	assert.ErrorContains(t, err, "reaches bytes [4032, 4160) of a 4096-byte buffer")
}
