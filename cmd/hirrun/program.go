package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
)

// stdinName names standard input, given as the program file "-", in every
// message about the program: <stdin>:4:6: ..., as a file's name would be.
const stdinName = "<stdin>"

// programName is how messages name the program file path: its path, or
// stdinName for "-".
func programName(path string) string {
	if path == "-" {
		return stdinName
	}
	return path
}

// readSource reads a program file; a missing or unreadable file is a usage
// error.
func (c *cli) readSource(path string) ([]byte, int) {
	src, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.errorf("%s: no such file", path)
		return nil, exitUsage
	case err != nil:
		c.errorf("%v", err)
		return nil, exitUsage
	}
	return src, exitOK
}

// readProgram reads a program file, or standard input for "-".
func (c *cli) readProgram(path string) ([]byte, int) {
	if path != "-" {
		return c.readSource(path)
	}
	src, err := io.ReadAll(os.Stdin)
	if err != nil {
		c.errorf("reading the program from standard input (-): %v", err)
		return nil, exitUsage
	}
	return src, exitOK
}

// stdinOnce checks that "-" is among a command's program files at most
// once: standard input can be read only once.
func (c *cli) stdinOnce(cmd string, paths []string) bool {
	n := 0
	for _, p := range paths {
		if p == "-" {
			n++
		}
	}
	if n > 1 {
		c.errorf("%s: - (standard input) is given %d times, but it can be read only once: give it once, and the other programs as files", cmd, n)
		return false
	}
	return true
}

// parse reads and parses a program file ("-": standard input, named
// <stdin> in messages).
func (c *cli) parse(path string) (*ir.Program, int) {
	src, code := c.readProgram(path)
	if code != exitOK {
		return nil, code
	}
	prog, err := parser.Parse(programName(path), src)
	if err != nil {
		c.report(err)
		return nil, exitFail
	}
	return prog, exitOK
}

// passContext is the passes' context for a program from c.parse (verified
// already): their notes go to stderr when asked to explain.
func (c *cli) passContext(explain bool) *passes.Context {
	ctx := &passes.Context{Verified: true} // c.parse's programs come from parser.Parse
	if explain {
		ctx.Explain = c.stderr
	}
	return ctx
}

// warnNoOutputs warns, as a compiler warns of code with no effect, about
// a program that declares no output: it checks and runs, but whatever it
// computes is thrown away. It is a warning, not an error, because the
// language allows it (docs/LANGUAGE.md, "Programs and the mesh"): such a
// program still moves data between ranks, and may still deadlock or fail,
// which is what a test of a runtime may want of it.
func (c *cli) warnNoOutputs(prog *ir.Program) {
	if len(prog.Outputs) > 0 {
		return
	}
	pos := prog.Mesh.Pos
	if !pos.IsValid() {
		pos = ir.NewPos(prog.File, 1, 1)
	}
	c.warnf(pos, "the program has no outputs, so nothing it computes is kept; add an `output %%NAME` line, last, naming the values to print")
}

// warnf prints a warning about the program at pos, as its errors are
// printed (file:line:col: warning: ...); it leaves the exit status alone.
func (c *cli) warnf(pos ir.Pos, format string, args ...any) {
	fmt.Fprintf(c.stderr, "%s: warning: "+format+"\n", append([]any{pos}, args...)...)
}
