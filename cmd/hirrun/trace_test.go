package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/internal/timeline"
)

// shape is what checkTimeline found in a trace.
type shape struct {
	slices map[timeline.Track][]timeline.Event // X slices by track
	tracks map[timeline.Track]string           // thread names
	flows  []flowPair
	async  map[int][]timeline.Event // "b" events by rank
}

type flowPair struct{ from, to timeline.Event }

// checkTimeline checks what makes a timeline load and read well: every
// track's slices nest or are disjoint (exactly: times are integer ns);
// every flow has one start and one end, on different ranks, each at the
// start of the slice of its track that it links (the flow's op_id and
// occurrence), which no other slice of the track touches there but the
// slices enclosing it, and no flow points backwards in time; every async
// slice begins and ends once, not backwards; metadata names every process
// and track.
func checkTimeline(t *testing.T, f *timeline.File) shape {
	t.Helper()
	procs, threads := f.Names()
	sh := shape{slices: map[timeline.Track][]timeline.Event{}, tracks: threads, async: map[int][]timeline.Event{}}
	flows := map[string][]timeline.Event{}
	type asyncKey struct {
		pid int
		id  string
	}
	async := map[asyncKey][]timeline.Event{}
	var asyncOrder []asyncKey
	for _, e := range f.TraceEvents {
		tr := timeline.Track{Pid: e.Pid, Tid: e.Tid}
		switch e.Ph {
		case "M":
		case "X":
			assert.False(t, e.Ts < 0 || e.Dur < 0, "rank %d %s: ts %d ns, dur %d ns", e.Pid, e.Name, e.Ts, e.Dur)
			sh.slices[tr] = append(sh.slices[tr], e)
		case "s", "f":
			require.NotEmpty(t, e.ID, "flow event without an id: %+v", e)
			flows[e.ID] = append(flows[e.ID], e)
		case "b", "e":
			require.NotEmpty(t, e.ID, "async event without an id: %+v", e)
			k := asyncKey{e.Pid, e.ID}
			if _, ok := async[k]; !ok {
				asyncOrder = append(asyncOrder, k)
			}
			async[k] = append(async[k], e)
		default:
			assert.Fail(t, "unexpected event", "ph %q: %+v", e.Ph, e)
		}
	}
	for tr, evs := range sh.slices {
		assert.NotEmpty(t, procs[tr.Pid], "process %d has no process_name", tr.Pid)
		assert.NotEmpty(t, threads[tr], "track %+v has no thread_name", tr)
		// Sorted by start, the longer first: each slice must end before the
		// next starts or contain it.
		sort.SliceStable(evs, func(i, j int) bool {
			if evs[i].Ts != evs[j].Ts {
				return evs[i].Ts < evs[j].Ts
			}
			return evs[i].Dur > evs[j].Dur
		})
		var open []timeline.Event
		for _, e := range evs {
			for len(open) > 0 && open[len(open)-1].End() <= e.Ts {
				open = open[:len(open)-1]
			}
			if len(open) > 0 {
				outer := open[len(open)-1]
				assert.LessOrEqual(t, e.End(), outer.End(), "track %q of rank %d: %s [%d, %d] ns overlaps %s [%d, %d] ns without nesting",
					threads[tr], tr.Pid, e.Name, e.Ts, e.End(), outer.Name, outer.Ts, outer.End())
			}
			open = append(open, e)
		}
	}
	// binds checks that flow event e sits at the start of the slice of the
	// call it links, and that the track's other slices there are ones
	// enclosing that slice, so a viewer binds it to that slice alone.
	binds := func(id string, e timeline.Event) {
		t.Helper()
		var linked *timeline.Event
		var touching []timeline.Event
		for _, s := range sh.slices[timeline.Track{Pid: e.Pid, Tid: e.Tid}] {
			if s.Ts <= e.Ts && e.Ts <= s.End() {
				touching = append(touching, s)
			}
			if s.Ts == e.Ts && s.Name == e.Name && s.Cat != "gpu" &&
				s.Args["op_id"] == e.Args["op_id"] && s.Args["occurrence"] == e.Args["occurrence"] {
				linked = &s
			}
		}
		if !assert.NotNil(t, linked, "flow %s (%s) at %d ns on rank %d, track %d: no slice of op_id %v, occurrence %v starts there",
			id, e.Ph, e.Ts, e.Pid, e.Tid, e.Args["op_id"], e.Args["occurrence"]) {
			return
		}
		for _, s := range touching {
			if s.Ts <= linked.Ts && linked.End() <= s.End() {
				continue // the linked slice, or one enclosing it
			}
			assert.Fail(t, "ambiguous flow binding", "flow %s (%s) at %d ns on rank %d: %s [%d, %d] ns touches it as well as %s [%d, %d] ns",
				id, e.Ph, e.Ts, e.Pid, s.Name, s.Ts, s.End(), linked.Name, linked.Ts, linked.End())
		}
	}
	for id, evs := range flows {
		if !assert.Len(t, evs, 2, "flow %s: want one start and one end", id) {
			continue
		}
		byPh := map[string]timeline.Event{evs[0].Ph: evs[0], evs[1].Ph: evs[1]}
		s, okS := byPh["s"]
		fin, okF := byPh["f"]
		if !assert.True(t, okS && okF, "flow %s: want one start and one end, got %+v", id, evs) {
			continue
		}
		assert.NotEqual(t, s.Pid, fin.Pid, "flow %s links two slices of rank %d", id, s.Pid)
		binds(id, s)
		binds(id, fin)
		assert.Equal(t, "e", fin.Bp, "flow %s: the end binds to its enclosing slice", id)
		assert.LessOrEqual(t, s.Ts, fin.Ts, "flow %s points backwards in time: from rank %d at %d ns to rank %d at %d ns",
			id, s.Pid, s.Ts, fin.Pid, fin.Ts)
		sh.flows = append(sh.flows, flowPair{s, fin})
	}
	for _, k := range asyncOrder {
		evs := async[k]
		if !assert.Len(t, evs, 2, "async %s of rank %d: want one begin and one end", k.id, k.pid) {
			continue
		}
		b, e := evs[0], evs[1]
		assert.Equal(t, []string{"b", "e"}, []string{b.Ph, e.Ph}, "async %s of rank %d", k.id, k.pid)
		assert.LessOrEqual(t, b.Ts, e.Ts, "async %s of rank %d ends before it begins", k.id, k.pid)
		assert.NotEmpty(t, procs[k.pid], "process %d has no process_name", k.pid)
		sh.async[k.pid] = append(sh.async[k.pid], b)
	}
	return sh
}

