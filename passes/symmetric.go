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
	s := &symmetrizer{names: newNamer(p), ctx: ctx}
	s.block(p.Body, nil)
	return s.errs.Err()
}

type symmetrizer struct {
	names namer
	ctx   *Context
	errs  ir.ErrorList
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
	im := &imports{parent: parent, sym: map[*ir.Value]*ir.Value{}}
	var out []*ir.Op
	for _, op := range b.Ops {
		if op.Code == ir.OpFor {
			s.block(op.Body, im)
		}
		if op.Code.IsCollective() {
			if imp := s.collective(op, im); imp != nil {
				out = append(out, imp)
			}
		}
		out = append(out, op)
	}
	b.Ops = out
}

// collective checks op against the table and returns the import to insert
// before it, if any.
func (s *symmetrizer) collective(op *ir.Op, im *imports) *ir.Op {
	algo := op.Algo()
	access, ok := ir.LookupRule(op.Code, algo)
	if !ok {
		s.errs.Add(op.Pos, "%s has no algorithm %s; it supports %s", op.Code, algo, joinOr(ir.Algorithms(op.Code)))
		return nil
	}
	if access.WritesOutput {
		s.checkOutput(op, algo)
	}
	if !access.ReadsInput {
		return nil
	}
	x := op.Operands[0]
	t := x.Tensor()
	if t == nil || t.Mem == ir.Symmetric {
		return nil
	}
	if sym := im.lookup(x); sym != nil {
		op.Operands[0] = sym
		s.ctx.explain(op.Pos, "%s (algo=%s) reads %s remotely; reused its import %s", op.Code, algo, x, sym)
		return nil
	}
	sym := &ir.Value{Name: s.names.fresh(x.Name, ".sym"), Type: t.In(ir.Symmetric), Pos: op.Pos}
	imp := &ir.Op{Code: ir.OpCopy, Operands: []*ir.Value{x}, Results: []*ir.Value{sym}, Pos: op.Pos}
	imp.SetAttr("mem", ir.AttrValue{Kind: ir.KindWord, Word: ir.Symmetric.String()})
	sym.Def = imp
	im.sym[x] = sym
	op.Operands[0] = sym
	s.ctx.explain(op.Pos, "%s (algo=%s) reads %s remotely; imported it onto the symmetric heap as %s", op.Code, algo, x, sym)
	return imp
}

// checkOutput rejects a remotely written output that is not symmetric.
func (s *symmetrizer) checkOutput(op *ir.Op, algo string) {
	out, buffer := op.Result(), false
	if len(op.Operands) == 2 {
		out, buffer = op.Operands[1], true
	}
	t := out.Tensor()
	if t == nil || t.Mem == ir.Symmetric {
		return
	}
	fix := "annotate the result `: " + t.In(ir.Symmetric).String() + "`"
	if buffer {
		fix = "pass a symmetric buffer (" + out.String() + " = alloc : " + t.In(ir.Symmetric).String() + ")"
	}
	if alts := nonWriting(op.Code); len(alts) > 0 {
		fix += ", or choose an algorithm that does not write remotely (algo=" + joinOr(alts) + ")"
	}
	s.errs.Add(op.Pos, "%s (algo=%s) writes its output %s remotely, but %s is in %s memory; %s", op.Code, algo, out, out, t.Mem, fix)
}

// nonWriting lists op's algorithms that do not write the output remotely.
func nonWriting(op ir.Opcode) []string {
	var out []string
	for _, a := range ir.Algorithms(op) {
		if acc, _ := ir.LookupRule(op, a); !acc.WritesOutput {
			out = append(out, a)
		}
	}
	return out
}
