package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
)

// expectSrc halves its input: with x = 0, 1, ..., 11 the output %y is
// 0, 0.5, ..., 5.5, sharded over two ranks, and %b the same in bf16.
const expectSrc = `mesh 2
input %x : f32[4/DIDx, 3]
%a = mul %x, 0.5
%y = relu %a
%b = cast %y dtype=bf16
output %y, %b
`

// expectCase writes the program, x and the exact outputs to a fresh
// directory and returns their paths.
type expectCase struct {
	dir, prog, x string
	y, b         *host.Array // the outputs, as the program makes them
}

func newExpectCase(t *testing.T) expectCase {
	t.Helper()
	c := expectCase{prog: writeProgram(t, "p.hir", expectSrc)}
	c.dir = filepath.Dir(c.prog)
	x := host.New(ir.F32, []int64{4, 3})
	c.y = host.New(ir.F32, []int64{4, 3})
	for i := range x.Len() {
		x.Set(i, float64(i))
		c.y.Set(i, float64(i)/2)
	}
	c.b = c.y.Convert(ir.BF16)
	c.x = c.path("x.npy")
	require.NoError(t, x.WriteNPYFile(c.x))
	return c
}

func (c expectCase) path(name string) string { return filepath.Join(c.dir, name) }

// run runs the program on x with extra flags.
func (c expectCase) run(extra ...string) result {
	return hirrun(append([]string{"run", c.prog, "--input", "x=" + c.x}, extra...)...)
}

// save writes a to the case's directory.
func (c expectCase) save(t *testing.T, name string, a *host.Array) string {
	t.Helper()
	p := c.path(name)
	require.NoError(t, a.WriteNPYFile(p))
	return p
}

// checkLines are the lines --expect printed.
func checkLines(stdout string) []string {
	var out []string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "check ") {
			out = append(out, l)
		}
	}
	return out
}

func TestExpectPasses(t *testing.T) {
	c := newExpectCase(t)
	yRef := c.save(t, "y.npy", c.y)
	bRef := c.save(t, "b.npy", c.b) // bf16 saved as <f4, as --output does
	r := c.run("--expect", "y="+yRef, "--expect", "%b="+bRef)
	expectCode(t, r, exitOK)
	assert.Equal(t, []string{
		"check %y against " + yRef + ": ok, 12 elements within rtol 1.3e-06, atol 1e-05; max abs error 0, max rel error 0",
		"check %b against " + bRef + ": ok, 12 elements within rtol 0.016, atol 1e-05; max abs error 0, max rel error 0",
	}, checkLines(r.stdout))
	assert.Empty(t, r.stderr)
	// The outputs are printed first, as without --expect.
	plain := c.run()
	assert.True(t, strings.HasPrefix(r.stdout, plain.stdout), "stdout starts with the run's output lines:\n%s", r.stdout)

	// With --graph the comparison is of the last replay.
	r = c.run("--graph", "--repeat", "3", "--expect", "y="+yRef)
	expectCode(t, r, exitOK)
	assert.Len(t, checkLines(r.stdout), 1, "--graph --repeat 3:\n%s", r.stdout)
}

func TestExpectMismatchIsExit1(t *testing.T) {
	c := newExpectCase(t)
	ref := c.y.Clone()
	ref.Set(5, 2)        // [1, 2] is 2.5: |0.5| against 2, rel 0.25
	ref.Set(9, 5)        // [3, 0] is 4.5: |0.5| against 5, rel 0.1
	ref.Set(1, 0.500004) // [0, 1] is 0.5: within atol 1e-5
	yRef := c.save(t, "y.npy", ref)
	bRef := c.save(t, "b.npy", c.b)
	all := c.path("all.npz")
	r := c.run("--expect", "y="+yRef, "--expect", "b="+bRef, "--output", all)
	expectCode(t, r, exitFail)
	assert.Equal(t, []string{
		"check %y against " + yRef + ": MISMATCH, 2 of 12 elements differ (rtol 1.3e-06, atol 1e-05); the first at [1, 2]: got 2.5, want 2; max abs error 0.5, max rel error 0.25",
		"check %b against " + bRef + ": ok, 12 elements within rtol 0.016, atol 1e-05; max abs error 0, max rel error 0",
	}, checkLines(r.stdout), "every check is printed")
	assert.Equal(t, "hirrun: run: 1 of 2 --expect checks failed: %y\n", r.stderr)
	// The outputs are saved all the same, to look into.
	z, err := host.OpenNPZ(all)
	require.NoError(t, err)
	defer z.Close()
	got, err := z.Read("y")
	require.NoError(t, err)
	assert.NoError(t, host.Equal(got.Array, c.y))

	// The tolerances are the user's: within atol 0.5 both pass; with rtol
	// 0.2 alone 0.5 is too far from 2 (0.4) but not from 5 (1).
	r = c.run("--expect", "y="+yRef, "--atol", "0.5")
	expectCode(t, r, exitOK)
	assert.Equal(t, []string{"check %y against " + yRef + ": ok, 12 elements within rtol 1.3e-06, atol 0.5; max abs error 0.5, max rel error 0.25"}, checkLines(r.stdout))
	r = c.run("--expect", "y="+yRef, "--rtol", "0.2", "--atol", "0")
	expectCode(t, r, exitFail)
	assert.Equal(t, []string{"check %y against " + yRef + ": MISMATCH, 1 of 12 elements differ (rtol 0.2, atol 0); the first at [1, 2]: got 2.5, want 2; max abs error 0.5, max rel error 0.25"}, checkLines(r.stdout))
}