// loadTrace reads and checks a --trace file.
func loadTrace(t *testing.T, path string) (*timeline.File, shape) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := timeline.Read(bytes.NewReader(raw))
	require.NoError(t, err, "%s is not a trace", path)
	return f, checkTimeline(t, f)
}

// readTrace loads and checks a --trace file and returns its op slices by
// rank.
func readTrace(t *testing.T, path string) map[int][]timeline.Event {
	t.Helper()
	_, sh := loadTrace(t, path)
	byRank := map[int][]timeline.Event{}
	for tr, evs := range sh.slices {
		for _, e := range evs {
			if e.Cat != "gpu" {
				byRank[tr.Pid] = append(byRank[tr.Pid], e)
			}
		}
	}
	return byRank
}

// opNames lists a rank's slices in time order.
func opNames(evs []timeline.Event) []string {
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Ts < evs[j].Ts })
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Name)
	}
	return out
}

// traceOf runs a testdata program with --trace and checks the file.
func traceOf(t *testing.T, prog string, args ...string) (*timeline.File, shape) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.json")
	r := hirrun(append(append([]string{"run", "--trace", path}, args...), prog)...)
	expectCode(t, r, exitOK)
	return loadTrace(t, path)
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

// Across processes, the trace rows travel to rank 0 in each rank's header
// (gather.go), as JSON: the stream, op, occurrence, collective and async
// fields survive it, so rank 0 links the ranks' collectives. (simproc's
// ranks cannot talk to each other, so the events are made here.)
func TestTraceRowsTravelAsJSON(t *testing.T) {
	var reports []rankReport
	for rank := 0; rank < 3; rank++ {
		start := int64(1_000_000 + 100*rank)
		rows := []evaluator.TraceEvent{
			{Op: "all_reduce", Pos: "p.hir:3:6", Start: start, Dur: 500, Iter: -1, StreamName: "default stream", OpID: 0, Collective: true},
			{Op: "all_reduce", Pos: "p.hir:4:6", Start: start + 600, Dur: 50, Iter: -1, Stream: evaluator.TraceCommStream,
				StreamName: "comm stream (async)", OpID: 1, Collective: true, Async: true, Done: start + 2000},
			{Op: "wait", Pos: "p.hir:5:1", Start: start + 700, Dur: 1300, Iter: -1, StreamName: "default stream", OpID: 2},
		}
		raw, err := json.Marshal(rankHeader{Rank: rank, Stats: evaluator.Stats{Trace: rows}})
		require.NoError(t, err)
		var hdr rankHeader
		require.NoError(t, json.Unmarshal(raw, &hdr))
		require.Equal(t, rows, hdr.Stats.Trace, "rank %d's rows after JSON", rank)
		reports = append(reports, rankReport{Rank: rank, Stats: hdr.Stats})
	}
	var buf bytes.Buffer
	require.NoError(t, timeline.Write(&buf, buildTimeline(reports)))
	f, err := timeline.Read(&buf)
	require.NoError(t, err)
	sh := checkTimeline(t, f)
	assert.Len(t, sh.flows, 4, "two collectives on three ranks: two links each")
	for _, fp := range sh.flows {
		assert.Equal(t, fp.from.Pid+1, fp.to.Pid, "links go from the rank that started first to the next")
	}
	for rank := 0; rank < 3; rank++ {
		assert.Len(t, sh.async[rank], 1, "rank %d's async slices", rank)
		assert.Equal(t, "comm stream (async)", sh.tracks[timeline.Track{Pid: rank, Tid: tid(evaluator.TraceCommStream)}])
	}
}

