package evaluator_test

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/sim"
)

// FuzzCheckThenRun holds the checker to its promise (docs/SEMANTICS.md,
// "The contract"): a program `check` accepts runs on the CPU runtime, or
// stops for a resource — memory, the timeout — with a typed error. It
// starts from every program the repository has, mutates it token by token
// (numbers to edge values, words to other keywords, names to other names,
// lines dropped or repeated), and runs whatever the checker accepts, twice,
// under a memory budget and a wall-clock budget. A panic, a hang or any
// other error is a finding: a checker bug, or a runtime bug.
//
//	go test -run '^$' -fuzz FuzzCheckThenRun -fuzztime 30m ./evaluator
func FuzzCheckThenRun(f *testing.F) {
	for _, src := range seedPrograms(f) {
		f.Add(src, []byte{})
	}
	// a few mutations of the quickstart, so the corpus starts with some
	f.Add([]byte("mesh 2\ninput %x : f32[4/DIDx, 4] symmetric\n%a = mul %x, 2.0\n%g = all_gather %a algo=ring : f32[4, 4] symmetric\n%v = symmetric_contiguous_view %x\noutput %g, %v\n"), []byte{3, 7, 11, 2, 40, 9})
	f.Fuzz(func(t *testing.T, src, muts []byte) {
		checkThenRun(t, mutateProgram(src, muts))
	})
}

// seedPrograms reads every .hir file of the repository's test data.
func seedPrograms(tb testing.TB) [][]byte {
	var out [][]byte
	for _, pattern := range []string{"../testdata/*.hir", "../testdata/cuda/*.hir", "../examples/*.hir", "../passes/testdata/*/*.hir", "../parser/testdata/*.hir", "../testdata/contract/*.hir"} {
		files, err := filepath.Glob(pattern)
		require.NoError(tb, err)
		for _, file := range files {
			src, err := os.ReadFile(file)
			require.NoError(tb, err)
			out = append(out, src)
		}
	}
	require.GreaterOrEqual(tb, len(out), 50, "only %d seed programs", len(out))
	return out
}

// Limits that keep one fuzz run short; a program past them is not run
// (its size is the memory budget's business, tested on its own).
const (
	fuzzMaxMesh       = 8
	fuzzMaxTensor     = 1 << 20 // bytes of any one tensor
	fuzzMaxIterations = 4096    // ops run inside loops, all loops together
	fuzzMemoryLimit   = 256 << 20
	fuzzPeerTimeout   = time.Second
	fuzzHang          = 60 * time.Second
)

// checkThenRun is one case of the contract: parse, check and lower src;
// if accepted and small, run it twice and accept only success or a
// resource error.
func checkThenRun(t *testing.T, src []byte) {
	prog, err := parser.Parse("fuzz.hir", src)
	if err != nil {
		return
	}
	if err := passes.Lower(prog, &passes.Context{}); err != nil {
		return
	}
	if !smallEnough(prog) {
		return
	}
	rt, err := sim.NewWithOptions(runtime.Config{WorldSize: prog.Mesh.Size(), Timeout: fuzzPeerTimeout}, sim.Options{MemoryLimit: fuzzMemoryLimit})
	require.NoError(t, err, "opening the CPU runtime for a checked program\n%s", src)
	defer rt.Close()
	job, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	require.NoError(t, err, "NewJob of a checked program\n%s", src)
	defer job.Close()
	inputs := map[string]*host.Array{}
	for i, in := range prog.Inputs {
		tt := in.Tensor()
		inputs[in.Name] = host.Random(tt.DType, tt.Shape(), uint64(i+1))
	}
	var want *evaluator.Result
	for run := 1; run <= 2; run++ {
		res, ok := runChecked(t, job, inputs, src, fmt.Sprintf("run %d", run))
		if !ok {
			return
		}
		want = res
	}
	// The same program with no buffer ever reused gives the same outputs,
	// bit for bit: a value freed while still read (an async collective's
	// operand freed at its post) shows here as a difference.
	fresh, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	require.NoError(t, err)
	defer fresh.Close()
	evaluator.DisableReuseForTest(fresh)
	if got, ok := runChecked(t, fresh, inputs, src, "a run with no buffer reused"); ok {
		for i := range want.Ranks {
			for name, w := range want.Ranks[i].Outputs {
				require.Equal(t, w.Data, got.Ranks[i].Outputs[name].Data, "rank %d, output %s differs from a run with no buffer reused: a lifetime bug\n%s", i, name, src)
			}
		}
	}
	// What check --graph accepts runs in graph mode too (warm-up, capture,
	// replay), with the eager run's outputs, bit for bit.
	if ir.CheckCapturable(prog) != nil {
		return
	}
	graph, err := evaluator.NewJob(prog, rt, evaluator.Options{Graph: true})
	require.NoError(t, err, "NewJob in graph mode of a program check --graph accepts\n%s", src)
	defer graph.Close()
	for run := 1; run <= 3; run++ {
		got, ok := runChecked(t, graph, inputs, src, fmt.Sprintf("graph-mode run %d", run))
		if !ok {
			return
		}
		for i := range want.Ranks {
			for name, w := range want.Ranks[i].Outputs {
				require.Equal(t, w.Data, got.Ranks[i].Outputs[name].Data, "graph-mode run %d, rank %d, output %s differs from eager\n%s", run, i, name, src)
			}
		}
	}
}

