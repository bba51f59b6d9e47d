package main

import (
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

// TestGraphRefusesHostWaits: run --graph and check --graph name each op a
// graph cannot hold, with its position; plain check accepts the program.
func TestGraphRefusesHostWaits(t *testing.T) {
	prog := writeProgram(t, "b.hir", "mesh 2\ninput %x : f32[4/DIDx]\n%y = mul %x, 2.0\nbarrier\nsync_stream\noutput %y\n")
	expectCode(t, hirrun("check", prog), exitOK)
	for _, args := range [][]string{
		{"check", "--graph", prog},
		{"run", "--graph", prog, "--input", "x=random"},
	} {
		r := hirrun(args...)
		expectCode(t, r, exitFail)
		require.Contains(t, r.stderr, prog+":4:1: barrier cannot be captured in a graph: barrier waits on the host for the peers", "%v", args)
		require.Contains(t, r.stderr, prog+":5:1: sync_stream cannot be captured in a graph", "%v", args)
	}
	expectCode(t, hirrun("check", "--graph", writeProgram(t, "p.hir", pointwiseSrc)), exitOK)
}
