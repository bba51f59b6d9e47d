package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const noOutputSrc = `mesh 2
input %x : f32[4/DIDx, 3]
%y = relu %x
`

// TestNoOutputsWarnsOncePerJob: a program with no output runs (exit 0,
// nothing on stdout) with one warning, at the mesh line, however many
// processes run it: the hirrun that starts the ranks warns, the ranks do
// not; under another launcher, rank 0 alone warns.
func TestNoOutputsWarnsOncePerJob(t *testing.T) {
	t.Setenv(envAsHirrun, "1")
	prog := writeProgram(t, "p.hir", noOutputSrc)
	want := prog + ":1:1: warning: the program has no outputs, so nothing it computes is kept; add an `output %NAME` line, last, naming the values to print\n"
	for _, backend := range []string{"sim", "simproc"} {
		r := hirrun("run", "--backend", backend, prog, "--input", "x=random")
		expectCode(t, r, exitOK)
		assert.Empty(t, r.stdout, "--backend %s", backend)
		assert.Equal(t, want, r.stderr, "--backend %s: one warning, from the hirrun run by hand", backend)
	}

	cmds := rankProcs(t, 2, []string{"run", "--backend", "simproc", "--input", "x=random", prog}, nil)
	for rank, cmd := range cmds {
		err := cmd.Wait()
		stdout, stderr := cmd.Stdout.(*bytes.Buffer).String(), cmd.Stderr.(*bytes.Buffer).String()
		require.NoError(t, err, "rank %d:\n%s", rank, stderr)
		assert.Empty(t, stdout, "rank %d", rank)
		if rank == 0 {
			assert.Equal(t, want, stderr, "rank 0 of a job torchrun started speaks for it")
		} else {
			assert.Empty(t, stderr, "rank %d of a job torchrun started", rank)
		}
	}
}

// TestNoOutputsCheckWarnsExitZero: check warns of each program with no
// output, at its mesh line (after any comments), and exits 0; a program
// with an error gets the error alone.
func TestNoOutputsCheckWarnsExitZero(t *testing.T) {
	a := writeProgram(t, "a.hir", "// no outputs\n\n"+noOutputSrc)
	b := writeProgram(t, "b.hir", pointwiseSrc)
	r := hirrun("check", a, b)
	expectCode(t, r, exitOK)
	assert.Empty(t, r.stdout)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "%q", r.stderr)
	assert.True(t, strings.HasPrefix(r.stderr, a+":3:1: warning: the program has no outputs"), "%q", r.stderr)

	bad := writeProgram(t, "bad.hir", "mesh 2\ninput %x : f32[3/DIDx]\n%y = relu %x\n")
	r = hirrun("check", bad)
	expectCode(t, r, exitFail)
	assert.NotContains(t, r.stderr, "warning", "an error comes alone")
}
