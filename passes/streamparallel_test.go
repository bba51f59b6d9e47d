package passes

import (
	"os"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

// withStreams gives every loop of src `streams n`.
func withStreams(src string, n string) string {
	return regexp.MustCompile(`(?m)^(\s*for .*) \{$`).ReplaceAllString(src, "$1 streams "+n+" {")
}

// The standard pipelined pattern, each iteration writing its own slice of
// a buffer from outside the loop (select by the loop index), is accepted:
// testdata/for_pipeline.hir with streams on both its loops.
func TestStreamParallelAcceptsThePipelinedPattern(t *testing.T) {
	src, err := os.ReadFile("../testdata/for_pipeline.hir")
	require.NoError(t, err)
	for _, n := range []string{"1", "2", "4", "9"} {
		text := withStreams(string(src), n)
		require.Contains(t, text, "streams "+n+" {")
		p, err := parser.Parse("for_pipeline.hir", []byte(text))
		require.NoError(t, err)
		require.NoError(t, Lower(p, nil), "streams %s", n)
		require.NotContains(t, p.String(), " streams ")
	}
}

// Running the pass again changes nothing, and the lowered text parses
// back to a program that lowers to the same text.
func TestStreamParallelIsIdempotent(t *testing.T) {
	for _, file := range []string{"pipeline", "fork", "rotation", "disjoint"} {
		src, err := os.ReadFile("testdata/stream-parallel/" + file + ".hir")
		require.NoError(t, err)
		p, err := parser.Parse(file+".hir", src)
		require.NoError(t, err)
		require.NoError(t, LowerUntil(p, "stream-parallel", nil))
		once := p.String()
		require.NoError(t, streamParallel(p, nil))
		require.Empty(t, cmp.Diff(once, p.String()), file)

		require.NoError(t, Lower(p, nil))
		lowered := p.String()
		back, err := parser.Parse(file+".hir", []byte(lowered))
		require.NoError(t, err)
		require.NoError(t, Lower(back, nil))
		require.Empty(t, cmp.Diff(lowered, back.String()), file)
	}
}

// The deadlock pass plays a lowered loop on the streams its pick_stream
// takes: each iteration's collectives on stream i mod 2, every rank alike,
// so it accepts the pipeline; a ring shift with send before recv on each
// iteration's stream it rejects, as it does without streams.
func TestStreamParallelLoopsAreDeadlockChecked(t *testing.T) {
	src := `mesh 2
input %x : f32[4, 2/DIDx, 3]
%buf = alloc : f32[4, 1, 3]
for %t = 0 to 2 {
  for %i = 0 to 4 streams 2 {
    %c = select %x, %i axis=0
    %g = all_gather %c algo=nccl
    %r = all_reduce %g algo=ring
  }
}
for %i2 = 0 to 4 streams 2 {
  %c2 = select %x, %i2 axis=0
  send %c2 peer=+1
  %b = select %buf, %i2 axis=0
  %r2 = recv %b peer=-1
}
output %buf
`
	p, err := parser.Parse("ring.hir", []byte(src))
	require.NoError(t, err)
	// pickedStreams names each pick_stream of the flattened program, and
	// the stream it takes: 0, 1, 0, 1... within each run of the loop.
	lp := lowered(t, src)
	var flat []*ir.Op
	require.True(t, flatten(lp.Body, &flat, 1000))
	picks := pickedStreams(lp.Body)
	var got []int
	for k, op := range flat {
		want, ok := picks[k]
		require.Equal(t, op.Code == ir.OpPickStream, ok, "place %d (%s)", k, op.Code)
		if ok {
			got = append(got, want)
		}
	}
	require.Equal(t, []int{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}, got)
	err = Check(p, nil)
	require.Error(t, err)
	require.Regexp(t, `^ring.hir:11:1: wait_stream: the ranks wait for each other forever: on rank 0 the wait_stream at ring.hir:11:1 waits for the send at ring.hir:13:3 on the stream %i2.stream0`, err.Error())

	ok := regexp.MustCompile(`(?s)for %i2.*\n\}\n`).ReplaceAllString(src, "")
	p, err = parser.Parse("ring.hir", []byte(ok))
	require.NoError(t, err)
	require.NoError(t, Check(p, nil))
}

func lowered(t *testing.T, src string) *ir.Program {
	t.Helper()
	p, err := parser.Parse("l.hir", []byte(src))
	require.NoError(t, err)
	require.NoError(t, LowerUntil(p, "stream-parallel", nil))
	return p
}
