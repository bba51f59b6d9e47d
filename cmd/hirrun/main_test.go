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

func TestUsageAndHelp(t *testing.T) {
	r := hirrun()
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr, "Usage:", "hirrun run", "hirrun check", "hirrun fmt", "hirrun lower", "hirrun rules")

	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		r := hirrun(args...)
		expectCode(t, r, exitOK)
		expectContains(t, "stdout", r.stdout, "Usage:", "Exit codes")
	}
	for _, cmd := range commands {
		for _, args := range [][]string{{cmd.name, "--help"}, {cmd.name, "-h"}, {"help", cmd.name}} {
			r := hirrun(args...)
			expectCode(t, r, exitOK)
			expectContains(t, "stdout", r.stdout, "Usage: hirrun "+cmd.name)
			assert.Empty(t, r.stderr, "%v wrote to stderr", args)
		}
	}
	r = hirrun("run", "--help")
	expectContains(t, "run --help", r.stdout, "-input", "-output", "-backend", "-stats", "-timeout", "-repeat")
}

func TestMisuse(t *testing.T) {
	prog := writeProgram(t, "p.hir", pointwiseSrc)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"help", "frob"}, `help: unknown command "frob"`},
		{[]string{"run", "--frob", prog}, "run: flag provided but not defined: -frob"},
		{[]string{"run"}, "run: want one program, got 0 arguments"},
		{[]string{"run", prog, prog}, "run: want one program, got 2 arguments"},
		{[]string{"run", "nope.hir"}, "nope.hir: no such file"},
		{[]string{"nope.hir"}, "nope.hir: no such file"},
		{[]string{"check", "nope.hir"}, "nope.hir: no such file"},
		{[]string{"check"}, "check: no program given"},
		{[]string{"fmt"}, "fmt: no program given"},
		{[]string{"lower", prog, "--pass", "nosuch"}, `lower: unknown pass "nosuch" (the passes are typecheck, validate, symmetric, stream-parallel, deadlock, fuse, kernels, insert-free)`},
		{[]string{"rules", "extra"}, "rules: takes no arguments"},
		{[]string{"run", prog, "--repeat", "0", "--input", "x=random"}, "--repeat must be at least 1"},
		{[]string{"run", prog, "--timeout", "soon"}, `invalid value "soon" for flag -timeout`},
		{[]string{"run", prog, "--input", "x"}, "--input x: want NAME=random:seed=N, NAME=FILE.npy, or FILE.npz for every input it names"},
		{[]string{"run", prog, "--input", "x=random", "--input", "x=random:seed=2"}, "--input x is given twice"},
		{[]string{"run", prog, "--input", "w=random"}, "--input w: the program has no input %w (its inputs: %x)"},
		{[]string{"run", prog, "--input", "x=random:sed=1"}, `--input x=random:sed=1: unknown random option "sed=1" (want random:seed=N)`},
		{[]string{"run", prog, "--input", "x=random:seed=-1"}, `seed "-1" is not a non-negative integer`},
		{[]string{"run", prog, "--input", "x=nothere.npy"}, "--input x=nothere.npy: no such file"},
		{[]string{"run", prog, "--input", "x=random", "--output", "q=q.npy"}, "--output q: the program has no output %q (its outputs: %y)"},
		{[]string{"run", prog, "--input", "x=random", "--backend", "abacus"}, `unknown backend "abacus"`},
	} {
		r := hirrun(tc.args...)
		assert.Equal(t, exitUsage, r.code, "hirrun %s: stderr %q", strings.Join(tc.args, " "), r.stderr)
		assert.Contains(t, r.stderr, tc.want, "hirrun %s", strings.Join(tc.args, " "))
	}
}

func TestMissingInputSaysHowToGiveIt(t *testing.T) {
	prog := writeProgram(t, "p.hir", `mesh 2
input %x : f32[4/DIDx, 3] symmetric
input %w : bf16[3]
%y = mul %x, 2.0
output %y, %w
`)
	r := hirrun("run", prog, "--input", "w=random")
	expectCode(t, r, exitUsage)
	want := "hirrun: run: missing input %x : f32[4/DIDx, 3] symmetric (declared at " + prog + ":2:7); give each with --input NAME=random:seed=N (random values) or --input NAME=FILE.npy, e.g. --input x=random:seed=1\n"
	assert.Equal(t, want, r.stderr, "stderr")
	r = hirrun("run", prog)
	expectContains(t, "stderr", r.stderr, "missing inputs %x : f32[4/DIDx, 3] symmetric (declared at "+prog+":2:7), %w : bf16[3] (declared at "+prog+":3:7);")
}

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

	// `hirrun FILE` is run, and flags may come before or after the file.
	for _, args := range [][]string{
		{prog, "--input", "x=random:seed=9"},
		{"--input", "x=random:seed=9", prog},
		{"run", "--input", "%x=random:seed=9", prog},
		{"run", prog, "--repeat", "3", "--input", "x=random:seed=9"},
	} {
		again := hirrun(args...)
		expectCode(t, again, exitOK)
		assert.Equal(t, r.stdout, again.stdout, "hirrun %v", args)
	}
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

