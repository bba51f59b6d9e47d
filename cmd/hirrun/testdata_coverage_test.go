package main

// The project's testdata/ is meant to show every operation running and every
// error the passes report (issue 2, item 8). These tests keep it so: a new
// op, algorithm or pass error needs a testdata program.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	hirparser "github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
)

// testdataProgram is one testdata/*.hir with its golden.
type testdataProgram struct {
	name   string
	src    []byte
	golden string
}

func (p testdataProgram) ok() bool { return strings.Contains(p.golden, "\nexit 0\n") }

func testdataPrograms(t *testing.T) []testdataProgram { return programsIn(t, "") }

// contractPrograms are testdata/contract/*.hir, named contract/NAME.hir:
// programs the checker accepts that test its promise (docs/SEMANTICS.md).
func contractPrograms(t *testing.T) []testdataProgram { return programsIn(t, "contract/") }

func programsIn(t *testing.T, dir string) []testdataProgram {
	files, err := filepath.Glob("../../testdata/" + dir + "*.hir")
	require.NoError(t, err)
	var out []testdataProgram
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		golden, err := os.ReadFile(strings.TrimSuffix(f, ".hir") + ".golden")
		require.NoError(t, err)
		out = append(out, testdataProgram{dir + filepath.Base(f), src, string(golden)})
	}
	return out
}

// notYetInTestdata are ops another piece of work brings to testdata; none
// at the moment.
var notYetInTestdata = map[ir.Opcode]bool{}

func TestTestdataCoversTheLanguage(t *testing.T) {
	ops := map[ir.Opcode]bool{}
	algos := map[string]bool{} // "all_reduce algo=ring"
	reduceOps := map[ir.ReduceOp]bool{}
	dtypes := map[ir.DType]bool{}
	meshes := map[int]bool{}
	for _, p := range testdataPrograms(t) {
		if !p.ok() {
			continue
		}
		prog, err := hirparser.Parse(p.name, p.src)
		require.NoError(t, err, p.name)
		require.NoError(t, passes.Check(prog, &passes.Context{}), p.name)
		meshes[prog.Mesh.Size()] = true
		for _, in := range prog.Inputs {
			dtypes[in.Tensor().DType] = true
		}
		prog.Walk(func(op *ir.Op) {
			ops[op.Code] = true
			for _, r := range op.Results {
				if tt, ok := r.Type.(*ir.TensorType); ok {
					dtypes[tt.DType] = true
				}
			}
			if op.Code.IsCollective() {
				algos[op.Code.String()+" algo="+op.Algo().String()] = true
				if _, has := op.Attr("op"); has || op.Code == ir.OpAllReduce {
					reduceOps[op.ReduceOp()] = true
				}
			}
		})
	}
	for _, op := range ir.Opcodes() {
		if !notYetInTestdata[op] {
			assert.True(t, ops[op], "no succeeding testdata program runs %s", op)
		}
	}
	for _, rule := range ir.SymmetricRules() {
		key := rule.Op.String() + " algo=" + rule.Algo.String()
		assert.True(t, algos[key], "no succeeding testdata program runs %s", key)
	}
	for _, w := range ir.ReduceOps() {
		assert.True(t, reduceOps[w], "no succeeding testdata program reduces over ranks with op=%s", w)
	}
	for _, dt := range ir.AllDTypes {
		assert.True(t, dtypes[dt], "no succeeding testdata program uses %s", dt)
	}
	for _, n := range []int{1, 2, 3, 4} {
		assert.True(t, meshes[n], "no succeeding testdata program runs on a mesh of %d", n)
	}
}

// passErrorsNotInTestdata are messages of passes/ that no text program can
// provoke, or that belong to ops testdata does not hold yet; each says why.
var passErrorsNotInTestdata = map[string]string{
	"%s: no type rule":                                "an internal guard: every opcode has a rule",
	"%s: the literal %s is not a tensor":              "ir.Verify rejects a literal operand first, wherever one is not allowed",
	"for: the index %s must be an i64 scalar, not %s": "the parser always types a for index i64",
}

