package ir

import (
	"maps"
	"slices"
)

// Verify checks a program's structure: the mesh, SSA (every operand defined
// before its use, every name defined once), each op's arity, body and
// attributes against its schema. Types and shapes are the passes' business.
// It returns nil or an ErrorList.
func Verify(p *Program) error {
	v := &verifier{names: make(map[string]definition, topValues(p))}
	v.program(p)
	return v.errs.Err()
}

// VerifyResolved is Verify for a program whose front end has already
// checked its names: each defined once, and each operand and output defined
// where it is used (parser.Parse does, with its own messages). It skips
// Verify's map of every name, most of Verify's time on a large program,
// and checks the rest.
func VerifyResolved(p *Program) error {
	v := &verifier{resolved: true}
	v.program(p)
	return v.errs.Err()
}

// topValues is about how many values the top level defines, to size the
// verifier's maps once rather than growing them a program-size times.
func topValues(p *Program) int {
	n := len(p.Inputs)
	if p.Body != nil {
		n += len(p.Body.Ops)
	}
	return n
}

type verifier struct {
	errs ErrorList
	// names is every name defined so far (for duplicate checks), with the
	// value it names and the scope that defines it (for scope.has).
	names map[string]definition
	// resolved: the names are known to be good (VerifyResolved); names is
	// not kept.
	resolved bool
}

type definition struct {
	val   *Value
	scope *scope
}

type scope struct {
	parent *scope
	// captured is what a closed scope (a fusion body) sees of the scopes
	// around it: the op's operands. It sees nothing else from outside.
	captured []*Value
	closed   bool
}

// has reports whether val is defined in s or a scope s sees.
func (v *verifier) has(s *scope, val *Value) bool {
	if v.resolved {
		return true
	}
	d, ok := v.names[val.Name]
	if !ok || d.val != val {
		d.scope = nil // not defined anywhere (perhaps captured)
	}
	for ; s != nil; s = s.parent {
		if s == d.scope {
			return true
		}
		for _, c := range s.captured {
			if c == val {
				return true
			}
		}
		if s.closed {
			return false
		}
	}
	return false
}

func (v *verifier) define(s *scope, val *Value) {
	if val == nil {
		v.errs.Add(Pos{}, "nil value")
		return
	}
	if val.Name == "" || val.Lit != nil {
		v.errs.Add(val.Pos, "a defined value needs a name")
		return
	}
	if v.resolved {
		return
	}
	if prev, dup := v.names[val.Name]; dup {
		v.errs.Add(val.Pos, "%%%s is defined twice (first at %s)", val.Name, prev.val.Pos)
		return
	}
	v.names[val.Name] = definition{val, s}
}

func (v *verifier) program(p *Program) {
	seen := map[int]bool{}
	if p.Mesh.Size() == 0 {
		v.errs.Add(FilePos(p.File), "the program declares no mesh (write `mesh N` first)")
	}
	for _, d := range p.Mesh.Devices {
		if d < 0 {
			v.errs.Add(FilePos(p.File), "mesh device %d is negative", d)
		}
		if seen[d] {
			v.errs.Add(FilePos(p.File), "mesh device %d is listed twice", d)
		}
		seen[d] = true
	}
	top := &scope{}
	for _, in := range p.Inputs {
		v.define(top, in)
		if _, ok := in.Type.(*TensorType); !ok {
			v.errs.Add(in.Pos, "input %s needs a tensor type", in)
		}
		if in.Def != nil {
			v.errs.Add(in.Pos, "input %s must not have a defining op", in)
		}
	}
	if p.Body == nil {
		p.Body = &Block{}
	}
	v.block(top, p.Body, OpInvalid, FilePos(p.File))
	for _, out := range p.Outputs {
		if out == nil || !v.has(top, out) {
			name := "<nil>"
			pos := FilePos(p.File)
			if out != nil {
				name, pos = out.String(), out.Pos
			}
			v.errs.Add(pos, "output %s is not defined at the top level", name)
		}
	}
}

// block checks b, the body of an op with opcode owner at ownerPos (OpInvalid
// for the program's top level).
func (v *verifier) block(s *scope, b *Block, owner Opcode, ownerPos Pos) {
	for i, op := range b.Ops {
		if op.Code == OpYield {
			if owner != OpFusion {
				v.errs.Add(op.Pos, "yield may only end a fusion body")
			} else if i != len(b.Ops)-1 {
				v.errs.Add(op.Pos, "yield must be the last op of a fusion body")
			}
		}
		v.op(s, op)
	}
	if owner == OpFusion && (len(b.Ops) == 0 || b.Ops[len(b.Ops)-1].Code != OpYield) {
		v.errs.Add(ownerPos, "a fusion body must end with yield")
	}
}

