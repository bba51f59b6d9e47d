package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// TestReadToHostOnGPU: ReadToHost reads contiguous tensors (through the
// pinned buffer, which grows), a strided view and an empty tensor, and
// gives what CopyToHost gives.
func TestReadToHostOnGPU(t *testing.T) {
	rt := openSingleRuntime(t)
	d := rt.dev
	def := d.DefaultStream()
	const rows, cols = 512, 1024 // 2 MiB of f32: past the first pinned buffer
	buf, err := d.Alloc(rows*cols*4, ir.Global)
	require.NoError(t, err)
	defer d.Free(buf)
	data := make([]byte, rows*cols*4)
	for i := range data {
		data[i] = byte(i * 7)
	}
	require.NoError(t, d.CopyFromHost(runtime.Tensor{Buf: buf, DType: ir.F32, Shape: []int64{rows, cols}}, data, def))
	whole := runtime.Tensor{Buf: buf, DType: ir.F32, Shape: []int64{rows, cols}}
	row := runtime.Tensor{Buf: buf, Offset: 3 * cols * 4, DType: ir.F32, Shape: []int64{cols}}
	column := runtime.Tensor{Buf: buf, Offset: 5 * 4, DType: ir.F32, Shape: []int64{rows}, Strides: []int64{cols}}
	empty := runtime.Tensor{Buf: buf, DType: ir.F32, Shape: []int64{0}}
	srcs := []runtime.Tensor{row, whole, column, empty, row}
	want := make([][]byte, len(srcs))
	got := make([][]byte, len(srcs))
	for i, s := range srcs {
		want[i] = make([]byte, s.Bytes())
		got[i] = make([]byte, s.Bytes())
		require.NoError(t, d.CopyToHost(want[i], s, def))
	}
	require.NoError(t, def.Synchronize())
	for round := range 3 { // the buffer made, then reused
		require.NoError(t, d.ReadToHost(got, srcs, def), "round %d", round)
		for i := range srcs {
			assert.Equal(t, want[i], got[i], "round %d: tensor %d", round, i)
		}
	}
	assert.Equal(t, data, got[1], "the whole tensor")
	require.Error(t, d.ReadToHost(got[:1], srcs, def), "a destination short")
}