// TestTestdataCoversEveryPassError finds every message the type checker,
// validate and symmetric passes can report (the format strings of their
// errs.Add and fail calls) and checks that a testdata golden shows it.
func TestTestdataCoversEveryPassError(t *testing.T) {
	var stderr strings.Builder
	for _, p := range testdataPrograms(t) {
		if !p.ok() {
			_, errText, _ := strings.Cut(p.golden, "-- stderr --\n")
			stderr.WriteString(errText)
		}
	}
	typecheck, err := filepath.Glob("../../passes/typecheck*.go") // the pass and its files by op class
	require.NoError(t, err)
	typecheck = slices.DeleteFunc(typecheck, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	formats := passErrorFormats(t, append(typecheck, "../../passes/validate.go", "../../passes/symmetric.go", "../../passes/p2p.go", "../../passes/schedule.go", "../../passes/races.go")...)
	// The collectives' type rule lives with ir.Layout; the checker prints
	// its errors behind the op's name.
	formats = append(formats, errorfFormats(t, "../../ir/layout.go", "ResultType")...)
	require.GreaterOrEqual(t, len(formats), 50, "error formats found in passes/: has the code changed shape?")
	for _, f := range formats {
		if _, skip := passErrorsNotInTestdata[f]; skip {
			continue
		}
		// Not assert.Regexp: its message would hold every golden's stderr.
		assert.True(t, formatRegexp(f).MatchString(stderr.String()),
			"no testdata golden shows the pass error %q: add a program that provokes it (or list it in passErrorsNotInTestdata, saying why)", f)
	}
}

// passErrorFormats returns the string-literal formats passed to X.errs.Add
// (second argument) and fail (first argument) in the given Go files.
func passErrorFormats(t *testing.T, files ...string) []string {
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			arg := -1
			switch fun := call.Fun.(type) {
			case *ast.SelectorExpr:
				if recv, ok := fun.X.(*ast.SelectorExpr); ok && recv.Sel.Name == "errs" && fun.Sel.Name == "Add" {
					arg = 1
				}
			case *ast.Ident:
				if fun.Name == "fail" {
					arg = 0
				}
			}
			if arg < 0 || len(call.Args) <= arg {
				return true
			}
			if lit, ok := call.Args[arg].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					seen[s] = true
				}
			}
			return true
		})
	}
	var out []string
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// errorfFormats returns the string-literal formats of the fmt.Errorf
// calls in function (or method) name of a Go file.
func errorfFormats(t *testing.T, file, name string) []string {
	var out []string
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	require.NoError(t, err)
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Name.Name != name {
			continue
		}
		ast.Inspect(fd, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			fun, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || fun.Sel.Name != "Errorf" {
				return true
			}
			if pkg, ok := fun.X.(*ast.Ident); !ok || pkg.Name != "fmt" {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out = append(out, s)
				}
			}
			return true
		})
	}
	require.NotEmpty(t, out, "no fmt.Errorf formats in %s's %s: has the code changed shape?", file, name)
	return out
}

// formatRegexp matches what a Printf format prints, any verb standing for
// any non-empty text on one line.
func formatRegexp(format string) *regexp.Regexp {
	verb := regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`)
	var b strings.Builder
	last := 0
	for _, loc := range verb.FindAllStringIndex(format, -1) {
		b.WriteString(regexp.QuoteMeta(format[last:loc[0]]))
		b.WriteString(`[^\n]+`)
		last = loc[1]
	}
	b.WriteString(regexp.QuoteMeta(format[last:]))
	return regexp.MustCompile(b.String())
}

// TestTestdataLoweredRoundTrip: the lowered form of every succeeding
// testdata program (what `hirrun lower` prints) parses back, and lowering
// that again changes nothing. (parser's TestRoundTrip covers the sources.)
func TestTestdataLoweredRoundTrip(t *testing.T) {
	for _, p := range testdataPrograms(t) {
		if !p.ok() {
			continue
		}
		prog, err := hirparser.Parse(p.name, p.src)
		require.NoError(t, err, p.name)
		require.NoError(t, passes.Lower(prog, &passes.Context{}), p.name)
		text := prog.String()
		again, err := hirparser.Parse(p.name, []byte(text))
		if err == nil {
			err = passes.Lower(again, &passes.Context{})
		}
		if !assert.NoError(t, err, "%s: the lowered program does not parse and lower again:\n%s", p.name, text) {
			continue
		}
		assert.Empty(t, cmp.Diff(text, again.String()), "%s: lowering the printed lowered program changed it (-first +then)", p.name)
	}
}
