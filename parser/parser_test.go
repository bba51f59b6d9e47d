package parser

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hirlab/hir/ir"
)

var update = flag.Bool("update", false, "rewrite the golden .err files")

// snapshot is a program as plain data, without the Value <-> Op cycles:
// an operand is its name (names are unique program-wide) or its literal.
// go-cmp could walk the cycles itself, but re-walks every shared def and
// takes exponential time on long def chains.
type snapshot struct {
	File    string
	Mesh    ir.Mesh
	Inputs  []valueSnap
	Body    blockSnap
	Outputs []string
}

type valueSnap struct {
	Name string
	Type ir.Type
	Lit  *ir.Literal
	// DefOK: a result points back to its op; other values have no Def.
	DefOK bool
}

type opSnap struct {
	Code     ir.Opcode
	Results  []valueSnap
	Operands []valueSnap
	Attrs    []ir.Attr
	Body     *blockSnap
}

type blockSnap struct {
	Args []valueSnap
	Ops  []opSnap
}

func snap(p *ir.Program) snapshot {
	s := snapshot{File: p.File, Mesh: p.Mesh}
	for _, in := range p.Inputs {
		s.Inputs = append(s.Inputs, valueSnap{Name: in.Name, Type: in.Type, DefOK: in.Def == nil})
	}
	if p.Body != nil {
		s.Body = snapBlock(p.Body)
	}
	for _, out := range p.Outputs {
		s.Outputs = append(s.Outputs, out.Name)
	}
	return s
}

func snapBlock(b *ir.Block) blockSnap {
	var s blockSnap
	for _, a := range b.Args {
		s.Args = append(s.Args, valueSnap{Name: a.Name, Type: a.Type, DefOK: a.Def == nil})
	}
	for _, op := range b.Ops {
		o := opSnap{Code: op.Code, Attrs: op.Attrs}
		for _, r := range op.Results {
			o.Results = append(o.Results, valueSnap{Name: r.Name, Type: r.Type, DefOK: r.Def == op})
		}
		for _, x := range op.Operands {
			if x.Lit != nil {
				o.Operands = append(o.Operands, valueSnap{Lit: x.Lit})
			} else {
				o.Operands = append(o.Operands, valueSnap{Name: x.Name})
			}
		}
		if op.Body != nil {
			body := snapBlock(op.Body)
			o.Body = &body
		}
		s.Ops = append(s.Ops, o)
	}
	return s
}

// snapOptions: positions differ between a file and its printed form, NaN
// literals equal themselves, and an empty list equals a missing one.
var snapOptions = cmp.Options{
	cmpopts.IgnoreTypes(ir.Pos{}),
	cmpopts.EquateEmpty(),
	cmpopts.EquateNaNs(),
}

// diffPrograms is "" when a and b are the same program.
func diffPrograms(a, b *ir.Program) string { return cmp.Diff(snap(a), snap(b), snapOptions) }

// exampleFiles lists the valid programs this package checks: its own and
// the project's (which may include programs meant to fail).
func exampleFiles(t testing.TB) (own, project []string) {
	own, err := filepath.Glob("testdata/*.hir")
	if err != nil {
		t.Fatal(err)
	}
	project, err = filepath.Glob("../testdata/*.hir")
	if err != nil {
		t.Fatal(err)
	}
	return own, project
}

// roundTrip parses src, prints it, parses the print, and checks the two
// programs are equal and that printing again changes nothing.
func roundTrip(t testing.TB, name string, src []byte, verify bool) {
	t.Helper()
	p1, err := parse(name, src, verify)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text1 := p1.String()
	p2, err := parse(name, []byte(text1), verify)
	if err != nil {
		t.Fatalf("%s: the printed program does not parse: %v\n%s", name, err, text1)
	}
	if diff := diffPrograms(p1, p2); diff != "" {
		t.Fatalf("%s: parse(print(p)) differs from p (-p +reparsed):\n%s\nprinted:\n%s", name, diff, text1)
	}
	if text2 := p2.String(); text2 != text1 {
		t.Fatalf("%s: printing is not a fixed point:\n%s\nthen:\n%s", name, text1, text2)
	}
}

func TestRoundTrip(t *testing.T) {
	own, project := exampleFiles(t)
	if len(own) < 10 {
		t.Fatalf("want at least 10 example programs in testdata/, found %d", len(own))
	}
	for _, f := range own {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, f, src, true)
		})
	}
	for _, f := range project {
		t.Run("project/"+filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(f, src); err != nil {
				// The project's testdata holds programs meant to be rejected too.
				t.Skipf("does not parse (an error case?): %v", err)
			}
			roundTrip(t, f, src, true)
		})
	}
}

