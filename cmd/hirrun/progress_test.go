package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/ir"
)

// stuckSrc runs long, then hangs: both ranks send first and wait for
// their streams (sync_stream), so each send waits for a recv queued behind
// the peer's own send until the timeout. The loop puts the program past
// what the deadlock pass plays (passes.DeadlockCheckLimit), so check
// accepts it and only the run-time timeout stops it.
const stuckSrc = `mesh 2
input %x : f32[4]
for %i = 0 to 140000 {
  %a = relu %x
}
send %x peer=+1
sync_stream
%r = recv peer=-1 : f32[4]
output %r
`

// fastWatch makes the progress line appear at once and redraw often, and
// stalls report after 100 ms, for the test.
func fastWatch(t *testing.T) {
	delay, every, stall := progressDelay, progressEvery, stallAfter
	progressDelay, progressEvery, stallAfter = 0, 10*time.Millisecond, 100*time.Millisecond
	t.Cleanup(func() { progressDelay, progressEvery, stallAfter = delay, every, stall })
}

// TestStuckRunExplainsItself: with the line forced (--progress always),
// the stuck program's stderr shows the line redrawn in place with each
// rank's ops done and the op the slowest host is in; each rank's wait at
// the send is reported once, with its position and the rank it waits for;
// then the line ends and the timeout's error follows.
func TestStuckRunExplainsItself(t *testing.T) {
	fastWatch(t)
	prog := writeProgram(t, "p.hir", stuckSrc)
	expectCode(t, hirrun("check", prog), exitOK)
	r := hirrun("run", prog, "--input", "x=random", "--timeout", "1s", "--progress", "always")
	expectCode(t, r, exitFail)
	assert.Empty(t, r.stdout)
	// the loop's 140000 iterations of relu and its free, the loop, the send
	done := 140000*2 + 2
	// A rank whose send failed first may have gone on by one op (its
	// sync_stream returned the error) while the other still waits there.
	counts := fmt.Sprintf("(%d|%d)", done, done+1)
	line := regexp.MustCompile(fmt.Sprintf(`\r\[\d+\.\ds\] ops done: %s %s \| slowest: rank \d at %s:7:1 \(sync_stream\)\x1b\[K`,
		counts, counts, regexp.QuoteMeta(prog)))
	assert.Regexp(t, line, r.stderr, "want the line with the hosts stuck at the sync_stream")
	for _, rank := range []int{0, 1} {
		msg := fmt.Sprintf("rank %d has waited 100ms at %s:6:1 (send) for rank %d\n", rank, prog, 1-rank)
		assert.Equal(t, 1, strings.Count(r.stderr, msg), "want %q once in:\n%q", msg, r.stderr)
	}
	// every report starts a line of its own: the progress line is erased
	// first (or was not drawn)
	for _, m := range regexp.MustCompile(`[^\n]*rank \d has waited`).FindAllString(r.stderr, -1) {
		assert.True(t, m == "rank 0 has waited" || m == "rank 1 has waited" || strings.HasSuffix(m, "\r\x1b[Krank 0 has waited") || strings.HasSuffix(m, "\r\x1b[Krank 1 has waited"), "%q", m)
	}
	// the last line drawn holds the final counts and ends the line
	final := regexp.MustCompile(fmt.Sprintf(`\r\[\d+\.\ds\] ops done: %d %d\x1b\[K\n%s:6:1: rank \d: send: `, done+1, done+1, regexp.QuoteMeta(prog)))
	assert.Regexp(t, final, r.stderr, "want the final line, then the error")
	assert.Contains(t, r.stderr, "timed out after 1s waiting for rank")
}

// TestProgressLineOnlyWhereAsked: auto draws no line on stderr that is not
// a terminal (a test's buffer), and never draws none; stall reports come
// either way.
func TestProgressLineOnlyWhereAsked(t *testing.T) {
	fastWatch(t)
	prog := writeProgram(t, "p.hir", stuckSrc)
	for _, mode := range []string{"auto", "never"} {
		r := hirrun("run", prog, "--input", "x=random", "--timeout", "500ms", "--progress", mode)
		expectCode(t, r, exitFail)
		assert.NotContains(t, r.stderr, "\r", "--progress %s", mode)
		assert.NotContains(t, r.stderr, "ops done", "--progress %s", mode)
		assert.Contains(t, r.stderr, fmt.Sprintf("rank 0 has waited 100ms at %s:6:1 (send) for rank 1\n", prog), "--progress %s", mode)
	}
	r := hirrun("run", prog, "--input", "x=random", "--progress", "sometimes")
	expectCode(t, r, exitUsage)
	assert.Equal(t, "hirrun: run: --progress sometimes: want one of auto, always, never\n", r.stderr)
}

// TestQuickRunDrawsNoLine: a run shorter than the delay never draws the
// line, even when forced.
func TestQuickRunDrawsNoLine(t *testing.T) {
	prog := writeProgram(t, "p.hir", pointwiseSrc)
	r := hirrun("run", prog, "--input", "x=random", "--progress", "always")
	expectCode(t, r, exitOK)
	assert.Empty(t, r.stderr)
}

func TestProgressText(t *testing.T) {
	op := &ir.Op{Code: ir.OpAllReduce, Pos: ir.NewPos("prog.hir", 12, 3)}
	other := &ir.Op{Code: ir.OpRelu, Pos: ir.NewPos("prog.hir", 9, 6)}
	four := []evaluator.Progress{{Rank: 0, Done: 1200, Op: other}, {Rank: 1, Done: 1180, Op: other}, {Rank: 2, Done: 40, Op: op}, {Rank: 3, Done: 40}}
	var many []evaluator.Progress
	for r := range 16 {
		many = append(many, evaluator.Progress{Rank: r, Done: int64(100 + r), Op: other})
	}
	many[5] = evaluator.Progress{Rank: 5, Done: 7, Op: op}
	for _, c := range []struct {
		run, runs int
		ranks     []evaluator.Progress
		final     bool
		want      string
	}{
		{1, 1, four, false, "[3.2s] ops done: 1200 1180 40 40 | slowest: rank 2 at prog.hir:12:3 (all_reduce)"},
		{2, 5, four, false, "[3.2s] run 2/5, ops done: 1200 1180 40 40 | slowest: rank 2 at prog.hir:12:3 (all_reduce)"},
		{1, 1, four[3:], false, "[3.2s] ops done: 40 | waiting for its streams"},
		{1, 1, []evaluator.Progress{{Rank: 0}, {Rank: 1}}, false, "[3.2s] ops done: 0 0 | slowest: rank 0 starting"},
		{1, 1, many, false, "[3.2s] ops done: 7..115 over 16 ranks | slowest: rank 5 at prog.hir:12:3 (all_reduce)"},
		{1, 1, four, true, "[3.2s] ops done: 1200 1180 40 40"},
		{1, 1, nil, false, "[3.2s] starting"},
	} {
		assert.Equal(t, c.want, progressText(3200*time.Millisecond, c.run, c.runs, c.ranks, c.final))
	}
}

// TestStatsGoToStderr: stdout holds the results alone.
func TestStatsGoToStderr(t *testing.T) {
	prog := writeProgram(t, "p.hir", pointwiseSrc)
	plain := hirrun("run", prog, "--input", "x=random")
	expectCode(t, plain, exitOK)
	r := hirrun("run", prog, "--input", "x=random", "--stats")
	expectCode(t, r, exitOK)
	require.Equal(t, plain.stdout, r.stdout)
	assert.Regexp(t, `(?m)^rank 0: symmetric handles 0 hits, 0 misses; kernels 0 hits, 1 miss$`, r.stderr)
}
