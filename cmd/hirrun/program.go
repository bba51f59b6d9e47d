package main

import (
	"errors"
	"io/fs"
	"os"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
)

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

// parse reads and parses a program file.
func (c *cli) parse(path string) (*ir.Program, int) {
	src, code := c.readSource(path)
	if code != exitOK {
		return nil, code
	}
	prog, err := parser.Parse(path, src)
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
