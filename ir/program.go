package ir

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"sync"
)

// Pos is a place in IR text. The zero Pos means "made by Go code".
//
// Every op, value and attribute carries one, so it is kept to 12 bytes
// without pointers: the file is a number in a table of file names shared
// by all positions (FilePos), not a string per position.
type Pos struct {
	file      fileID
	Line, Col int32
}

// NewPos is the position line:col in file.
func NewPos(file string, line, col int) Pos { return FilePos(file).At(line, col) }

// FilePos names a file but no place in it (IsValid is false): where a
// message about the whole file points.
func FilePos(file string) Pos { return Pos{file: files.id(file)} }

// At is line:col in p's file.
func (p Pos) At(line, col int) Pos {
	return Pos{file: p.file, Line: clamp32(line), Col: clamp32(col)}
}

// File is the name of the file p points into; "" when none.
func (p Pos) File() string { return files.name(p.file) }

// IsValid reports whether p points into a file.
func (p Pos) IsValid() bool { return p.Line > 0 }

func (p Pos) String() string {
	file := p.File()
	if file == "" {
		file = "<input>"
	}
	if !p.IsValid() {
		return file
	}
	return fmt.Sprintf("%s:%d:%d", file, p.Line, p.Col)
}

// Less orders positions by file name, line and column.
func (p Pos) Less(q Pos) bool {
	if p.file != q.file {
		return p.File() < q.File()
	}
	if p.Line != q.Line {
		return p.Line < q.Line
	}
	return p.Col < q.Col
}

// posJSON is a Pos in JSON (stats travel between processes as JSON): the
// file by name, since the table of names is the process's own.
type posJSON struct {
	File      string
	Line, Col int32
}

func (p Pos) MarshalJSON() ([]byte, error) {
	return json.Marshal(posJSON{File: p.File(), Line: p.Line, Col: p.Col})
}

func (p *Pos) UnmarshalJSON(b []byte) error {
	var j posJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = FilePos(j.File).At(int(j.Line), int(j.Col))
	return nil
}

func clamp32(n int) int32 { return int32(min(max(n, 0), math.MaxInt32)) }

// fileID numbers a file name in files; 0 is "".
type fileID uint32

// files is the table of every file name a Pos has named. It only grows:
// by one string per distinct file name, which a process parses few of.
var files fileTable

type fileTable struct {
	mu    sync.RWMutex
	ids   map[string]fileID
	names []string // names[id-1]
}

func (t *fileTable) id(name string) fileID {
	if name == "" {
		return 0
	}
	t.mu.RLock()
	id, ok := t.ids[name]
	t.mu.RUnlock()
	if ok {
		return id
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.ids[name]; ok {
		return id
	}
	if t.ids == nil {
		t.ids = map[string]fileID{}
	}
	t.names = append(t.names, name)
	id = fileID(len(t.names))
	t.ids[name] = id
	return id
}

func (t *fileTable) name(id fileID) string {
	if id == 0 {
		return ""
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.names[id-1]
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

// Aliased returns the value whose storage v aliases: the operand a view
// looks into, the destination an op writes into, the tensor a
// registration or transfer keeps in use (OpInfo.Aliases). It returns nil
// when v owns its storage (or has none).
func (v *Value) Aliased() *Value {
	op := v.Def
	if op == nil {
		return nil
	}
	if i := op.Code.Info().AliasedOperand(len(op.Operands)); i >= 0 {
		return op.Operands[i]
	}
	return nil
}

// Root follows Aliased to the value that owns v's storage.
func (v *Value) Root() *Value {
	for {
		s := v.Aliased()
		if s == nil || s.Lit != nil {
			return v
		}
		v = s
	}
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
	Bool     bool
	Relative bool // KindPeer: Int is an offset from this rank, modulo the mesh
	Int      int64
	Float    float64
	Word     string
	Ints     []int64
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
	Pos      Pos
	Results  []*Value
	Operands []*Value
	Attrs    []Attr // sorted by key: the canonical order
	Body     *Block // for `for` and `fusion`
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

// SelectIndex is the index a select takes on rank of a mesh, whose axis
// has extent entries, for the index operand's value i: i itself, or with
// shift=rank (i + rank) mod extent, so each rank starts at its own entry
// (a ring's step i reaches peer rank+i).
func (op *Op) SelectIndex(i, rank, extent int64) int64 {
	if op.WordAttr("shift", "") == "rank" && extent > 0 {
		return (i%extent + rank%extent) % extent
	}
	return i
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

// Uninit reports an `alloc uninit=true`: a tensor with no zero-fill, its
// contents undefined until written.
func (op *Op) Uninit() bool { return op.Code == OpAlloc && op.BoolAttr("uninit") }

// Async reports whether the collective or transfer completes at a later wait.
func (op *Op) Async() bool { return op.BoolAttr("async") }

// ReadsDestination reports whether op is given a destination and reads
// it as well as writing it (matmul accumulate=true adds into it): the
// destination is then an input too, the last one.
func (op *Op) ReadsDestination() bool {
	info := op.Code.Info()
	return info.ReadsDestIf != "" && info.Destination(len(op.Operands)) >= 0 && op.BoolAttr(info.ReadsDestIf)
}

// InputOperand reports whether operand i is one of op's inputs: any
// operand but its destination, and that too when the op reads it
// (ReadsDestination). A kernel's inputs are these, in operand order.
func (op *Op) InputOperand(i int) bool {
	return i != op.Code.Info().Destination(len(op.Operands)) || op.ReadsDestination()
}

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
