// This file holds how the builder reads operands, number literals,
// attributes and types.

package parser

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/hirlab/hir/ir"
)

func (b *builder) operand(x *operandAST) *ir.Value {
	if x.Name != nil {
		return b.resolve(&nameTok{Pos: x.Pos, Text: *x.Name})
	}
	return b.literal(*x.Num, x.Pos)
}

// tokenOperand is operand for an operand the fast path read (t, on l).
func (b *builder) tokenOperand(l *line, t *lexeme) *ir.Value {
	if t.kind() == tokVar {
		return b.resolve(&nameTok{Pos: l.pos(t), Text: l.text(t)})
	}
	return b.literal(l.text(t), l.pos(t))
}

// literal is the value of the number literal text at p.
func (b *builder) literal(text string, p lexer.Position) *ir.Value {
	lit, ok := b.number(text, p)
	if !ok {
		return nil
	}
	l := take(&b.ir.literals)
	*l = lit
	v := take(&b.ir.values)
	v.Lit, v.Pos = l, b.pos(p)
	return v
}

// number reads a literal: an int64, or a float (with a point or an
// exponent, or inf, -inf, +inf, nan).
func (b *builder) number(text string, p lexer.Position) (ir.Literal, bool) {
	switch text {
	case "inf", "+inf":
		return ir.Literal{IsFloat: true, Float: math.Inf(1)}, true
	case "-inf":
		return ir.Literal{IsFloat: true, Float: math.Inf(-1)}, true
	case "nan":
		return ir.Literal{IsFloat: true, Float: math.NaN()}, true
	}
	if n, ok := smallInt(text); ok {
		return ir.Literal{Int: n}, true
	}
	if strings.ContainsAny(text, ".eE") {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			b.errs.Add(b.pos(p), "number %s is out of the range of f64", text)
			return ir.Literal{}, false
		}
		return ir.Literal{IsFloat: true, Float: f}, true
	}
	n, ok := b.int(&intTok{Pos: p, Text: text})
	return ir.Literal{Int: n}, ok
}

func (b *builder) int(t *intTok) (int64, bool) {
	if n, ok := smallInt(t.Text); ok {
		return n, true
	}
	n, err := strconv.ParseInt(t.Text, 10, 64)
	if err != nil {
		b.errs.Add(b.pos(t.Pos), "integer %s does not fit in 64 bits", t.Text)
		return 0, false
	}
	return n, true
}

// smallInt is text's value where it is up to 18 decimal digits, no sign
// (most integers: strconv.ParseInt's checks cost more than the digits).
func smallInt(text string) (int64, bool) {
	if len(text) == 0 || len(text) > 18 {
		return 0, false
	}
	n := int64(0)
	for i := 0; i < len(text); i++ {
		d := text[i] - '0'
		if d > 9 {
			return 0, false
		}
		n = n*10 + int64(d)
	}
	return n, true
}

// attr reads key=value into *attr, which is zero (fresh from the slab):
// in place, field by field, since an attribute is 96 bytes and a line may
// have millions (a whole-struct store copied all of them with the
// collector's barriers: half of a line of 2.5 million attributes' time).
// The kind follows the text; a signed integer is a relative rank where the
// op's schema takes a peer.
func (b *builder) attr(attr *ir.Attr, a *attrParts, code ir.Opcode) bool {
	var spec ir.AttrSpec
	known := false
	if code != ir.OpInvalid {
		spec, known = code.Info().Attr(a.key)
	}
	// The schema's strings, where they are the text's, cost no copy, nor
	// does a key written again right after (one copy, compared by pointer
	// when the list is checked for order).
	key := spec.Key
	if !known {
		if a.key != b.lastKey {
			b.lastKey = b.keep(a.key)
		}
		key = b.lastKey
	}
	attr.Key, attr.Pos = key, b.filePos.At(a.line, a.col)
	switch {
	case a.list != nil:
		attr.Value.Kind = ir.KindInts
		attr.Value.Ints = b.ir.intSlice(a.list.len())
		for k := range a.list.len() {
			it := a.list.item(k)
			n, ok := b.int(&it)
			if !ok {
				return false
			}
			attr.Value.Ints = append(attr.Value.Ints, n)
		}
	case !a.num:
		v := &attr.Value // zero: set field by field
		switch w := a.value; w {
		case "true", "false":
			v.Kind, v.Bool = ir.KindBool, w == "true"
		case "inf", "nan":
			lit, _ := b.number(w, a.valuePos())
			v.Kind, v.Float = ir.KindFloat, lit.Float
		default:
			v.Kind, v.Word = ir.KindWord, b.word(w, spec.Words)
		}
	default:
		lit, ok := b.number(a.value, a.valuePos())
		if !ok {
			return false
		}
		takesPeer := (known && spec.Kind == ir.KindPeer) || (code == ir.OpInvalid && a.key == "peer")
		v := &attr.Value
		switch {
		case lit.IsFloat:
			v.Kind, v.Float = ir.KindFloat, lit.Float
		case takesPeer && (strings.HasPrefix(a.value, "+") || strings.HasPrefix(a.value, "-")):
			v.Kind, v.Int, v.Relative = ir.KindPeer, lit.Int, true
		default:
			v.Kind, v.Int = ir.KindInt, lit.Int
		}
	}
	return true
}

