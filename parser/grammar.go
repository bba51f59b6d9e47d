package parser

import (
	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// The participle grammar covers one statement line. Lines are split by the
// driver (parser.go), which nests region bodies itself from the `{` that
// ends a header line and the `}` lines; this keeps the grammar flat and lets
// the parser go on after an error at the next line, inside regions too.

// lineAST is one non-empty line.
type lineAST struct {
	Mesh   *meshAST   `parser:"  @@"`
	Input  *inputAST  `parser:"| @@"`
	Output *outputAST `parser:"| @@"`
	Close  *closeAST  `parser:"| @@"`
	Op     *opAST     `parser:"| @@"`
}

type meshAST struct {
	Pos   lexer.Position
	Count *intTok     `parser:"'mesh' ( @@"`
	List  *intListAST `parser:"       | @@ )"`
}

type inputAST struct {
	Pos  lexer.Position
	Name *nameTok `parser:"'input' @@"`
	Type *typeAST `parser:"':' @@"`
}

type outputAST struct {
	Pos    lexer.Position
	Values []*nameTok `parser:"'output' @@ ( ',' @@ )*"`

	// The names as the fast path reads them, in place of Values (then
	// nil), as fastOps are a generic op's: an output of millions.
	fastValues []lexeme
	fastLine   *line
}

// count is how many values the output names.
func (o *outputAST) count() int { return len(o.Values) + len(o.fastValues) }

// value is the output's name k.
func (o *outputAST) value(k int) nameTok {
	if o.fastValues == nil {
		return *o.Values[k]
	}
	t := &o.fastValues[k]
	return nameTok{Pos: o.fastLine.pos(t), Text: o.fastLine.text(t)}
}

type closeAST struct {
	Pos   lexer.Position
	Brace bool `parser:"@'}'"`
}

// opAST is `parser:"results = op ..."` or `parser:"op ..."`.
type opAST struct {
	Pos     lexer.Position
	Results []*nameTok  `parser:"( @@ ( ',' @@ )* '=' )?"`
	For     *forAST     `parser:"( @@"`
	Generic *genericAST `parser:"| @@ )"`

	// The results as the fast path reads them, in place of Results (then
	// nil), as an output's names: their tokens, on fastLine, where a
	// nameTok node and its pointer cost 64 bytes (a line of millions of
	// results). They are the fast path's, reused by the next line.
	fastResults []lexeme
	fastLine    *line
}

// resultCount is how many results the line names.
func (o *opAST) resultCount() int { return len(o.Results) + len(o.fastResults) }

// result is the line's result k.
func (o *opAST) result(k int) nameTok {
	if o.fastResults == nil {
		return *o.Results[k]
	}
	t := &o.fastResults[k]
	return nameTok{Pos: o.fastLine.pos(t), Text: o.fastLine.text(t)}
}

// resultText is the name of the line's result k, as written.
func (o *opAST) resultText(k int) string {
	if o.fastResults == nil {
		return o.Results[k].Text
	}
	return o.fastLine.text(&o.fastResults[k])
}

type forAST struct {
	Pos     lexer.Position
	Index   *nameTok `parser:"'for' @@ '='"`
	From    *intTok  `parser:"@@ 'to'"`
	To      *intTok  `parser:"@@"`
	Step    *intTok  `parser:"( 'step' @@ )?"`
	Streams *intTok  `parser:"( 'streams' @@ )?"`
	Open    bool     `parser:"@'{'"`
}

type genericAST struct {
	Name     *identTok     `parser:"@@"`
	Operands []*operandAST `parser:"( @@ ( ',' @@ )* )?"`
	Attrs    []*attrAST    `parser:"@@*"`
	Types    []*typeAST    `parser:"( ':' @@ ( ',' @@ )* )?"`
	Open     bool          `parser:"@'{'?"`

	// The operands as the fast path reads them, in place of Operands
	// (then nil): their tokens, on fastLine, 16 bytes each and no pointer
	// where an operandAST costs 80 (a line of millions of operands). They
	// are the fast path's, reused by the next line. (participle does not
	// see unexported fields.)
	fastOps  []lexeme
	fastLine *line
	// The attributes as the fast path reads them, in place of Attrs
	// (then nil): their keys' and values' tokens, on fastLine, and the
	// lists of those whose value is a list (its [), in order.
	fastAttrs []fastAttr
	fastLists []*intListAST
}

// fastAttr is an attribute as the fast path reads it: its key's token and
// its value's (a list's [).
type fastAttr struct{ key, value lexeme }

// attrParts is an attribute's key and value (genericAST.attr), from the
// grammar's node or the fast path's tokens: no node is made of the
// fast path's, and none holds a pointer (a line may have millions).
type attrParts struct {
	line, col, valueCol int         // where the key and the value are (line:col)
	key                 string      //
	value               string      // the value's text, a number or a word; "" for a list
	num                 bool        // value is a number
	list                *intListAST // the value, where it is a list
}

// valuePos is where the value is.
func (a *attrParts) valuePos() lexer.Position {
	return lexer.Position{Line: a.line, Column: a.valueCol}
}

// attrCount is how many attributes the op has.
func (g *genericAST) attrCount() int { return len(g.Attrs) + len(g.fastAttrs) }

// attr is the op's attribute k, in a (lists counts the attributes with a
// list value before k, the fast path's).
func (g *genericAST) attr(k int, lists *int, a *attrParts) {
	if g.fastAttrs == nil {
		g.Attrs[k].parts(a)
		return
	}
	// Field by field, positions as numbers: a line may have millions.
	l, fa := g.fastLine, &g.fastAttrs[k]
	a.line, a.col, a.valueCol = l.num, fa.key.offset()-l.start+1, fa.value.offset()-l.start+1
	a.key, a.value, a.num, a.list = l.text(&fa.key), "", false, nil
	switch fa.value.kind() {
	case tokInt, tokFloat:
		a.value, a.num = l.text(&fa.value), true
	case tokIdent:
		a.value = l.text(&fa.value)
	default:
		a.list = g.fastLists[*lists]
		*lists++
	}
}

// parts is the attribute's parts, in p.
func (a *attrAST) parts(p *attrParts) {
	v := a.Value
	*p = attrParts{line: a.Pos.Line, col: a.Pos.Column, valueCol: v.Pos.Column, key: a.Key, list: v.List}
	switch {
	case v.Num != nil:
		p.value, p.num = *v.Num, true
	case v.Word != nil:
		p.value = *v.Word
	}
}

// operandAST is a value or a literal; inf and nan are literals, not names.
type operandAST struct {
	Pos  lexer.Position
	Name *string `parser:"  @Var"`
	Num  *string `parser:"| @( Int | Float | 'inf' | 'nan' )"`
}

type attrAST struct {
	Pos   lexer.Position
	Key   string        `parser:"@Ident '='"`
	Value *attrValueAST `parser:"@@"`
}

type attrValueAST struct {
	Pos  lexer.Position
	Num  *string     `parser:"  @( Int | Float )"`
	Word *string     `parser:"| @Ident"`
	List *intListAST `parser:"| @@"`
}

type intListAST struct {
	Pos   lexer.Position
	Open  bool      `parser:"@'['"`
	Items []*intTok `parser:"( @@ ( ',' @@ )* )? ']'"`

	// The items as the fast path reads them, in place of Items (then
	// nil): their tokens, on fastLine, 16 bytes each and no pointer where
	// an item costs 72 and a pointer (a list of millions of numbers). They
	// are the fast path's, reused by the next line.
	fastItems []lexeme
	fastLine  *line
}

// len is how many items the list has.
func (l *intListAST) len() int { return len(l.Items) + len(l.fastItems) }

// item is the list's item k.
func (l *intListAST) item(k int) intTok {
	if l.fastItems != nil {
		return l.fastLine.intTok(&l.fastItems[k])
	}
	return *l.Items[k]
}

// typeAST is f32[8/DIDx, 16] symmetric, or a type without a shape
// (a scalar dtype, stream, handle), as the passes annotate values.
type typeAST struct {
	Pos   lexer.Position
	Name  *identTok `parser:"@@"`
	Shape *shapeAST `parser:"@@?"`
}

type shapeAST struct {
	Open bool      `parser:"@'['"`
	Dims []*dimAST `parser:"( @@ ( ',' @@ )* )? ']'"`
	Mem  *identTok `parser:"@@?"`

	// The dims as the fast path reads them, in place of Dims (then nil),
	// as fastItems are an intListAST's: a type of millions of dims.
	fastDims []fastDim
	fastLine *line
}

// fastDim is a dim as the fast path reads it: its extent's token and, for
// N/DIDx, its device dimension's (else the zero lexeme, of no type).
type fastDim struct{ extent, parallel lexeme }

// rank is how many dims the shape has.
func (s *shapeAST) rank() int { return len(s.Dims) + len(s.fastDims) }

// dim is the shape's dim k: its extent and, when it has one (ok), its
// device dimension.
func (s *shapeAST) dim(k int) (extent intTok, parallel identTok, ok bool) {
	if s.fastDims == nil {
		d := s.Dims[k]
		if d.Parallel != nil {
			parallel, ok = *d.Parallel, true
		}
		return *d.Extent, parallel, ok
	}
	l, d := s.fastLine, &s.fastDims[k]
	if d.parallel.typ != 0 {
		parallel, ok = identTok{Pos: l.pos(&d.parallel), Text: l.text(&d.parallel)}, true
	}
	return l.intTok(&d.extent), parallel, ok
}

type dimAST struct {
	Pos      lexer.Position
	Extent   *intTok   `parser:"@@"`
	Parallel *identTok `parser:"( '/' @@ )?"`
}

type nameTok struct {
	Pos  lexer.Position
	Text string `parser:"@Var"`
}

type intTok struct {
	Pos  lexer.Position
	Text string `parser:"@Int"`
}

type identTok struct {
	Pos  lexer.Position
	Text string `parser:"@Ident"`
}

// One parser per kind of line: parseLine picks it by the line's first
// token, so participle never tries (and backtracks out of) the kinds a
// line cannot be. That halves the time to parse a large program.
var (
	meshParser   = buildLineParser[meshAST]()
	inputParser  = buildLineParser[inputAST]()
	outputParser = buildLineParser[outputAST]()
	closeParser  = buildLineParser[closeAST]()
	opParser     = buildLineParser[opAST]()
)

func buildLineParser[T any]() *participle.Parser[T] {
	return participle.MustBuild[T](participle.Lexer(hirLexer{}), participle.UseLookahead(1))
}

// parseLineAST parses one line's tokens with the parser its first token
// calls for.
func parseLineAST(first lexer.Token, peek *lexer.PeekingLexer) (*lineAST, error) {
	var ast lineAST
	var err error
	switch {
	case first.Type == tokIdent && first.Value == "mesh":
		ast.Mesh, err = meshParser.ParseFromLexer(peek)
	case first.Type == tokIdent && first.Value == "input":
		ast.Input, err = inputParser.ParseFromLexer(peek)
	case first.Type == tokIdent && first.Value == "output":
		ast.Output, err = outputParser.ParseFromLexer(peek)
	case first.Type == tokPunct && first.Value == "}":
		ast.Close, err = closeParser.ParseFromLexer(peek)
	default:
		ast.Op, err = opParser.ParseFromLexer(peek)
	}
	return &ast, err
}
