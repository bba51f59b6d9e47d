package ir

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Print writes p in the canonical text format. Parsing the output gives back
// an equal program.
func Print(w io.Writer, p *Program) error {
	pr := &printer{}
	pr.program(p)
	_, err := io.WriteString(w, pr.b.String())
	return err
}

// String returns the canonical text of p.
func (p *Program) String() string {
	var b strings.Builder
	_ = Print(&b, p)
	return b.String()
}

// String returns one op in the text format (its body included).
func (op *Op) String() string {
	pr := &printer{}
	pr.op(op)
	return strings.TrimSuffix(pr.b.String(), "\n")
}

// A Line is one line of a program's canonical text, as PrintLines gives
// it: what a formatter needs to put other text (comments) between the
// lines Print writes.
type Line struct {
	Kind  LineKind
	Depth int    // the regions around it; Print indents each by two spaces
	Text  string // the line without its indentation and newline; "" for LineBlank
	// Op is the op of a LineOp, or the op whose body a LineClose ends;
	// Value is the input of a LineInput.
	Op    *Op
	Value *Value
}

// LineKind says what a Line holds.
type LineKind uint8

const (
	LineMesh   LineKind = iota // mesh N
	LineBlank                  // the empty line after the mesh
	LineInput                  // input %x : type
	LineOp                     // an op; a header that opens a body ends with {
	LineClose                  // the } that ends an op's body
	LineOutput                 // output %a, %b
)

// PrintLines calls f with each line of p's canonical text, in order:
// Print writes each line's Text, indented two spaces per Depth, and a
// newline.
func PrintLines(p *Program, f func(Line)) {
	pr := &printer{emit: f}
	pr.program(p)
}

type printer struct {
	b      strings.Builder
	indent int
	emit   func(Line) // PrintLines': each line goes here rather than to b
}

func (pr *printer) line(kind LineKind, op *Op, v *Value, text string) {
	if pr.emit != nil {
		pr.emit(Line{Kind: kind, Depth: pr.indent, Text: text, Op: op, Value: v})
		return
	}
	for range pr.indent {
		pr.b.WriteString("  ")
	}
	pr.b.WriteString(text)
	pr.b.WriteByte('\n')
}

func (pr *printer) program(p *Program) {
	if p.Mesh.IsLinear() {
		pr.line(LineMesh, nil, nil, "mesh "+strconv.Itoa(p.Mesh.Size()))
	} else {
		pr.line(LineMesh, nil, nil, "mesh "+formatInts(intsToInt64(p.Mesh.Devices)))
	}
	pr.line(LineBlank, nil, nil, "")
	for _, in := range p.Inputs {
		pr.line(LineInput, nil, in, "input "+in.String()+" : "+typeString(in.Type))
	}
	if p.Body != nil {
		for _, op := range p.Body.Ops {
			pr.op(op)
		}
	}
	if len(p.Outputs) > 0 {
		pr.line(LineOutput, nil, nil, "output "+joinValues(p.Outputs))
	}
}

func (pr *printer) op(op *Op) {
	var b strings.Builder
	if len(op.Results) > 0 {
		b.WriteString(joinValues(op.Results))
		b.WriteString(" = ")
	}
	b.WriteString(op.Code.String())
	if op.Code == OpFor {
		idx := "%?"
		if op.Body != nil && len(op.Body.Args) == 1 {
			idx = op.Body.Args[0].String()
		}
		fmt.Fprintf(&b, " %s = %d to %d", idx, op.IntAttr("from", 0), op.IntAttr("to", 0))
		if step := op.IntAttr("step", 1); step != 1 {
			fmt.Fprintf(&b, " step %d", step)
		}
		if n, ok := op.Attr("streams"); ok {
			fmt.Fprintf(&b, " streams %d", n.Int)
		}
	} else {
		if len(op.Operands) > 0 {
			b.WriteString(" ")
			b.WriteString(joinValues(op.Operands))
		}
		for _, a := range op.Attrs {
			fmt.Fprintf(&b, " %s=%s", a.Key, FormatAttrValue(a.Value))
		}
		var types []string
		for _, r := range op.Results {
			if r.Type != nil {
				types = append(types, r.Type.String())
			}
		}
		if len(types) == len(op.Results) && len(types) > 0 {
			b.WriteString(" : ")
			b.WriteString(strings.Join(types, ", "))
		}
	}
	if op.Body == nil {
		pr.line(LineOp, op, nil, b.String())
		return
	}
	b.WriteString(" {")
	pr.line(LineOp, op, nil, b.String())
	pr.indent++
	for _, inner := range op.Body.Ops {
		pr.op(inner)
	}
	pr.indent--
	pr.line(LineClose, op, nil, "}")
}

// FormatAttrValue spells an attribute value as the text format does.
func FormatAttrValue(v AttrValue) string {
	switch v.Kind {
	case KindInt:
		return strconv.FormatInt(v.Int, 10)
	case KindFloat:
		return formatFloat(v.Float)
	case KindBool:
		return strconv.FormatBool(v.Bool)
	case KindWord:
		return v.Word
	case KindInts:
		return formatInts(v.Ints)
	case KindPeer:
		if v.Relative {
			if v.Int >= 0 {
				return "+" + strconv.FormatInt(v.Int, 10)
			}
			return strconv.FormatInt(v.Int, 10)
		}
		return strconv.FormatInt(v.Int, 10)
	}
	return "?"
}

// formatFloat always shows a float as one (2 prints as 2.0) so it parses
// back as a float.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

func formatInts(xs []int64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatInt(x, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func intsToInt64(xs []int) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}

func joinValues(vs []*Value) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, ", ")
}

func typeString(t Type) string {
	if t == nil {
		return "?"
	}
	return t.String()
}