// A rank that reaches a collective first waits longest, so its slice ends
// last: the links follow the ranks' arrivals, from slice start to slice
// start, and point forward in time. (Placed at the slices' middles, the
// link from rank 3, here first, to rank 2 pointed 5.5 µs back, as in the
// issue's quickstart trace.)
func TestTraceFlowsFollowArrivals(t *testing.T) {
	const t0 = int64(5_000_000)
	starts := []int64{4000, 6000, 5000, 0} // rank 3 first, then 0, 2, 1
	var reports []rankReport
	for rank, start := range starts {
		end := int64(20_000) // every rank leaves the all_gather at about the same time
		rows := []evaluator.TraceEvent{{Op: "all_gather", Pos: "q.hir:9:6", Start: t0 + start, Dur: end - start, Iter: -1,
			StreamName: "default stream", OpID: 3, Collective: true}}
		reports = append(reports, rankReport{Rank: rank, Stats: evaluator.Stats{Trace: rows}})
	}
	var buf bytes.Buffer
	require.NoError(t, timeline.Write(&buf, buildTimeline(reports)))
	f, err := timeline.Read(&buf)
	require.NoError(t, err)
	sh := checkTimeline(t, f)
	type link struct {
		from, to     int
		fromTs, toTs timeline.Micros
	}
	var got []link
	for _, fp := range sh.flows {
		got = append(got, link{fp.from.Pid, fp.to.Pid, fp.from.Ts, fp.to.Ts})
	}
	slices.SortFunc(got, func(a, b link) int { return int(a.fromTs - b.fromTs) })
	// ts is relative to the earliest start, rank 3's.
	assert.Equal(t, []link{{3, 0, 0, 4000}, {0, 2, 4000, 5000}, {2, 1, 5000, 6000}}, got,
		"links from each rank's arrival to the next rank's arrival")
}

