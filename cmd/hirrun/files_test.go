package main

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
)

// Input and output files: .npz archives, Fortran order, bf16 bits, and
// the output paths checked before the run.

const filesSrc = `mesh 2
input %x : f32[4/DIDx, 3]
input %w : bf16[3]
%c = cast %w dtype=f32
%y = mul %x, %c
output %y, %c
`

func TestInputArchive(t *testing.T) {
	dir := t.TempDir()
	prog := writeProgram(t, "p.hir", filesSrc)
	x, w := host.Random(ir.F32, []int64{4, 3}, 1), host.Random(ir.BF16, []int64{3}, 2)
	xPath, wPath := filepath.Join(dir, "x.npy"), filepath.Join(dir, "w.npy")
	require.NoError(t, x.WriteNPYFile(xPath))
	require.NoError(t, w.WriteNPYFile(wPath))
	want := hirrun("run", prog, "--input", "x="+xPath, "--input", "w="+wPath)
	expectCode(t, want, exitOK)

	// One archive gives both inputs; %c, an output, is skipped.
	caseFile := filepath.Join(dir, "case.npz")
	require.NoError(t, host.WriteNPZFile(caseFile, []string{"w", "x", "c"}, []*host.Array{w, x, w}))
	r := hirrun("run", prog, "--input", caseFile)
	expectCode(t, r, exitOK)
	assert.Equal(t, want.stdout, r.stdout, "--input case.npz")
	// Or gives some, the others given by name.
	onlyX := filepath.Join(dir, "onlyx.npz")
	require.NoError(t, host.WriteNPZFile(onlyX, []string{"x"}, []*host.Array{x}))
	r = hirrun("run", prog, "--input", onlyX, "--input", "w="+wPath)
	expectCode(t, r, exitOK)
	assert.Equal(t, want.stdout, r.stdout, "--input onlyx.npz --input w=w.npy")

	stray := filepath.Join(dir, "stray.npz")
	require.NoError(t, host.WriteNPZFile(stray, []string{"x", "q"}, []*host.Array{x, x}))
	wrongType := filepath.Join(dir, "wrong.npz")
	require.NoError(t, host.WriteNPZFile(wrongType, []string{"x", "w"}, []*host.Array{x.Convert(ir.F64), w}))
	outputsOnly := filepath.Join(dir, "outs.npz")
	require.NoError(t, host.WriteNPZFile(outputsOnly, []string{"y"}, []*host.Array{x}))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input", caseFile, "--input", "x=" + xPath}, "--input " + caseFile + ": %x is also given by --input x=" + xPath},
		{[]string{"--input", onlyX, "--input", caseFile}, "--input " + caseFile + ": %x is also given by --input " + onlyX},
		{[]string{"--input", caseFile, "--input", caseFile}, "--input " + caseFile + " is given twice"},
		{[]string{"--input", stray}, "--input " + stray + `: the archive's array "q" names no input of the program (its inputs: %x, %w)`},
		{[]string{"--input", wrongType}, "--input " + wrongType + ": array x: dtype: the file holds float64 ('<f8') but %x is declared f32[4/DIDx, 3]"},
		{[]string{"--input", outputsOnly, "--input", "x=random", "--input", "w=random"}, "--input " + outputsOnly + ": the archive holds no array named after an input (its inputs: %x, %w; its arrays: y)"},
		{[]string{"--input", "x=" + caseFile}, "--input x=" + caseFile + ": an .npz archive is given whole (--input " + caseFile + ") and matched by its arrays' names; for one array, give NAME=FILE.npy"},
		{[]string{"--input", filepath.Join(dir, "gone.npz")}, "--input " + filepath.Join(dir, "gone.npz") + ": no such file"},
		{[]string{"--input", onlyX}, "missing input %w : bf16[3]"},
		{[]string{"--input", "x=" + xPath, "--input", "w=" + xPath}, "--input w=" + xPath + ": shape: the file holds f32[4, 3] but %w is declared bf16[3]"},
	} {
		r := hirrun(append([]string{"run", prog}, tc.args...)...)
		assert.Equal(t, exitUsage, r.code, "%v: stderr %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, "hirrun: run: "+tc.want, "%v", tc.args)
	}
}

func TestInputFortranOrderAndBF16Bits(t *testing.T) {
	dir := t.TempDir()
	prog := writeProgram(t, "p.hir", filesSrc)
	x := host.New(ir.F32, []int64{4, 3})
	for i := range x.Len() {
		x.Set(i, float64(i))
	}
	w := host.New(ir.BF16, []int64{3})
	for i, v := range []float64{1, -3, 0.5} {
		w.Set(int64(i), v)
	}
	xPath, wPath := filepath.Join(dir, "x.npy"), filepath.Join(dir, "w.npy")
	require.NoError(t, x.WriteNPYFile(xPath))
	require.NoError(t, w.WriteNPYFile(wPath))
	want := hirrun("run", prog, "--input", "x="+xPath, "--input", "w="+wPath)
	expectCode(t, want, exitOK)

	// x column by column: element [i, j] at i + 4j.
	var col []byte
	for j := range 3 {
		for i := range 4 {
			col = binary.LittleEndian.AppendUint32(col, math.Float32bits(float32(3*i+j)))
		}
	}
	xF := filepath.Join(dir, "xf.npy")
	require.NoError(t, os.WriteFile(xF, rawNPYOrder("<f4", "(4, 3)", true, col), 0o644))
	// w as raw bf16 bits, as x.view(np.uint16) or ml_dtypes' bfloat16
	// (np.save says '<V2') saves it.
	for _, descr := range []string{"<u2", "<V2"} {
		wBits := filepath.Join(dir, "wbits.npy")
		require.NoError(t, os.WriteFile(wBits, rawNPY(descr, "(3,)", w.Data), 0o644))
		r := hirrun("run", prog, "--input", "x="+xF, "--input", "w="+wBits)
		expectCode(t, r, exitOK)
		assert.Equal(t, want.stdout, r.stdout, "Fortran-ordered x, w as %s bits", descr)
	}
	// bf16 bits are not an f32.
	bits := filepath.Join(dir, "bits.npy")
	require.NoError(t, os.WriteFile(bits, rawNPY("<u2", "(4, 3)", make([]byte, 24)), 0o644))
	r := hirrun("run", prog, "--input", "x="+bits, "--input", "w="+wPath)
	expectCode(t, r, exitUsage)
	assert.Equal(t, "hirrun: run: --input x="+bits+": dtype: the file holds uint16 ('<u2', read as bf16 bits) but %x is declared f32[4/DIDx, 3]\n", r.stderr)
}

