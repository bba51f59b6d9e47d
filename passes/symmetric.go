package passes

import (
	"github.com/hirlab/hir/ir"
)

// symmetric applies the symmetric-heap rules of the one table in ir/remote.go
// (ir.LookupRule): a collective whose algorithm reads its input remotely gets
// a symmetric copy of a non-symmetric input (one per value and block); one
// whose algorithm writes its output remotely needs a symmetric output, or the
// program is rejected.
func symmetric(p *ir.Program, ctx *Context) error {
	s := &symmetrizer{prog: p, ctx: ctx}
	s.block(p.Body, nil)
	return s.errs.Err()
}

type symmetrizer struct {
	prog    *ir.Program
	aliased map[*ir.Value]bool // values some op aliases (viewed), made at the first promotion
	names   namer              // made when the first import needs a name
	ctx     *Context
	errs    ir.ErrorList
}

// imports maps a value to its symmetric copy made earlier in a block (or in
// an enclosing block, before the loop that holds this one).
type imports struct {
	parent *imports
	sym    map[*ir.Value]*ir.Value
}

func (im *imports) lookup(v *ir.Value) *ir.Value {
	for ; im != nil; im = im.parent {
		if s := im.sym[v]; s != nil {
			return s
		}
	}
	return nil
}

func (s *symmetrizer) block(b *ir.Block, parent *imports) {
	im := &imports{parent: parent}
	var out []*ir.Op // made at the first import; until then b.Ops stays
	for i, op := range b.Ops {
		if op.Code == ir.OpFor {
			s.block(op.Body, im)
		}
		if op.Code.IsCollective() {
			if imp := s.collective(op, im); imp != nil {
				if out == nil {
					out = make([]*ir.Op, i, len(b.Ops)+1)
					copy(out, b.Ops[:i])
				}
				out = append(out, imp)
			}
		}
		if out != nil {
			out = append(out, op)
		}
	}
	if out != nil {
		b.Ops = out
	}
}

// collective checks op against the table and returns the import to insert
// before it, if any.
func (s *symmetrizer) collective(op *ir.Op, im *imports) *ir.Op {
	algo := op.Algo()
	access, ok := ir.LookupRule(op.Code, algo)
	if !ok {
		s.errs.Add(op.Pos, "%s has no algorithm %s; it supports %s", op.Code, algo, joinOr(ir.Words(ir.Algorithms(op.Code))))
		return nil
	}
	if len(op.Operands) == 2 {
		if cv := contiguousViewOf(op.Operands[1]); cv != nil {
			out, what := op.Operands[1], "a contiguous view"
			if out != cv {
				what = "a view of the contiguous view " + cv.String()
			}
			s.errs.Add(op.Pos, "%s: the output buffer %s is %s, which maps every rank's shard, so each rank would write into its peers' shards at once; give %s an output buffer of this rank's own (`%%buf = alloc : %s`), then copy it into %s if needed",
				op.Code, out, what, op.Code, out.Tensor().In(ir.Symmetric), out)
			return nil
		}
	}
	if access.WritesOutput {
		s.checkOutput(op, algo)
	}
	if !access.ReadsInput {
		return nil
	}
	x := op.Operands[0]
	t := x.Tensor()
	if t == nil {
		return nil
	}
	if peerAddressable(x) {
		s.ctx.explain(op.Pos, "%s (algo=%s) reads %s remotely; %s is already on the symmetric heap (%s)", op.Code, algo, x, x, placedBy(x))
		return nil
	}
	if sym := im.lookup(x); sym != nil {
		op.Operands[0] = sym
		s.ctx.explain(op.Pos, "%s (algo=%s) reads %s remotely; reused its import %s", op.Code, algo, x, sym)
		return nil
	}
	if promotable(x) && !s.viewed(x) {
		// Made by an op of the program into storage of its own: make that
		// storage symmetric, rather than copy it there before each read.
		x.Type = t.In(ir.Symmetric)
		s.ctx.explain(op.Pos, "%s (algo=%s) reads %s remotely; %s now allocates it on the symmetric heap (no import copy)", op.Code, algo, x, x.Def.Code)
		return nil
	}
	if s.names == nil {
		s.names = newNamer(s.prog)
	}
	sym := &ir.Value{Name: s.names.fresh(x.Name, ".sym"), Type: t.In(ir.Symmetric), Pos: op.Pos}
	why := ""
	if cv := contiguousViewOf(x); cv != nil {
		why = " (it is symmetric, but as a view of the contiguous view " + cv.String() + " it is this rank's mapping of every shard, which peers cannot address)"
	} else if sel := rankShiftedSelect(x); sel != nil && t.Mem == ir.Symmetric {
		why = " (it is symmetric, but " + sel.String() + " selects with shift=rank, so each rank's window is another one)"
	}
	imp := &ir.Op{Code: ir.OpCopy, Operands: []*ir.Value{x}, Results: []*ir.Value{sym}, Pos: op.Pos}
	imp.SetAttr("mem", ir.AttrValue{Kind: ir.KindWord, Word: ir.Symmetric.String()})
	sym.Def = imp
	if im.sym == nil {
		im.sym = map[*ir.Value]*ir.Value{}
	}
	im.sym[x] = sym
	op.Operands[0] = sym
	s.ctx.explain(op.Pos, "%s (algo=%s) reads %s remotely%s; imported it onto the symmetric heap as %s", op.Code, algo, x, why, sym)
	return imp
}