// runChecked runs job once under the contract: success (ok), a resource
// error (not ok: the case ends), or a test failure.
func runChecked(t *testing.T, job *evaluator.Job, inputs map[string]*host.Array, src []byte, what string) (*evaluator.Result, bool) {
	type outcome struct {
		res *evaluator.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() { res, err := job.Run(inputs); done <- outcome{res, err} }()
	select {
	case o := <-done:
		if o.err != nil && isResourceError(o.err) {
			return nil, false
		}
		require.NoError(t, o.err, "%s of a checked program failed\n%s", what, src)
		return o.res, true
	case <-time.After(fuzzHang):
		require.FailNow(t, "a checked program hangs", "%s: no end after %v\n%s", what, fuzzHang, src)
	}
	return nil, false
}

// isResourceError reports the errors the contract allows a checked
// program: out of memory, peers that did not arrive in time.
func isResourceError(err error) bool {
	var oom *runtime.OutOfMemoryError
	var timeout *runtime.TimeoutError
	return errors.As(err, &oom) || errors.As(err, &timeout)
}

// smallEnough keeps a fuzz case fast: a small mesh, small tensors, few
// loop iterations.
func smallEnough(p *ir.Program) bool {
	if p.Mesh.Size() > fuzzMaxMesh {
		return false
	}
	ok := true
	small := func(v *ir.Value) {
		t := v.Tensor()
		if t == nil {
			return
		}
		n, fits := ir.ProductChecked(t.Shape())
		if !fits || n*int64(max(t.DType.Size(), 1)) > fuzzMaxTensor || n > fuzzMaxTensor {
			ok = false
		}
	}
	for _, in := range p.Inputs {
		small(in)
	}
	var walk func(b *ir.Block, trips uint64)
	walk = func(b *ir.Block, trips uint64) {
		for _, op := range b.Ops {
			for _, r := range op.Results {
				small(r)
			}
			if op.Code == ir.OpFor {
				n := tripCount(op)
				hi, total := bits.Mul64(trips, n)
				if hi != 0 || total > fuzzMaxIterations {
					ok = false
					return
				}
				walk(op.Body, total)
			}
		}
	}
	walk(p.Body, 1)
	return ok
}

// tripCount is how many times a checked for loop runs, without overflow.
func tripCount(op *ir.Op) uint64 {
	from, to, step := op.IntAttr("from", 0), op.IntAttr("to", 0), op.IntAttr("step", 1)
	if to <= from || step <= 0 {
		return 0
	}
	span := uint64(to) - uint64(from) // exact: to > from
	return (span-1)/uint64(step) + 1
}

// tokenRE splits a program into tokens a mutation may replace.
var tokenRE = regexp.MustCompile(`%[A-Za-z_][A-Za-z0-9_.]*|-?[0-9]+(\.[0-9]+)?|[A-Za-z_][A-Za-z0-9_]*|/DIDx`)

// Replacement pools for mutations.
var (
	fuzzNumbers = []string{"0", "1", "2", "3", "4", "-1", "8", "16", "7", "64", "255", "256", "257",
		"2147483647", "2147483648", "4294967296", "9223372036854775807", "-9223372036854775808", "9223372036854775806",
		"4611686018427387904", "1.5", "0.0"}
	fuzzWords = func() []string {
		var w []string
		for _, op := range ir.Opcodes() {
			w = append(w, op.String())
		}
		w = append(w, ir.AlgoWords...)
		w = append(w, ir.ReduceOpWords...)
		w = append(w, ir.DTypeWords...)
		w = append(w, ir.MemWords...)
		w = append(w, ir.DirWords...)
		return append(w, "axis", "root", "peer", "algo", "op", "async", "true", "false", "mesh", "input", "output", "shape", "axes", "keepdim", "step", "to")
	}()
)

// mutateProgram applies the mutations muts spells, two bytes each: which
// token or line, and what to do with it.
func mutateProgram(src, muts []byte) []byte {
	if len(muts) == 0 {
		return src
	}
	s := string(src)
	for i := 0; i+1 < len(muts); i += 2 {
		where, what := int(muts[i]), int(muts[i+1])
		if what%8 == 7 {
			s = mutateLine(s, where, what/8)
			continue
		}
		locs := tokenRE.FindAllStringIndex(s, -1)
		if len(locs) == 0 {
			return []byte(s)
		}
		loc := locs[where%len(locs)]
		tok := s[loc[0]:loc[1]]
		var rep string
		switch {
		case tok == "/DIDx":
			rep = ""
		case tok[0] == '%':
			// another name of the program
			other := s[locs[(where+what+1)%len(locs)][0]:locs[(where+what+1)%len(locs)][1]]
			if other[0] != '%' {
				continue
			}
			rep = other
		case tok[0] == '-' || (tok[0] >= '0' && tok[0] <= '9'):
			rep = fuzzNumbers[what%len(fuzzNumbers)]
			if what%5 == 0 {
				rep += "/DIDx"
			}
		default:
			rep = fuzzWords[what%len(fuzzWords)]
		}
		s = s[:loc[0]] + rep + s[loc[1]:]
	}
	return []byte(s)
}

// mutateLine drops, repeats or moves one line.
func mutateLine(s string, where, how int) string {
	lines := strings.Split(s, "\n")
	i := where % len(lines)
	switch how % 3 {
	case 0:
		lines = append(lines[:i], lines[i+1:]...)
	case 1:
		lines = append(lines[:i+1], lines[i:]...)
	default:
		j := (i + 1 + how) % len(lines)
		lines[i], lines[j] = lines[j], lines[i]
	}
	return strings.Join(lines, "\n")
}

// TestContractCorpus runs every program of testdata/contract (programs the
// fuzz target or a review found breaking the contract, each fixed since)
// through checkThenRun, and checks that each is still accepted.
func TestContractCorpus(t *testing.T) {
	files, err := filepath.Glob("../testdata/contract/*.hir")
	require.NoError(t, err)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			require.NoError(t, err)
			prog, err := parser.Parse(file, src)
			require.NoError(t, err)
			err = passes.Lower(prog, &passes.Context{})
			if err != nil && strings.Contains(string(src), "// rejected:") {
				want := strings.TrimSpace(strings.SplitN(strings.SplitN(string(src), "// rejected:", 2)[1], "\n", 2)[0])
				require.ErrorContains(t, err, want, "rejected, with the message of its // rejected: line")
				return
			}
			require.NoError(t, err, "the checker rejects it")
			checkThenRun(t, src)
		})
	}
}
