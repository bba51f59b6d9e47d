package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchOutputCheckedFirst: a wrong --format or --plot is a usage error
// before anything is measured (here, where there is no GPU, before the
// cuda backend is even opened).
func TestBenchOutputCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "dir.svg"), 0o755))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "xml"}, `bench: --format "xml": the formats are table, csv and json`},
		{[]string{"--format", "JSON"}, `--format "JSON"`},
		{[]string{"--plot", "out.pdf"}, `bench: --plot "out.pdf": a chart is written as .svg or .png, not ".pdf"`},
		{[]string{"--plot", "out"}, `a chart is written as .svg or .png, not ""`},
		{[]string{"--plot", filepath.Join(dir, "missing", "out.svg")}, "missing does not exist"},
		{[]string{"--plot", filepath.Join(dir, "dir.svg")}, "dir.svg\" is a directory"},
		{[]string{"--plot", filepath.Join(file, "out.svg")}, "file is not a directory"},
	} {
		r := hirrun(append([]string{"bench", "--nproc", "2"}, c.args...)...)
		expectCode(t, r, exitUsage)
		assert.Contains(t, r.stderr, c.want, "%v", c.args)
		assert.NotContains(t, r.stderr, "cuda", "%v: checked after the GPU", c.args)
		assert.Empty(t, r.stdout, "%v", c.args)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "the write probe leaves nothing behind")
}

func TestBenchPlotDirectoryNotWritable(t *testing.T) {
	if why := noReadOnlyDirs(); why != "" {
		t.Skip(why)
	}
	dir := filepath.Join(t.TempDir(), "ro")
	require.NoError(t, os.Mkdir(dir, 0o555))
	r := hirrun("bench", "--plot", filepath.Join(dir, "out.svg"))
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr, "cannot write in "+dir+": permission denied")
}

// TestBenchFromErrors: --from takes what --format json wrote and says
// where a file is wrong; measuring flags do not go with it.
func TestBenchFromErrors(t *testing.T) {
	good, err := os.ReadFile(benchGoldens["json"])
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		return path
	}
	// The first record of the good file, changed.
	first := func(from, to string) string {
		i := strings.Index(string(good), from)
		require.GreaterOrEqual(t, i, 0, "%q", from)
		return string(good[:i]) + to + string(good[i+len(from):])
	}
	for _, c := range []struct {
		name, text, want string
	}{
		{"syntax.json", "{\n  \"format\": \"hir-bench/1\",,\n}", `syntax.json:2:27: invalid character ','`},
		{"type.json", "{\n  \"format\": \"hir-bench/1\",\n  \"world\": \"two\"\n}", `type.json:3:16: "world" must be a JSON number, not string`},
		{"array.json", `[]`, `array.json:1:1: the file must be a JSON object, not array`},
		{"graphtype.json", first(`"graph_latency_us": 3.505`, `"graph_latency_us": "fast"`), `"records.graph_latency_us" must be a JSON number, not string`},
		{"table.json", `{"version": 1, "device": "GPU X", "entries": []}`, `table.json: not a file ` + "`hirrun bench --format json`" + ` wrote ("format" is "", not "hir-bench/1")`},
		{"empty.json", `{"format": "hir-bench/1", "device": "GPU X", "world": 2, "records": []}`, "empty.json: no records"},
		{"world0.json", `{"format": "hir-bench/1", "world": 0, "records": []}`, `"world" must be at least 1, not 0`},
		{"zero.json", first(`"latency_us": 5.405`, `"latency_us": 0`), `zero.json: record 1 (all_reduce bf16 8KiB algo=one_shot): "latency_us" must be a positive time, not 0`},
		{"graph.json", first(`"graph_latency_us": 3.505`, `"graph_latency_us": -1`), `record 1 (all_reduce bf16 8KiB algo=one_shot): "graph_latency_us" must be a positive time or null, not -1`},
		{"size.json", first(`"size_bytes": 8192`, `"size_bytes": 0`), `record 1 (all_reduce bf16 0B algo=one_shot): "size_bytes" must be positive, not 0`},
		{"rank.json", first(`"world": 2,
      "size_bytes": 8192`, `"world": 4,
      "size_bytes": 8192`), `record 1 (all_reduce bf16 8KiB algo=one_shot): "world" is 4, but the run's is 2`},
		{"noalgo.json", first(`"algo": "one_shot"`, `"algo": ""`), `record 1 (all_reduce bf16 8KiB algo=): "op", "dtype" and "algo" must be named`},
		{"dup.json", first(`"algo": "two_shot"`, `"algo": "one_shot"`), `dup.json: record 2 (all_reduce bf16 8KiB algo=one_shot): the same figure as record 1`},
	} {
		path := write(c.name, c.text)
		svg := filepath.Join(dir, c.name+".svg")
		r := hirrun("bench", "--from", path, "--plot", svg)
		expectCode(t, r, exitFail)
		assert.Contains(t, r.stderr, "hirrun: bench: ", c.name)
		assert.Contains(t, r.stderr, c.want, c.name)
		assert.Empty(t, r.stdout, c.name)
		assert.NoFileExists(t, svg, c.name)
	}

	r := hirrun("bench", "--from", filepath.Join(dir, "none.json"))
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr, "none.json: no such file")

	r = hirrun("bench", "--from", benchGoldens["json"], "--nproc", "2", "--graph", "--format", "csv")
	expectCode(t, r, exitUsage)
	expectContains(t, "stderr", r.stderr, "bench: --from prints saved figures; leave out what only measuring takes: --graph --nproc")

	for _, args := range [][]string{{"--format", "yaml"}, {"--plot", "x.jpg"}} {
		r = hirrun(append([]string{"bench", "--from", benchGoldens["json"]}, args...)...)
		expectCode(t, r, exitUsage)
		assert.Empty(t, r.stdout, "%v", args)
	}
}

// TestBenchRankArgs: the ranks hirrun starts get the same options back,
// --format and --plot included (rank 0 prints and draws).
func TestBenchRankArgs(t *testing.T) {
	want := &benchOptions{minSize: "16KiB", maxSize: "1MiB", dtypes: "bf16,f32", ops: "all_reduce", table: "t.json", noSave: true, graph: true,
		timeout: 90 * time.Second, format: "json", plot: "out/run.svg"}
	args := benchRankArgs(want)
	require.Equal(t, "bench", args[0])
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	got := benchCommand.flags(fs).(*benchOptions)
	require.NoError(t, fs.Parse(args[1:]))
	assert.Empty(t, fs.Args(), "positional arguments")
	got.fs, want.fs = nil, nil
	assert.Equal(t, want, got)
}
