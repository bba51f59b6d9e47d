package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/hirlab/hir/format"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/passes"
)

type checkOptions struct{ explain, graph bool }

var checkCommand = &command{
	name:    "check",
	args:    "[--explain] [--graph] prog.hir...",
	summary: "parse and check programs, printing every error",
	help: `Parses each program and runs the passes that can reject one (typecheck,
validate, symmetric, stream-parallel, deadlock). Prints nothing when every
program is correct, but for a warning when a program has no output (nothing it
computes is kept; the exit status stays 0). A program file "-" is read
from standard input and named <stdin> in messages. With --graph, also
checks the program for graph mode (run --graph): a loop too long to unroll
into a graph is an error; each op that waits on the host (register,
deregister, barrier, sync_stream) is noted with its position, since graph
mode runs it on the host between two graphs.`,
	flags: func(fs *flag.FlagSet) any {
		o := &checkOptions{}
		fs.BoolVar(&o.explain, "explain", false, "print what the passes did (e.g. symmetric imports) to stderr")
		fs.BoolVar(&o.graph, "graph", false, "also check the program for graph mode (run --graph), noting where ops on the host split the graph and which loops the device repeats")
		return o
	},
	run: func(c *cli, opts any, args []string) int {
		o := opts.(*checkOptions)
		if len(args) == 0 {
			c.errorf("check: no program given (usage: %s)", usageLine("check"))
			return exitUsage
		}
		if !c.stdinOnce("check", args) {
			return exitUsage
		}
		worst := exitOK
		for _, path := range args {
			prog, code := c.parse(path)
			if code == exitOK {
				err := passes.Check(prog, c.passContext(o.explain))
				if err == nil && o.graph {
					if err = ir.CheckCapturable(prog); err == nil {
						for _, sp := range ir.GraphSplits(prog) {
							fmt.Fprintf(c.stderr, "%s: note: %s splits the graph, running on the host between two graphs: %s\n", sp.Op.Pos, sp.Op.Code, sp.Why)
						}
						for _, l := range ir.DeviceLoops(prog) {
							fmt.Fprintf(c.stderr, "%s: note: the loop runs on the device: %s\n", l.Op.Pos, l.Why)
						}
					}
				}
				if err != nil {
					c.report(err)
					code = exitFail
				} else {
					c.warnNoOutputs(prog)
				}
			}
			worst = max(worst, code)
		}
		return worst
	},
}

type fmtOptions struct{ write, list bool }

var fmtCommand = &command{
	name:    "fmt",
	args:    "[-w] [-l] prog.hir... | -",
	summary: "print programs in canonical form, comments kept",
	help: `Prints each program in the canonical text form (the form ir.Print writes
and the parser reads back to the same program), with the file's comments
and blank lines kept: a comment above a statement stays above it, one at
the end of a line stays there (those of consecutive lines aligned), one at
the end of a body stays before its }, and a run of blank lines becomes one.
With -l, lists the files whose text differs from it instead; with -w,
rewrites them. "-" reads a program from standard input and writes it
formatted to standard output; messages and -l name it <stdin>.`,
	flags: func(fs *flag.FlagSet) any {
		o := &fmtOptions{}
		fs.BoolVar(&o.write, "w", false, "write the canonical form back to the file")
		fs.BoolVar(&o.list, "l", false, "list the files whose text is not canonical")
		return o
	},
	run: func(c *cli, opts any, args []string) int {
		o := opts.(*fmtOptions)
		if len(args) == 0 {
			c.errorf("fmt: no program given (usage: %s)", usageLine("fmt"))
			return exitUsage
		}
		for _, path := range args {
			if path == "-" && o.write {
				c.errorf("fmt: cannot use -w with standard input")
				return exitUsage
			}
		}
		if !c.stdinOnce("fmt", args) {
			return exitUsage
		}
		worst := exitOK
		for _, path := range args {
			worst = max(worst, c.format(path, o))
		}
		return worst
	},
}