// Every flow of several traced programs, over 2 to 4 ranks with blocking,
// async, rooted and looped collectives, points forward in time
// (checkTimeline), and each call of a collective is chained across all its
// ranks: ranks-1 links visiting each rank once, in order of arrival.
func TestTraceFlowsPointForward(t *testing.T) {
	t.Chdir("../..")
	for _, tc := range []struct {
		prog, args string
		ranks      int
	}{
		{"examples/quickstart.hir", "--input x=random:seed=1 --repeat 3", 4},
		{"testdata/rooted.hir", "--repeat 2", 4},
		{"testdata/all_to_all.hir", "--repeat 2", 4},
		{"testdata/reduce_scatter.hir", "--repeat 2", 4},
		{"testdata/stream_parallel_reduce_scatter.hir", "", 4},
		{"testdata/tp_matmul_reduce_scatter.hir", "", 4},
		{"testdata/all_reduce_algos.hir", "", 3},
		{"testdata/async_wait.hir", "--input x=random:seed=46 --input y=random:seed=53 --repeat 3", 2},
	} {
		t.Run(filepath.Base(tc.prog), func(t *testing.T) {
			args := strings.Fields(tc.args)
			if !slices.ContainsFunc(args, func(a string) bool { return a == "--input" }) {
				args = append(args, programArgs(t, tc.prog)...)
			}
			_, sh := traceOf(t, tc.prog, args...)
			require.NotEmpty(t, sh.flows, "no flows")
			type call struct{ op, occ any }
			chains := map[call][]flowPair{}
			backwards := 0
			for _, fp := range sh.flows {
				k := call{fp.from.Args["op_id"], fp.from.Args["occurrence"]}
				chains[k] = append(chains[k], fp)
				if fp.to.Ts < fp.from.Ts {
					backwards++
				}
			}
			assert.Zero(t, backwards, "of %d flows, %d point backwards", len(sh.flows), backwards)
			for k, links := range chains {
				if !assert.Len(t, links, tc.ranks-1, "op %v, occurrence %v: links", k.op, k.occ) {
					continue
				}
				slices.SortFunc(links, func(a, b flowPair) int { return int(a.from.Ts - b.from.Ts) })
				visited := []int{links[0].from.Pid}
				for i, l := range links {
					assert.Equal(t, k, call{l.to.Args["op_id"], l.to.Args["occurrence"]}, "a link joins one call")
					assert.Equal(t, l.from.Name, l.to.Name, "a link joins one collective")
					if i > 0 {
						assert.Equal(t, links[i-1].to.Pid, l.from.Pid, "op %v, occurrence %v: link %d does not go on from the last", k.op, k.occ, i)
						assert.Equal(t, links[i-1].to.Ts, l.from.Ts, "op %v, occurrence %v: link %d does not go on from the last", k.op, k.occ, i)
					}
					visited = append(visited, l.to.Pid)
				}
				slices.Sort(visited)
				assert.Equal(t, tc.ranks, len(slices.Compact(visited)), "op %v, occurrence %v: ranks linked %v", k.op, k.occ, visited)
			}
		})
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

// Every testdata program that runs makes a well-formed timeline.
func TestTraceTimelinesAreWellFormed(t *testing.T) {
	t.Chdir("../..")
	for _, tc := range []struct{ prog, args string }{
		{"testdata/async_wait.hir", "--input x=random:seed=46 --input y=random:seed=53"},
		{"testdata/streams_join.hir", "--input a=random:seed=5 --input b=random:seed=6"},
		{"testdata/streams.hir", ""},
		{"testdata/for_pipeline.hir", "--input x=random:seed=1 --input w=random:seed=2 --repeat 2"},
		{"testdata/transfer_pair.hir", "--input x=random:seed=62"},
		{"testdata/send_recv.hir", ""},
		{"testdata/all_reduce_algos.hir", ""},
	} {
		t.Run(filepath.Base(tc.prog), func(t *testing.T) {
			args := strings.Fields(tc.args)
			if len(args) == 0 {
				args = programArgs(t, tc.prog)
			}
			traceOf(t, tc.prog, args...)
		})
	}
}

// programArgs reads a testdata program's "// args:" line.
func programArgs(t *testing.T, prog string) []string {
	t.Helper()
	src, err := os.ReadFile(prog)
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(src), "\n")
	if rest, ok := strings.CutPrefix(first, "// args:"); ok {
		return strings.Fields(rest)
	}
	return nil
}

// async_wait: the async collectives run on the communication stream's
// track, each with an async slice from its post to the end of its wait,
// and each collective is linked between the two ranks.
func TestTraceAsyncCollectives(t *testing.T) {
	t.Chdir("../..")
	_, sh := traceOf(t, "testdata/async_wait.hir", "--input", "x=random:seed=46", "--input", "y=random:seed=53")
	assert.Len(t, sh.flows, 2, "two collectives on two ranks: one link each")
	for _, fp := range sh.flows {
		assert.Equal(t, fp.from.Name, fp.to.Name, "a flow links one collective")
		assert.Equal(t, fp.from.Args["op_id"], fp.to.Args["op_id"], "a flow links one op")
	}
	for rank := 0; rank < 2; rank++ {
		comm := timeline.Track{Pid: rank, Tid: tid(evaluator.TraceCommStream)}
		def := timeline.Track{Pid: rank, Tid: tid(evaluator.TraceDefaultStream)}
		assert.Equal(t, "comm stream (async)", sh.tracks[comm], "rank %d", rank)
		assert.Equal(t, "default stream", sh.tracks[def], "rank %d", rank)
		assert.Equal(t, []string{"all_gather", "all_reduce"}, opNames(sh.slices[comm]), "rank %d's comm stream", rank)
		assert.Equal(t, []string{"relu", "wait", "wait", "add"}, opNames(sh.slices[def]), "rank %d's default stream", rank)
		require.Len(t, sh.async[rank], 2, "rank %d's async slices", rank)
	}
}

// The async slice of an async op ends where the wait for it ends.
func TestTraceAsyncEndsAtItsWait(t *testing.T) {
	t.Chdir("../..")
	f, _ := traceOf(t, "testdata/async_wait.hir", "--input", "x=random:seed=46", "--input", "y=random:seed=53")
	ends := map[int][]timeline.Micros{}
	waits := map[int][]timeline.Micros{}
	for _, e := range f.TraceEvents {
		switch {
		case e.Ph == "e":
			ends[e.Pid] = append(ends[e.Pid], e.Ts)
		case e.Ph == "X" && e.Name == "wait":
			waits[e.Pid] = append(waits[e.Pid], e.End())
		}
	}
	for rank := 0; rank < 2; rank++ {
		slices.Sort(ends[rank])
		slices.Sort(waits[rank])
		assert.Equal(t, waits[rank], ends[rank], "rank %d: async ends (actual), wait ends (expected)", rank)
	}
}

// streams_join: the ops after `set_stream %s` are on %s's track.
func TestTraceStreamTracks(t *testing.T) {
	t.Chdir("../..")
	_, sh := traceOf(t, "testdata/streams_join.hir", "--input", "a=random:seed=5", "--input", "b=random:seed=6")
	for rank := 0; rank < 2; rank++ {
		var names []string
		for tr, name := range sh.tracks {
			if tr.Pid == rank {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		assert.Equal(t, []string{"default stream", "default stream (GPU)", "stream %s (line 11)", "stream %s (line 11) (GPU)"}, names, "rank %d's tracks", rank)
		for tr, evs := range sh.slices {
			if tr.Pid != rank {
				continue
			}
			ops := opNames(evs)
			if strings.HasPrefix(sh.tracks[tr], "stream %s") {
				assert.Subset(t, ops, []string{"matmul", "all_reduce"}, "rank %d's %s", rank, sh.tracks[tr])
			} else {
				assert.NotContains(t, ops, "matmul", "rank %d's %s", rank, sh.tracks[tr])
				assert.Contains(t, ops, "exp", "rank %d's %s", rank, sh.tracks[tr])
			}
		}
	}
	assert.Len(t, sh.flows, 1, "one all_reduce on two ranks")
}

// Times are exact: slices that touch at a ns far from 1970 stay disjoint
// (a float64 of µs since 1970 steps by 0.25 µs, and made them overlap).
func TestTraceTimesAreExact(t *testing.T) {
	const t0 = int64(1_767_225_600_123_456_789) // 2026, in ns
	ev := func(op string, start, dur int64) evaluator.TraceEvent {
		return evaluator.TraceEvent{Op: op, Pos: "p.hir:1:1", Start: t0 + start, Dur: dur, Iter: -1, StreamName: "default stream"}
	}
	reports := []rankReport{{Rank: 0, Stats: evaluator.Stats{Trace: []evaluator.TraceEvent{
		ev("a", 0, 1001), ev("b", 1001, 1), ev("c", 1002, 333), ev("d", 1335, 0),
	}}}}
	var buf bytes.Buffer
	require.NoError(t, timeline.Write(&buf, buildTimeline(reports)))
	assert.Contains(t, buf.String(), `"ts":1.001,"dur":0.001`, "b starts at 1001 ns and lasts 1 ns")
	f, err := timeline.Read(&buf)
	require.NoError(t, err)
	sh := checkTimeline(t, f)
	evs := sh.slices[timeline.Track{Pid: 0, Tid: 1}]
	require.Len(t, evs, 4)
	for i := 0; i+1 < len(evs); i++ {
		assert.Equal(t, evs[i].End(), evs[i+1].Ts, "%s ends where %s starts", evs[i].Name, evs[i+1].Name)
	}
}

func TestMicrosJSON(t *testing.T) {
	for _, tc := range []struct {
		ns   timeline.Micros
		json string
	}{{0, "0.000"}, {1, "0.001"}, {999, "0.999"}, {1000, "1.000"}, {1_234_567_891, "1234567.891"}, {-1500, "-1.500"}} {
		raw, err := json.Marshal(tc.ns)
		require.NoError(t, err)
		assert.Equal(t, tc.json, string(raw))
		var back timeline.Micros
		require.NoError(t, json.Unmarshal(raw, &back))
		assert.Equal(t, tc.ns, back, "%s read back", raw)
	}
	for in, want := range map[string]timeline.Micros{"12": 12000, "1.5": 1500, "1.25e3": 1_250_000, "0.0004": 0, "0.0006": 1} {
		var m timeline.Micros
		require.NoError(t, json.Unmarshal([]byte(in), &m), in)
		assert.Equal(t, want, m, in)
	}
}

// TestTraceGPUTimes: on a runtime that times events (the CPU runtime does,
// as cuda does), each compute, copy and blocking collective has a slice on
// its stream's GPU track, for the same call (pos, occurrence), starting no
// earlier than the host slice and no longer than it (the host's slice
// holds the stream's synchronisation); GPU tracks nest like host tracks
// (checkTimeline).
func TestTraceGPUTimes(t *testing.T) {
	t.Chdir("../..")
	_, sh := traceOf(t, "testdata/streams_join.hir", "--input", "a=random:seed=5", "--input", "b=random:seed=6")
	type call struct {
		pid       int
		name, pos string // an inserted free has its value's op's position
		occ       any
	}
	host := map[call]timeline.Event{}
	gpu := map[call]timeline.Event{}
	for tr, evs := range sh.slices {
		for _, e := range evs {
			k := call{tr.Pid, e.Name, e.Args["pos"].(string), e.Args["occurrence"]}
			if e.Cat == "gpu" {
				assert.True(t, strings.HasSuffix(sh.tracks[tr], " (GPU)"), "GPU slice %s on track %q", e.Name, sh.tracks[tr])
				gpu[k] = e
			} else {
				host[k] = e
			}
		}
	}
	require.NotEmpty(t, gpu, "no GPU slices")
	timed := 0
	for k, h := range host {
		g, ok := gpu[k]
		if !ok {
			continue
		}
		timed++
		assert.GreaterOrEqual(t, g.Ts, h.Ts, "%s at %s: the GPU slice starts before the host's", h.Name, k.pos)
		assert.LessOrEqual(t, g.Dur, h.Dur, "%s at %s: the GPU slice is longer than the host's", h.Name, k.pos)
		assert.Positive(t, g.Dur, "%s at %s", h.Name, k.pos)
	}
	assert.Equal(t, len(gpu), timed, "GPU slices without a host slice")
	for k, h := range host {
		if h.Name == "matmul" || h.Name == "all_reduce" {
			assert.Contains(t, gpu, k, "%s at %s has no GPU time", h.Name, k.pos)
		}
	}
}
