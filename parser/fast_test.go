package parser

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/hirlab/hir/ir"
)

// parseReference parses src with the participle grammar alone, as Parse did
// before the fast path: the reference the fast path is held to.
func parseReference(filename string, src []byte) (prog *ir.Program, err error) {
	defer func() {
		if r := recover(); r != nil {
			prog = nil
			err = ir.ErrorList{ir.Errorf(ir.FilePos(filename), "%s: %v", internalErrorText, r)}
		}
	}()
	return parseWith(filename, src, true, true)
}

// differentialSeeds is every .hir file of the repository, and lines where
// participle's lookahead, not only the EBNF, decides.
func differentialSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, pattern := range []string{
		"testdata/*.hir", "testdata/errors/*.hir",
		"../testdata/*.hir", "../testdata/contract/*.hir", "../examples/*.hir", "../examples/*/*.hir",
		"../passes/testdata/*/*.hir", "../format/testdata/*.hir",
	} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			seeds = append(seeds, src)
		}
	}
	for _, s := range []string{
		"mesh 2\ninput %x : f32[4]\nfor %i\nfor relu=3\nfor\nfor %i, %j\nfor %i = 0 to 4 step {\n}\noutput %x\n",
		"mesh 2\n%a = relu inf=3\n%b = relu nan, inf, -inf, +inf, 1e-05, 2\n%c = relu %x, \n%d = relu %x foo\n%e = relu %x foo=\n",
		"mesh [0, 1,]\nmesh []\nmesh [\nmesh x\ninput %x f32[4]\ninput %x : f32[4/DIDx/DIDx]\ninput %y : f32[4/]\ninput %z : f32[4,]\n",
		"mesh 2\n%a = f x=[1, 2 y=3\n%b = f x=[] : f32[] symmetric, f32 {\n%c, = f\n%d, %e = f : f32[2], f32[3] foo {\n}\n}\n} }\noutput\noutput %a,\n",
		"mesh 2\n%a = f : \n%b = f : f32[8] , \n%c = f : f32[8]] , f32\n%d = f x = ]\n%e = f x=-1 y=true z=word w=[1,2,3]\n",
		"mesh 2\nfor %i = 0 to 4 {\n%a = for %j = 1 to 2 step 3 {\n}\n}\nfor %i = 0 to 4 { x\n",
		// for headers a worker builds (chunks.go) whose names clash
		"mesh 1\ninput %x : f32[4]\nfor %i = 0 to 2 {\nfor %i = 0 to 3 {\n%i = for %k = 0 to 1 {\n}\n%y = relu %i\n}\n%r = for %x = 1 to 2 streams 2 {\n}\n%r, %s = for %q = 99999999999999999999 to 1 {\n}\n%s = for %t = 0 to 1 step 1 {\n%u = add %t, %x\n}\n}\noutput %s, %u\n",
		// lines rejected at their first token, past the errors worded
		// (rejectedAtOnce), among lines that are not
		"mesh 1\ninput %x : f32[4]\n" + strings.Repeat("}\n,\n\x00\n= {\n1 2\n[ %x\n} }\n\x00 {\n%a = relu %x\n}\n", 12) + "output %x\n",
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// checkDifferential fails when the fast path and the participle grammar
// disagree on src: on any line, whether it is accepted and the tree built;
// on the whole program, the errors (text and positions) or the printed
// program.
func checkDifferential(t *testing.T, src []byte) {
	t.Helper()
	var alloc fastAlloc
	eachLine("f.hir", src, func(l *line) {
		fast, ok := parseLineFast(l, &alloc)
		if ok {
			materializeLists(fast)
			materializeOperands(fast)
		}
		if _, bad := l.firstBad(); bad {
			if ok {
				t.Fatalf("fast path accepts a line with a bad token: %q", l.src[l.start:])
			}
			return
		}
		tokens, _, _ := l.grammarTokens(int(^uint(0)>>1)-1, false)
		ref, err := parseLineReference(tokens)
		switch {
		case ok && err != nil:
			t.Fatalf("fast path accepts what the grammar rejects (%v): %q", err, lineText(tokens))
		case !ok && err == nil:
			t.Fatalf("fast path rejects what the grammar accepts: %q", lineText(tokens))
		case ok && !reflect.DeepEqual(fast, ref):
			t.Fatalf("fast path builds another tree for %q:\nfast: %s\ngrammar: %s", lineText(tokens), dump(fast), dump(ref))
		}
	})
	prog, err := Parse("f.hir", src)
	refProg, refErr := parseReference("f.hir", src)
	if fmt.Sprint(err) != fmt.Sprint(refErr) {
		t.Fatalf("errors differ on %q:\nfast: %v\ngrammar: %v", clipForLog(src), err, refErr)
	}
	// A long line is read letting go of its tokens as they are read
	// (line.release), and the grammar, which words syntax errors, is
	// given it shortened (line.elideList): do both to every line.
	func() {
		defer func(a, b, c, d int) { elideMin, elideKeep, releaseEvery, releaseMin = a, b, c, d }(elideMin, elideKeep, releaseEvery, releaseMin)
		elideMin, elideKeep, releaseEvery, releaseMin = 3, 1, 1, 1
		sprog, serr := Parse("f.hir", src)
		if fmt.Sprint(serr) != fmt.Sprint(refErr) {
			t.Fatalf("errors differ on %q with every line read as a long one:\nfast: %v\ngrammar: %v", clipForLog(src), serr, refErr)
		}
		if serr == nil && positions(sprog) != positions(prog) {
			t.Fatalf("programs differ on %q with every line read as a long one", clipForLog(src))
		}
	}()
	checkChunked(t, src, prog, err)
	// Parse checks the program built, whether or not it has errors,
	// without Verify's checks of names (builder.verify): they find nothing.
	b := newBuilder("f.hir")
	b.parse(src, false)
	if b.meshBad || b.prog.Mesh.Size() == 0 {
		b.prog.Mesh = ir.LinearMesh(1)
	}
	if full, resolved := ir.Verify(b.prog), ir.VerifyResolved(b.prog); fmt.Sprint(full) != fmt.Sprint(resolved) {
		t.Fatalf("Verify and VerifyResolved differ on what Parse built of %q:\nVerify: %v\nVerifyResolved: %v", clipForLog(src), full, resolved)
	}
	if err == nil {
		// Parse verifies without Verify's checks of names (builder.verify).
		if err := ir.Verify(prog); err != nil {
			t.Fatalf("Parse accepts what ir.Verify rejects (%v): %q", err, clipForLog(src))
		}
		var a, b bytes.Buffer
		if err := ir.Print(&a, prog); err != nil {
			t.Fatal(err)
		}
		if err := ir.Print(&b, refProg); err != nil {
			t.Fatal(err)
		}
		if a.String() != b.String() {
			t.Fatalf("programs differ on %q:\nfast:\n%s\ngrammar:\n%s", clipForLog(src), a.String(), b.String())
		}
	}
}

// parseChunked is Parse reading src in parallel (chunks.go) in chunks of
// about size bytes, however small src is.
func parseChunked(filename string, src []byte, size int) (prog *ir.Program, err error) {
	defer func() {
		if r := recover(); r != nil {
			prog = nil
			err = ir.ErrorList{ir.Errorf(ir.FilePos(filename), "%s: %v", internalErrorText, r)}
		}
	}()
	b := newBuilder(filename)
	b.chunkBytes = size
	return b.parse(src, true)
}

// checkChunked fails when reading src in parallel gives other errors or
// another program than Parse did on one goroutine (prog, err).
func checkChunked(t *testing.T, src []byte, prog *ir.Program, err error) {
	t.Helper()
	for _, size := range []int{1, 40, 1000} {
		chunked, cerr := parseChunked("f.hir", src, size)
		if fmt.Sprint(err) != fmt.Sprint(cerr) {
			t.Fatalf("errors differ on %q read in chunks of %d bytes:\none goroutine: %v\nchunks: %v", clipForLog(src), size, err, cerr)
		}
		if err != nil {
			continue
		}
		var a, b bytes.Buffer
		if err := ir.Print(&a, prog); err != nil {
			t.Fatal(err)
		}
		if err := ir.Print(&b, chunked); err != nil {
			t.Fatal(err)
		}
		// and the positions, which the printed program does not show.
		if a.String() != b.String() || positions(prog) != positions(chunked) {
			t.Fatalf("programs differ on %q read in chunks of %d bytes:\none goroutine:\n%s\nchunks:\n%s", clipForLog(src), size, a.String(), b.String())
		}
	}
}

// positions lists where every op, value and attribute of prog is, and
// whether each named operand is the value its name was defined as.
func positions(prog *ir.Program) string {
	var b strings.Builder
	for _, v := range prog.Inputs {
		fmt.Fprintf(&b, "input %s %v\n", v.Name, v.Pos)
	}
	defs := map[*ir.Value]bool{}
	for _, v := range prog.Inputs {
		defs[v] = true
	}
	prog.Body.Walk(func(op *ir.Op) {
		fmt.Fprintf(&b, "%s %v:", op.Code, op.Pos)
		for _, v := range op.Operands {
			fmt.Fprintf(&b, " %s %v %v", v.Name, v.Pos, v.Lit != nil || defs[v])
		}
		for _, a := range op.Attrs {
			fmt.Fprintf(&b, " %s %v", a.Key, a.Pos)
		}
		for _, v := range op.Results {
			fmt.Fprintf(&b, " -> %s %v %v", v.Name, v.Pos, v.Def == op)
			defs[v] = true
		}
		if op.Body != nil {
			for _, v := range op.Body.Args {
				fmt.Fprintf(&b, " arg %s %v", v.Name, v.Pos)
				defs[v] = true
			}
		}
		b.WriteString("\n")
	})
	return b.String()
}

func parseLineReference(tokens []lexer.Token) (ast *lineAST, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	peek, err := lexer.Upgrade(&sliceLexer{tokens: tokens})
	if err != nil {
		return nil, err
	}
	return parseLineAST(tokens[0], peek)
}

// materializeOperands turns the operands and results of the fast path's
// tree, kept as tokens, into the grammar's nodes, to compare the trees.
func materializeOperands(ast *lineAST) {
	if o := ast.Op; o != nil && o.fastResults != nil {
		for k := range o.resultCount() {
			n := o.result(k)
			o.Results = append(o.Results, &n)
		}
		o.fastResults, o.fastLine = nil, nil
	}
	if ast.Op == nil || ast.Op.Generic == nil || ast.Op.Generic.fastOps == nil {
		return
	}
	g := ast.Op.Generic
	for i := range g.fastOps {
		t := &g.fastOps[i]
		text := g.fastLine.text(t)
		x := &operandAST{Pos: g.fastLine.pos(t), Num: &text}
		if t.kind() == tokVar {
			x.Name, x.Num = &text, nil
		}
		g.Operands = append(g.Operands, x)
	}
	g.fastOps, g.fastLine = nil, nil
}

// materializeLists turns the int lists' items and the shapes' dims of the
// fast path's tree, kept as tokens, into the grammar's nodes, to compare
// the trees.
func materializeLists(ast *lineAST) {
	list := func(l *intListAST) {
		if l == nil || l.fastItems == nil {
			return
		}
		for k := range l.len() {
			it := l.item(k)
			l.Items = append(l.Items, &it)
		}
		l.fastItems, l.fastLine = nil, nil
	}
	shape := func(t *typeAST) {
		if t == nil || t.Shape == nil || t.Shape.fastDims == nil {
			return
		}
		s := t.Shape
		for k := range s.rank() {
			extent, parallel, ok := s.dim(k)
			d := &dimAST{Pos: extent.Pos, Extent: &extent}
			if ok {
				d.Parallel = &parallel
			}
			s.Dims = append(s.Dims, d)
		}
		s.fastDims, s.fastLine = nil, nil
	}
	switch {
	case ast.Output != nil:
		o := ast.Output
		for k := range o.count() {
			n := o.value(k)
			o.Values = append(o.Values, &n)
		}
		o.fastValues, o.fastLine = nil, nil
	case ast.Mesh != nil:
		list(ast.Mesh.List)
	case ast.Input != nil:
		shape(ast.Input.Type)
	case ast.Op != nil && ast.Op.Generic != nil:
		g := ast.Op.Generic
		lists := 0
		for k := range g.fastAttrs {
			var p attrParts
			g.attr(k, &lists, &p)
			// positions as the parts give them (the offsets, which
			// they do not keep, from the tokens)
			fa := &g.fastAttrs[k]
			a := &attrAST{
				Pos:   lexer.Position{Offset: fa.key.offset(), Line: p.line, Column: p.col},
				Key:   p.key,
				Value: &attrValueAST{Pos: lexer.Position{Offset: fa.value.offset(), Line: p.line, Column: p.valueCol}, List: p.list},
			}
			switch {
			case p.list != nil:
			case p.num:
				a.Value.Num = &p.value
			default:
				a.Value.Word = &p.value
			}
			g.Attrs = append(g.Attrs, a)
		}
		g.fastAttrs, g.fastLists = nil, nil
		if g.fastOps == nil {
			g.fastLine = nil
		}
		for _, a := range g.Attrs {
			list(a.Value.List)
		}
		for _, t := range ast.Op.Generic.Types {
			shape(t)
		}
	}
}

// eachLine calls f with every line of src that holds a token, read as
// Parse reads it (f may scan it to its end or not).
func eachLine(filename string, src []byte, f func(l *line)) {
	s := scanner{filename: filename, src: string(src), line: 1}
	var l line
	for more := true; more; {
		l.begin(&s, nil)
		if !l.empty() {
			f(&l)
		}
		more = l.finish()
	}
}

func lineText(tokens []lexer.Token) string {
	var parts []string
	for _, t := range tokens[:len(tokens)-1] {
		parts = append(parts, t.Value)
	}
	return strings.Join(parts, " ")
}

func dump(v any) string {
	var b strings.Builder
	dumpValue(&b, reflect.ValueOf(v))
	return b.String()
}

func dumpValue(b *strings.Builder, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		b.WriteString("&")
		dumpValue(b, v.Elem())
	case reflect.Struct:
		b.WriteString(v.Type().Name() + "{")
		for i := 0; i < v.NumField(); i++ {
			fmt.Fprintf(b, "%s:", v.Type().Field(i).Name)
			dumpValue(b, v.Field(i))
			b.WriteString(" ")
		}
		b.WriteString("}")
	case reflect.Slice:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		b.WriteString("[")
		for i := 0; i < v.Len(); i++ {
			dumpValue(b, v.Index(i))
			b.WriteString(" ")
		}
		b.WriteString("]")
	default:
		fmt.Fprintf(b, "%v", v.Interface())
	}
}

func TestDifferentialSeeds(t *testing.T) {
	for _, src := range differentialSeeds(t) {
		checkDifferential(t, src)
	}
	// The benchmark's program, whose lines are all accepted by the fast path.
	checkDifferential(t, generateProgram(300))
}

// FuzzDifferential holds the fast path (fast.go) to the participle grammar:
// the same lines accepted, the same trees, the same errors and programs.
func FuzzDifferential(f *testing.F) {
	for _, src := range differentialSeeds(f) {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		checkDifferential(t, src)
	})
}
