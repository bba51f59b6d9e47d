package parser

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
)

// A loop header's `streams N` is the for op's int attribute streams, at
// the number's position; it prints back as written, after step, and both
// the fast path and the grammar read it.
func TestLoopStreamsAttribute(t *testing.T) {
	src := "mesh 2\ninput %x : f32[8]\nfor %i = 0 to 8 step 2 streams 4 {\n  %y = relu %x\n}\nfor %j = 0 to 3 streams 1 {\n}\nfor %k = 0 to 3 step 1 {\n}\n"
	p, err := Parse("s.hir", []byte(src))
	require.NoError(t, err)
	loops := p.Body.Ops
	require.Len(t, loops, 3)

	n, ok := loops[0].Attr("streams")
	require.True(t, ok)
	require.Equal(t, ir.AttrValue{Kind: ir.KindInt, Int: 4}, n)
	require.Equal(t, int64(4), loops[0].Streams())
	require.Equal(t, "s.hir:3:32", attrPos(loops[0], "streams").String())
	require.Equal(t, int64(1), loops[1].Streams(), "streams 1 is stored: one stream of the loop's own")
	require.Equal(t, int64(0), loops[2].Streams())
	_, hasStep := loops[2].Attr("step")
	require.False(t, hasStep, "step 1 is the default and is not stored")

	want := "mesh 2\n\ninput %x : f32[8]\nfor %i = 0 to 8 step 2 streams 4 {\n  %y = relu %x\n}\nfor %j = 0 to 3 streams 1 {\n}\nfor %k = 0 to 3 {\n}\n"
	require.Equal(t, want, p.String())
	back, err := Parse("s.hir", []byte(p.String()))
	require.NoError(t, err)
	if diff := diffPrograms(p, back); diff != "" { // go-cmp
		t.Fatalf("parse(print(p)) differs from p (-p +reparsed):\n%s", diff)
	}
	checkDifferential(t, []byte(src))
}

// Headers the grammar rejects, the fast path rejects too, with the
// grammar's message; each costs its line only.
func TestLoopStreamsSyntaxErrors(t *testing.T) {
	for _, tc := range []struct{ line, msg string }{
		{"for %i = 0 to 4 streams=2 {", "h.hir:2:17: syntax error: unexpected word streams: write `for %i = FROM to TO [step S] [streams N] {` (write `streams 2`, not `streams=2`)"},
		{"for %i = 0 to 4 streams 2 step 1 {", "h.hir:2:27: syntax error: unexpected word step: write `for %i = FROM to TO [step S] [streams N] {`"},
		{"for %i = 0 to 4 streams 2 streams 3 {", "h.hir:2:27: syntax error: unexpected word streams: write `for %i = FROM to TO [step S] [streams N] {`"},
		{"for %i = 0 to 4 streams 2.0 {", "h.hir:2:17: syntax error: unexpected word streams: write `for %i = FROM to TO [step S] [streams N] {`"},
		{"for %i = 0 to 4 streams 0 {", "h.hir:2:25: for: streams must be at least 1, got 0 (the number of streams the iterations rotate over)"},
	} {
		src := []byte("mesh 1\n" + tc.line + "\n}\n")
		_, err := Parse("h.hir", src)
		require.Error(t, err, tc.line)
		require.Equal(t, tc.msg, firstLine(err.Error()), tc.line)
		checkDifferential(t, src)
	}
}

func attrPos(op *ir.Op, key string) ir.Pos {
	for _, a := range op.Attrs {
		if a.Key == key {
			return a.Pos
		}
	}
	return ir.Pos{}
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
