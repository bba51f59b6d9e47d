package host

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
)

// npyBytes builds an NPY file by hand from the format's description.
func npyBytes(major byte, dict string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x93NUMPY")
	b.WriteByte(major)
	b.WriteByte(0)
	lenBytes := 2
	if major >= 2 {
		lenBytes = 4
	}
	total := (10 + lenBytes - 2 + len(dict) + 1 + 63) / 64 * 64
	header := dict + strings.Repeat(" ", total-(8+lenBytes)-len(dict)-1) + "\n"
	if lenBytes == 2 {
		_ = binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	} else {
		_ = binary.Write(&b, binary.LittleEndian, uint32(len(header)))
	}
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

func TestWriteNPYGoldenBytes(t *testing.T) {
	// f32 [1, -2] as NumPy 1.0 writes it: the dict is 57 bytes, so with the
	// 10-byte prefix and the newline the header pads to 128 bytes in all.
	dict := "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
	want := "\x93NUMPY\x01\x00\x76\x00" + dict + strings.Repeat(" ", 60) + "\n" +
		"\x00\x00\x80\x3f" + "\x00\x00\x00\xc0"
	a := New(ir.F32, []int64{2})
	a.Set(0, 1)
	a.Set(1, -2)
	var b bytes.Buffer
	require.NoError(t, a.WriteNPY(&b))
	assert.Equal(t, want, b.String())
	back, err := ReadNPY(strings.NewReader(want))
	require.NoError(t, err)
	assert.Empty(t, cmp.Diff(a, back), "read back differs")
}

func TestNPYHeaderShapes(t *testing.T) {
	for _, tc := range []struct {
		shape []int64
		want  string
	}{
		{nil, "'shape': ()"},
		{[]int64{5}, "'shape': (5,)"},
		{[]int64{2, 3, 4}, "'shape': (2, 3, 4)"},
		{[]int64{0, 3}, "'shape': (0, 3)"},
	} {
		var b bytes.Buffer
		require.NoError(t, New(ir.I64, tc.shape).WriteNPY(&b))
		s := b.String()
		assert.Contains(t, s, tc.want, "%v: header", tc.shape)
		n := 10 + int(binary.LittleEndian.Uint16(b.Bytes()[8:]))
		assert.Zero(t, n%64, "%v: data starts at %d, not a multiple of 64", tc.shape, n)
		assert.Equal(t, byte('\n'), s[n-1], "%v: data starts at %d, not after a newline", tc.shape, n)
	}
}

func TestNPYRoundTripEveryDType(t *testing.T) {
	dir := t.TempDir()
	for _, dt := range ir.AllDTypes {
		for _, shape := range [][]int64{nil, {7}, {3, 5}, {2, 0, 4}, {2, 3, 4}} {
			a := Random(dt, shape, 11)
			path := filepath.Join(dir, "a.npy")
			require.NoError(t, a.WriteNPYFile(path))
			back, err := ReadNPYFile(path)
			require.NoError(t, err)
			if dt == ir.BF16 {
				// Saved as <f4, exactly; rounding back to bf16 is lossless.
				require.Equal(t, ir.F32, back.DType, "bf16 read back")
				back = back.Convert(ir.BF16)
			}
			assert.Empty(t, cmp.Diff(a, back), "%v%v: round trip differs", dt, shape)
		}
	}
}

func TestReadNPYVersions(t *testing.T) {
	data := []byte{1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff}
	for _, major := range []byte{1, 2, 3} {
		a, err := ReadNPY(bytes.NewReader(npyBytes(major, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", data)))
		require.NoError(t, err, "version %d", major)
		if assert.Equal(t, ir.I32, a.DType, "version %d", major) {
			assert.Equal(t, []int64{1, -2}, []int64{a.AtInt(0), a.AtInt(1)}, "version %d", major)
		}
	}
	// Other spellings NumPy has used: double quotes, Python 2 longs, no
	// trailing comma, a list for the shape.
	a, err := ReadNPY(bytes.NewReader(npyBytes(1, `{"shape": [2L], "fortran_order": False, "descr": "<i4"}`, data)))
	if assert.NoError(t, err, "old-style header") {
		assert.Equal(t, int64(2), a.Len(), "old-style header")
	}
}

func TestReadNPYSequential(t *testing.T) {
	var b bytes.Buffer
	x, y := Random(ir.F64, []int64{3}, 1), Random(ir.Bool, []int64{2, 2}, 2)
	require.NoError(t, x.WriteNPY(&b))
	require.NoError(t, y.WriteNPY(&b))
	for _, want := range []*Array{x, y} {
		got, err := ReadNPY(&b)
		require.NoError(t, err)
		assert.Empty(t, cmp.Diff(want, got))
	}
}

func TestReadNPYFortranOrder(t *testing.T) {
	// [[1, 2, 3], [4, 5, 6]] stored column by column: 1 4 2 5 3 6.
	var col []byte
	for _, v := range []float64{1, 4, 2, 5, 3, 6} {
		col = binary.LittleEndian.AppendUint64(col, math.Float64bits(v))
	}
	a, err := ReadNPY(bytes.NewReader(npyBytes(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", col)))
	require.NoError(t, err)
	want := New(ir.F64, []int64{2, 3})
	for i := range int64(6) {
		want.Set(i, float64(i+1))
	}
	assert.Empty(t, cmp.Diff(want, a), "2x3 Fortran order read")

	// Three axes, one of extent 1: element [i, 0, k] of a 2x1x3 array is
	// at i + 2k in the column-major data.
	var col3 []byte
	for _, v := range []int32{10, 20, 11, 21, 12, 22} {
		col3 = binary.LittleEndian.AppendUint32(col3, uint32(v))
	}
	a, err = ReadNPY(bytes.NewReader(npyBytes(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 1, 3), }", col3)))
	require.NoError(t, err)
	var got []int64
	for i := range a.Len() {
		got = append(got, a.AtInt(i))
	}
	assert.Equal(t, []int64{10, 11, 12, 20, 21, 22}, got, "2x1x3 Fortran order read")

	// With one axis longer than 1 the layouts agree; an empty array has
	// nothing to move.
	_, err = ReadNPY(bytes.NewReader(npyBytes(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (1, 4), }", make([]byte, 32))))
	assert.NoError(t, err, "1x4 Fortran order")
	a, err = ReadNPY(bytes.NewReader(npyBytes(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (3, 0), }", nil)))
	require.NoError(t, err, "3x0 Fortran order")
	assert.Equal(t, []int64{3, 0}, a.Shape)
}

func TestReadNPYBoolNormalises(t *testing.T) {
	a, err := ReadNPY(bytes.NewReader(npyBytes(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", []byte{0, 1, 7})))
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 1, 1}, a.Data)
}

func TestReadNPYErrors(t *testing.T) {
	header := func(dict string, data int) []byte { return npyBytes(1, dict, make([]byte, data)) }
	badVersion := npyBytes(1, "{}", nil)
	badVersion[6] = 4
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "not an NPY file: the file ends too early"},
		{"magic", []byte("PK\x03\x04 not npy at all"), "not an NPY file (it does not start with \\x93NUMPY)"},
		{"version", badVersion, "NPY format version 4.0 is not supported"},
		{"short header", []byte("\x93NUMPY\x01\x00\x40\x00{'descr'"), "NPY header: the file ends too early"},
		{"big endian", header("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8), "big-endian data (>f4) is not supported"},
		{"dtype", header("{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }", 8), "dtype <u4 is not supported (supported: <f4 <f8 <f2 <i4 <i8 |b1, and <u2 <i2 <V2 as bf16 bits)"},
		{"structured", header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8), "structured dtypes are not supported"},
		{"no shape", header("{'descr': '<f4', 'fortran_order': False}", 8), "no 'shape' key"},
		{"negative", header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 8), "'shape' holds -1"},
		{"syntax", header("{'descr': '<f4' 'shape': (2,)}", 8), "want '}' at byte"},
		{"huge", header("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000, 1000000), }", 8), "is too large"},
		{"truncated", header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20), "NPY data is truncated: [2 3] of <f4 needs 24 bytes, the file has 20"},
	} {
		_, err := ReadNPY(bytes.NewReader(tc.file))
		assert.ErrorContains(t, err, tc.want, tc.name)
	}
	_, err := ReadNPYFile(filepath.Join(t.TempDir(), "missing.npy"))
	assert.ErrorContains(t, err, "missing.npy", "missing file")
}

func TestWriteNPYBF16IsExactF32(t *testing.T) {
	a := New(ir.BF16, []int64{3})
	for i, v := range []float64{0.1, -3, math.Inf(1)} {
		a.Set(int64(i), v)
	}
	var b bytes.Buffer
	require.NoError(t, a.WriteNPY(&b))
	back, err := ReadNPY(&b)
	require.NoError(t, err)
	for i := range int64(3) {
		assert.Equal(t, a.At(i), back.At(i), "element %d", i)
	}
}
