package host

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
)

// The files in testdata/safetensors are what the safetensors library
// (huggingface/safetensors: safetensors.torch.save_file, save, and the
// Rust serializer both call) writes. Neither torch nor safetensors is
// installed here, so they were written by hand, byte for byte:
//
//   - pt_i32, pt_bf16: the bytes bindings/python/tests/test_pt_comparison.py
//     (test_serialization) asserts safetensors.torch.save writes for
//     torch.zeros((2, 2), dtype=torch.int32) with a 1 at [1, 1], and for
//     torch.ones((2, 2), dtype=torch.bfloat16) with 2.25 at [0, 0];
//   - forces_alignment, metadata: test_simple.py's
//     test_serialization_forces_alignment (an I32 and an F16 tensor, given
//     in either order) and test_serialization_metadata
//     (metadata={"framework": "pt"});
//   - rust_forced_alignment: safetensors/src/tensor.rs's
//     test_serialization_forced_alignement;
//   - unpadded: test_simple.py's test_deserialization, a header with no
//     padding, which the library reads but never writes;
//   - all_dtypes: every dtype hir has, laid out as the serializer's code
//     (tensor.rs, prepare and Metadata's Serialize) lays them out: the
//     tensors by descending dtype (the Dtype enum's order), then by name;
//     compact JSON with "__metadata__" first and each tensor's dtype,
//     shape and data_offsets in that order; spaces to a multiple of 8.
//     allDTypesHeader below is its header, written out.
//
// testdata/safetensors/make.py remakes them all with the library, for
// anyone who has it, to check the claim (`git diff --exit-code` after).

const allDTypesHeader = `{"__metadata__":{"format":"pt"},` +
	`"l":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},` +
	`"d":{"dtype":"F64","shape":[3],"data_offsets":[16,40]},` +
	`"empty":{"dtype":"F32","shape":[0,3],"data_offsets":[40,40]},` +
	`"s":{"dtype":"F32","shape":[2,2],"data_offsets":[40,56]},` +
	`"scalar":{"dtype":"F32","shape":[],"data_offsets":[56,60]},` +
	`"i":{"dtype":"I32","shape":[4],"data_offsets":[60,76]},` +
	`"bf":{"dtype":"BF16","shape":[3],"data_offsets":[76,82]},` +
	`"h":{"dtype":"F16","shape":[2,2],"data_offsets":[82,90]},` +
	`"b":{"dtype":"BOOL","shape":[2,3],"data_offsets":[90,96]}}`

// ints builds an array of integers (floats, in tolerance_test.go, one
// of floats; here only values each dtype holds exactly).
func ints(dt ir.DType, shape []int64, vs ...int64) *Array {
	a := New(dt, shape)
	for i, v := range vs {
		a.SetInt(int64(i), v)
	}
	return a
}

// libraryFile is one testdata/safetensors file and everything in it.
type libraryFile struct {
	file     string
	tensors  map[string]*Array
	descrs   map[string]string
	metadata map[string]string
}

