package main

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"slices"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/internal/timeline"
)

// A --trace file is the Chrome trace event format (chrome://tracing and
// ui.perfetto.dev read it; docs/TRACE.md shows one):
//
//   - one process (pid) per rank, named "rank N", and in it one thread
//     (tid) per stream the rank's ops went to: the default stream, each
//     stream a `stream` op made, the communication stream of async
//     collectives and transfers; each named by thread_name metadata;
//   - an "X" slice per op, from the op's start to its end on the host, the
//     wait for its stream included (--trace serialises ops as --stats does),
//     so one track's slices are disjoint;
//   - a collective's slices on every rank chained by flows ("s" to "f"),
//     from the rank that started it first to the one that started it last,
//     keyed by the op and its occurrence in the run (the k-th execution of
//     the op, the same on every rank); both ends of a flow sit at the start
//     of their slice, so no arrow points backwards in time;
//   - an async slice ("b" to "e") per async collective and transfer, from
//     its post to the end of the `wait` that saw it complete.
//
// Times are integer ns from the evaluator, written as µs with three
// decimals relative to the job's first op, so nothing is rounded.

// writeTrace writes every rank's traced ops to path as a timeline; nothing
// when path is empty.
func (c *cli) writeTrace(path string, overlap bool, reports []rankReport) int {
	if path == "" {
		return exitOK
	}
	var b bytes.Buffer
	f := buildTimeline(reports)
	if overlap {
		f.OtherData = &timeline.OtherData{TraceOverlap: true}
	}
	err := timeline.Write(&b, f)
	if err == nil {
		err = os.WriteFile(path, b.Bytes(), 0o644)
	}
	if err != nil {
		c.errorf("run: --trace %s: %v", path, err)
		return exitFail
	}
	return exitOK
}

// commSortIndex puts the communication stream's track below the others.
const commSortIndex = 1 << 20

