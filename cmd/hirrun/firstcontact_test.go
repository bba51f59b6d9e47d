package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/runtime/cuda"
)

// TestHelpFitsWidth: no line of any help text, hirrun's or a command's,
// however it is asked for, is wider than helpWidth (100) columns.
func TestHelpFitsWidth(t *testing.T) {
	asks := [][]string{nil, {"help"}, {"--help"}, {"-h"}}
	for _, cmd := range commands {
		asks = append(asks, []string{"help", cmd.name}, []string{cmd.name, "-h"}, []string{cmd.name, "--help"})
	}
	for _, args := range asks {
		r := hirrun(args...)
		text := r.stdout
		if len(args) == 0 { // bare hirrun: the help on stderr, exit 2
			expectCode(t, r, exitUsage)
			text = r.stderr
		} else {
			expectCode(t, r, exitOK)
		}
		require.NotEmpty(t, text, "hirrun %s printed no help", strings.Join(args, " "))
		for i, line := range strings.Split(text, "\n") {
			assert.LessOrEqual(t, displayWidth(line), helpWidth,
				"hirrun %s: line %d is %d columns wide (at most %d):\n%s", strings.Join(args, " "), i+1, displayWidth(line), helpWidth, line)
		}
	}
}

// TestTopUsageWrapsSummaries: a summary too long for its column goes on
// under it, word by word, each word kept, and a long usage line has its
// summary on the lines below.
func TestTopUsageWrapsSummaries(t *testing.T) {
	r := hirrun("help")
	expectCode(t, r, exitOK)
	lines := strings.Split(r.stdout, "\n")
	for _, cmd := range commands {
		usage := "  " + usageLine(cmd.name)
		at := -1
		for i, l := range lines {
			if strings.HasPrefix(l, usage) {
				at = i
				break
			}
		}
		require.GreaterOrEqual(t, at, 0, "hirrun help has no line for %s", cmd.name)
		// The summary: the rest of the usage line, then the lines indented
		// under the summary column.
		var words []string
		words = append(words, strings.Fields(strings.TrimPrefix(lines[at], usage))...)
		col := -1
		for _, l := range lines[at+1:] {
			body := strings.TrimLeft(l, " ")
			indent := len(l) - len(body)
			if body == "" || strings.HasPrefix(body, "hirrun ") || (col >= 0 && indent != col) {
				break
			}
			col = indent
			words = append(words, strings.Fields(body)...)
		}
		assert.Equal(t, strings.Fields(cmd.summary), words, "hirrun help's summary of %s", cmd.name)
	}
}

func TestWrapLine(t *testing.T) {
	// flag text (indented with a tab, as flag.PrintDefaults writes it)
	// stays in its column
	got := wrapLine("    \t"+strings.Repeat("word ", 30), 40)
	for _, l := range got {
		assert.True(t, strings.HasPrefix(l, "    \tword"), "%q", l)
		assert.LessOrEqual(t, displayWidth(l), 40, "%q", l)
	}
	assert.Equal(t, strings.Repeat("word ", 30), strings.Join(trimAll(got), " ")+" ")
	// an example indented with spaces goes on 4 columns further in
	assert.Equal(t, []string{"  aaa bbb ccc", "      ddd eee"}, wrapLine("  aaa bbb ccc ddd eee", 13))
	assert.Equal(t, []string{"  aaa bbb", "      ccc", "      ddd", "      eee"}, wrapLine("  aaa bbb ccc ddd eee", 12))
	// a word too wide for any line is left whole; a short line as it is
	assert.Equal(t, []string{strings.Repeat("x", 20)}, wrapLine(strings.Repeat("x", 20), 10))
	assert.Equal(t, []string{"  short"}, wrapLine("  short", 10))
	assert.Equal(t, 8+4, displayWidth("  \tµsec"), "tabs to the next multiple of 8, runes one column each")
}

func trimAll(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimSpace(l)
	}
	return out
}

// TestReportPositionsOfAnyFile: a message that starts with file:line:col
// is printed as it is, whatever the file is called, so editors jump to it;
// any other gets "hirrun: " before it.
func TestReportPositionsOfAnyFile(t *testing.T) {
	for msg, pos := range map[string]bool{
		"prog.hir:4:6: relu takes 1 operand":             true,
		"prog.txt:4:6: relu takes 1 operand":             true,
		"<stdin>:4:6: relu takes 1 operand":              true,
		"dir/no extension:12:1: x":                       true,
		`C:\progs\prog.hir:3:7: x`:                       true,
		"run 2 of 3: prog.hir:3:7: x":                    false,
		"closing the cuda runtime: prog.hir:3:7: x":      false,
		"prog.hir: no such file":                         false,
		"prog.hir:4: x":                                  false,
		"rank 1 has waited 5s at prog.hir:12:3 for rank": false,
	} {
		assert.Equal(t, pos, startsWithPos(msg), "startsWithPos(%q)", msg)
	}
}