func libraryFiles() []libraryFile {
	zeros22 := New(ir.I32, []int64{2, 2})
	return []libraryFile{
		{file: "pt_i32.safetensors",
			tensors: map[string]*Array{"test": ints(ir.I32, []int64{2, 2}, 0, 0, 0, 1)},
			descrs:  map[string]string{"test": "I32"}},
		{file: "pt_bf16.safetensors",
			tensors: map[string]*Array{"test": floats(ir.BF16, []int64{2, 2}, 2.25, 1, 1, 1)},
			descrs:  map[string]string{"test": "BF16"}},
		{file: "forces_alignment.safetensors",
			tensors: map[string]*Array{"test1": zeros22, "test2": New(ir.F16, []int64{2, 2})},
			descrs:  map[string]string{"test1": "I32", "test2": "F16"}},
		{file: "metadata.safetensors",
			tensors:  map[string]*Array{"test1": zeros22},
			descrs:   map[string]string{"test1": "I32"},
			metadata: map[string]string{"framework": "pt"}},
		{file: "rust_forced_alignment.safetensors",
			tensors: map[string]*Array{"attn0": floats(ir.F32, []int64{1, 1, 2, 3}, 0, 1, 2, 3, 4, 5)},
			descrs:  map[string]string{"attn0": "F32"}},
		{file: "unpadded.safetensors",
			tensors: map[string]*Array{"test": zeros22},
			descrs:  map[string]string{"test": "I32"}},
		{file: "all_dtypes.safetensors",
			tensors: map[string]*Array{
				"l":      ints(ir.I64, []int64{2}, -9007199254740993, 1<<62),
				"d":      floats(ir.F64, []int64{3}, 0.1, -2.5, 1e300),
				"empty":  New(ir.F32, []int64{0, 3}),
				"s":      floats(ir.F32, []int64{2, 2}, 1.5, math.Copysign(0, -1), math.Inf(1), 3.25),
				"scalar": floats(ir.F32, []int64{}, 7),
				"i":      ints(ir.I32, []int64{4}, -8, 0, 7, math.MaxInt32),
				"bf":     floats(ir.BF16, []int64{3}, 2.25, -1, 0.0078125),
				"h":      floats(ir.F16, []int64{2, 2}, 0.5, -2, 65504, 0x1p-14),
				"b":      ints(ir.Bool, []int64{2, 3}, 1, 0, 1, 0, 0, 1),
			},
			descrs: map[string]string{"l": "I64", "d": "F64", "empty": "F32", "s": "F32", "scalar": "F32",
				"i": "I32", "bf": "BF16", "h": "F16", "b": "BOOL"},
			metadata: map[string]string{"format": "pt"}},
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestReadSafeTensorsLibraryFiles(t *testing.T) {
	for _, lf := range libraryFiles() {
		path := filepath.Join("testdata/safetensors", lf.file)
		s, err := OpenSafeTensors(path)
		require.NoError(t, err, lf.file)
		assert.Equal(t, sortedKeys(lf.tensors), s.Names(), lf.file)
		assert.Equal(t, lf.metadata, s.Metadata(), lf.file)
		got := map[string]*Array{}
		for _, name := range s.Names() {
			st, err := s.Read(name)
			require.NoError(t, err, "%s: %s", lf.file, name)
			got[name] = st.Array
			assert.Equal(t, lf.descrs[name], st.Descr, "%s: %s", lf.file, name)
		}
		assert.Empty(t, cmp.Diff(lf.tensors, got), "%s: read (-want +got)", lf.file)
		require.NoError(t, s.Close())
	}
}

// The same tensors, written here, are the library's bytes: whatever the
// order they are given in (the library sorts them), and with the header
// padded (the unpadded file is read, never written, by the library).
func TestWriteSafeTensorsAsTheLibraryDoes(t *testing.T) {
	for _, lf := range libraryFiles() {
		want, err := os.ReadFile(filepath.Join("testdata/safetensors", lf.file))
		require.NoError(t, err)
		if lf.file == "unpadded.safetensors" {
			want, err = os.ReadFile("testdata/safetensors/metadata.safetensors")
			require.NoError(t, err)
			lf.tensors = map[string]*Array{"test1": lf.tensors["test"]}
			lf.metadata = map[string]string{"framework": "pt"}
		}
		names := sortedKeys(lf.tensors)
		for _, order := range [][]string{names, reversed(names)} {
			arrays := make([]*Array, len(order))
			for i, n := range order {
				arrays[i] = lf.tensors[n]
			}
			var b bytes.Buffer
			require.NoError(t, WriteSafeTensors(&b, order, arrays, lf.metadata), lf.file)
			assert.Equal(t, want, b.Bytes(), "%s written from %v", lf.file, order)
		}
	}
	// all_dtypes' header is the one written out above.
	b, err := os.ReadFile("testdata/safetensors/all_dtypes.safetensors")
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(b)
	assert.Equal(t, allDTypesHeader, strings.TrimRight(string(b[8:8+n]), " "))
	assert.Zero(t, n%8)
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// The Rust library's own tests give the whole file for these (tensor.rs:
// test_serialization, test_empty); the bytes are theirs.
func TestWriteSafeTensorsRustVectors(t *testing.T) {
	attn := floats(ir.F32, []int64{1, 2, 3}, 0, 1, 2, 3, 4, 5)
	var b bytes.Buffer
	require.NoError(t, WriteSafeTensors(&b, []string{"attn.0"}, []*Array{attn}, nil))
	assert.Equal(t, []byte{
		64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100,
		116, 121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34,
		58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115,
		101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 0, 0, 0, 0, 0, 0, 128, 63,
		0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64,
	}, b.Bytes())

	b.Reset()
	require.NoError(t, WriteSafeTensors(&b, nil, nil, nil))
	assert.Equal(t, []byte{8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32}, b.Bytes())
	b.Reset()
	require.NoError(t, WriteSafeTensors(&b, nil, nil, map[string]string{"framework": "pt"}))
	assert.Equal(t, []byte{
		40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95,
		95, 34, 58, 123, 34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112,
		116, 34, 125, 125, 32, 32, 32, 32, 32,
	}, b.Bytes())
	s, err := ReadSafeTensors(bytes.NewReader(b.Bytes()), int64(b.Len()), "empty.safetensors")
	require.NoError(t, err)
	assert.Empty(t, s.Names())
	assert.Equal(t, map[string]string{"framework": "pt"}, s.Metadata())
}

func TestSafeTensorsRoundTrip(t *testing.T) {
	names := []string{"x", "w.0", "Z", "idx", "mask", "half", "brain", "scalar", "none", "é \"q\"\n\x01<>&\u2028"}
	arrays := []*Array{
		Random(ir.F32, []int64{3, 4}, 1),
		Random(ir.F64, []int64{2, 2, 2}, 2),
		Random(ir.F32, []int64{5}, 3),
		Random(ir.I64, []int64{6}, 4),
		Random(ir.Bool, []int64{2, 7}, 5),
		Random(ir.F16, []int64{9}, 6),
		Random(ir.BF16, []int64{4, 3}, 7),
		Random(ir.I32, []int64{}, 8),
		New(ir.F64, []int64{3, 0}),
		Random(ir.I32, []int64{2}, 9),
	}
	// bf16 NaN and -0 bits come back as they were.
	binary.LittleEndian.PutUint16(arrays[6].Data, 0x7fc1)
	binary.LittleEndian.PutUint16(arrays[6].Data[2:], 0x8000)
	meta := map[string]string{"format": "pt", "b": "two\tkeys"}
	var b bytes.Buffer
	require.NoError(t, WriteSafeTensors(&b, names, arrays, meta))
	assert.Zero(t, (8+binary.LittleEndian.Uint64(b.Bytes()))%8, "the data starts 8-aligned")

	path := filepath.Join(t.TempDir(), "rt.safetensors")
	require.NoError(t, WriteSafeTensorsFile(path, names, arrays, meta))
	onDisk, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, b.Bytes(), onDisk)

	s, err := OpenSafeTensors(path)
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, meta, s.Metadata())
	want := map[string]*Array{}
	for i, n := range names {
		want[n] = arrays[i]
	}
	assert.Equal(t, sortedKeys(want), s.Names())
	for _, n := range s.Names() {
		st, err := s.Read(n)
		require.NoError(t, err, n)
		assert.Empty(t, cmp.Diff(want[n], st.Array), "%q (-want +got)", n)
	}

	// The escapes are serde_json's: control characters, quotes and
	// backslashes; <, >, & and U+2028 as they are.
	n := binary.LittleEndian.Uint64(b.Bytes())
	assert.Contains(t, string(b.Bytes()[8:8+n]), `"é \"q\"\n\u0001<>&`+"\u2028"+`":{"dtype":"I32"`)
	assert.Contains(t, string(b.Bytes()[8:8+n]), `{"__metadata__":{"b":"two\tkeys","format":"pt"},"idx":{"dtype":"I64"`)
}

func TestWriteSafeTensorsErrors(t *testing.T) {
	x := New(ir.F32, []int64{2})
	for _, tc := range []struct {
		names  []string
		arrays []*Array
		want   string
	}{
		{[]string{"x"}, nil, "1 names for 0 arrays"},
		{[]string{"x", "x"}, []*Array{x, x}, `two arrays named "x"`},
		{[]string{"__metadata__"}, []*Array{x}, "may not be named __metadata__"},
		{[]string{"\xff"}, []*Array{x}, "is not UTF-8"},
		{[]string{"short"}, []*Array{{DType: ir.F32, Shape: []int64{3}, Data: make([]byte, 4)}}, "array short: f32[3] holds 4 bytes of data"},
		{[]string{"bad"}, []*Array{{DType: ir.InvalidDType}}, "array bad: invalid dtype"},
	} {
		err := WriteSafeTensors(&bytes.Buffer{}, tc.names, tc.arrays, nil)
		assert.ErrorContains(t, err, tc.want, "%v", tc.names)
	}
	err := WriteSafeTensorsFile(filepath.Join(t.TempDir(), "no", "dir.safetensors"), nil, nil, nil)
	assert.ErrorContains(t, err, "dir.safetensors")
}

// safetensorsFile makes a file of header (padded with spaces unless it
// says otherwise) and data.
func safetensorsFile(header string, data []byte) []byte {
	h := []byte(header)
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return append(append(b, h...), data...)
}

func TestReadSafeTensorsErrors(t *testing.T) {
	f32 := func(name string, shape string, begin, end int) string {
		return `"` + name + `":{"dtype":"F32","shape":` + shape + `,"data_offsets":[` + strconv.Itoa(begin) + `,` + strconv.Itoa(end) + `]}`
	}
	hdr := func(entries ...string) string { return "{" + strings.Join(entries, ",") + "}" }
	lengthOnly := func(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty file", nil, "not a safetensors file: it has 0 bytes, fewer than the 8 that give its header's length"},
		{"huge header length", lengthOnly(1 << 62), "its header length is 4611686018427387904 bytes, past the format's limit of 100000000"},
		{"header past the file", append(lengthOnly(100_000_000), "{}"...), "truncated: the safetensors header is 100000000 bytes long, but the file has only 2 bytes after the length"},
		{"not UTF-8", safetensorsFile("{\"\xff\":1}", nil), "safetensors header: it is not UTF-8 text"},
		{"not JSON", safetensorsFile("hello", nil), "safetensors header: not JSON: invalid character 'h'"},
		{"not an object", safetensorsFile("[1,2]", nil), "safetensors header: not a JSON object"},
		{"unfinished", safetensorsFile(`{"a":{"dtype":"F32"`, nil), "not JSON"},
		{"junk after", safetensorsFile(`{}x`, nil), `"x" follows the JSON object (only spaces may pad it)`},
		{"second object", safetensorsFile(`{}{}`, nil), `"{}" follows the JSON object`},
		{"named twice", safetensorsFile(hdr(f32("a", "[1]", 0, 4), f32("a", "[1]", 0, 4)), make([]byte, 4)), `it names "a" twice`},
		{"metadata of numbers", safetensorsFile(`{"__metadata__":{"k":1}}`, nil), "__metadata__: want an object of strings: a JSON number where it wants a string"},
		{"metadata a string", safetensorsFile(`{"__metadata__":"pt"}`, nil), "__metadata__: want an object of strings: a JSON string where it wants an object"},
		{"entry not an object", safetensorsFile(`{"a":[1]}`, nil), `tensor "a": want an object with dtype, shape and data_offsets`},
		{"no dtype", safetensorsFile(`{"a":{"shape":[],"data_offsets":[0,4]}}`, nil), `tensor "a": no "dtype"`},
		{"no shape", safetensorsFile(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, nil), `tensor "a": no "shape"`},
		{"keys are case-sensitive", safetensorsFile(`{"a":{"DTYPE":"F32","shape":[],"data_offsets":[0,4]}}`, nil), `tensor "a": no "dtype"`},
		{"dtype a number", safetensorsFile(`{"a":{"dtype":3,"shape":[],"data_offsets":[0,4]}}`, nil), `tensor "a": dtype: want a string, got 3`},
		{"unknown dtype", safetensorsFile(`{"a":{"dtype":"F9","shape":[],"data_offsets":[0,4]}}`, nil), `tensor "a": dtype "F9" is not a safetensors dtype`},
		{"negative extent", safetensorsFile(hdr(f32("a", "[-1]", 0, 4)), nil), `tensor "a": shape: -1 is not an integer >= 0 that fits 64 bits`},
		{"fractional extent", safetensorsFile(hdr(f32("a", "[1.0]", 0, 4)), nil), `tensor "a": shape: 1.0 is not an integer`},
		{"quoted extent", safetensorsFile(hdr(f32("a", `["1"]`, 0, 4)), nil), `tensor "a": shape: "1" is not an integer`},
		{"shape not an array", safetensorsFile(hdr(f32("a", `3`, 0, 4)), nil), `tensor "a": shape: want an array of integers, got 3`},
		{"shape null", safetensorsFile(hdr(f32("a", `null`, 0, 4)), nil), `tensor "a": shape: want an array of integers, got null`},
		{"extent past 64 bits", safetensorsFile(hdr(f32("a", "[18446744073709551616]", 0, 4)), nil), "is not an integer >= 0 that fits 64 bits"},
		{"three offsets", safetensorsFile(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4,8]}}`, nil), `tensor "a": data_offsets: want [begin, end], got 3 numbers`},
		{"end before begin", safetensorsFile(hdr(f32("a", "[1]", 8, 4)), nil), `tensor "a": data_offsets [8, 4] end before they begin`},
		{"wrong size", safetensorsFile(hdr(f32("a", "[2,3]", 0, 20)), make([]byte, 20)), `tensor "a": data_offsets [0, 20] hold 20 bytes, but F32[2 3] needs 24`},
		{"shape overflows", safetensorsFile(hdr(f32("a", "[4294967296,4294967296]", 0, 4)), nil), `tensor "a": shape [4294967296 4294967296] of F32 is too large`},
		{"bytes overflow", safetensorsFile(hdr(f32("a", "[4611686018427387904]", 0, 4)), nil), `of F32 is too large`},
		{"half bytes", safetensorsFile(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, make([]byte, 2)), `tensor "a": 3 elements of F4 do not fill whole bytes`},
		{"truncated data", safetensorsFile(hdr(f32("a", "[2]", 0, 8), f32("b", "[4]", 8, 24)), make([]byte, 20)), `truncated: tensor "b"'s data_offsets [8, 24] run past the end of the data, which is 20 bytes long`},
		{"offsets far past the file", safetensorsFile(hdr(f32("a", "[1]", 1<<40, 1<<40+4)), make([]byte, 4)), "run past the end of the data"},
		{"overlap", safetensorsFile(hdr(f32("a", "[2]", 0, 8), f32("b", "[2]", 4, 12)), make([]byte, 12)), `tensors "a" (data_offsets [0, 8]) and "b" ([4, 12]) overlap`},
		{"same data twice", safetensorsFile(hdr(f32("a", "[2]", 0, 8), f32("b", "[2]", 0, 8)), make([]byte, 8)), `tensors "a" (data_offsets [0, 8]) and "b" ([0, 8]) overlap`},
		{"empty inside another", safetensorsFile(hdr(f32("a", "[2]", 0, 8), f32("e", "[0]", 4, 4)), make([]byte, 8)), `tensors "a" (data_offsets [0, 8]) and "e" ([4, 4]) overlap`},
		{"gap", safetensorsFile(hdr(f32("a", "[1]", 0, 4), f32("b", "[1]", 8, 12)), make([]byte, 12)), `bytes [4, 8) of the data belong to no tensor (the next is "b" at [8, 12])`},
		{"gap first", safetensorsFile(hdr(f32("a", "[1]", 4, 8)), make([]byte, 8)), `bytes [0, 4) of the data belong to no tensor`},
		{"bytes after", safetensorsFile(hdr(f32("a", "[1]", 0, 4)), make([]byte, 6)), "2 bytes follow the last tensor's data (the tensors' data_offsets end at 4, the data is 6 bytes long)"},
		{"data without tensors", safetensorsFile(`{}`, make([]byte, 3)), "3 bytes follow the last tensor's data"},
	} {
		_, err := ReadSafeTensors(bytes.NewReader(tc.file), int64(len(tc.file)), "bad.safetensors")
		if assert.Error(t, err, tc.name) {
			assert.Contains(t, err.Error(), tc.want, tc.name)
			assert.True(t, strings.HasPrefix(err.Error(), "bad.safetensors: "), "%s: %v names the file", tc.name, err)
		}
	}
}

