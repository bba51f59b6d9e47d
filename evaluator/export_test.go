package evaluator

// TraceEventPairs counts the event pairs j's ranks made for
// Options.TraceOverlap, for tests (they are reused Run after Run).
func TraceEventPairs(j *Job) int {
	n := 0
	for _, r := range j.ranks {
		n += len(r.traceState.gpu.pairs)
	}
	return n
}
