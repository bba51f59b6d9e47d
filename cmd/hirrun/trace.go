package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// chromeEvent is one record of the Chrome trace event format, which
// chrome://tracing and ui.perfetto.dev read: "X" slices with a start and a
// duration in µs, and "M" metadata naming each process row.
type chromeEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// writeTrace writes every rank's traced ops to path as a timeline, one row
// (process) per rank; nothing when path is empty.
func (c *cli) writeTrace(path string, reports []rankReport) int {
	if path == "" {
		return exitOK
	}
	events := []chromeEvent{}
	var origin float64 // the earliest start: timelines read better from 0
	for _, rep := range reports {
		for _, ev := range rep.Stats.Trace {
			if origin == 0 || ev.Start < origin {
				origin = ev.Start
			}
		}
	}
	for _, rep := range reports {
		events = append(events, chromeEvent{Name: "process_name", Ph: "M", Pid: rep.Rank,
			Args: map[string]any{"name": fmt.Sprintf("rank %d", rep.Rank)}})
		for _, ev := range rep.Stats.Trace {
			args := map[string]any{"pos": ev.Pos}
			if ev.Iter >= 0 {
				args["iter"] = ev.Iter
			}
			events = append(events, chromeEvent{Name: ev.Op, Cat: "op", Ph: "X", Ts: ev.Start - origin, Dur: ev.Dur,
				Pid: rep.Rank, Args: args})
		}
	}
	raw, err := json.Marshal(map[string]any{"traceEvents": events, "displayTimeUnit": "ns"})
	if err == nil {
		err = os.WriteFile(path, raw, 0o644)
	}
	if err != nil {
		c.errorf("run: --trace %s: %v", path, err)
		return exitFail
	}
	return exitOK
}