// A header that claims much allocates no more than the file holds.
func TestReadSafeTensorsAllocatesNoMoreThanTheFile(t *testing.T) {
	files := [][]byte{
		binary.LittleEndian.AppendUint64(nil, 99_999_999),
		append(binary.LittleEndian.AppendUint64(nil, 99_999_999), "{}"...),
		safetensorsFile(`{"a":{"dtype":"F64","shape":[1000000000],"data_offsets":[0,8000000000]}}`, make([]byte, 16)),
	}
	for i, f := range files {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ReadSafeTensors(bytes.NewReader(f), int64(len(f)), "big.safetensors")
		runtime.ReadMemStats(&after)
		assert.Error(t, err, "file %d", i)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "file %d: bytes allocated", i)
	}
}

func TestSafeTensorsReadErrors(t *testing.T) {
	file := safetensorsFile(`{"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}`, make([]byte, 6))
	s, err := ReadSafeTensors(bytes.NewReader(file), int64(len(file)), "u8.safetensors")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, s.Names())
	_, err = s.Read("b")
	assert.EqualError(t, err, "u8.safetensors: tensor b: dtype U8 is not supported (hir reads BF16 F16 F32 F64 I32 I64 BOOL)")
	_, err = s.Read("c")
	assert.EqualError(t, err, `u8.safetensors: no tensor named "c" (it holds a, b)`)
	// A file cut after it was opened.
	s, err = ReadSafeTensors(bytes.NewReader(file[:len(file)-4]), int64(len(file)), "cut.safetensors")
	require.NoError(t, err)
	_, err = s.Read("a")
	assert.EqualError(t, err, "cut.safetensors: tensor a: the file ends too early")

	_, err = OpenSafeTensors(filepath.Join(t.TempDir(), "missing.safetensors"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = OpenSafeTensors(t.TempDir())
	assert.ErrorContains(t, err, "not a regular file")
}

func TestSafeTensorsBoolsAreZeroOrOne(t *testing.T) {
	file := safetensorsFile(`{"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}}`, []byte{0, 1, 7})
	s, err := ReadSafeTensors(bytes.NewReader(file), int64(len(file)), "m.safetensors")
	require.NoError(t, err)
	st, err := s.Read("m")
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 1, 1}, st.Array.Data)
}