func TestExpectBF16References(t *testing.T) {
	c := newExpectCase(t)
	// 1% off: within bf16's rtol 1.6e-2, not within f32's.
	near := c.y.Clone()
	for i := range near.Len() {
		near.Set(i, near.At(i)*1.01)
	}
	nearRef := c.save(t, "near.npy", near)
	r := c.run("--expect", "b="+nearRef)
	expectCode(t, r, exitOK)
	assert.Contains(t, r.stdout, "check %b against "+nearRef+": ok, 12 elements within rtol 0.016, atol 1e-05; max abs error 0.055, max rel error 0.0099")
	r = c.run("--expect", "b="+nearRef, "--rtol", "1e-3")
	expectCode(t, r, exitFail)
	assert.Contains(t, r.stdout, "check %b against "+nearRef+": MISMATCH, 11 of 12 elements differ (rtol 0.001, atol 1e-05); the first at [0, 1]: got 0.5, want 0.505;")

	// Raw bf16 bits, as x.view(np.uint16) saves them.
	bits := c.path("bits.npy")
	require.NoError(t, os.WriteFile(bits, rawNPY("<u2", "(4, 3)", c.b.Data), 0o644))
	r = c.run("--expect", "b="+bits)
	expectCode(t, r, exitOK)
	assert.Contains(t, r.stdout, "check %b against "+bits+": ok, 12 elements")
}

func TestExpectArchive(t *testing.T) {
	c := newExpectCase(t)
	x, err := host.ReadNPYFile(c.x)
	require.NoError(t, err)
	// A whole case: the input (skipped by --expect) and both outputs.
	caseFile := c.path("case.npz")
	require.NoError(t, host.WriteNPZFile(caseFile, []string{"x", "y", "b"}, []*host.Array{x, c.y, c.b}))
	r := hirrun("run", c.prog, "--input", caseFile, "--expect", caseFile)
	expectCode(t, r, exitOK)
	assert.Equal(t, []string{
		"check %y against " + caseFile + "[y]: ok, 12 elements within rtol 1.3e-06, atol 1e-05; max abs error 0, max rel error 0",
		"check %b against " + caseFile + "[b]: ok, 12 elements within rtol 0.016, atol 1e-05; max abs error 0, max rel error 0",
	}, checkLines(r.stdout))

	// What --output FILE.npz saves is a reference --expect takes.
	saved := c.path("saved.npz")
	expectCode(t, c.run("--output", saved), exitOK)
	r = c.run("--expect", saved)
	expectCode(t, r, exitOK)
	assert.Len(t, checkLines(r.stdout), 2)
}