func TestRunStats(t *testing.T) {
	prog := writeProgram(t, "p.hir", `mesh 2
input %x : f32[4/DIDx, 3]
%a = mul %x, 2.0
%y = relu %a
%g = all_gather %y algo=ring : f32[4, 3] symmetric
output %g
`)
	r := hirrun("run", prog, "--input", "x=random", "--stats", "--repeat", "2")
	expectCode(t, r, exitOK)
	// on stderr: stdout holds the outputs alone
	assert.NotContains(t, r.stdout, "symmetric handles")
	header := regexp.MustCompile(`(?m)^rank [01]: symmetric handles \d+ hits?, \d+ miss(es)?; kernels \d+ hits?, \d+ miss(es)?$`)
	assert.Len(t, header.FindAllString(r.stderr, -1), 2, "want a cache line per rank:\n%s", r.stderr)
	// Two runs: the gather ran twice on each rank.
	row := regexp.MustCompile(`(?m)^\s*all_gather\s+\S+p\.hir:5:\d+\s+2\s+\S+\s+\S+$`)
	assert.Len(t, row.FindAllString(r.stderr, -1), 2, "want an all_gather row with count 2 per rank:\n%s", r.stderr)
	expectContains(t, "stderr", r.stderr, "op", "where", "count", "total", "mean")
}

func TestRunFailureIsExit1(t *testing.T) {
	// Every rank waits for a message nobody sends: the runtime times out.
	prog := writeProgram(t, "p.hir", `mesh 2
input %x : f32[2]
%y = recv peer=+1 : f32[2]
output %y
`)
	r := hirrun("run", prog, "--input", "x=random", "--timeout", "200ms")
	expectCode(t, r, exitFail)
	expectContains(t, "stderr", r.stderr, "rank ")
}

func TestCheck(t *testing.T) {
	good := writeProgram(t, "good.hir", pointwiseSrc)
	r := hirrun("check", good)
	expectCode(t, r, exitOK)
	assert.Empty(t, r.stdout, "check of a good program printed to stdout")
	assert.Empty(t, r.stderr, "check of a good program printed to stderr")
	bad := writeProgram(t, "bad.hir", "mesh 4\ninput %x : f32[4/DIDx, 2]\n%g = all_gather %x algo=ring : f32[4, 2]\noutput %g\n")
	r = hirrun("check", good, bad)
	expectCode(t, r, exitFail)
	assert.Regexp(t, `bad\.hir:3:\d+: `, r.stderr, "want an error at bad.hir:3")
	assert.Contains(t, r.stderr, "symmetric", "want an error about symmetric memory")
	// A missing file outranks a bad program.
	r = hirrun("check", bad, filepath.Join(t.TempDir(), "gone.hir"))
	expectCode(t, r, exitUsage)
}

func TestFmt(t *testing.T) {
	messy := "mesh   2\ninput %x:f32[4/DIDx,3]\n%y=relu %x\noutput %y\n"
	path := writeProgram(t, "p.hir", messy)
	prog, err := parser.Parse(path, []byte(messy))
	require.NoError(t, err)
	canonical := prog.String()

	r := hirrun("fmt", path)
	expectCode(t, r, exitOK)
	assert.Equal(t, canonical, r.stdout, "fmt printed")
	r = hirrun("fmt", "-l", path)
	expectCode(t, r, exitOK)
	assert.Equal(t, path+"\n", r.stdout, "fmt -l prints the path")
	r = hirrun("fmt", "-w", path)
	expectCode(t, r, exitOK)
	got, _ := os.ReadFile(path)
	assert.Equal(t, canonical, string(got), "fmt -w wrote")
	r = hirrun("fmt", "-l", path)
	assert.Equal(t, exitOK, r.code, "fmt -l on a canonical file: exit")
	assert.Empty(t, r.stdout, "fmt -l on a canonical file")

	// Comments are kept (fmt_test.go has more).
	commented := "// keep me\n" + messy
	path2 := writeProgram(t, "c.hir", commented)
	r = hirrun("fmt", "-w", path2)
	expectCode(t, r, exitOK)
	got, _ = os.ReadFile(path2)
	assert.Equal(t, "// keep me\n"+canonical, string(got), "fmt -w on a commented file")

	bad := writeProgram(t, "bad.hir", "mesh 2\ninput %x : f33[2]\n")
	r = hirrun("fmt", bad)
	expectCode(t, r, exitFail)
	expectContains(t, "stderr", r.stderr, "bad.hir:2:")
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