// Headers may spell their JSON with spaces, keys in any order and fields
// the reader does not know; a header of no tensors is a file.
func TestReadSafeTensorsLenientJSON(t *testing.T) {
	header := "{ \"b\" : { \"data_offsets\" : [ 4 , 8 ], \"extra\": {\"x\": [1]}, \"shape\" : [ ], \"dtype\" : \"I32\" },\n" +
		"\t\"__metadata__\": null, \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]} }\n"
	file := safetensorsFile(header, []byte{0, 0, 0x80, 0x3f, 5, 0, 0, 0})
	s, err := ReadSafeTensors(bytes.NewReader(file), int64(len(file)), "spaced.safetensors")
	require.NoError(t, err)
	assert.Nil(t, s.Metadata())
	a, err := s.Read("a")
	require.NoError(t, err)
	assert.Empty(t, cmp.Diff(floats(ir.F32, []int64{1}, 1), a.Array))
	b, err := s.Read("b")
	require.NoError(t, err)
	assert.Empty(t, cmp.Diff(ints(ir.I32, []int64{}, 5), b.Array))
}

func TestSafeTensorsDTypeText(t *testing.T) {
	assert.Equal(t, "F64 (f64)", Stored{Array: New(ir.F64, nil), Descr: "F64"}.DTypeText())
	assert.Equal(t, "BF16 (bf16)", Stored{Array: New(ir.BF16, nil), Descr: "BF16"}.DTypeText())
	assert.Equal(t, "BOOL (bool)", Stored{Array: New(ir.Bool, nil), Descr: "BOOL"}.DTypeText())
}

