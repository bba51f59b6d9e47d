package main

import (
	"bufio"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What keeps the scripts, the README and the help text from drifting apart.

// scriptLine is one command line of a script, split as testscript splits it.
type scriptLine struct {
	file  string
	line  int
	conds []string // [cuda], [!cuda], ...
	neg   bool     // "!" before the command
	words []string // the command and its arguments
}

func (l scriptLine) String() string {
	return l.file + ":" + strconv.Itoa(l.line)
}

// readScripts returns every command line of testdata/script/*.txtar.
func readScripts(t *testing.T) []scriptLine {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(scriptDir, "*.txtar"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var lines []scriptLine
	for _, file := range files {
		a, err := txtar.ParseFile(file)
		require.NoError(t, err)
		for i, text := range strings.Split(string(a.Comment), "\n") {
			words := scriptWords(text)
			l := scriptLine{file: file, line: i + 1}
			for len(words) > 0 && strings.HasPrefix(words[0], "[") && strings.HasSuffix(words[0], "]") {
				l.conds, words = append(l.conds, words[0]), words[1:]
			}
			if len(words) > 0 && words[0] == "!" {
				l.neg, words = true, words[1:]
			}
			if len(words) > 0 {
				l.words = words
				lines = append(lines, l)
			}
		}
	}
	return lines
}

// scriptWords splits a script line into words as testscript does: spaces
// separate, single quotes group (two in a row make one), an unquoted #
// ends the line. Variables are left as written.
func scriptWords(line string) []string {
	var words []string
	var word strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\'' && i+1 < len(line) && line[i+1] == '\'':
			word.WriteByte('\'')
			i++
		case c == '\'':
			quoted, inWord = !quoted, true
		case !quoted && (c == ' ' || c == '\t' || c == '\r' || c == '#'):
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
			if c == '#' {
				return words
			}
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

// readmeCommands returns the command lines of README.md's code blocks that
// run hirrun (`go run ./cmd/hirrun` counts as hirrun), comments and
// redirections (< FILE, > FILE) left out: the script gives standard input
// with `stdin FILE` and keeps standard output with `cp stdout FILE`.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../README.md")
	require.NoError(t, err)
	defer f.Close()
	var cmds []string
	fenced := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := sc.Text()
		if strings.HasPrefix(text, "```") {
			fenced = !fenced
			continue
		}
		if !fenced && !strings.HasPrefix(text, "    ") {
			continue
		}
		text = strings.TrimSpace(text)
		text, _, _ = strings.Cut(text, " #")
		if rest, ok := strings.CutPrefix(text, "go run ./cmd/hirrun "); ok {
			text = "hirrun " + rest
		}
		if !strings.HasPrefix(text, "hirrun ") && text != "hirrun" {
			continue
		}
		var words []string
		fields := strings.Fields(text)
		for i := 0; i < len(fields); i++ {
			if fields[i] == "<" || fields[i] == ">" {
				i++
				continue
			}
			words = append(words, fields[i])
		}
		cmds = append(cmds, strings.Join(words, " "))
	}
	require.NoError(t, sc.Err())
	return cmds
}

// TestScriptsRunEveryREADMECommand: each hirrun command line the README
// shows is run, word for word, by some script.
func TestScriptsRunEveryREADMECommand(t *testing.T) {
	run := map[string]bool{}
	for _, l := range readScripts(t) {
		if l.words[0] == "hirrun" {
			run[strings.Join(l.words, " ")] = true
		}
	}
	cmds := readmeCommands(t)
	require.Greater(t, len(cmds), 15, "README.md's command list")
	for _, cmd := range cmds {
		assert.True(t, run[cmd], "README.md shows `%s`, but no script in %s runs it", cmd, scriptDir)
	}
}

// TestScriptsCheckExitStatus: hirrun tells a failed program (1) from a
// wrong command line (2), so every `! hirrun` is followed by `status N`.
func TestScriptsCheckExitStatus(t *testing.T) {
	lines := readScripts(t)
	status := regexp.MustCompile(`^[0-9]+$`)
	for i, l := range lines {
		if !l.neg || l.words[0] != "hirrun" {
			continue
		}
		if i+1 == len(lines) || lines[i+1].file != l.file {
			t.Errorf("%s: `! hirrun` ends the script: follow it with `status N`", l)
			continue
		}
		next := lines[i+1]
		ok := next.words[0] == "status" && len(next.words) == 2 && status.MatchString(next.words[1]) && slices.Equal(next.conds, l.conds)
		assert.True(t, ok, "%s: `! hirrun` is followed by %q, not `status N` (under the same conditions)", l, strings.Join(next.words, " "))
	}
}

// TestHelpNamesEveryFlag: `hirrun help` names every command, and each
// command's help (however asked for) its usage line and every flag.
func TestHelpNamesEveryFlag(t *testing.T) {
	top := hirrun("help")
	expectCode(t, top, exitOK)
	for _, cmd := range commands {
		assert.Contains(t, top.stdout, "\n  "+usageLine(cmd.name), "hirrun help names %s", cmd.name)

		help := hirrun("help", cmd.name)
		expectCode(t, help, exitOK)
		assert.Empty(t, help.stderr, "hirrun help %s wrote to stderr", cmd.name)
		assert.Contains(t, help.stdout, "Usage: hirrun "+cmd.name+" ")
		if cmd.flags != nil {
			fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
			cmd.flags(fs)
			fs.VisitAll(func(f *flag.Flag) {
				assert.Regexp(t, `(?m)^  -`+regexp.QuoteMeta(f.Name)+`([ \t]|$)`, help.stdout, "hirrun help %s names -%s", cmd.name, f.Name)
				assert.NotEmpty(t, f.Usage, "hirrun %s -%s has no help text", cmd.name, f.Name)
			})
		}
		for _, args := range [][]string{{cmd.name, "--help"}, {cmd.name, "-h"}} {
			r := hirrun(args...)
			expectCode(t, r, exitOK)
			assert.Equal(t, help.stdout, r.stdout, "hirrun %s prints what hirrun help %s does", strings.Join(args, " "), cmd.name)
		}
	}
}

// TestREADMEShowsEveryCommand: the README's command list has a line for
// every command but help.
func TestREADMEShowsEveryCommand(t *testing.T) {
	cmds := readmeCommands(t)
	for _, cmd := range commands {
		if cmd == helpCommand {
			continue
		}
		shown := slices.ContainsFunc(cmds, func(line string) bool {
			return line == "hirrun "+cmd.name || strings.HasPrefix(line, "hirrun "+cmd.name+" ")
		})
		assert.True(t, shown, "README.md shows no `hirrun %s` command line", cmd.name)
	}
}
