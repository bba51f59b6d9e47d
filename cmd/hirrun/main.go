// Command hirrun runs and inspects hir programs: it parses a .hir file,
// checks and lowers it, and runs it on a backend (the embedded CPU runtime
// by default), printing each rank's outputs.
//
//	hirrun prog.hir --input x=random:seed=1
//	hirrun check prog.hir
//	hirrun fmt -w prog.hir
//	hirrun lower --pass symmetric prog.hir
//	hirrun rules
//	hirrun run --backend cuda prog.hir  (one process per GPU)
//	hirrun topo --nproc 2
//	hirrun version --backend cuda
//
// Exit codes: 0 success, 1 the program is wrong or failed (parse, check or
// run), 2 the command line is (unknown command or flag, missing file or
// input).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	// Backends register themselves with runtime.Register when imported.
	_ "github.com/hirlab/hir/runtime/cuda"
	_ "github.com/hirlab/hir/runtime/sim"
)

const (
	exitOK    = 0
	exitFail  = 1 // the program is wrong or failed
	exitUsage = 2 // the command line is wrong
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand.
type command struct {
	name    string
	args    string // what follows the name in the usage line
	summary string
	help    string // a paragraph after the usage line
	flags   func(fs *flag.FlagSet) any
	run     func(c *cli, opts any, args []string) int
}

var commands []*command

func init() {
	// Filled here, not in the declaration, because help refers to commands.
	commands = []*command{runCommand, checkCommand, fmtCommand, lowerCommand, rulesCommand, helpCommand}
	commands = beforeHelp(commands, topoCommand)
	commands = beforeHelp(commands, codegenCommand)
	commands = beforeHelp(commands, benchCommand)
	commands = beforeHelp(commands, versionCommand)
}

// beforeHelp inserts extra into list ahead of the help command, which
// stays last.
func beforeHelp(list []*command, extra ...*command) []*command {
	for i, c := range list {
		if c == helpCommand {
			return append(append(append([]*command{}, list[:i]...), extra...), list[i:]...)
		}
	}
	return append(list, extra...)
}

func lookupCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// cli is where a command writes.
type cli struct {
	stdout, stderr io.Writer
}

// run is the whole program: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		c.topUsage(stderr)
		return exitUsage
	}
	switch first := args[0]; {
	case first == "-h" || first == "-help" || first == "--help":
		c.topUsage(stdout)
		return exitOK
	case lookupCommand(first) != nil:
		return c.dispatch(lookupCommand(first), args[1:])
	case strings.HasPrefix(first, "-") || strings.HasSuffix(first, ".hir") || isFile(first):
		// `hirrun prog.hir` and `hirrun --input ... prog.hir` mean run.
		return c.dispatch(runCommand, args)
	default:
		c.errorf("unknown command %q (the commands are %s; run 'hirrun help')", first, commandNames())
		return exitUsage
	}
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// usageLine is a command's usage line. It looks the command up at run time
// because the commands' own functions cannot name their variables.
func usageLine(name string) string {
	return strings.TrimSpace("hirrun " + name + " " + lookupCommand(name).args)
}

func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// dispatch parses cmd's flags (anywhere among its arguments) and runs it.
func (c *cli) dispatch(cmd *command, args []string) int {
	fs := flag.NewFlagSet("hirrun "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported below, once
	var opts any
	if cmd.flags != nil {
		opts = cmd.flags(fs)
	}
	positional, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		c.commandUsage(c.stdout, cmd, fs)
		return exitOK
	}
	if err != nil {
		c.errorf("%s: %v (run 'hirrun %s --help')", cmd.name, err, cmd.name)
		return exitUsage
	}
	return cmd.run(c, opts, positional)
}

// parseInterspersed parses flags that may come before, between or after the
// positional arguments (`hirrun run prog.hir --stats`), which the flag
// package alone does not allow. After "--" everything is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// errorf reports a problem with the command line or the environment.
func (c *cli) errorf(format string, args ...any) {
	fmt.Fprintf(c.stderr, "hirrun: "+format+"\n", args...)
}

// report prints an error from parsing, checking or running a program. IR
// errors already start with file:line:col, one per line.
func (c *cli) report(err error) {
	msg := err.Error()
	if !startsWithPos(msg) {
		msg = "hirrun: " + msg
	}
	fmt.Fprintln(c.stderr, msg)
}

// startsWithPos reports whether msg starts like "file.hir:3:7: ".
func startsWithPos(msg string) bool {
	first, _, _ := strings.Cut(msg, "\n")
	file, rest, ok := strings.Cut(first, ".hir:")
	return ok && file != "" && !strings.Contains(file, ": ") && rest != "" && rest[0] >= '0' && rest[0] <= '9'
}

func (c *cli) topUsage(w io.Writer) {
	fmt.Fprint(w, `hirrun runs and inspects hir programs.

Usage:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, cmd := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", usageLine(cmd.name), cmd.summary)
	}
	tw.Flush()
	fmt.Fprint(w, `
'hirrun prog.hir [flags]' is short for 'hirrun run prog.hir [flags]'.
Run 'hirrun help COMMAND' (or 'hirrun COMMAND --help') for a command's flags.
Exit codes: 0 success, 1 the program failed (parse, check or run),
2 a usage error (bad flag, unknown command, missing file or input).
`)
}

func (c *cli) commandUsage(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: hirrun %s %s\n\n%s\n", cmd.name, cmd.args, cmd.help)
	if fs == nil {
		fs = flag.NewFlagSet(cmd.name, flag.ContinueOnError)
		if cmd.flags != nil {
			cmd.flags(fs)
		}
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

var helpCommand = &command{
	name:    "help",
	args:    "[COMMAND]",
	summary: "print help for hirrun or one command",
	help:    "Prints the list of commands, or the usage and flags of one.",
	run: func(c *cli, _ any, args []string) int {
		switch len(args) {
		case 0:
			c.topUsage(c.stdout)
			return exitOK
		case 1:
			cmd := lookupCommand(args[0])
			if cmd == nil {
				c.errorf("help: unknown command %q (the commands are %s)", args[0], commandNames())
				return exitUsage
			}
			c.commandUsage(c.stdout, cmd, nil)
			return exitOK
		}
		c.errorf("help: takes at most one command, got %d arguments", len(args))
		return exitUsage
	},
}
