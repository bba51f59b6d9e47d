package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readTrace loads a --trace file and returns its op slices by rank.
func readTrace(t *testing.T, path string) map[int][]chromeEvent {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc struct {
		TraceEvents []chromeEvent `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc), "%s is not a trace", path)
	byRank := map[int][]chromeEvent{}
	names := map[int]string{}
	for _, ev := range doc.TraceEvents {
		switch ev.Ph {
		case "M":
			names[ev.Pid], _ = ev.Args["name"].(string)
		case "X":
			assert.False(t, ev.Ts < 0 || ev.Dur < 0, "rank %d %s: ts %v dur %v", ev.Pid, ev.Name, ev.Ts, ev.Dur)
			byRank[ev.Pid] = append(byRank[ev.Pid], ev)
		}
	}
	for r := range byRank {
		assert.NotEmpty(t, names[r], "rank %d's row has no name", r)
	}
	return byRank
}

// opNames lists a rank's slices in time order.
func opNames(evs []chromeEvent) []string {
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Ts < evs[j].Ts })
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Name)
	}
	return out
}

func TestTraceHasEveryRanksOps(t *testing.T) {
	t.Chdir("../..")
	path := filepath.Join(t.TempDir(), "trace.json")
	r := hirrun("run", "--input", "x=random:seed=2", "--trace", path, "testdata/all_gather_ring.hir")
	expectCode(t, r, exitOK)
	byRank := readTrace(t, path)
	require.Len(t, byRank, 4, "trace ranks")
	for rank := 0; rank < 4; rank++ {
		assert.Equal(t, []string{"all_gather"}, opNames(byRank[rank]), "rank %d traced", rank)
		assert.Equal(t, "testdata/all_gather_ring.hir:8:6", byRank[rank][0].Args["pos"], "rank %d: pos", rank)
	}
}

// One process per rank: rank 0 gathers the others' ops and writes the file.
func TestTraceAcrossProcesses(t *testing.T) {
	t.Setenv(envAsHirrun, "1")
	prog := writeProgram(t, "p.hir", threeRankSrc)
	path := filepath.Join(t.TempDir(), "trace.json")
	r := hirrun("run", "--backend", "simproc", prog, "--input", "x=random", "--input", "w=random", "--trace", path)
	expectCode(t, r, exitOK)
	byRank := readTrace(t, path)
	require.Len(t, byRank, 3, "trace ranks")
	want := opNames(byRank[0])
	require.NotEmpty(t, want, "rank 0 traced no op")
	for rank := 1; rank < 3; rank++ {
		assert.Equal(t, strings.Join(want, " "), strings.Join(opNames(byRank[rank]), " "), "rank %d traced (actual), rank 0 (expected)", rank)
	}
}

func TestTraceNamesLoopIterations(t *testing.T) {
	t.Chdir("../..")
	path := filepath.Join(t.TempDir(), "trace.json")
	r := hirrun("run", "--input", "x=random:seed=1", "--input", "w=random:seed=2", "--repeat", "2", "--trace", path, "testdata/for_pipeline.hir")
	expectCode(t, r, exitOK)
	iters := map[float64]bool{}
	for _, ev := range readTrace(t, path)[0] {
		if it, ok := ev.Args["iter"].(float64); ok {
			iters[it] = true
		}
	}
	assert.GreaterOrEqual(t, len(iters), 2, "iterations named in the trace: %v, want several", iters)
}