// literalOK reports whether operand i of op may be a literal.
func literalOK(op *Op, i int) bool {
	switch {
	case op.Code.IsPointwise():
		return true
	case op.Code == OpSelect:
		return i == 1
	case op.Code == OpPickStream: // the index, after the streams
		return i == len(op.Operands)-1
	}
	return false
}

func (v *verifier) op(s *scope, op *Op) {
	info := op.Code.Info()
	if op.Code == OpInvalid || op.Code >= numOpcodes {
		v.errs.Add(op.Pos, "invalid opcode %d", op.Code)
		return
	}
	n := len(op.Operands)
	switch {
	case n < info.MinOperands && info.MinOperands == info.MaxOperands:
		v.errs.Add(op.Pos, "%s takes %d operand%s, got %d", info.Name, info.MinOperands, plural(info.MinOperands), n)
	case n < info.MinOperands:
		v.errs.Add(op.Pos, "%s takes at least %d operand%s, got %d", info.Name, info.MinOperands, plural(info.MinOperands), n)
	case info.MaxOperands != Variadic && n > info.MaxOperands:
		if info.MinOperands == info.MaxOperands {
			v.errs.Add(op.Pos, "%s takes %d operand%s, got %d", info.Name, info.MaxOperands, plural(info.MaxOperands), n)
		} else {
			v.errs.Add(op.Pos, "%s takes at most %d operand%s, got %d", info.Name, info.MaxOperands, plural(info.MaxOperands), n)
		}
	}
	for i, x := range op.Operands {
		switch {
		case x == nil:
			v.errs.Add(op.Pos, "%s: operand %d is nil", info.Name, i)
		case x.Lit != nil:
			if !literalOK(op, i) {
				v.errs.Add(x.Pos, "%s: operand %d must be a value, not the literal %s", info.Name, i, x)
			}
		case !v.has(s, x):
			v.errs.Add(op.Pos, "%s: %s is not defined here", info.Name, x)
		}
	}
	v.attrs(op, info)
	if op.Code == OpPickStream && op.IntAttr("step", 1) <= 0 {
		v.errs.Add(op.Pos, "pick_stream: step must be positive, got %d", op.IntAttr("step", 1))
	}

	switch {
	case info.Results == Variadic:
		if len(op.Results) == 0 {
			v.errs.Add(op.Pos, "%s needs at least one result", info.Name)
		}
	case len(op.Results) != info.Results:
		if info.Results == 0 {
			v.errs.Add(op.Pos, "%s has no result, but %d %s named", info.Name, len(op.Results), verbFor(len(op.Results)))
		} else {
			v.errs.Add(op.Pos, "%s has %d result%s, but %d %s named", info.Name, info.Results, plural(info.Results), len(op.Results), verbFor(len(op.Results)))
		}
	}
	for _, r := range op.Results {
		if r != nil && r.Def != op {
			v.errs.Add(r.Pos, "%s: result %s does not point back to its op", info.Name, r)
		}
	}

	if info.Body != (op.Body != nil) {
		if info.Body {
			v.errs.Add(op.Pos, "%s needs a body", info.Name)
		} else {
			v.errs.Add(op.Pos, "%s takes no body", info.Name)
		}
	}
	if op.Body != nil && info.Body {
		inner := &scope{parent: s}
		switch op.Code {
		case OpFusion:
			inner.closed = true
			for _, x := range op.Operands {
				if x != nil && x.Lit == nil {
					inner.captured = append(inner.captured, x)
				}
			}
			if len(op.Body.Args) != 0 {
				v.errs.Add(op.Pos, "fusion takes no block arguments")
			}
		case OpFor:
			if len(op.Body.Args) != 1 {
				v.errs.Add(op.Pos, "for needs exactly one index")
			}
			if op.IntAttr("step", 1) <= 0 {
				v.errs.Add(op.Pos, "for: step must be positive, got %d", op.IntAttr("step", 1))
			}
			v.streamsAttr(op)
		}
		for _, a := range op.Body.Args {
			v.define(inner, a)
		}
		v.block(inner, op.Body, op.Code, op.Pos)
		if op.Code == OpFusion && len(op.Body.Ops) > 0 {
			if y := op.Body.Ops[len(op.Body.Ops)-1]; y.Code == OpYield && len(y.Operands) != len(op.Results) {
				v.errs.Add(y.Pos, "fusion has %d result%s but yields %d value%s", len(op.Results), plural(len(op.Results)), len(y.Operands), plural(len(y.Operands)))
			}
		}
	}
	for _, r := range op.Results {
		if r != nil {
			v.define(s, r)
		}
	}
}