// TestExpectErrorsBeforeTheRun: a reference that cannot match is a usage
// error found before the program runs (nothing is printed on stdout).
func TestExpectErrorsBeforeTheRun(t *testing.T) {
	c := newExpectCase(t)
	f64 := c.save(t, "f64.npy", c.y.Convert(ir.F64))
	i32 := c.save(t, "i32.npy", c.y.Convert(ir.I32))
	wide := c.save(t, "wide.npy", host.New(ir.F32, []int64{2, 3}))
	y := c.save(t, "y.npy", c.y)
	bits := c.path("bits.npy")
	require.NoError(t, os.WriteFile(bits, rawNPY("<u2", "(4, 3)", c.b.Data), 0o644))
	onlyX := c.path("onlyx.npz")
	require.NoError(t, host.WriteNPZFile(onlyX, []string{"x"}, []*host.Array{c.y}))
	stray := c.path("stray.npz")
	require.NoError(t, host.WriteNPZFile(stray, []string{"y", "q"}, []*host.Array{c.y, c.y}))
	both := c.path("both.npz")
	require.NoError(t, host.WriteNPZFile(both, []string{"y"}, []*host.Array{c.y}))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--expect", "y=" + f64}, "--expect y=" + f64 + ": dtype: reference is float64 ('<f8'), output %y is f32"},
		{[]string{"--expect", "b=" + i32}, "--expect b=" + i32 + ": dtype: reference is int32 ('<i4'), output %b is bf16"},
		{[]string{"--expect", "y=" + bits}, "--expect y=" + bits + ": dtype: reference is uint16 ('<u2', read as bf16 bits), output %y is f32"},
		{[]string{"--expect", "y=" + wide}, "--expect y=" + wide + ": shape: reference is f32[2, 3], output %y is f32[4/DIDx, 3] (the whole logical tensor is compared)"},
		{[]string{"--expect", "y=" + c.path("gone.npy")}, "--expect y=" + c.path("gone.npy") + ": no such file"},
		{[]string{"--expect", c.path("gone.npz")}, "--expect " + c.path("gone.npz") + ": no such file"},
		{[]string{"--expect", "q=" + y}, "--expect q: the program has no output %q (its outputs: %y, %b)"},
		{[]string{"--expect", "y=" + y, "--expect", "y=" + f64}, "--expect y is given twice"},
		{[]string{"--expect", "y=" + y, "--expect", both}, "--expect " + both + ": array y: %y is also compared by --expect y=" + y},
		{[]string{"--expect", "y=ref.bin"}, "--expect y=ref.bin: want NAME=FILE.npy, or FILE.npz or FILE.safetensors for every output it names (the file must end in .npy)"},
		{[]string{"--expect", "y=" + both}, "--expect y=" + both + ": an .npz archive is given whole (--expect " + both + ") and matched by its arrays' names; for one array, give NAME=FILE.npy"},
		{[]string{"--expect", onlyX}, "--expect " + onlyX + ": the archive holds no array named after an output (its outputs: %y, %b; its arrays: x)"},
		{[]string{"--expect", stray}, "--expect " + stray + `: the archive's array "q" names no output of the program (its outputs: %y, %b)`},
		{[]string{"--expect", "y=" + y, "--rtol", "-1"}, `invalid value "-1" for flag -rtol: want a finite number >= 0`},
		{[]string{"--expect", "y=" + y, "--atol", "nan"}, `invalid value "nan" for flag -atol: want a finite number >= 0`},
	} {
		r := c.run(tc.args...)
		assert.Equal(t, exitUsage, r.code, "%v: stderr %s", tc.args, r.stderr)
		assert.Equal(t, "hirrun: run: "+tc.want, strings.TrimSuffix(strings.TrimSuffix(r.stderr, "\n"), " (run 'hirrun run --help')"), "%v", tc.args)
		assert.Empty(t, r.stdout, "%v: nothing runs", tc.args)
	}
}

// rawNPY is an NPY 1.0 file with any descr and shape, written by hand.
func rawNPY(descr, shape string, data []byte) []byte {
	return rawNPYOrder(descr, shape, false, data)
}

func rawNPYOrder(descr, shape string, fortran bool, data []byte) []byte {
	order := "False"
	if fortran {
		order = "True"
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, order, shape)
	pad := 64 - (10+len(dict)+1)%64
	header := dict + strings.Repeat(" ", pad%64) + "\n"
	b := []byte("\x93NUMPY\x01\x00")
	b = binary.LittleEndian.AppendUint16(b, uint16(len(header)))
	return append(append(b, header...), data...)
}

// TestDataFilesDocShowsRealLines: the lines docs/DATA-FILES.md shows are
// what hirrun prints for the case above.
func TestDataFilesDocShowsRealLines(t *testing.T) {
	doc, err := os.ReadFile("../../docs/DATA-FILES.md")
	require.NoError(t, err)
	c := newExpectCase(t)
	ref := c.y.Clone()
	ref.Set(5, 2)
	ref.Set(9, 5)
	c.save(t, "y_ref.npy", ref)
	require.NoError(t, host.WriteNPZFile(c.path("case.npz"), []string{"b"}, []*host.Array{c.b}))
	t.Chdir(c.dir)
	r := c.run("--expect", "y=y_ref.npy", "--expect", "case.npz")
	expectCode(t, r, exitFail)
	lines := checkLines(r.stdout)
	require.Len(t, lines, 2)
	for _, l := range lines {
		assert.Contains(t, string(doc), "\n"+l+"\n", "docs/DATA-FILES.md should show this line as hirrun prints it")
	}
	assert.Contains(t, string(doc), "\n"+r.stderr, "docs/DATA-FILES.md should show the failure line as hirrun prints it")
}