// placedBy says what put x, a symmetric value, on the symmetric heap, for
// an explain note: the op that makes its storage (recv, alloc, a copy with
// mem=, an op whose result is annotated symmetric or that this pass
// promoted) or the input declaration, and where; for a view or an op that
// writes into a destination, what it lies in as well.
func placedBy(x *ir.Value) string {
	root := x.Root()
	what, pos := "its input declaration", root.Pos
	if root.Def != nil {
		what, pos = root.Def.Code.String(), root.Def.Pos
	}
	where := ""
	if pos.IsValid() {
		where = " at " + pos.String()
	}
	if root == x {
		return what + " placed it there" + where
	}
	return "it lies in " + root.String() + ", which " + what + " placed there" + where
}

// promotable reports whether x, read remotely, can simply be allocated on
// the symmetric heap: an op of the program makes it in global memory of
// its own (not a view, not an input, not a copy whose mem= names the
// memory). Every rank runs that op alike, so the allocation is matched
// across ranks as an import's would be. Pointwise ops and reductions keep
// global results, which fuse pass groups into one kernel (an import copy
// costs about what the unfused kernel would).
func promotable(x *ir.Value) bool {
	op, t := x.Def, x.Tensor()
	if op == nil || t == nil || t.Mem != ir.Global || op.Code.IsPointwise() || op.Code.IsReduction() {
		return false
	}
	if _, ok := op.Attr("mem"); ok {
		return false
	}
	return op.Code.Info().AliasedOperand(len(op.Operands)) < 0
}

// viewed reports whether some op of the program looks into x's storage
// (a view, a copy or collective into it): its type names x's memory, so x
// keeps it. The aliased values are gathered in one walk, at the first ask.
func (s *symmetrizer) viewed(x *ir.Value) bool {
	if s.aliased == nil {
		s.aliased = map[*ir.Value]bool{}
		s.prog.Walk(func(op *ir.Op) {
			if i := op.Code.Info().AliasedOperand(len(op.Operands)); i >= 0 {
				s.aliased[op.Operands[i]] = true
			}
		})
	}
	return s.aliased[x]
}

// peerAddressable reports whether peers can address x through the
// symmetric heap: x is symmetric and lies in this rank's own shard of a
// symmetric allocation (the allocation itself, or a select or reshape of
// it: a peer's counterpart is the same window of its own shard). A
// contiguous view, and any view of one, is symmetric but is this rank's
// mapping of every shard, not a shard: peers cannot address it.
func peerAddressable(x *ir.Value) bool {
	t := x.Tensor()
	return t != nil && t.Mem == ir.Symmetric && contiguousViewOf(x) == nil && rankShiftedSelect(x) == nil
}

// rankShiftedSelect returns the select with shift=rank that x is or looks
// through, or nil: each rank's window is another one, so a peer's
// counterpart is not the same window of its shard.
func rankShiftedSelect(x *ir.Value) *ir.Value {
	for y := x; y != nil; y = y.Aliased() {
		if y.Def != nil && y.Def.Code == ir.OpSelect && y.Def.WordAttr("shift", "") == "rank" {
			return y
		}
	}
	return nil
}

// contiguousViewOf returns the symmetric_contiguous_view result that x is
// or looks into, or nil.
func contiguousViewOf(x *ir.Value) *ir.Value {
	for y := x; y != nil; y = y.Aliased() {
		if y.Def != nil && y.Def.Code == ir.OpSymmetricContiguousView {
			return y
		}
	}
	return nil
}

// checkOutput rejects a remotely written output that is not symmetric.
func (s *symmetrizer) checkOutput(op *ir.Op, algo ir.Algo) {
	out, buffer := op.Result(), false
	if len(op.Operands) == 2 {
		out, buffer = op.Operands[1], true
	}
	t := out.Tensor()
	if t != nil && t.Mem == ir.Symmetric && buffer {
		if sel := rankShiftedSelect(out); sel != nil {
			s.errs.Add(op.Pos, "%s (algo=%s) writes its output %s remotely, but %s selects with shift=rank, so each peer would write into the window its own rank picks; give %s an output buffer of this rank's own (`%%buf = alloc : %s`), then copy it into %s",
				op.Code, algo, out, sel, op.Code, t, out)
			return
		}
	}
	if t == nil || t.Mem == ir.Symmetric {
		return
	}
	fix := "annotate the result `: " + t.In(ir.Symmetric).String() + "`"
	if buffer {
		fix = "pass a symmetric buffer (" + out.String() + " = alloc : " + t.In(ir.Symmetric).String() + ")"
	}
	if alts := nonWriting(op.Code); len(alts) > 0 {
		fix += ", or choose an algorithm that does not write remotely (algo=" + joinOr(ir.Words(alts)) + ")"
	}
	s.errs.Add(op.Pos, "%s (algo=%s) writes its output %s remotely, but %s is in %s memory; %s", op.Code, algo, out, out, t.Mem, fix)
}

// nonWriting lists op's algorithms that do not write the output remotely.
func nonWriting(op ir.Opcode) []ir.Algo {
	var out []ir.Algo
	for _, a := range ir.Algorithms(op) {
		if acc, _ := ir.LookupRule(op, a); !acc.WritesOutput {
			out = append(out, a)
		}
	}
	return out
}