// word is w, as one of the schema's words when it is one (no copy).
func (b *builder) word(w string, words []string) string {
	for _, s := range words {
		if s == w {
			return s
		}
	}
	return b.keep(w)
}

// sortAttrs sorts attrs by key, stably (duplicates stay for Verify to
// name, in the order given).
func sortAttrs(attrs []ir.Attr) {
	if len(attrs) > 16 {
		byKey := func(a, b ir.Attr) int { return strings.Compare(a.Key, b.Key) }
		if slices.IsSortedFunc(attrs, byKey) {
			return
		}
		// Their indices are sorted, ties in order (stably), and each
		// attribute is moved once: a sort moves an index (4 bytes) many
		// times where it would move an attribute (96).
		order := make([]int32, len(attrs))
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortFunc(order, func(i, j int32) int {
			if c := strings.Compare(attrs[i].Key, attrs[j].Key); c != 0 {
				return c
			}
			return int(i - j)
		})
		// attrs[k] takes attrs[order[k]], one cycle of the permutation at
		// a time, in place: no second list of 96-byte attributes.
		for k := range order {
			if order[k] < 0 {
				continue // placed
			}
			held := attrs[k]
			j := k
			for {
				i := int(order[j])
				order[j] = -1
				if i == k {
					attrs[j] = held
					break
				}
				attrs[j] = attrs[i]
				j = i
			}
		}
		return
	}
	// Insertion sort: attribute lists are short.
	for i := 1; i < len(attrs); i++ {
		for j := i; j > 0 && attrs[j].Key < attrs[j-1].Key; j-- {
			attrs[j], attrs[j-1] = attrs[j-1], attrs[j]
		}
	}
}

var typeWords = append(append([]string(nil), ir.DTypeWords...), "stream", "handle")