// TestExamplesCoverEverything makes sure the examples use every opcode and
// every attribute kind a valid program can hold (no op takes a float
// attribute yet: TestFloatAttributes covers that kind).
func TestExamplesCoverEverything(t *testing.T) {
	own, _ := exampleFiles(t)
	ops := map[ir.Opcode]bool{}
	kinds := map[ir.AttrKind]bool{}
	for _, f := range own {
		p, err := ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p.Walk(func(op *ir.Op) {
			ops[op.Code] = true
			for _, a := range op.Attrs {
				kinds[a.Value.Kind] = true
			}
		})
	}
	for _, op := range ir.Opcodes() {
		if !ops[op] {
			t.Errorf("no example in testdata/ uses %s (opcode %d)", op, op)
		}
	}
	for _, k := range []ir.AttrKind{ir.KindInt, ir.KindBool, ir.KindWord, ir.KindInts, ir.KindPeer} {
		if !kinds[k] {
			t.Errorf("no example in testdata/ has an attribute that is %s", k)
		}
	}
}

func TestFloatAttributes(t *testing.T) {
	src := "mesh 1\ninput %x : f32[2]\n%y = relu %x a=2.5 b=-0.0 c=1e+21 d=inf e=-inf f=nan g=1e-07 h=3.0\n"
	roundTrip(t, "float.hir", []byte(src), false)
	p, err := parse("float.hir", []byte(src), false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"a": 2.5, "b": math.Copysign(0, -1), "c": 1e21, "d": math.Inf(1), "e": math.Inf(-1), "g": 1e-7, "h": 3}
	op := p.Body.Ops[0]
	for key, w := range want {
		v, ok := op.Attr(key)
		if !ok || v.Kind != ir.KindFloat || v.Float != w || math.Signbit(v.Float) != math.Signbit(w) {
			t.Errorf("%s = %+v, want float %v", key, v, w)
		}
	}
	if v, _ := op.Attr("f"); v.Kind != ir.KindFloat || !math.IsNaN(v.Float) {
		t.Errorf("f = %+v, want NaN", v)
	}
	if _, err := Parse("float.hir", []byte(src)); err == nil || !strings.Contains(err.Error(), "relu takes no attributes, got a") {
		t.Errorf("Verify should reject the float attributes, got %v", err)
	}
}

