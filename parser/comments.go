package parser

import (
	"strings"

	"github.com/hirlab/hir/ir"
)

// A Mode asks ParseSource for more than the program.
type Mode uint

const (
	// ParseComments keeps the source's comments, and where the statements
	// are that the program does not record (a region's }, the output), so
	// that the text can be printed back with them (package format).
	ParseComments Mode = 1 << iota
)

// A Comment is one // comment of the source. Comments are no part of the
// program: ParseSource gives them apart, as go/parser gives a Go file's.
type Comment struct {
	Pos  ir.Pos // where its // is
	Text string // from // to the end of its line, trailing spaces, tabs and carriage returns dropped
	// Trailing: the comment follows a statement on its line; otherwise
	// the line holds the comment alone.
	Trailing bool
}

// A File is a program as ParseSource read it.
type File struct {
	Program *ir.Program
	// With ParseComments: every comment, in source order; where each
	// region's } is, by the op whose body it ends; and where the output
	// statement is (not valid when there is none).
	Comments []Comment
	Ends     map[*ir.Op]ir.Pos
	Output   ir.Pos
}

// ParseSource reads the program in src as Parse does, and with
// ParseComments also its comments. The error, when not nil, is an
// ir.ErrorList, the one Parse gives.
func ParseSource(filename string, src []byte, mode Mode) (f *File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f = nil
			err = ir.ErrorList{ir.Errorf(ir.FilePos(filename), "%s: %v", internalErrorText, r)}
		}
	}()
	b := newBuilder(filename)
	if mode&ParseComments != 0 {
		b.ends = map[*ir.Op]ir.Pos{}
	}
	prog, err := b.parse(src, true)
	if err != nil {
		return nil, err
	}
	f = &File{Program: prog}
	if mode&ParseComments != 0 {
		f.Comments = scanComments(filename, b.src)
		f.Ends = b.ends
		f.Output = b.outputPos
	}
	return f, nil
}

// scanComments returns the comments of src, found by the lexer itself
// (scanLine) so that what is a comment is decided in one place.
func scanComments(filename, src string) []Comment {
	comments := []Comment{}
	s := scanner{filename: filename, src: src, line: 1, comments: &comments}
	for s.next().kind() != tokEOF {
	}
	return comments
}

// comment records the comment src[start:end] of the line being scanned.
func (s *scanner) comment(start, end int) {
	*s.comments = append(*s.comments, Comment{
		Pos:      ir.NewPos(s.filename, s.line, start-s.lineStart+1),
		Text:     strings.Clone(strings.TrimRight(s.src[start:end], " \t\r")),
		Trailing: s.onLine,
	})
}
