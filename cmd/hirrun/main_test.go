package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
)

// writeProgram writes src to a .hir file in a fresh directory.
func writeProgram(t *testing.T, name, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	return path
}

const pointwiseSrc = `mesh 2

input %x : f32[4/DIDx, 3]

%a = mul %x, 2.0
%y = relu %a
output %y
`

func expectCode(t *testing.T, r result, code int) {
	t.Helper()
	require.Equal(t, code, r.code, "exit code\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
}

func expectContains(t *testing.T, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		assert.Contains(t, s, p, what)
	}
}

// TestRunPrintsEveryRank: each rank's shard of relu(2x), against values
// worked out here. The command line's other behaviour is tested by the
// scripts in testdata/script (script_test.go).
func TestRunPrintsEveryRank(t *testing.T) {
	prog := writeProgram(t, "p.hir", pointwiseSrc)
	x := host.Random(ir.F32, []int64{4, 3}, 9)
	r := hirrun("run", prog, "--input", "x=random:seed=9")
	expectCode(t, r, exitOK)
	var want strings.Builder
	for rank := range 2 {
		shard, err := x.Shard(0, rank, 2)
		require.NoError(t, err)
		for i := range shard.Len() {
			shard.Set(i, max(2*shard.At(i), 0))
		}
		want.WriteString("rank " + string(rune('0'+rank)) + ": %y = " + shard.Summary() + "\n")
	}
	assert.Equal(t, want.String(), r.stdout, "stdout")
	assert.Empty(t, r.stderr, "stderr")
}

func TestRunNPYInputAndOutput(t *testing.T) {
	dir := t.TempDir()
	prog := writeProgram(t, "p.hir", `mesh 4
input %x : f32[8/DIDx, 2]
input %s : bf16[2]
%c = cast %s dtype=f32
%y = mul %x, %c
%g = all_gather %y algo=ring : f32[8, 2] symmetric
output %y, %g
`)
	x := host.Random(ir.F32, []int64{8, 2}, 5)
	xPath := filepath.Join(dir, "x.npy")
	require.NoError(t, x.WriteNPYFile(xPath))
	// A bf16 input given as <f4 is rounded to nearest even: 1.00390625 is
	// halfway between 1 and 1 + 2^-7, so it becomes 1.
	s := host.New(ir.F32, []int64{2})
	s.Set(0, 1.00390625)
	s.Set(1, -3)
	sPath := filepath.Join(dir, "s.npy")
	require.NoError(t, s.WriteNPYFile(sPath))
	outPath := filepath.Join(dir, "y.npy")
	gPath := filepath.Join(dir, "g.npy")
	r := hirrun("run", prog, "--input", "x="+xPath, "--input", "s="+sPath, "--output", "y="+outPath, "--output", "g="+gPath)
	expectCode(t, r, exitOK)

	want := x.Clone()
	for i := range want.Len() {
		want.Set(i, want.At(i)*[]float64{1, -3}[i%2])
	}
	for _, path := range []string{outPath, gPath} {
		got, err := host.ReadNPYFile(path)
		require.NoError(t, err)
		assert.NoError(t, host.Equal(got, want), filepath.Base(path))
	}
	assert.Equal(t, 8, strings.Count(r.stdout, "\n"), "want 2 outputs on each of 4 ranks:\n%s", r.stdout)

	// A file of the wrong shape or dtype is a usage error naming both.
	r = hirrun("run", prog, "--input", "x="+sPath, "--input", "s="+sPath)
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr, "--input x="+sPath+": shape: the file holds f32[2] but %x is declared f32[8/DIDx, 2]")
	bad := filepath.Join(dir, "bad.npy")
	require.NoError(t, os.WriteFile(bad, []byte("not numpy"), 0o644))
	r = hirrun("run", prog, "--input", "x="+bad, "--input", "s="+sPath)
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr, "not an NPY file")
}

func TestLower(t *testing.T) {
	path := writeProgram(t, "p.hir", `mesh 4
input %x : f32[2, 4]
%a = mul %x, 2.0
%b = relu %a
%s = all_reduce %b algo=two_shot : f32[2, 4] symmetric
output %s
`)
	r := hirrun("lower", path)
	expectCode(t, r, exitOK)
	sections := regexp.MustCompile(`(?m)^// after pass (\S+): `).FindAllStringSubmatch(r.stdout, -1)
	var names []string
	for _, s := range sections {
		names = append(names, s[1])
	}
	var want []string
	for _, p := range passes.Pipeline() {
		want = append(want, p.Name)
	}
	assert.Equal(t, strings.Join(want, " "), strings.Join(names, " "), "sections")
	// Every section is a program the parser reads back.
	for i, text := range regexp.MustCompile(`(?m)^// after pass .*\n`).Split(r.stdout, -1)[1:] {
		_, err := parser.Parse("section", []byte(text))
		assert.NoError(t, err, "the program after pass %s does not parse:\n%s", want[i], text)
	}

	r = hirrun("lower", "--pass", "symmetric", "--explain", path)
	expectCode(t, r, exitOK)
	assert.Equal(t, 1, strings.Count(r.stdout, "// after pass"), "lower --pass symmetric sections:\n%s", r.stdout)
	assert.True(t, strings.HasPrefix(r.stdout, "// after pass symmetric: "), "lower --pass symmetric printed:\n%s", r.stdout)
	assert.NotEmpty(t, r.stderr, "--explain printed nothing: the two-shot input should be imported")
}

func TestRules(t *testing.T) {
	r := hirrun("rules")
	expectCode(t, r, exitOK)
	assert.Equal(t, ir.RulesTable(), r.stdout, "rules printed, want ir.RulesTable()")
}
