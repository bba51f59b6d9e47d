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
	"regexp"
	"strconv"
	"strings"
	"time"

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
	fs.VisitAll(func(f *flag.Flag) { f.Value = explainValue(f.Value) })
	positional, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		c.commandUsage(c.stdout, cmd) // from a fresh flag set: the help shows the flags' own types
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
// errors already start with file:line:col, one per line: those are printed
// as they are, whatever the file is called, so that editors jump to them.
func (c *cli) report(err error) {
	msg := err.Error()
	if !startsWithPos(msg) {
		msg = "hirrun: " + msg
	}
	fmt.Fprintln(c.stderr, msg)
}

// posPrefix is a message's leading "file:line:col: ", of any file name.
var posPrefix = regexp.MustCompile(`^([^\n]+?):[0-9]+:[0-9]+: `)

// startsWithPos reports whether msg starts like "prog.hir:3:7: " (the
// file may have any name: prog.txt, <stdin>, C:\dir\prog). A first part
// holding ": " is a message of its own ("run 2 of 3: prog.hir:3:7: ..."),
// not a file name.
func startsWithPos(msg string) bool {
	m := posPrefix.FindStringSubmatch(msg)
	return m != nil && !strings.Contains(m[1], ": ")
}

// helpWidth is the widest a line of help may be, in columns: every help
// text, hirrun's and each command's, is wrapped to it (TestHelpFitsWidth).
const helpWidth = 100

// usageColumn is the widest usage line that keeps its summary beside it in
// the top-level help; a longer one has its summary on the lines below.
const usageColumn = 48

func (c *cli) topUsage(w io.Writer) {
	fmt.Fprint(w, `hirrun runs and inspects hir programs.

Usage:
`)
	col := 0
	for _, cmd := range commands {
		if n := len(usageLine(cmd.name)); n <= usageColumn {
			col = max(col, n)
		}
	}
	indent := strings.Repeat(" ", 2+col+3)
	for _, cmd := range commands {
		usage := usageLine(cmd.name)
		lines := wrapWords(cmd.summary, helpWidth-len(indent))
		if len(usage) > usageColumn {
			fmt.Fprintf(w, "  %s\n", usage)
		} else {
			fmt.Fprintf(w, "  %-*s   %s\n", col, usage, lines[0])
			lines = lines[1:]
		}
		for _, l := range lines {
			fmt.Fprintf(w, "%s%s\n", indent, l)
		}
	}
	fmt.Fprint(w, `
'hirrun prog.hir [flags]' is short for 'hirrun run prog.hir [flags]'.
A program file may be - to read the program from standard input.
Run 'hirrun help COMMAND' (or 'hirrun COMMAND --help') for a command's flags.
Exit codes: 0 success, 1 the program failed (parse, check or run),
2 a usage error (bad flag, unknown command, missing file or input).
`)
}

// commandUsage prints a command's help: its usage line, its paragraph and
// its flags, wrapped to helpWidth.
func (c *cli) commandUsage(w io.Writer, cmd *command) {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: hirrun %s %s\n\n%s\n", cmd.name, cmd.args, cmd.help)
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(&b, "\nFlags:")
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	io.WriteString(w, wrapText(b.String(), helpWidth))
}

// wrapText wraps each line of text wider than width columns at spaces
// (wrapLine); the others stay as they are.
func wrapText(text string, width int) string {
	lines := strings.Split(text, "\n")
	var out []string
	for _, l := range lines {
		out = append(out, wrapLine(l, width)...)
	}
	return strings.Join(out, "\n")
}

// wrapLine wraps a line wider than width columns at spaces. The lines it
// continues on keep its indentation: a flag's text (indented with a tab, as
// flag.PrintDefaults writes it) stays in its column, and an example
// indented with spaces goes on 4 columns further in, so that it reads as
// one line continued. A word wider than the width is left whole.
func wrapLine(line string, width int) []string {
	if displayWidth(line) <= width {
		return []string{line}
	}
	body := strings.TrimLeft(line, " \t")
	indent := line[:len(line)-len(body)]
	more := indent
	if indent != "" && !strings.Contains(indent, "\t") {
		more += "    "
	}
	var out []string
	prefix, cur := indent, ""
	for _, word := range strings.Fields(body) {
		if cur != "" && displayWidth(prefix+cur+" "+word) > width {
			out = append(out, prefix+cur)
			prefix, cur = more, ""
		}
		if cur != "" {
			cur += " "
		}
		cur += word
	}
	return append(out, prefix+cur)
}

// wrapWords breaks text into lines of at most width columns at spaces; a
// word wider than that has a line of its own. It always returns a line.
func wrapWords(text string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, word := range strings.Fields(text) {
		if cur.Len() > 0 && displayWidth(cur.String())+1+displayWidth(word) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(word)
	}
	return append(lines, cur.String())
}

// displayWidth is how many columns s takes on a terminal: a rune each,
// tabs to the next multiple of 8.
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		if r == '\t' {
			n += 8 - n%8
			continue
		}
		n++
	}
	return n
}

// explainValue wraps a flag's value so that a value it cannot read is
// reported with what it wants: the flag package says only "parse error" of
// a duration, integer or boolean it cannot parse (--timeout 1x).
func explainValue(v flag.Value) flag.Value {
	g, ok := v.(flag.Getter)
	if !ok {
		return v
	}
	switch g.Get().(type) {
	case time.Duration:
		return durationValue{v}
	case int:
		return intValue{v}
	case bool:
		return boolValue{v}
	}
	return v
}

type durationValue struct{ flag.Value }

func (d durationValue) Set(s string) error {
	if _, err := time.ParseDuration(s); err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return fmt.Errorf("a duration needs a unit: %ss for seconds, %sm for minutes (a Go duration, like 30s, 2m or 1h30m)", s, s)
		}
		return errors.New("want a Go duration, a number and a unit: 30s, 2m, 1h30m, 500ms (units ns, us, ms, s, m, h)")
	}
	return d.Value.Set(s)
}

type intValue struct{ flag.Value }

func (i intValue) Set(s string) error {
	if _, err := strconv.ParseInt(s, 0, strconv.IntSize); err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return errors.New("the number is out of range")
		}
		return errors.New("want a whole number, like 4")
	}
	return i.Value.Set(s)
}

type boolValue struct{ flag.Value }

func (b boolValue) IsBoolFlag() bool { return true }

func (b boolValue) Set(s string) error {
	if _, err := strconv.ParseBool(s); err != nil {
		return errors.New("want true or false (the flag alone means true)")
	}
	return b.Value.Set(s)
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
			c.commandUsage(c.stdout, cmd)
			return exitOK
		}
		c.errorf("help: takes at most one command, got %d arguments", len(args))
		return exitUsage
	},
}
