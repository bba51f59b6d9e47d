// Package passes holds the compiler pipeline that turns a parsed hir program
// into one the evaluator runs: an ordered list of named passes, modelled on
// the Go compiler's SSA passes. Each pass may be run alone once the passes
// before it have run; every pass is idempotent.
package passes

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/hirlab/hir/ir"
)

// Pass is one step of the pipeline.
type Pass struct {
	Name string
	Doc  string
	Run  func(p *ir.Program, ctx *Context) error
	// Rejects marks the passes that reject programs outside the language
	// (type, memory, symmetric-heap and deadlock errors): Check runs these.
	// The others transform the program, or reject only what the target
	// backend cannot compile (kernels).
	Rejects bool
}

// Context carries what passes share besides the program.
type Context struct {
	// Explain receives notes of what passes did (e.g. symmetric imports);
	// nil discards them.
	Explain io.Writer
	// CheckKernel, when set, is the target backend's check that it can
	// compile a compute op (fusion, pointwise op, reduction, matmul) on a
	// mesh of the given size: the `kernels` pass calls it for every one, so
	// a program the backend cannot compile is rejected before it runs. The
	// cuda backend's is codegen.CheckKernel; nil (the CPU runtime, which
	// runs every op) checks nothing.
	CheckKernel func(op *ir.Op, meshSize int) error
	// Verified says the program has just passed ir.Verify, as what
	// parser.Parse returns has, so the pipeline does not verify it again.
	// Leave it false for a program built or changed in Go.
	Verified bool
}

func (ctx *Context) explain(pos ir.Pos, format string, args ...any) {
	if ctx == nil || ctx.Explain == nil {
		return
	}
	fmt.Fprintf(ctx.Explain, "%s: %s\n", pos, fmt.Sprintf(format, args...))
}

var pipeline = []Pass{
	{Name: "typecheck", Doc: "infer every result type; check dtypes, shapes, shardings, annotations and async waits", Run: typecheck, Rejects: true},
	{Name: "validate", Doc: "check memory types and dimensions: mesh divisibility, contiguous views, ranks, host memory, frees", Run: validate, Rejects: true},
	{Name: "symmetric", Doc: "apply the symmetric-heap rules: import remotely read inputs, reject non-symmetric remotely written outputs", Run: symmetric, Rejects: true},
	{Name: "stream-parallel", Doc: "run the iterations of each loop with streams on its streams in turn, with the waits its data needs; reject loop-carried dependencies that would race", Run: streamParallel, Rejects: true},
	{Name: "deadlock", Doc: "play the program on every rank at once: reject sends, recvs, collectives and stream waits that would wait for each other forever", Run: deadlock, Rejects: true},
	{Name: "stream-hazards", Doc: "play this rank's streams: reject a read or write of storage that another stream wrote or read, with nothing ordering the two", Run: streamHazards, Rejects: true},
	{Name: "fuse", Doc: "group runs of pointwise ops (and one trailing reduction) into fusion ops", Run: fuse},
	{Name: "kernels", Doc: "check that the target backend can compile every compute op (when Context.CheckKernel is set)", Run: checkKernels},
	{Name: "insert-free", Doc: "free every freshly allocated value after its last use", Run: insertFree},
}

// checkPipeline is the passes Check runs: those that reject, in order.
var checkPipeline = func() []Pass {
	var out []Pass
	for _, p := range pipeline {
		if p.Rejects {
			out = append(out, p)
		}
	}
	return out
}()

// Pipeline returns the passes in the order they run.
func Pipeline() []Pass { return append([]Pass(nil), pipeline...) }

// Lookup finds a pass by name.
func Lookup(name string) (Pass, bool) {
	for _, p := range pipeline {
		if p.Name == name {
			return p, true
		}
	}
	return Pass{}, false
}

// Check runs the passes that can reject a program (typecheck, validate,
// symmetric, stream-parallel, deadlock, stream-hazards). symmetric and stream-parallel
// also rewrite the program: they insert imports and lower loops with
// streams. Like every run of passes, it first verifies the program
// (ir.Verify), unless the program is one parser.Parse verified and its top
// level is unchanged since (ir.Program.Verified).
func Check(p *ir.Program, ctx *Context) error { return run(p, checkPipeline, ctx) }

// Lower runs the whole pipeline in place.
func Lower(p *ir.Program, ctx *Context) error { return run(p, pipeline, ctx) }

// LowerUntil runs the pipeline up to and including the pass named name.
func LowerUntil(p *ir.Program, name string, ctx *Context) error {
	for i, ps := range pipeline {
		if ps.Name == name {
			return run(p, pipeline[:i+1], ctx)
		}
	}
	names := make([]string, len(pipeline))
	for i, ps := range pipeline {
		names[i] = ps.Name
	}
	return fmt.Errorf("unknown pass %q (the passes are %s)", name, strings.Join(names, ", "))
}

func run(p *ir.Program, ps []Pass, ctx *Context) error {
	if p == nil {
		return fmt.Errorf("no program")
	}
	// A program fresh from the parser has passed Verify already
	// (Context.Verified); any other is verified here.
	if ctx == nil || !ctx.Verified {
		if err := ir.Verify(p); err != nil {
			return err
		}
	}
	for _, pass := range ps {
		if err := pass.Run(p, ctx); err != nil {
			return err
		}
	}
	return nil
}

// namer hands out names not yet used anywhere in a program.
type namer map[string]bool

func newNamer(p *ir.Program) namer {
	size := len(p.Inputs)
	if p.Body != nil {
		size += len(p.Body.Ops)
	}
	n := make(namer, size)
	for _, v := range p.Inputs {
		n[v.Name] = true
	}
	p.Walk(func(op *ir.Op) {
		for _, r := range op.Results {
			n[r.Name] = true
		}
		if op.Body != nil {
			for _, a := range op.Body.Args {
				n[a.Name] = true
			}
		}
	})
	return n
}

// fresh returns base+suffix, or base+suffix+N when that is taken.
func (n namer) fresh(base, suffix string) string {
	name := base + suffix
	for i := 1; n[name]; i++ {
		name = base + suffix + strconv.Itoa(i)
	}
	n[name] = true
	return name
}

// outputSet returns the program's outputs as a set.
func outputSet(p *ir.Program) map[*ir.Value]bool {
	out := map[*ir.Value]bool{}
	for _, v := range p.Outputs {
		out[v] = true
	}
	return out
}

// joinOr spells a list as "a, b or c".
func joinOr(ws []string) string {
	if len(ws) <= 1 {
		return strings.Join(ws, "")
	}
	return strings.Join(ws[:len(ws)-1], ", ") + " or " + ws[len(ws)-1]
}