// format formats one program file, or standard input for "-" (named
// <stdin> in messages and by -l, as every command names it).
func (c *cli) format(path string, o *fmtOptions) int {
	name := programName(path)
	src, code := c.readProgram(path)
	if code != exitOK {
		return code
	}
	formatted, err := format.Source(name, src)
	if err != nil {
		c.report(err) // every message has a position, <stdin>:3:1 for "-"
		return exitFail
	}
	changed := !bytes.Equal(src, formatted)
	if o.list && changed {
		fmt.Fprintln(c.stdout, name)
	}
	if !o.write {
		if !o.list {
			c.stdout.Write(formatted)
		}
		return exitOK
	}
	if !changed {
		return exitOK
	}
	st, err := os.Stat(path)
	if err == nil {
		err = os.WriteFile(path, formatted, st.Mode().Perm())
	}
	if err != nil {
		c.errorf("fmt: %v", err)
		return exitFail
	}
	return exitOK
}

type lowerOptions struct {
	pass    string
	explain bool
}

var lowerCommand = &command{
	name:    "lower",
	args:    "[--pass NAME] [--explain] prog.hir",
	summary: "print the program after each pass",
	help: `Runs the compiler pipeline on the program and prints it after every pass,
each under a "// after pass NAME" header, or only after the pass --pass names
(having run the passes before it). The program file may be - (standard
input, named <stdin> in messages).`,
	flags: func(fs *flag.FlagSet) any {
		o := &lowerOptions{}
		fs.StringVar(&o.pass, "pass", "", "print the program only after this pass: "+passNames())
		fs.BoolVar(&o.explain, "explain", false, "print what the passes did (e.g. symmetric imports) to stderr")
		return o
	},
	run: func(c *cli, opts any, args []string) int {
		o := opts.(*lowerOptions)
		if len(args) != 1 {
			c.errorf("lower: want one program, got %d arguments (usage: %s)", len(args), usageLine("lower"))
			return exitUsage
		}
		var only passes.Pass
		if o.pass != "" {
			var ok bool
			if only, ok = passes.Lookup(o.pass); !ok {
				c.errorf("lower: unknown pass %q (the passes are %s)", o.pass, passNames())
				return exitUsage
			}
		}
		prog, code := c.parse(args[0])
		if code != exitOK {
			return code
		}
		ctx := c.passContext(o.explain)
		if o.pass != "" {
			if err := passes.LowerUntil(prog, o.pass, ctx); err != nil {
				c.report(err)
				return exitFail
			}
			c.printAfter(only, prog)
			return exitOK
		}
		for i, p := range passes.Pipeline() {
			if err := p.Run(prog, ctx); err != nil {
				c.report(err)
				return exitFail
			}
			if i > 0 {
				fmt.Fprintln(c.stdout)
			}
			c.printAfter(p, prog)
		}
		return exitOK
	},
}

func (c *cli) printAfter(p passes.Pass, prog *ir.Program) {
	fmt.Fprintf(c.stdout, "// after pass %s: %s\n", p.Name, p.Doc)
	_ = ir.Print(c.stdout, prog)
}

func passNames() string {
	var names []string
	for _, p := range passes.Pipeline() {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

var rulesCommand = &command{
	name:    "rules",
	args:    "",
	summary: "print which tensors each collective algorithm touches remotely",
	help: `Prints the symmetric-heap table: for every collective and algorithm, whether
peers read its input or write its output through the symmetric heap. A
tensor read remotely is imported onto the heap by the symmetric pass; one
written remotely must be declared symmetric.`,
	run: func(c *cli, _ any, args []string) int {
		if len(args) != 0 {
			c.errorf("rules: takes no arguments, got %q", strings.Join(args, " "))
			return exitUsage
		}
		fmt.Fprint(c.stdout, ir.RulesTable())
		return exitOK
	},
}