// typ reads a type: dtype[dims] mem for tensors; a bare dtype, stream or
// handle for the other types the passes annotate.
func (b *builder) typ(t *typeAST) (ir.Type, bool) {
	name := t.Name.Text
	dt, isDType := ir.ParseDType(name)
	if t.Shape == nil {
		switch {
		case isDType:
			return &ir.ScalarType{DType: dt}, true
		case name == "stream":
			return &ir.StreamType{}, true
		case name == "handle":
			return &ir.HandleType{}, true
		}
		b.errorAt(b.pos(t.Name.Pos), func() string {
			return fmt.Sprintf("unknown type %q%s", name, didYouMean(name, typeWords, ""))
		})
		return nil, false
	}
	ok := true
	if !isDType {
		// Report the dtype and go on to check the dims and memory type.
		ok = false
		if name == "stream" || name == "handle" {
			b.errs.Add(b.pos(t.Name.Pos), "%s takes no shape", name)
		} else {
			b.errorAt(b.pos(t.Name.Pos), func() string {
				if s := suggest(name, ir.DTypeWords); s != "" {
					return fmt.Sprintf("unknown dtype %q (did you mean %s?)", name, s)
				}
				return fmt.Sprintf("unknown dtype %q (the dtypes are %s)", name, strings.Join(ir.DTypeWords, ", "))
			})
		}
	}
	dims := b.dimBuf[:0]
	if rank := t.Shape.rank(); rank > len(typeKey{}.dims) {
		// The type's own dims (a long list, not copied again by tensorType).
		dims = make([]ir.Dim, 0, rank)
	}
	// The byte size must fit in an int64, as the passes require of every
	// type (ir.TensorType.SizeError); 8 bytes for an unknown dtype.
	size := uint64(8)
	if isDType {
		size = uint64(dt.Size())
	}
	maxElems := math.MaxInt64 / size
	elems := uint64(1)
	shape := t.Shape
	for k := range shape.rank() {
		// A dim the fast path read is looked at in its tokens; its nodes
		// (40-byte positions and all) are made only for an error.
		var n int64
		iok, hasParallel := false, false
		if shape.fastDims != nil {
			d := &shape.fastDims[k]
			n, iok = smallInt(shape.fastLine.text(&d.extent))
			hasParallel = d.parallel.typ != 0
		} else {
			hasParallel = shape.Dims[k].Parallel != nil
		}
		if !iok {
			extent, _, _ := shape.dim(k)
			if n, iok = b.int(&extent); !iok {
				ok = false
				continue
			}
		}
		if n < 1 {
			extent, _, _ := shape.dim(k)
			b.errs.Add(b.pos(extent.Pos), "an extent must be at least 1, got %d", n)
			ok = false
			continue
		}
		dim := ir.Dim{Extent: n}
		if hasParallel {
			if _, parallel, _ := shape.dim(k); parallel.Text != "DIDx" {
				b.errs.Add(b.pos(parallel.Pos), "unknown device dimension %q in %d/%s (the only one is DIDx)", parallel.Text, n, parallel.Text)
				ok = false
			}
			dim.Parallel = ir.DIDx
		}
		hi, lo := bits.Mul64(elems, uint64(n))
		if hi != 0 || lo > maxElems {
			b.errorAt(b.pos(t.Pos), func() string { return "tensor type " + typeText(t) + " is too large" })
			return nil, false
		}
		elems = lo
		dims = append(dims, dim)
	}
	if t.Shape.rank() <= len(typeKey{}.dims) {
		b.dimBuf = dims
	}
	var mem ir.MemoryType
	if m := t.Shape.Mem; m != nil {
		var mok bool
		if mem, mok = ir.ParseMemoryType(m.Text); !mok {
			b.errorAt(b.pos(m.Pos), func() string { return fmt.Sprintf("unknown memory type %q%s", m.Text, memHint(m.Text)) })
			ok = false
		}
	}
	if !ok {
		return nil, false
	}
	return b.tensorType(dt, dims, mem), true
}

// typeKey is a tensor type of rank at most 4 as a map key.
type typeKey struct {
	dt   ir.DType
	mem  ir.MemoryType
	rank int
	dims [4]ir.Dim
}

// tensorType is dt[dims] mem, one value for every equal annotation: a
// program spells a few types many times, and types are never changed in
// place (a pass that changes a type makes a new one).
func (b *builder) tensorType(dt ir.DType, dims []ir.Dim, mem ir.MemoryType) *ir.TensorType {
	var k typeKey
	cached := len(dims) <= len(k.dims)
	if cached {
		k = typeKey{dt: dt, mem: mem, rank: len(dims)}
		copy(k.dims[:], dims)
		if t, ok := b.typeCache[k]; ok {
			return t
		}
	}
	t := take(&b.ir.tensors)
	t.DType, t.Dims, t.Mem = dt, dims, mem
	if cached {
		// dims is the builder's buffer, reused by the next type; a longer
		// list is the type's own (typ).
		t.Dims = append(b.ir.dimSlice(len(dims)), dims...)
	}
	if cached {
		if b.typeCache == nil {
			b.typeCache = map[typeKey]*ir.TensorType{}
		}
		b.typeCache[k] = t
	}
	return t
}

func memHint(word string) string {
	if s := suggest(word, ir.MemWords); s != "" {
		return " (did you mean " + s + "?)"
	}
	return " (the memory types are " + strings.Join(ir.MemWords, ", ") + ")"
}

func typeText(t *typeAST) string {
	parts := make([]string, t.Shape.rank())
	for i := range parts {
		extent, _, _ := t.Shape.dim(i)
		parts[i] = extent.Text
	}
	return t.Name.Text + "[" + strings.Join(parts, ", ") + "]"
}