func (v *verifier) attrs(op *Op, info *OpInfo) {
	// given[i]: info.Attrs[i] was given (schemas are short: no map per op).
	given := append(make([]bool, 0, 8), make([]bool, len(info.Attrs))...)
	unknown := unknownKeys{sorted: true} // keys the op does not take, given so far: errors already
	// In a long list not in source order, errors past a point are sure to
	// be dropped (attrErrorsPast): counted at the end.
	var past Pos
	cut, tried := false, false
	dropped := 0
	for k := range op.Attrs {
		a := &op.Attrs[k] // not copied: an Attr is 96 bytes
		unknown.next(info, op.Attrs, k)
		pos := attrPos(op, k)
		keeps := v.errs.Keeps(pos)
		if keeps && !tried && v.errs.full() && len(op.Attrs)-k > attrCutMin {
			// An error here would take the place of one kept: the
			// attributes come out of source order.
			past, cut = attrErrorsPast(op, info, k, given, unknown)
			tried = true
		}
		if !keeps || (cut && past.Less(pos)) {
			// An error here would only be counted, now or once the op's
			// errors before it are in: count it without wording it (or
			// boxing its arguments).
			if attrFails(info, a, given, &unknown) {
				if keeps {
					dropped++
				} else {
					v.errs.Add(pos, "")
				}
			}
			continue
		}
		i := attrIndex(info, a.Key)
		if i < 0 {
			if unknown.seen(a.Key) {
				v.errs.Add(pos, "%s: attribute %s is given twice", info.Name, a.Key)
				continue
			}
			if len(info.Attrs) == 0 {
				v.errs.Add(pos, "%s takes no attributes, got %s", info.Name, a.Key)
			} else {
				v.errs.Add(pos, "%s has no attribute %s (it takes %s)", info.Name, a.Key, attrKeys(info))
			}
			continue
		}
		if given[i] {
			v.errs.Add(pos, "%s: attribute %s is given twice", info.Name, a.Key)
			continue
		}
		given[i] = true
		spec := &info.Attrs[i]
		// A plain integer is a valid absolute peer.
		if spec.Kind == KindPeer && a.Value.Kind == KindInt {
			continue
		}
		if a.Value.Kind != spec.Kind {
			if spec.Kind == KindInts && a.Value.Kind == KindInt {
				// A list of one written without its brackets.
				v.errs.Add(pos, "%s: attribute %s takes %s, got %d (write %s=[%d])", info.Name, a.Key, spec.Kind, a.Value.Int, a.Key, a.Value.Int)
				continue
			}
			v.errs.Add(pos, "%s: attribute %s takes %s, got %s", info.Name, a.Key, spec.Kind, FormatAttrValue(a.Value))
			continue
		}
		if spec.Kind == KindWord && spec.Words != nil && !contains(spec.Words, a.Value.Word) {
			v.errs.Add(pos, "%s: %s=%s is not one of %s", info.Name, a.Key, a.Value.Word, joinWords(spec.Words))
		}
	}
	v.errs.drop(dropped)
	for i, spec := range info.Attrs {
		if spec.Required && !given[i] {
			v.errs.Add(op.Pos, "%s needs attribute %s (%s)", info.Name, spec.Key, spec.Kind)
		}
	}
}

// attrPos is where the error about op's attribute k is.
func attrPos(op *Op, k int) Pos {
	if pos := op.Attrs[k].Pos; pos.IsValid() {
		return pos
	}
	return op.Pos
}

// attrCutMin is how many attributes must be left, where the list of
// errors is full and would still keep an error of one, for attrs to look
// for the point past which their errors are dropped (a test raises it, to
// compare).
var attrCutMin = 2 * MaxErrors

