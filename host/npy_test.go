package host

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
	if err := a.WriteNPY(&b); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	back, err := ReadNPY(strings.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, back); diff != "" {
		t.Errorf("read back differs:\n%s", diff)
	}
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
		if err := New(ir.I64, tc.shape).WriteNPY(&b); err != nil {
			t.Fatal(err)
		}
		s := b.String()
		if !strings.Contains(s, tc.want) {
			t.Errorf("%v: header %q lacks %q", tc.shape, s[10:], tc.want)
		}
		if n := 10 + int(binary.LittleEndian.Uint16(b.Bytes()[8:])); n%64 != 0 || s[n-1] != '\n' {
			t.Errorf("%v: data starts at %d, not a multiple of 64 after a newline", tc.shape, n)
		}
	}
}

func TestNPYRoundTripEveryDType(t *testing.T) {
	dir := t.TempDir()
	for _, dt := range ir.AllDTypes {
		for _, shape := range [][]int64{nil, {7}, {3, 5}, {2, 0, 4}, {2, 3, 4}} {
			a := Random(dt, shape, 11)
			path := filepath.Join(dir, "a.npy")
			if err := a.WriteNPYFile(path); err != nil {
				t.Fatal(err)
			}
			back, err := ReadNPYFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if dt == ir.BF16 {
				// Saved as <f4, exactly; rounding back to bf16 is lossless.
				if back.DType != ir.F32 {
					t.Fatalf("bf16 read back as %v, want f32", back.DType)
				}
				back = back.Convert(ir.BF16)
			}
			if diff := cmp.Diff(a, back); diff != "" {
				t.Errorf("%v%v: round trip differs:\n%s", dt, shape, diff)
			}
		}
	}
}

func TestReadNPYVersions(t *testing.T) {
	data := []byte{1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff}
	for _, major := range []byte{1, 2, 3} {
		a, err := ReadNPY(bytes.NewReader(npyBytes(major, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", data)))
		if err != nil {
			t.Fatalf("version %d: %v", major, err)
		}
		if a.DType != ir.I32 || a.AtInt(0) != 1 || a.AtInt(1) != -2 {
			t.Errorf("version %d: got %s", major, a.Summary())
		}
	}
	// Other spellings NumPy has used: double quotes, Python 2 longs, no
	// trailing comma, a list for the shape.
	a, err := ReadNPY(bytes.NewReader(npyBytes(1, `{"shape": [2L], "fortran_order": False, "descr": "<i4"}`, data)))
	if err != nil || a.Len() != 2 {
		t.Errorf("old-style header: %v", err)
	}
}

func TestReadNPYSequential(t *testing.T) {
	var b bytes.Buffer
	x, y := Random(ir.F64, []int64{3}, 1), Random(ir.Bool, []int64{2, 2}, 2)
	if err := x.WriteNPY(&b); err != nil {
		t.Fatal(err)
	}
	if err := y.WriteNPY(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*Array{x, y} {
		got, err := ReadNPY(&b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Error(diff)
		}
	}
}

func TestReadNPYFortranOrder(t *testing.T) {
	_, err := ReadNPY(bytes.NewReader(npyBytes(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }", make([]byte, 32))))
	if err == nil || !strings.Contains(err.Error(), "Fortran-ordered arrays are not supported") {
		t.Errorf("2-D Fortran order: %v", err)
	}
	// With one axis longer than 1 the layouts agree, so it is read.
	if _, err := ReadNPY(bytes.NewReader(npyBytes(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (1, 4), }", make([]byte, 32)))); err != nil {
		t.Errorf("1x4 Fortran order: %v", err)
	}
}

func TestReadNPYBoolNormalises(t *testing.T) {
	a, err := ReadNPY(bytes.NewReader(npyBytes(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", []byte{0, 1, 7})))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]byte{0, 1, 1}, a.Data); diff != "" {
		t.Error(diff)
	}
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
		{"dtype", header("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", 4), "dtype <u2 is not supported (supported: <f4 <f8 <f2 <i4 <i8 |b1)"},
		{"structured", header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8), "structured dtypes are not supported"},
		{"no shape", header("{'descr': '<f4', 'fortran_order': False}", 8), "no 'shape' key"},
		{"negative", header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 8), "'shape' holds -1"},
		{"syntax", header("{'descr': '<f4' 'shape': (2,)}", 8), "want '}' at byte"},
		{"huge", header("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000, 1000000), }", 8), "is too large"},
		{"truncated", header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20), "NPY data is truncated: [2 3] of <f4 needs 24 bytes, the file has 20"},
	} {
		_, err := ReadNPY(bytes.NewReader(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := ReadNPYFile(filepath.Join(t.TempDir(), "missing.npy")); err == nil || !strings.Contains(err.Error(), "missing.npy") {
		t.Errorf("missing file: %v", err)
	}
}

func TestWriteNPYBF16IsExactF32(t *testing.T) {
	a := New(ir.BF16, []int64{3})
	for i, v := range []float64{0.1, -3, math.Inf(1)} {
		a.Set(int64(i), v)
	}
	var b bytes.Buffer
	if err := a.WriteNPY(&b); err != nil {
		t.Fatal(err)
	}
	back, err := ReadNPY(&b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(3) {
		if back.At(i) != a.At(i) {
			t.Errorf("element %d: %v read back as %v", i, a.At(i), back.At(i))
		}
	}
}