func TestOutputArchive(t *testing.T) {
	dir := t.TempDir()
	prog := writeProgram(t, "p.hir", filesSrc)
	common := []string{"run", prog, "--input", "x=random:seed=1", "--input", "w=random:seed=2"}
	y, c, all := filepath.Join(dir, "y.npy"), filepath.Join(dir, "c.npy"), filepath.Join(dir, "all.npz")
	expectCode(t, hirrun(append(common, "--output", "y="+y, "--output", "c="+c, "--output", all)...), exitOK)
	z, err := host.OpenNPZ(all)
	require.NoError(t, err)
	defer z.Close()
	assert.Equal(t, []string{"y", "c"}, z.Names(), "every output, in the program's order")
	for name, path := range map[string]string{"y": y, "c": c} {
		fromNPY, err := host.ReadNPYFile(path)
		require.NoError(t, err)
		fromNPZ, err := z.Read(name)
		require.NoError(t, err)
		assert.Empty(t, cmp.Diff(fromNPY, fromNPZ.Array), "%s: the archive's array and the .npy file (-npy +npz)", name)
	}
}

// TestOutputPathsCheckedBeforeTheRun: a bad --output path is a usage
// error reported before the program runs (a run prints its outputs).
func TestOutputPathsCheckedBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	prog := writeProgram(t, "p.hir", `mesh 2
input %x : f32[2]
%y = relu %x
output %y, %x
`)
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	sub := filepath.Join(dir, "sub.npy")
	require.NoError(t, os.Mkdir(sub, 0o755))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--output", "y=" + filepath.Join(dir, "no", "y.npy")}, "--output y=" + filepath.Join(dir, "no", "y.npy") + ": the directory " + filepath.Join(dir, "no") + " does not exist"},
		{[]string{"--output", "y=" + filepath.Join(file, "y.npy")}, "--output y=" + filepath.Join(file, "y.npy") + ": " + file + " is not a directory"},
		{[]string{"--output", "y=" + sub}, "--output y=" + sub + ": " + sub + " exists and is not a regular file"},
		{[]string{"--output", "y=" + filepath.Join(dir, "a.npy"), "--output", "x=" + dir + "/./a.npy"}, "--output y=" + filepath.Join(dir, "a.npy") + " and --output x=" + dir + "/./a.npy write the same file"},
		{[]string{"--output", filepath.Join(dir, "all.npz"), "--output", "y=" + filepath.Join(dir, "all.npz")}, "--output y=" + filepath.Join(dir, "all.npz") + ": an .npz archive is given whole"},
		{[]string{"--output", "y=" + filepath.Join(dir, "y.bin")}, "--output y=" + filepath.Join(dir, "y.bin") + ": want NAME=FILE.npy, or FILE.npz or FILE.safetensors for every output (the file must end in .npy)"},
		{[]string{"--output", filepath.Join(dir, "y.npy")}, "--output " + filepath.Join(dir, "y.npy") + ": want NAME=FILE.npy, or FILE.npz or FILE.safetensors for every output"},
	} {
		r := hirrun(append([]string{"run", prog, "--input", "x=random"}, tc.args...)...)
		assert.Equal(t, exitUsage, r.code, "%v: stderr %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, "hirrun: run: "+tc.want, "%v", tc.args)
		assert.Empty(t, r.stdout, "%v: nothing runs", tc.args)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasPrefix(e.Name(), ".hirrun-check-"), "the writability check left %s", e.Name())
	}

	if why := noReadOnlyDirs(); why != "" {
		t.Log(why + ": the read-only cases are not tested")
		return
	}
	ro := filepath.Join(dir, "ro")
	require.NoError(t, os.Mkdir(ro, 0o555))
	r := hirrun("run", prog, "--input", "x=random", "--output", "y="+filepath.Join(ro, "y.npy"))
	expectCode(t, r, exitUsage)
	assert.Contains(t, r.stderr, "cannot create files in the directory "+ro+": permission denied")
	roFile := filepath.Join(dir, "ro.npy")
	require.NoError(t, os.WriteFile(roFile, nil, 0o444))
	r = hirrun("run", prog, "--input", "x=random", "--output", "y="+roFile)
	expectCode(t, r, exitUsage)
	assert.Contains(t, r.stderr, "cannot write "+roFile+": permission denied")
}
