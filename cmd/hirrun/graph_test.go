package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunGraph: --graph prints what an eager run prints, for every number
// of runs (the warm-up, the capture, replays).
func TestRunGraph(t *testing.T) {
	prog := writeProgram(t, "p.hir", pointwiseSrc)
	eager := hirrun("run", prog, "--input", "x=random:seed=9")
	expectCode(t, eager, exitOK)
	for _, repeat := range []string{"1", "2", "5"} {
		r := hirrun("run", "--graph", "--repeat", repeat, prog, "--input", "x=random:seed=9")
		expectCode(t, r, exitOK)
		assert.Equal(t, eager.stdout, r.stdout, "--graph --repeat %s", repeat)
		assert.Empty(t, r.stderr)
	}
	r := hirrun("run", "--graph", "--stats", prog, "--input", "x=random:seed=9")
	expectCode(t, r, exitUsage)
	assert.Contains(t, r.stderr, "--graph runs each rank's program as one graph")
}

// TestGraphSplitsAtHostWaits: check --graph notes each op that waits on the
// host, with its position; run --graph runs the program, those ops on the
// host between graphs, with the eager outputs.
func TestGraphSplitsAtHostWaits(t *testing.T) {
	prog := writeProgram(t, "b.hir", "mesh 2\ninput %x : f32[4/DIDx]\n%y = mul %x, 2.0\nbarrier\nsync_stream\n%z = add %y, 1.0\noutput %z\n")
	r := hirrun("check", "--graph", prog)
	expectCode(t, r, exitOK)
	require.Equal(t, prog+":4:1: note: barrier splits the graph, running on the host between two graphs: barrier waits on the host for the peers\n"+
		prog+":5:1: note: sync_stream splits the graph, running on the host between two graphs: sync_stream waits on the host for the stream\n", r.stderr)
	eager := filepath.Join(t.TempDir(), "eager.npy")
	graph := filepath.Join(t.TempDir(), "graph.npy")
	expectCode(t, hirrun("run", prog, "--input", "x=random:seed=3", "--output", "z="+eager), exitOK)
	expectCode(t, hirrun("run", "--graph", "--repeat", "4", prog, "--input", "x=random:seed=3", "--output", "z="+graph), exitOK)
	a, err := os.ReadFile(eager)
	require.NoError(t, err)
	b, err := os.ReadFile(graph)
	require.NoError(t, err)
	require.Equal(t, a, b, "graph mode's output differs from the eager run's")
	expectCode(t, hirrun("check", "--graph", writeProgram(t, "p.hir", pointwiseSrc)), exitOK)
}
