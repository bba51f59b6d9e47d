package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// readTrace loads a --trace file and returns its op slices by rank.
func readTrace(t *testing.T, path string) map[int][]chromeEvent {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []chromeEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s is not a trace: %v", path, err)
	}
	byRank := map[int][]chromeEvent{}
	names := map[int]string{}
	for _, ev := range doc.TraceEvents {
		switch ev.Ph {
		case "M":
			names[ev.Pid], _ = ev.Args["name"].(string)
		case "X":
			if ev.Ts < 0 || ev.Dur < 0 {
				t.Errorf("rank %d %s: ts %v dur %v", ev.Pid, ev.Name, ev.Ts, ev.Dur)
			}
			byRank[ev.Pid] = append(byRank[ev.Pid], ev)
		}
	}
	for r := range byRank {
		if names[r] == "" {
			t.Errorf("rank %d's row has no name", r)
		}
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
	if len(byRank) != 4 {
		t.Fatalf("trace has %d ranks, want 4", len(byRank))
	}
	for rank := 0; rank < 4; rank++ {
		got := opNames(byRank[rank])
		if len(got) != 1 || got[0] != "all_gather" {
			t.Errorf("rank %d traced %v, want [all_gather]", rank, got)
		}
		if pos := byRank[rank][0].Args["pos"]; pos != "testdata/all_gather_ring.hir:8:6" {
			t.Errorf("rank %d: pos %v", rank, pos)
		}
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
	if len(byRank) != 3 {
		t.Fatalf("trace has %d ranks, want 3", len(byRank))
	}
	want := opNames(byRank[0])
	if len(want) == 0 {
		t.Fatal("rank 0 traced no op")
	}
	for rank := 1; rank < 3; rank++ {
		if got := opNames(byRank[rank]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("rank %d traced %v, rank 0 %v", rank, got, want)
		}
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
	if len(iters) < 2 {
		t.Errorf("iterations named in the trace: %v, want several", iters)
	}
}
