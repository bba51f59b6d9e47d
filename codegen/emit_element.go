package codegen

import (
	"fmt"
	"strings"

	"github.com/hirlab/hir/ir"
)

// One element's work at an iteration index (coordinates, loads, the body,
// guarded stores) and the offset arithmetic it and the reduction loops use.

// element writes the work for iteration index idx: coordinates where a
// broadcast operand needs them, the loads, the body and the stores of the
// pointwise results. load(k) and store(k, v) give the C for input k and
// output k; nil store means outputs are written by the caller. With guards,
// an output smaller than the iteration space (broadcast into it) is stored
// only where its stretched coordinates are 0, so each element once.
func (e *emitter) element(ind int, idx string, load func(k int) string, store func(k int, v string) string, guards bool) {
	p := e.p
	// Coordinates of the iteration axes that a broadcast input (or a
	// broadcast output's guard) needs.
	need := make([]bool, len(p.iter))
	inOffsets := map[int]string{}
	for k, in := range p.inputs {
		if in.kind != kindTensor || !p.used[k] || load != nil {
			continue
		}
		if ir.Product(in.shape) == e.n {
			inOffsets[k] = idx
			continue
		}
		inOffsets[k] = e.offset(in.shape, need)
	}
	outOffsets := map[int]string{}
	outGuards := map[int][]int{}
	for k, y := range p.yields {
		if y.kind == kindComputed && p.red != nil && y.op == len(p.ops)-1 {
			continue
		}
		if !guards || ir.Product(y.shape) == e.n {
			outOffsets[k] = idx
			continue
		}
		outOffsets[k] = e.offset(y.shape, need)
		off := len(p.iter) - len(y.shape)
		for a, ext := range p.iter {
			if ext > 1 && (a < off || y.shape[a-off] == 1) {
				need[a] = true
				outGuards[k] = append(outGuards[k], a)
			}
		}
	}
	e.coords(ind, idx, need)
	for k, in := range p.inputs {
		if in.kind != kindTensor || !p.used[k] {
			continue
		}
		if load != nil {
			e.line(ind, "const %s x%d = hir_ld(%s);", computeType(in.dtype), k, load(k))
		} else {
			e.line(ind, "const %s x%d = hir_ld(in%d[%s]);", computeType(in.dtype), k, k, inOffsets[k])
		}
	}
	for _, b := range p.ops {
		if b == p.red {
			continue
		}
		v := p.vals[b.Results[0]]
		e.line(ind, "const %s t%d = %s;", computeType(v.dtype), v.op, e.opExpr(b))
	}
	for k, y := range p.yields {
		off, ok := outOffsets[k]
		if !ok {
			continue
		}
		v := storeExpr(y.dtype, e.valExpr(y, y.dtype))
		if store != nil {
			e.line(ind, "%s", store(k, v))
			continue
		}
		st := fmt.Sprintf("out%d[%s] = %s;", k, off, v)
		if g := outGuards[k]; len(g) > 0 {
			conds := make([]string, len(g))
			for i, a := range g {
				conds[i] = fmt.Sprintf("i%d == 0", a)
			}
			st = "if (" + strings.Join(conds, " && ") + ") " + st
		}
		e.line(ind, "%s", st)
	}
}

// coords declares i<axis>, the coordinate of flat index idx along each
// iteration axis need marks.
func (e *emitter) coords(ind int, idx string, need []bool) {
	strides := ir.ContiguousStrides(e.p.iter)
	first := true
	for a, ext := range e.p.iter {
		if !need[a] {
			if ext > 1 {
				first = false
			}
			continue
		}
		c := idx
		if strides[a] != 1 {
			c = fmt.Sprintf("%s / %d", c, strides[a])
		}
		if !first {
			c = fmt.Sprintf("%s %% %d", c, ext)
		}
		first = false
		e.line(ind, "const %s i%d = %s;", e.idx, a, c)
	}
}

// offset is the flat offset into a tensor of shape s broadcast into the
// iteration space, from the coordinates i<axis>; it marks the axes it uses.
func (e *emitter) offset(s []int64, need []bool) string {
	iter := e.p.iter
	off := len(iter) - len(s)
	st := ir.ContiguousStrides(s)
	var terms []string
	for a := off; a < len(iter); a++ {
		if iter[a] <= 1 || s[a-off] != iter[a] {
			continue
		}
		need[a] = true
		if st[a-off] == 1 {
			terms = append(terms, fmt.Sprintf("i%d", a))
		} else {
			terms = append(terms, fmt.Sprintf("i%d * %d", a, st[a-off]))
		}
	}
	if len(terms) == 0 {
		return "0"
	}
	return strings.Join(terms, " + ")
}

// linearOffset maps a linear index j over the given iteration axes (in
// order) to its offset in the iteration space. Axes of extent 1 add
// nothing, and axes adjacent in memory merge into one.
func (e *emitter) linearOffset(j string, axes []int) string {
	iter := e.p.iter
	strides := ir.ContiguousStrides(iter)
	type group struct{ ext, stride int64 }
	var groups []group
	last := -1
	for _, a := range axes {
		if iter[a] == 1 {
			continue
		}
		adjacent := last >= 0
		for b := last + 1; adjacent && b < a; b++ {
			if iter[b] != 1 {
				adjacent = false
			}
		}
		if adjacent {
			g := &groups[len(groups)-1]
			g.ext *= iter[a]
			g.stride = strides[a]
		} else {
			groups = append(groups, group{ext: iter[a], stride: strides[a]})
		}
		last = a
	}
	var terms []string
	below := int64(1) // product of the extents of the later groups
	for gi := len(groups) - 1; gi >= 0; gi-- {
		g := groups[gi]
		c := j
		if below != 1 {
			c = fmt.Sprintf("%s / %d", c, below)
		}
		if gi > 0 {
			c = fmt.Sprintf("%s %% %d", c, g.ext)
		}
		if g.stride != 1 {
			if c != j {
				c = "(" + c + ")"
			}
			c = fmt.Sprintf("%s * %d", c, g.stride)
		}
		terms = append([]string{c}, terms...)
		below *= g.ext
	}
	if len(terms) == 0 {
		return "0"
	}
	return strings.Join(terms, " + ")
}
