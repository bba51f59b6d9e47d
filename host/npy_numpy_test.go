package host

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
)

// Files NumPy wrote (testdata/numpy/make.py says how): what they hold is
// arange-based, so the wanted arrays are built here without NumPy.

func arange(dt ir.DType, shape []int64, scale, offset float64) *Array {
	a := New(dt, shape)
	for i := range a.Len() {
		a.Set(i, float64(i)*scale+offset)
	}
	return a
}

func TestReadNumPyFortranOrder(t *testing.T) {
	for _, tc := range []struct {
		file string
		want *Array
	}{
		{"fortran_f64_2x3.npy", arange(ir.F64, []int64{2, 3}, 1, 0)},
		{"fortran_i32_2x3x4.npy", arange(ir.I32, []int64{2, 3, 4}, 1, -12)},
	} {
		s, err := ReadStoredNPYFile(filepath.Join("testdata/numpy", tc.file))
		require.NoError(t, err, tc.file)
		assert.Empty(t, cmp.Diff(tc.want, s.Array), "%s: read (-want +got)", tc.file)
	}
}

func TestReadRawBF16Bits(t *testing.T) {
	want := New(ir.BF16, []int64{3})
	for i, v := range []float64{1, -3, 0.5} {
		want.Set(int64(i), v)
	}
	for _, tc := range []struct{ file, descr, text string }{
		{"bf16_bits_u2.npy", "<u2", "uint16 ('<u2', read as bf16 bits)"},
		{"bf16_bits_v2.npy", "|V2", "void16 ('|V2', read as bf16 bits)"},
	} {
		s, err := ReadStoredNPYFile(filepath.Join("testdata/numpy", tc.file))
		require.NoError(t, err, tc.file)
		assert.Empty(t, cmp.Diff(want, s.Array), "%s: read (-want +got)", tc.file)
		assert.Equal(t, tc.descr, s.Descr, tc.file)
		assert.Equal(t, tc.text, s.DTypeText(), tc.file)
	}
	// ml_dtypes' bfloat16 saves as '<V2'; a header written with
	// str(x.dtype) says 'bfloat16'; torch's int16 view says '<i2'.
	for _, descr := range []string{"<V2", "bfloat16", "<i2"} {
		s, err := ReadStoredNPY(bytes.NewReader(npyBytes(1, "{'descr': '"+descr+"', 'fortran_order': False, 'shape': (3,), }", want.Data)))
		require.NoError(t, err, descr)
		assert.Empty(t, cmp.Diff(want, s.Array), "%s: read (-want +got)", descr)
	}
	s, err := ReadStoredNPY(bytes.NewReader(npyBytes(1, "{'descr': 'bfloat16', 'fortran_order': False, 'shape': (3,), }", want.Data)))
	require.NoError(t, err)
	assert.Equal(t, "bfloat16 ('bfloat16')", s.DTypeText())
	s, err = ReadStoredNPY(bytes.NewReader(npyBytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", make([]byte, 8))))
	require.NoError(t, err)
	assert.Equal(t, "float64 ('<f8')", s.DTypeText())
}
