package host

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
)

// readAll reads every array of an archive, by name.
func readAll(t *testing.T, z *NPZ) map[string]*Array {
	t.Helper()
	out := map[string]*Array{}
	for _, name := range z.Names() {
		s, err := z.Read(name)
		require.NoError(t, err, name)
		out[name] = s.Array
	}
	return out
}

// numpyArchive is what testdata/numpy/make.py saves in its two archives.
func numpyArchive() map[string]*Array {
	b := New(ir.Bool, []int64{3})
	b.SetInt(0, 1)
	b.SetInt(2, 1)
	n := New(ir.I64, []int64{3})
	for i, v := range []int64{1, -2, 3} {
		n.SetInt(int64(i), v)
	}
	return map[string]*Array{
		"x": arange(ir.F32, []int64{2, 3}, 0.25, 0),
		"n": n,
		"b": b,
		"f": arange(ir.F64, []int64{2, 3}, 1, 0), // saved in Fortran order
	}
}

func TestReadNumPyArchives(t *testing.T) {
	// np.savez stores its members (zip64 headers and all),
	// np.savez_compressed deflates them.
	for _, file := range []string{"savez.npz", "savez_compressed.npz"} {
		z, err := OpenNPZ(filepath.Join("testdata/numpy", file))
		require.NoError(t, err, file)
		assert.Equal(t, []string{"x", "n", "b", "f"}, z.Names(), file)
		assert.Empty(t, cmp.Diff(numpyArchive(), readAll(t, z)), "%s (-want +got)", file)
		require.NoError(t, z.Close())
	}
}

func TestReadArchiveOfStoredAndDeflatedMembers(t *testing.T) {
	x, y := Random(ir.F32, []int64{4, 5}, 1), Random(ir.I32, []int64{7}, 2)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	_, err := zw.Create("dir/") // a directory entry: not an array
	require.NoError(t, err)
	for _, m := range []struct {
		name   string
		method uint16
		a      *Array
	}{{"x.npy", zip.Store, x}, {"y.npy", zip.Deflate, y}} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: m.method})
		require.NoError(t, err)
		require.NoError(t, m.a.WriteNPY(w))
	}
	require.NoError(t, zw.Close())

	z, err := ReadNPZ(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "mixed.npz")
	require.NoError(t, err)
	assert.Equal(t, []string{"x", "y"}, z.Names())
	assert.Empty(t, cmp.Diff(map[string]*Array{"x": x, "y": y}, readAll(t, z)), "(-want +got)")
	methods := map[string]uint16{}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	for _, f := range zr.File {
		methods[f.Name] = f.Method
	}
	assert.Equal(t, map[string]uint16{"dir/": zip.Store, "x.npy": zip.Store, "y.npy": zip.Deflate}, methods, "the archive holds both kinds")
}

func TestNPZRoundTripEveryDType(t *testing.T) {
	var names []string
	var arrays []*Array
	for i, dt := range ir.AllDTypes {
		names = append(names, dt.String())
		arrays = append(arrays, Random(dt, []int64{3, int64(i + 1)}, uint64(i)))
	}
	names = append(names, "scalar", "empty")
	arrays = append(arrays, Random(ir.F64, nil, 9), New(ir.I64, []int64{0, 2}))
	path := filepath.Join(t.TempDir(), "all.npz")
	require.NoError(t, WriteNPZFile(path, names, arrays))

	z, err := OpenNPZ(path)
	require.NoError(t, err)
	defer z.Close()
	assert.Equal(t, names, z.Names())
	for i, name := range names {
		s, err := z.Read(name)
		require.NoError(t, err, name)
		got := s.Array
		if arrays[i].DType == ir.BF16 {
			require.Equal(t, "<f4", s.Descr, "bf16 is saved as <f4")
			got = got.Convert(ir.BF16)
		}
		assert.Empty(t, cmp.Diff(arrays[i], got), "%s: round trip (-want +got)", name)
	}

	// The same arrays give the same bytes (the members' times are fixed).
	again := filepath.Join(t.TempDir(), "again.npz")
	require.NoError(t, WriteNPZFile(again, names, arrays))
	b1, _ := os.ReadFile(path)
	b2, _ := os.ReadFile(again)
	assert.Equal(t, b1, b2, "two writes of the same arrays")
}

func TestNPZErrors(t *testing.T) {
	dir := t.TempDir()
	archive := func(name string, build func(zw *zip.Writer)) string {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		zw.RegisterCompressor(99, func(w io.Writer) (io.WriteCloser, error) { return flate.NewWriter(w, 1) })
		build(zw)
		require.NoError(t, zw.Close())
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
		return path
	}
	member := func(zw *zip.Writer, name string, method uint16, data []byte) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		require.NoError(t, err)
		_, err = w.Write(data)
		require.NoError(t, err)
	}
	var npy bytes.Buffer
	require.NoError(t, New(ir.F32, []int64{2}).WriteNPY(&npy))

	notZip := filepath.Join(dir, "plain.npz")
	require.NoError(t, os.WriteFile(notZip, npy.Bytes(), 0o644))
	_, err := OpenNPZ(notZip)
	assert.EqualError(t, err, notZip+": not an NPZ archive: not a zip file")
	_, err = OpenNPZ(filepath.Join(dir, "missing.npz"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	dup := archive("dup.npz", func(zw *zip.Writer) {
		member(zw, "x.npy", zip.Store, npy.Bytes())
		member(zw, "x", zip.Store, npy.Bytes())
	})
	_, err = OpenNPZ(dup)
	assert.EqualError(t, err, dup+`: the archive holds two arrays named "x"`)

	bad := archive("bad.npz", func(zw *zip.Writer) {
		member(zw, "junk.npy", zip.Deflate, []byte("not numpy"))
		member(zw, "odd.npy", 99, npy.Bytes())
		member(zw, "short.npy", zip.Store, npy.Bytes()[:npy.Len()-1])
	})
	z, err := OpenNPZ(bad)
	require.NoError(t, err)
	defer z.Close()
	for name, want := range map[string]string{
		"junk":  bad + ": array junk: not an NPY file (it does not start with \\x93NUMPY)",
		"odd":   bad + ": array odd: compression method 99 is not supported (stored and deflated are)",
		"short": bad + ": array short: NPY data is truncated: [2] of <f4 needs 8 bytes, the file has 7",
		"gone":  bad + `: no array named "gone" (it holds junk, odd, short)`,
	} {
		_, err := z.Read(name)
		assert.EqualError(t, err, want, name)
	}

	assert.ErrorContains(t, WriteNPZ(io.Discard, []string{"a", "a"}, []*Array{New(ir.F32, nil), New(ir.F32, nil)}), `two arrays named "a"`)
	assert.ErrorContains(t, WriteNPZ(io.Discard, []string{"a"}, nil), "1 names for 0 arrays")
}
