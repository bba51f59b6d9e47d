package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
)

// TestZero clears a whole tensor and a strided view's elements only.
func TestZero(t *testing.T) {
	rt := newRuntime(t, 1, time.Second)
	d := rt.devices[0]
	all, err := upload(d, ir.Global, ir.F32, []float64{1, 2, 3, 4, 5, 6}, 2, 3)
	require.NoError(t, err)
	defer d.Free(all.Buf)
	// column 1 of the 2x3 matrix: elements 1 and 4
	col := runtime.Tensor{Buf: all.Buf, Offset: 4, DType: ir.F32, Shape: []int64{2}, Strides: []int64{3}}
	require.NoError(t, d.Zero(col, nil))
	got, err := download(d, all)
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 0, 3, 4, 0, 6}, got)
	require.NoError(t, d.Zero(all, nil))
	got, err = download(d, all)
	require.NoError(t, err)
	assert.Equal(t, []float64{0, 0, 0, 0, 0, 0}, got)
}
