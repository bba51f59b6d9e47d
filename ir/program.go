package ir

import (
	"fmt"
	"sort"
)

// Pos is a place in IR text. The zero Pos means "made by Go code".
type Pos struct {
	File string
	Line int
	Col  int
}

// IsValid reports whether p points into a file.
func (p Pos) IsValid() bool { return p.Line > 0 }

func (p Pos) String() string {
	file := p.File
	if file == "" {
		file = "<input>"
	}
	if !p.IsValid() {
		return file
	}
	return fmt.Sprintf("%s:%d:%d", file, p.Line, p.Col)
}

// LineCol is "line:col", for messages that name places in the file their
// own position names already ("op made by Go code" for the zero Pos).
func (p Pos) LineCol() string {
	if !p.IsValid() {
		return "(made by Go code)"
	}
	return fmt.Sprintf("%d:%d", p.Line, p.Col)
}

// Literal is a constant operand: `mul %x, 2.0` or `select %x, 3`.
type Literal struct {
	IsFloat bool
	Int     int64
	Float   float64
}

// Value returns the literal as a float64.
func (l *Literal) Value() float64 {
	if l.IsFloat {
		return l.Float
	}
	return float64(l.Int)
}

func (l *Literal) String() string {
	if l.IsFloat {
		return formatFloat(l.Float)
	}
	return fmt.Sprint(l.Int)
}

// Value is an SSA value: a program input, a loop index, an op's result, or a
// literal (Lit non-nil, no name).
type Value struct {
	Name string // without the %
	Type Type   // nil until type inference where the text omits it
	Def  *Op    // the defining op; nil for inputs, loop indexes and literals
	Lit  *Literal
	Pos  Pos
}

// Tensor returns the value's tensor type, or nil.
func (v *Value) Tensor() *TensorType {
	t, _ := v.Type.(*TensorType)
	return t
}

func (v *Value) String() string {
	if v.Lit != nil {
		return v.Lit.String()
	}
	return "%" + v.Name
}

// AttrValue is the value of an attribute; Kind says which field holds it.
type AttrValue struct {
	Kind     AttrKind
	Int      int64
	Float    float64
	Bool     bool
	Word     string
	Ints     []int64
	Relative bool // KindPeer: Int is an offset from this rank, modulo the mesh
}

// Attr is one key=value attribute.
type Attr struct {
	Key   string
	Value AttrValue
	Pos   Pos
}

// Op is one operation.
type Op struct {
	Code     Opcode
	Results  []*Value
	Operands []*Value
	Attrs    []Attr // sorted by key: the canonical order
	Body     *Block // for `for` and `fusion`
	Pos      Pos
}

// Result returns the op's single result, or nil.
func (op *Op) Result() *Value {
	if len(op.Results) == 1 {
		return op.Results[0]
	}
	return nil
}

// Attr returns the attribute key.
func (op *Op) Attr(key string) (AttrValue, bool) {
	for _, a := range op.Attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return AttrValue{}, false
}

// SetAttr sets key to v, keeping the attributes sorted.
func (op *Op) SetAttr(key string, v AttrValue) {
	for i := range op.Attrs {
		if op.Attrs[i].Key == key {
			op.Attrs[i].Value = v
			return
		}
	}
	op.Attrs = append(op.Attrs, Attr{Key: key, Value: v})
	sort.SliceStable(op.Attrs, func(i, j int) bool { return op.Attrs[i].Key < op.Attrs[j].Key })
}

// IntAttr returns an integer attribute or def when it is absent.
func (op *Op) IntAttr(key string, def int64) int64 {
	if v, ok := op.Attr(key); ok {
		return v.Int
	}
	return def
}

// BoolAttr returns a boolean attribute or false when it is absent.
func (op *Op) BoolAttr(key string) bool {
	v, ok := op.Attr(key)
	return ok && v.Bool
}

