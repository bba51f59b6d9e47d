package parser

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
)

func TestParseSourceComments(t *testing.T) {
	src := "// head  \r\nmesh 2 // m\n\ninput %x : f32[4]\n  // above\nfor %i = 0 to 2 {\n  %a = relu %x\t// r // still r\n  // last\n} //end\n\toutput %x  //  o\t\n// tail"
	f, err := ParseSource("c.hir", []byte(src), ParseComments)
	require.NoError(t, err)
	at := func(line, col int) ir.Pos { return ir.NewPos("c.hir", line, col) }
	want := []Comment{
		{Pos: at(1, 1), Text: "// head"},
		{Pos: at(2, 8), Text: "// m", Trailing: true},
		{Pos: at(5, 3), Text: "// above"},
		{Pos: at(7, 16), Text: "// r // still r", Trailing: true},
		{Pos: at(8, 3), Text: "// last"},
		{Pos: at(9, 3), Text: "//end", Trailing: true},
		{Pos: at(10, 13), Text: "//  o", Trailing: true},
		{Pos: at(11, 1), Text: "// tail"},
	}
	if diff := cmp.Diff(want, f.Comments, cmp.Comparer(func(a, b ir.Pos) bool { return a == b })); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
	loop := f.Program.Body.Ops[0]
	require.Equal(t, ir.OpFor, loop.Code)
	assert.Equal(t, map[*ir.Op]ir.Pos{loop: at(9, 1)}, f.Ends)
	assert.Equal(t, at(10, 2), f.Output)

	// Without ParseComments, the program alone: the one Parse gives.
	plain, err := ParseSource("c.hir", []byte(src), 0)
	require.NoError(t, err)
	assert.Nil(t, plain.Comments)
	assert.Nil(t, plain.Ends)
	assert.False(t, plain.Output.IsValid())
	prog, err := Parse("c.hir", []byte(src))
	require.NoError(t, err)
	assert.Equal(t, prog.String(), plain.Program.String())
	assert.Equal(t, positions(prog), positions(f.Program))

	// Errors are Parse's.
	_, err = ParseSource("c.hir", []byte("mesh 2\n%a = relu %b // c\n"), ParseComments)
	_, perr := Parse("c.hir", []byte("mesh 2\n%a = relu %b // c\n"))
	require.Error(t, err)
	assert.Equal(t, perr.Error(), err.Error())
}

// TestParseSourceLarge: a source large enough to be read in parallel
// (chunks.go) gives every comment and every region's end.
func TestParseSourceLarge(t *testing.T) {
	src := generateProgram(30_000)
	require.Greater(t, len(src), parallelMin)
	f, err := ParseSource("big.hir", src, ParseComments)
	require.NoError(t, err)
	prog, err := Parse("big.hir", src)
	require.NoError(t, err)
	assert.Equal(t, prog.String(), f.Program.String())
	assert.Len(t, f.Comments, bytes.Count(src, []byte("// a comment\n")))
	regions := 0
	for _, op := range f.Program.Body.Ops {
		if op.Body != nil {
			regions++
			end, ok := f.Ends[op]
			require.True(t, ok, "no end for the region at %s", op.Pos)
			// a fusion of generateProgram is a header, three lines and }
			assert.Equal(t, op.Pos.Line+4, end.Line, "end of the region at %s", op.Pos)
		}
	}
	assert.Len(t, f.Ends, regions)
	assert.Positive(t, regions)
}