// FuzzReadSafeTensors: no file makes the reader panic or allocate past
// what the file holds, and what it reads, written back, reads the same.
func FuzzReadSafeTensors(f *testing.F) {
	for _, lf := range libraryFiles() {
		b, err := os.ReadFile(filepath.Join("testdata/safetensors", lf.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint64(nil, 1<<62))
	f.Add(safetensorsFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}}`, make([]byte, 8)))
	f.Add(safetensorsFile(`{"a":{"dtype":"F4","shape":[4],"data_offsets":[0,2]}}`, make([]byte, 2)))
	f.Fuzz(func(t *testing.T, file []byte) {
		s, err := ReadSafeTensors(bytes.NewReader(file), int64(len(file)), "fuzz.safetensors")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.safetensors: ") {
				t.Fatalf("the error does not name the file: %v", err)
			}
			return
		}
		var names []string
		var arrays []*Array
		for _, name := range s.Names() {
			st, err := s.Read(name)
			if err != nil {
				continue // an unsupported dtype
			}
			if int64(len(st.Array.Data)) > int64(len(file)) {
				t.Fatalf("%s: %d bytes read from a file of %d", name, len(st.Array.Data), len(file))
			}
			names, arrays = append(names, name), append(arrays, st.Array)
		}
		var b bytes.Buffer
		if err := WriteSafeTensors(&b, names, arrays, s.Metadata()); err != nil {
			t.Fatalf("writing back what was read: %v", err)
		}
		back, err := ReadSafeTensors(bytes.NewReader(b.Bytes()), int64(b.Len()), "back.safetensors")
		if err != nil {
			t.Fatalf("reading back what was written: %v", err)
		}
		for i, name := range names {
			st, err := back.Read(name)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if diff := cmp.Diff(arrays[i], st.Array); diff != "" {
				t.Fatalf("%s: read back (-first +second):\n%s", name, diff)
			}
		}
	})
}