// WordAttr returns a word attribute or def when it is absent.
func (op *Op) WordAttr(key, def string) string {
	if v, ok := op.Attr(key); ok {
		return v.Word
	}
	return def
}

// IntsAttr returns an integer-list attribute or nil.
func (op *Op) IntsAttr(key string) []int64 {
	v, _ := op.Attr(key)
	return v.Ints
}

// Algo is the collective's algorithm (AlgoAuto when unset). A word that
// names no algorithm (Verify rejects it) gives an Algo no table lists.
func (op *Op) Algo() Algo {
	a, _ := ParseAlgo(op.WordAttr("algo", "auto"))
	return a
}

// ReduceOp is the collective's reduce op (ReduceSum when unset). A word
// that names no reduce op (Verify rejects it) gives one that is not Valid.
func (op *Op) ReduceOp() ReduceOp {
	r, _ := ParseReduceOp(op.WordAttr("op", "sum"))
	return r
}

// Root is the collective's root rank (0 when unset).
func (op *Op) Root() int { return int(op.IntAttr("root", 0)) }

// Async reports whether the collective or transfer completes at a later wait.
func (op *Op) Async() bool { return op.BoolAttr("async") }

// Peer resolves the op's peer attribute for rank on a mesh of size ranks.
func (op *Op) Peer(rank, size int) int {
	v, _ := op.Attr("peer")
	return v.PeerFor(rank, size)
}

// PeerFor resolves v, a peer attribute's value, for rank on a mesh of size
// ranks: Op.Peer with the attribute looked up once.
func (v AttrValue) PeerFor(rank, size int) int {
	if !v.Relative {
		return int(v.Int)
	}
	// Reduce the offset first: rank+v.Int could overflow for an offset near
	// the int64 limits (validate rejects those; this never wraps anyway).
	n := int64(size)
	return int(((int64(rank)%n+v.Int%n)%n + n) % n)
}

// Block is an ordered list of ops with arguments (a for loop's index).
type Block struct {
	Args []*Value
	Ops  []*Op
}

// Mesh is the set of devices that take part; rank r runs on Devices[r].
type Mesh struct {
	Devices []int
	Pos     Pos // where the program declares it; zero for a built program
}

// MaxMeshSize is the most ranks a program may have; the checker rejects a
// larger mesh. Every runtime keeps per-rank state (the CPU runtime a few
// goroutines and about 8 KiB per rank, and every collective meets all
// ranks), so 4096 keeps the CPU runtime, which hosts every rank in one
// process, within seconds and megabytes for a small program, and is well
// past the GPUs one job of a hir program spans. docs/RUNTIME.md has the
// figures.
const MaxMeshSize = 4096

// LinearMesh returns the mesh of devices 0..n-1.
func LinearMesh(n int) Mesh {
	m := Mesh{Devices: make([]int, n)}
	for i := range m.Devices {
		m.Devices[i] = i
	}
	return m
}

// Size is the number of ranks.
func (m Mesh) Size() int { return len(m.Devices) }

// IsLinear reports whether the mesh is 0..n-1, which prints as `mesh n`.
func (m Mesh) IsLinear() bool {
	for i, d := range m.Devices {
		if d != i {
			return false
		}
	}
	return true
}

// Program is the host program every rank runs.
type Program struct {
	File    string // where the text came from, for messages
	Mesh    Mesh
	Inputs  []*Value
	Body    *Block
	Outputs []*Value
}

// Walk calls f for every op of b in order: an op first, then its body.
func (b *Block) Walk(f func(*Op)) {
	for _, op := range b.Ops {
		f(op)
		if op.Body != nil {
			op.Body.Walk(f)
		}
	}
}

// Walk calls f for every op of the program, bodies included.
func (p *Program) Walk(f func(*Op)) {
	if p.Body != nil {
		p.Body.Walk(f)
	}
}

// Input returns the input named name, or nil.
func (p *Program) Input(name string) *Value {
	for _, v := range p.Inputs {
		if v.Name == name {
			return v
		}
	}
	return nil
}