// attrErrorsPast is, for the attributes of op from k on, whose errors may
// come before those kept (attrs meets them sorted by key, and the text may
// give them in the reverse order), a position past which an error
// about one of them is sure to be dropped from the list of errors: at least
// MaxErrors of their own errors come before it. attrs counts such errors
// without keeping them: a line of a million attributes in the reverse of
// their order would otherwise have each error worded, its words boxed, and
// dropped a moment later. given and unknown are attrs' state at k (they
// are not changed). ok is false where there is no such position.
func attrErrorsPast(op *Op, info *OpInfo, k int, given []bool, unknown unknownKeys) (past Pos, ok bool) {
	given = slices.Clone(given)
	unknown.keys = maps.Clone(unknown.keys)
	// The first MaxErrors positions of the errors attrs finds (its checks,
	// in its order), as a heap with the last of them on top.
	first := make([]Pos, 0, MaxErrors)
	for j := k; j < len(op.Attrs); j++ {
		if j > k {
			unknown.next(info, op.Attrs, j)
		}
		if !attrFails(info, &op.Attrs[j], given, &unknown) {
			continue
		}
		switch pos := attrPos(op, j); {
		case len(first) < MaxErrors:
			first = append(first, pos)
			for i := len(first) - 1; i > 0 && first[(i-1)/2].Less(first[i]); i = (i - 1) / 2 {
				first[i], first[(i-1)/2] = first[(i-1)/2], first[i]
			}
		case pos.Less(first[0]):
			first[0] = pos
			for i := 0; ; {
				top := i
				for _, c := range [2]int{2*i + 1, 2*i + 2} {
					if c < len(first) && first[top].Less(first[c]) {
						top = c
					}
				}
				if top == i {
					break
				}
				first[i], first[top] = first[top], first[i]
				i = top
			}
		}
	}
	if len(first) < MaxErrors {
		return Pos{}, false
	}
	return first[0], true
}

// attrFails is attrs' check of a, without the wording: it reports whether
// attrs adds an error for it, and notes it as given or seen as attrs does.
func attrFails(info *OpInfo, a *Attr, given []bool, unknown *unknownKeys) bool {
	i := attrIndex(info, a.Key)
	switch {
	case i < 0:
		unknown.seen(a.Key)
		return true
	case given[i]:
		return true
	}
	given[i] = true
	spec := &info.Attrs[i]
	switch {
	case spec.Kind == KindPeer && a.Value.Kind == KindInt:
		return false
	case a.Value.Kind != spec.Kind:
		return true
	}
	return spec.Kind == KindWord && spec.Words != nil && !contains(spec.Words, a.Value.Word)
}

// unknownKeys is the keys of an op's attributes, before the current one,
// that the op does not take. While the attributes so far are sorted by
// key, as the parser's are, a key given before is the one just before
// (prev); only once they are not are the keys kept in a map: a list of
// millions of unknown attributes costs no map.
type unknownKeys struct {
	sorted bool
	prev   *string // the key before the current attribute's, while sorted
	keys   map[string]bool
}

// next moves to attrs[k], the next attribute.
func (u *unknownKeys) next(info *OpInfo, attrs []Attr, k int) {
	if !u.sorted || k == 0 {
		return
	}
	u.prev = &attrs[k-1].Key
	if attrs[k].Key >= *u.prev {
		return
	}
	u.sorted, u.prev = false, nil
	u.keys = map[string]bool{}
	for _, a := range attrs[:k] {
		if attrIndex(info, a.Key) < 0 {
			u.keys[a.Key] = true
		}
	}
}

// seen reports whether key, one the op does not take, was given before the
// current attribute, and notes it.
func (u *unknownKeys) seen(key string) bool {
	if u.sorted {
		return u.prev != nil && *u.prev == key
	}
	if u.keys[key] {
		return true
	}
	u.keys[key] = true
	return false
}

// attrIndex is the index of key in info.Attrs, or -1 (OpInfo.Attr's
// search, giving the index).
func attrIndex(info *OpInfo, key string) int {
	for i, spec := range info.Attrs {
		if spec.Key == key {
			return i
		}
	}
	return -1
}

func attrKeys(info *OpInfo) string {
	keys := make([]string, len(info.Attrs))
	for i, a := range info.Attrs {
		keys[i] = a.Key
	}
	return joinWords(keys)
}

func joinWords(ws []string) string {
	out := ""
	for i, w := range ws {
		switch {
		case i == 0:
		case i == len(ws)-1:
			out += " or "
		default:
			out += ", "
		}
		out += w
	}
	return out
}

func contains(ws []string, w string) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func verbFor(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