// buildTimeline turns the ranks' trace events into trace format events.
func buildTimeline(reports []rankReport) *timeline.File {
	origin, found := int64(0), false // the earliest start: timelines read better from 0
	for _, rep := range reports {
		for _, ev := range rep.Stats.Trace {
			if !found || ev.Start < origin {
				origin, found = ev.Start, true
			}
		}
	}
	at := func(ns int64) timeline.Micros { return timeline.Micros(ns - origin) }

	// One call of a collective: (op, occurrence), and its slice on a rank.
	type call struct {
		op  int
		occ int64
	}
	type part struct {
		rank, tid int
		start     int64
		name      string
	}
	calls := map[call][]part{}
	var order []call

	var events []timeline.Event
	meta := func(name string, pid, tid int, args map[string]any) {
		events = append(events, timeline.Event{Name: name, Ph: "M", Pid: pid, Tid: tid, Args: args})
	}
	for _, rep := range reports {
		pid := rep.Rank
		meta("process_name", pid, 0, map[string]any{"name": fmt.Sprintf("rank %d", rep.Rank)})
		meta("process_sort_index", pid, 0, map[string]any{"sort_index": rep.Rank})
		var streams []evaluator.TraceEvent // one event per stream, for its name
		for _, ev := range rep.Stats.Trace {
			if !slices.ContainsFunc(streams, func(s evaluator.TraceEvent) bool { return s.Stream == ev.Stream }) {
				streams = append(streams, ev)
			}
		}
		slices.SortFunc(streams, func(a, b evaluator.TraceEvent) int { return cmp.Compare(a.Stream, b.Stream) })
		gpuTracks := map[int]bool{} // streams with GPU times: a track of their own
		for _, ev := range rep.Stats.Trace {
			if ev.GPUDur > 0 {
				gpuTracks[ev.Stream] = true
			}
		}
		for _, s := range streams {
			idx := s.Stream
			if idx == evaluator.TraceCommStream {
				idx = commSortIndex
			}
			meta("thread_name", pid, tid(s.Stream), map[string]any{"name": s.StreamName})
			meta("thread_sort_index", pid, tid(s.Stream), map[string]any{"sort_index": idx * 2})
			if gpuTracks[s.Stream] {
				meta("thread_name", pid, gpuTid(s.Stream), map[string]any{"name": s.StreamName + " (GPU)"})
				meta("thread_sort_index", pid, gpuTid(s.Stream), map[string]any{"sort_index": idx*2 + 1})
			}
		}
		for i, ev := range rep.Stats.Trace {
			args := map[string]any{"pos": ev.Pos, "op_id": ev.OpID, "occurrence": ev.Occurrence}
			if ev.Iter >= 0 {
				args["iter"] = ev.Iter
			}
			cat := "op"
			if ev.Collective {
				cat = "collective"
			}
			events = append(events, timeline.Event{Name: ev.Op, Cat: cat, Ph: "X", Ts: at(ev.Start), Dur: timeline.Micros(ev.Dur),
				Pid: pid, Tid: tid(ev.Stream), Args: args})
			if ev.GPUDur > 0 {
				events = append(events, timeline.Event{Name: ev.Op, Cat: "gpu", Ph: "X", Ts: at(ev.GPUStart), Dur: timeline.Micros(ev.GPUDur),
					Pid: pid, Tid: gpuTid(ev.Stream), Args: args})
			}
			if ev.Collective {
				k := call{ev.OpID, ev.Occurrence}
				if _, seen := calls[k]; !seen {
					order = append(order, k)
				}
				calls[k] = append(calls[k], part{rank: pid, tid: tid(ev.Stream), start: ev.Start, name: ev.Op})
			}
			if ev.Async {
				end := ev.Done
				if end < ev.Start+ev.Dur {
					end = ev.Start + ev.Dur // not seen complete: the post alone
				}
				id := fmt.Sprintf("rank%d.%d", pid, i)
				events = append(events,
					timeline.Event{Name: ev.Op, Cat: "async", Ph: "b", Ts: at(ev.Start), Pid: pid, Tid: tid(ev.Stream), ID: id,
						Args: map[string]any{"pos": ev.Pos, "op_id": ev.OpID, "occurrence": ev.Occurrence}},
					timeline.Event{Name: ev.Op, Cat: "async", Ph: "e", Ts: at(end), Pid: pid, Tid: tid(ev.Stream), ID: id})
			}
		}
	}
	// Chain each collective call's slices, earliest start first. Both ends
	// of a link sit at the start of their slice, where the rank reached the
	// call, and bind to that slice (bp "e": the slice enclosing ts): the
	// chain follows the ranks' arrivals, and an arrow never points backwards
	// in time. (At the slices' middles it did: a rank that starts first and
	// waits longest has the later middle.)
	flow := 0
	for _, k := range order {
		ps := calls[k]
		slices.SortStableFunc(ps, func(a, b part) int { return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.rank, b.rank)) })
		for i := 0; i+1 < len(ps); i++ {
			from, to := ps[i], ps[i+1]
			if from.rank == to.rank {
				continue // one rank reached the call twice: not a cross-rank link
			}
			flow++
			id := fmt.Sprintf("flow%d", flow)
			args := map[string]any{"op_id": k.op, "occurrence": k.occ}
			events = append(events,
				timeline.Event{Name: from.name, Cat: "collective", Ph: "s", Ts: at(from.start), Pid: from.rank, Tid: from.tid, ID: id, Bp: "e", Args: args},
				timeline.Event{Name: to.name, Cat: "collective", Ph: "f", Ts: at(to.start), Pid: to.rank, Tid: to.tid, ID: id, Bp: "e", Args: args})
		}
	}
	return &timeline.File{TraceEvents: events, DisplayTimeUnit: "ns"}
}

// tid is a stream's thread id: the evaluator's stream number plus one
// (some viewers take thread 0 for the process itself).
func tid(stream int) int { return stream + 1 }

// gpuTid is the track of a stream's GPU times, apart from its host slices.
func gpuTid(stream int) int { return 1<<16 + stream + 1 }