// TestCheckPositionsAnyFileName: `hirrun check prog.txt` prints its errors
// exactly as for prog.hir, position first, no "hirrun: ".
func TestCheckPositionsAnyFileName(t *testing.T) {
	dir := t.TempDir()
	src := "mesh 2\ninput %x : f32[4/DIDx]\n%y = relu %x, %x\noutput %y\n"
	var want string
	for _, name := range []string{"prog.hir", "prog.txt", "prog"} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
		r := hirrun("check", path)
		expectCode(t, r, exitFail)
		assert.True(t, strings.HasPrefix(r.stderr, path+":3:6: "), "check %s: %q", name, r.stderr)
		msg := strings.TrimPrefix(r.stderr, path)
		if want == "" {
			want = msg
		}
		assert.Equal(t, want, msg, "check %s says what check prog.hir says", name)
	}
}

// TestBadFlagValuesSayWhatIsWanted: a value a flag cannot read is
// reported with what the flag wants, not "parse error", on every command
// that has such a flag.
func TestBadFlagValuesSayWhatIsWanted(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--timeout", "1x", "p.hir"}, `run: invalid value "1x" for flag -timeout: want a Go duration, a number and a unit: 30s, 2m, 1h30m`},
		{[]string{"run", "--timeout", "30", "p.hir"}, `run: invalid value "30" for flag -timeout: a duration needs a unit: 30s for seconds, 30m for minutes`},
		{[]string{"bench", "--timeout", "soon"}, `bench: invalid value "soon" for flag -timeout: want a Go duration`},
		{[]string{"topo", "--timeout", "1x"}, `topo: invalid value "1x" for flag -timeout: want a Go duration`},
		{[]string{"run", "--nproc", "two", "p.hir"}, `run: invalid value "two" for flag -nproc: want a whole number, like 4`},
		{[]string{"run", "--repeat", "99999999999999999999", "p.hir"}, `-repeat: the number is out of range`},
		{[]string{"run", "--stats=maybe", "p.hir"}, `run: invalid boolean value "maybe" for -stats: want true or false (the flag alone means true)`},
	} {
		r := hirrun(tc.args...)
		expectCode(t, r, exitUsage)
		assert.Contains(t, r.stderr, tc.want, "hirrun %s", strings.Join(tc.args, " "))
		assert.NotContains(t, r.stderr, "parse error", "hirrun %s", strings.Join(tc.args, " "))
	}
	// Good values still parse, and bool flags still stand alone.
	prog := writeProgram(t, "p.hir", pointwiseSrc)
	r := hirrun("run", "--timeout", "1m30s", "--repeat", "2", "--stats=false", "--explain", prog, "--input", "x=random")
	expectCode(t, r, exitOK)
}

// TestMeasuringWithoutGPUAdvisesWhatExists: bench and topo, with no GPU,
// say they need GPUs and advise what works (bench --from), never a flag
// they do not have (--backend sim, which the probe advises run).
func TestMeasuringWithoutGPUAdvisesWhatExists(t *testing.T) {
	saved := probeCUDA
	t.Cleanup(func() { probeCUDA = saved })
	for _, reason := range []string{
		"the NVIDIA driver library did not load (cannot load libcuda.so.1: no such file): this machine has no usable NVIDIA driver",
		"the cuda backend needs linux (this hirrun is built for darwin/arm64)",
		"the driver loaded but sees no CUDA device (CUDA_VISIBLE_DEVICES=\"\")",
		cuda.Probe().Reason, // this machine's own, where it has no GPU
	} {
		if reason == "" {
			continue
		}
		// with the advice the probe gives run, which bench and topo leave out
		probeCUDA = func() cuda.ProbeResult {
			return cuda.ProbeResult{Reason: reason, Advice: "use the CPU runtime (--backend sim, the default)"}
		}
		r := hirrun("bench", "--nproc", "2")
		expectCode(t, r, exitFail)
		assert.Empty(t, r.stdout)
		assert.True(t, strings.HasPrefix(r.stderr, "hirrun: bench: needs GPUs, and the cuda backend cannot run here: "), "%q", r.stderr)
		assert.Contains(t, r.stderr, "run 'hirrun bench --from FILE.json'")
		assert.NotContains(t, r.stderr, "--backend", "bench has no --backend flag to advise")
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)

		r = hirrun("topo")
		expectCode(t, r, exitFail)
		assert.True(t, strings.HasPrefix(r.stderr, "hirrun: topo: needs GPUs, and the cuda backend cannot run here: "), "%q", r.stderr)
		assert.Contains(t, r.stderr, "run it on a machine with NVIDIA GPUs")
		assert.NotContains(t, r.stderr, "--backend", "topo has no --backend flag to advise")
	}
	// The figures bench advises looking at are there, and --from reads them.
	r := hirrun("bench", "--from", "../../docs/bench/h100-x2.json")
	expectCode(t, r, exitOK)
	assert.Contains(t, r.stdout, "BenchmarkCollective/")
}
