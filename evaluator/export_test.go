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

// DisableReuseForTest makes every allocation of j's Runs a fresh buffer
// (FuzzCheckThenRun's oracle: outputs must not change).
func DisableReuseForTest(j *Job) {
	for _, r := range j.ranks {
		r.pool.fresh = true
	}
}
