// Package format prints a hir program in canonical form with the comments
// of its source, as go/format does for Go: `hirrun fmt`.
//
// The program is printed by ir.PrintLines, the lines ir.Print writes, and
// the comments the parser keeps apart from the program
// (parser.ParseComments) are put back between them by position: statements
// come out in the order the source has them (the parser requires mesh, then
// the inputs, then the ops, then the output), so each comment goes where it
// was among them.
//
//   - A whole-line comment goes before the first statement after it, at that
//     statement's indentation: a comment block directly above an op stays
//     above it; comments before mesh stay at the top of the file; comments
//     at the end of a body stay before its }, indented as the body; comments
//     after the last statement stay at the end.
//   - A trailing comment stays at the end of its statement's line; those of
//     consecutive lines are aligned one space after the longest line.
//   - A comment keeps its text from // on, less trailing spaces.
//   - A blank line (or several) between two statements or comments is kept
//     as one, but for one at the start or end of a body or of the file;
//     the mesh is followed by one, as ir.Print writes it.
//
// A program without comments and without blank lines but the one after the
// mesh is printed as ir.Print prints it.
package format

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

// Source parses src (filename is for positions and messages) and returns
// it formatted. The error, when not nil, is the parser's ir.ErrorList.
func Source(filename string, src []byte) ([]byte, error) {
	f, err := parser.ParseSource(filename, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	return File(f)
}

// File formats f, which parser.ParseSource read with parser.ParseComments.
// It fails only when f's positions do not follow the order of the program's
// statements (a File made otherwise than by ParseSource).
func File(f *parser.File) ([]byte, error) {
	fm := &formatter{file: f, comments: f.Comments, start: true}
	var err error
	ir.PrintLines(f.Program, func(l ir.Line) {
		if err == nil {
			err = fm.line(l)
		}
	})
	if err != nil {
		return nil, err
	}
	fm.flush(-1, 0)
	if fm.blank {
		fm.out = append(fm.out, outLine{}) // ir.Print ends a program of a mesh alone so
	}
	return fm.bytes(), nil
}

// outLine is a line of the output: blank, a statement, a comment, or a
// statement and its trailing comment.
type outLine struct {
	depth         int
	code, comment string
}

type formatter struct {
	file     *parser.File
	comments []parser.Comment // those not yet printed
	out      []outLine
	prev     int  // the source line of the last statement or comment printed
	blank    bool // a blank line is due before the next line (the mesh's)
	start    bool // nothing printed yet in the file or the body being printed: no blank line
}

// line prints the program's line l with the comments before it.
func (fm *formatter) line(l ir.Line) error {
	var pos ir.Pos
	depth := l.Depth // of the comments before l
	switch l.Kind {
	case ir.LineBlank:
		fm.blank = true
		return nil
	case ir.LineMesh:
		pos = fm.file.Program.Mesh.Pos
	case ir.LineInput:
		pos = l.Value.Pos
	case ir.LineOp:
		pos = l.Op.Pos
	case ir.LineClose:
		pos = fm.file.Ends[l.Op]
		depth++ // comments at the end of a body are the body's
	case ir.LineOutput:
		pos = fm.file.Output
	}
	line := int(pos.Line)
	if line <= fm.prev || !pos.IsValid() {
		return fmt.Errorf("format: %q has no position after line %d, where the text before it is: was the file parsed with parser.ParseComments?", l.Text, fm.prev)
	}
	fm.flush(line, depth)
	trailing := ""
	if len(fm.comments) > 0 && int(fm.comments[0].Pos.Line) == line {
		trailing = fm.comments[0].Text
		fm.comments = fm.comments[1:]
	}
	if l.Kind == ir.LineClose {
		fm.blank, fm.start = false, true // no blank line before a }
	}
	fm.put(line, outLine{depth: l.Depth, code: l.Text, comment: trailing})
	fm.start = l.Kind == ir.LineOp && l.Op.Body != nil // nor after a {
	return nil
}

// flush prints the comments before source line before (every one when
// before is -1) at depth.
func (fm *formatter) flush(before, depth int) {
	for len(fm.comments) > 0 {
		c := fm.comments[0]
		if before >= 0 && int(c.Pos.Line) >= before {
			return
		}
		fm.comments = fm.comments[1:]
		fm.put(int(c.Pos.Line), outLine{depth: depth, comment: c.Text})
		fm.start = false
	}
}

// put appends l, from source line line, after a blank line if one is due
// or the source has one before it.
func (fm *formatter) put(line int, l outLine) {
	if (fm.blank || (fm.prev > 0 && line > fm.prev+1)) && !fm.start {
		fm.out = append(fm.out, outLine{})
	}
	fm.out = append(fm.out, l)
	fm.prev, fm.blank, fm.start = line, false, false
}

// bytes writes the lines out, the trailing comments of consecutive lines
// aligned.
func (fm *formatter) bytes() []byte {
	var b bytes.Buffer
	out := fm.out
	for i := 0; i < len(out); {
		if out[i].code == "" || out[i].comment == "" {
			writeLine(&b, out[i], 0)
			i++
			continue
		}
		// a run of lines with trailing comments, aligned together
		j, width := i, 0
		for ; j < len(out) && out[j].code != "" && out[j].comment != ""; j++ {
			width = max(width, 2*out[j].depth+len(out[j].code))
		}
		for ; i < j; i++ {
			writeLine(&b, out[i], width)
		}
	}
	return b.Bytes()
}

// writeLine writes l and a newline, its trailing comment from column
// width+2 on.
func writeLine(b *bytes.Buffer, l outLine, width int) {
	if l.code == "" && l.comment == "" {
		b.WriteByte('\n')
		return
	}
	indent := strings.Repeat("  ", l.depth)
	b.WriteString(indent)
	b.WriteString(l.code)
	if l.comment != "" {
		if l.code != "" {
			b.WriteString(strings.Repeat(" ", width-len(indent)-len(l.code)+1))
		}
		b.WriteString(l.comment)
	}
	b.WriteByte('\n')
}
