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