func TestAttributeKinds(t *testing.T) {
	src := `mesh 4
input %x : f32[8/DIDx, 4] symmetric
send %x peer=+1
send %x peer=-1
send %x peer=2
send %x peer=-0
%s = sum %x axes=[0, 1] keepdim=true
%g = all_gather %x algo=ring async=false
%r = reduce_scatter %g axis=-1 root=+2
`
	p, err := parse("kinds.hir", []byte(src), false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]ir.AttrValue{}
	p.Walk(func(op *ir.Op) {
		for _, a := range op.Attrs {
			got[a.Key] = append(got[a.Key], a.Value)
		}
	})
	want := map[string][]ir.AttrValue{
		"peer": {
			{Kind: ir.KindPeer, Int: 1, Relative: true},
			{Kind: ir.KindPeer, Int: -1, Relative: true},
			{Kind: ir.KindInt, Int: 2},
			{Kind: ir.KindPeer, Int: 0, Relative: true},
		},
		"axes":    {{Kind: ir.KindInts, Ints: []int64{0, 1}}},
		"keepdim": {{Kind: ir.KindBool, Bool: true}},
		"algo":    {{Kind: ir.KindWord, Word: "ring"}},
		"async":   {{Kind: ir.KindBool, Bool: false}},
		// A sign means "relative" only for a peer.
		"axis": {{Kind: ir.KindInt, Int: -1}},
		"root": {{Kind: ir.KindInt, Int: 2}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attribute values (-want +got):\n%s", diff)
	}
}

func TestStructure(t *testing.T) {
	src := `mesh [2, 0]
input %x : f32[8/DIDx, 4] symmetric
%a = mul %x, -2
for %i = 1 to 9 step 3 {
  %s = select %a, %i
}
for %j = 0 to 2 step 1 {
}
%y, %z = fusion %a : f32[8/DIDx, 4], f32[8/DIDx, 4] {
  %t = relu %a
  yield %t, %a
}
output %y
`
	p, err := Parse("s.hir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Mesh.Devices; !slices.Equal(got, []int{2, 0}) {
		t.Errorf("mesh = %v, want [2 0]", got)
	}
	x := p.Inputs[0]
	want := &ir.TensorType{DType: ir.F32, Dims: []ir.Dim{{Extent: 8, Parallel: ir.DIDx}, {Extent: 4}}, Mem: ir.Symmetric}
	if !ir.TypesEqual(x.Type, want) {
		t.Errorf("input type %v, want %v", x.Type, want)
	}
	ops := p.Body.Ops
	mul := ops[0]
	if mul.Operands[0] != x || mul.Operands[1].Lit == nil || mul.Operands[1].Lit.IsFloat || mul.Operands[1].Lit.Int != -2 {
		t.Errorf("mul operands %v", mul.Operands)
	}
	if mul.Result().Type != nil {
		t.Errorf("a result without annotation should have a nil type, got %v", mul.Result().Type)
	}
	loop := ops[1]
	if loop.Code != ir.OpFor || loop.IntAttr("from", -1) != 1 || loop.IntAttr("to", -1) != 9 || loop.IntAttr("step", -1) != 3 {
		t.Errorf("for attrs %v", loop.Attrs)
	}
	idx := loop.Body.Args[0]
	if idx.Name != "i" || !ir.TypesEqual(idx.Type, &ir.ScalarType{DType: ir.I64}) || idx.Def != nil {
		t.Errorf("loop index %+v", idx)
	}
	if sel := loop.Body.Ops[0]; sel.Operands[0] != mul.Result() || sel.Operands[1] != idx || sel.Result().Def != sel {
		t.Errorf("select operands do not resolve to their definitions")
	}
	if _, hasStep := ops[2].Attr("step"); hasStep {
		t.Errorf("step 1 should not be stored: %v", ops[2].Attrs)
	}
	fusion := ops[3]
	if len(fusion.Results) != 2 || fusion.Results[1].Tensor() == nil || fusion.Results[0].Def != fusion {
		t.Errorf("fusion results %v", fusion.Results)
	}
	if yield := fusion.Body.Ops[1]; yield.Operands[1] != mul.Result() {
		t.Errorf("yield of a fusion operand should be the operand's value")
	}
	if p.Outputs[0] != fusion.Results[0] {
		t.Errorf("output does not resolve to the fusion's result")
	}
}

func TestPositions(t *testing.T) {
	src := "mesh 2\n\ninput %x : f32[4]\n  %a = all_gather %x, 2.0  algo=ring\n"
	p, err := parse("pos.hir", []byte(src), false)
	if err != nil {
		t.Fatal(err)
	}
	op := p.Body.Ops[0]
	check := func(what string, got ir.Pos, line, col int) {
		t.Helper()
		if want := ir.NewPos("pos.hir", line, col); got != want {
			t.Errorf("%s at %v, want %v", what, got, want)
		}
	}
	check("input", p.Inputs[0].Pos, 3, 7)
	check("op", op.Pos, 4, 8)
	check("result", op.Results[0].Pos, 4, 3)
	check("literal", op.Operands[1].Pos, 4, 23)
	check("attr", op.Attrs[0].Pos, 4, 28)
}

func TestParseFile(t *testing.T) {
	p, err := ParseFile("testdata/p2p.hir")
	if err != nil {
		t.Fatal(err)
	}
	if p.File != "testdata/p2p.hir" || p.Body.Ops[0].Pos.File() != "testdata/p2p.hir" {
		t.Errorf("file name not recorded: %q", p.File)
	}
	_, err = ParseFile("testdata/no-such-file.hir")
	var list ir.ErrorList
	if !errors.As(err, &list) || err.Error() != "testdata/no-such-file.hir: cannot read the program: no such file or directory" {
		t.Errorf("got %v", err)
	}
}

// TestErrors checks every testdata/errors/*.hir against the messages in its
// .err file (go test -update rewrites them).
func TestErrors(t *testing.T) {
	files, err := filepath.Glob("testdata/errors/*.hir")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, perr := Parse(filepath.Base(f), src)
			if perr == nil {
				t.Fatal("parsed without error")
			}
			var list ir.ErrorList
			if !errors.As(perr, &list) {
				t.Fatalf("error is a %T, want ir.ErrorList", perr)
			}
			got := perr.Error() + "\n"
			if strings.Contains(got, internalErrorText) {
				t.Fatal(got)
			}
			golden := strings.TrimSuffix(f, ".hir") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("messages differ from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestPrefixes parses every prefix of every example: truncated input must
// give errors, never a panic, and a prefix that parses must round-trip.
func TestPrefixes(t *testing.T) {
	own, _ := exampleFiles(t)
	for _, f := range own {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n <= len(src); n++ {
			checkNoPanicAndRoundTrip(t, src[:n])
		}
	}
}

func checkNoPanicAndRoundTrip(t testing.TB, src []byte) {
	t.Helper()
	p, err := Parse("fuzz.hir", src)
	if err != nil {
		if strings.Contains(err.Error(), internalErrorText) {
			t.Fatalf("parser panicked on %q: %v", src, err)
		}
		var list ir.ErrorList
		if !errors.As(err, &list) || len(list) == 0 {
			t.Fatalf("error %v is not a non-empty ir.ErrorList", err)
		}
		checkMessages(t, src, list)
		return
	}
	_ = p
	roundTrip(t, "fuzz.hir", src, true)
}

func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"testdata/*.hir", "testdata/errors/*.hir", "../testdata/*.hir", "../examples/*.hir"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if src, err := os.ReadFile(file); err == nil {
				f.Add(src)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		checkNoPanicAndRoundTrip(t, src)
		checkRate(t, src)
	})
}

// generateProgram writes a valid program of about n ops mixing the common
// kinds of statements.
func generateProgram(n int) []byte {
	var b bytes.Buffer
	b.WriteString("mesh 8\n\ninput %x : f32[64/DIDx, 128] symmetric\ninput %w : bf16[128, 128]\n%sends = stream\n")
	prev := "%x"
	for i := 0; i < n; {
		name := "%v" + itoa(i)
		switch i % 10 {
		case 0, 1, 2, 3:
			b.WriteString(name + " = mul " + prev + ", 2.5 : f32[64/DIDx, 128]\n")
		case 4:
			b.WriteString(name + " = add " + prev + ", " + prev + "\n")
		case 5: // the gathered tensor is sent on (on a stream of its own,
			// as a ring shift must) and received; the chain goes on sharded
			b.WriteString(name + " = all_gather " + prev + " algo=ring async=false : f32[64, 128] symmetric\n")
			b.WriteString("set_stream %sends\nsend " + name + " peer=+1\nset_stream\n" + name + ".r = recv peer=-1 : f32[64, 128]\n")
			i += 2
			continue
		case 6:
			b.WriteString(name + " = sum " + prev + " axes=[1] keepdim=true\n")
			b.WriteString(name + ".b = add " + prev + ", " + name + "\n")
			name += ".b"
			i++
		case 7:
			b.WriteString(name + ", " + name + ".m = fusion " + prev + " : f32[64/DIDx, 128], f32[64/DIDx] {\n")
			b.WriteString("  " + name + ".t = relu " + prev + "\n  " + name + ".u = max " + name + ".t axes=[1]\n  yield " + name + ".t, " + name + ".u\n}\n")
			i += 3
		default:
			b.WriteString(name + " = relu " + prev + " // a comment\n")
		}
		prev = name
		i++
	}
	b.WriteString("output " + prev + "\n")
	return b.Bytes()
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

func TestGeneratedProgramParses(t *testing.T) {
	src := generateProgram(2000)
	roundTrip(t, "gen.hir", src, true)
}

// BenchmarkParse parses (and verifies) a program of 100,000 ops.
func BenchmarkParse(b *testing.B) {
	src := generateProgram(100_000)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("bench.hir", src); err != nil {
			b.Fatal(err)
		}
	}
}

// Parse reads the source in place; the program must keep nothing of it
// (names, attribute keys and words are copied), so a caller may reuse its
// bytes.
func TestParseKeepsNoSource(t *testing.T) {
	// with a key and a word no schema has, which are copied too
	extra := "%z = all_gather %x algo=zigzag mood=[1] : f32[64, 128] symmetric\noutput "
	src := bytes.Replace(generateProgram(200), []byte("output "), []byte(extra), 1)
	prog, err := parse("gen.hir", src, false)
	if err != nil {
		t.Fatal(err)
	}
	want := prog.String()
	for i := range src {
		src[i] = '#'
	}
	if got := prog.String(); got != want {
		t.Errorf("the program changed with its source:\n%s", firstDiff(want, got))
	}
}

func firstDiff(a, b string) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			lo := max(0, i-40)
			return a[lo:min(len(a), i+40)] + "\n" + b[lo:min(len(b), i+40)]
		}
	}
	return "(lengths differ)"
}
