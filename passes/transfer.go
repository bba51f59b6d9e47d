package passes

import (
	"github.com/hirlab/hir/ir"
)

// checkTransfers is validate's part for one-sided transfers (register,
// transfer, wait, deregister). What it can know before running, it reports:
// a registered tensor must be this rank's shard on the symmetric heap (a
// peer reaches it through its mapping of the shard); a transfer moves the
// whole registered tensor, so the local tensor must match its dtype and
// local element count; a registration must be live where it is used and
// deregistered exactly once, in the block that made it; a transfer must be
// waited for exactly once, in its block, and its local tensor is off limits
// until then (a read writes it, a write reads it); a registered tensor is
// not freed before it is deregistered. Peers outside the mesh are
// validate's general peer check.
func checkTransfers(p *ir.Program, v *validator) {
	t := &transferChecker{v: v}
	t.block(p.Body, &xferScope{})
}

type transferChecker struct {
	v *validator
}

type regInfo struct {
	op           *ir.Op // the register
	deregistered *ir.Op
}

type pendingXfer struct {
	op    *ir.Op // the transfer
	local *ir.Value
	root  *ir.Value // storage of the local tensor
	read  bool
}

// xferScope is one block: its registrations, transfers and waits; a for
// body's scope sees its parent's.
type xferScope struct {
	parent  *xferScope
	regs    map[*ir.Value]*regInfo // handle -> registration
	pending map[*ir.Value]*pendingXfer
	waited  map[*ir.Value]*ir.Op // transfer handle -> its wait
	order   []*ir.Value          // registrations and transfers, in order
}

func (s *xferScope) reg(h *ir.Value) (*regInfo, bool) {
	for sc, here := s, true; sc != nil; sc, here = sc.parent, false {
		if r, ok := sc.regs[h]; ok {
			return r, here
		}
	}
	return nil, false
}

func (s *xferScope) waitedAt(t *ir.Value) (*ir.Op, bool) {
	for sc := s; sc != nil; sc = sc.parent {
		if w, ok := sc.waited[t]; ok {
			return w, true
		}
	}
	return nil, false
}

// transferOn finds the in-flight transfer whose local tensor has storage root.
func (s *xferScope) transferOn(root *ir.Value) (*ir.Value, *pendingXfer) {
	for sc := s; sc != nil; sc = sc.parent {
		for t, px := range sc.pending {
			if px.root == root {
				return t, px
			}
		}
	}
	return nil, nil
}

// liveRegistrationOf finds a registration of root not yet deregistered.
func (s *xferScope) liveRegistrationOf(root *ir.Value) (*ir.Value, *regInfo) {
	for sc := s; sc != nil; sc = sc.parent {
		for h, r := range sc.regs {
			if r.deregistered == nil && r.op.Operands[0].Root() == root {
				return h, r
			}
		}
	}
	return nil, nil
}

func (c *transferChecker) block(b *ir.Block, s *xferScope) {
	s.regs, s.pending, s.waited = map[*ir.Value]*regInfo{}, map[*ir.Value]*pendingXfer{}, map[*ir.Value]*ir.Op{}
	for _, op := range b.Ops {
		c.inFlightUse(op, s)
		switch op.Code {
		case ir.OpRegister:
			c.register(op, s)
		case ir.OpTransfer:
			c.transfer(op, s)
		case ir.OpWait:
			c.wait(op, s)
		case ir.OpDeregister:
			c.deregister(op, s)
		case ir.OpFree:
			if h, r := s.liveRegistrationOf(op.Operands[0].Root()); h != nil {
				c.v.errs.Add(op.Pos, "free: %s is still registered (by %s at %s); deregister %s first", op.Operands[0], h, r.op.Pos, h)
			}
		case ir.OpFor:
			c.block(op.Body, &xferScope{parent: s})
		}
	}
	for _, x := range s.order {
		if r, ok := s.regs[x]; ok && r.deregistered == nil {
			c.v.errs.Add(r.op.Pos, "register: %s is never deregistered; add `deregister %s` after its last transfer (deregistration is where the ranks agree that no peer still reads or writes %s)", x, x, r.op.Operands[0])
		}
		if px, ok := s.pending[x]; ok {
			c.v.errs.Add(px.op.Pos, "transfer: %s is never waited for; add `wait %s` in the same block, before %s is used again", x, x, px.local)
		}
	}
}

func (c *transferChecker) register(op *ir.Op, s *xferScope) {
	x, h := op.Operands[0], op.Result()
	if t := x.Tensor(); t != nil && t.Mem != ir.Symmetric {
		c.v.errs.Add(op.Pos, "register: %s is in %s memory; peers reach a registered tensor through the symmetric heap, so it must be symmetric (give it a symmetric type, or register `copy %s mem=symmetric`)", x, t.Mem, x)
	}
	if cv := contiguousViewOf(x); cv != nil {
		c.v.errs.Add(op.Pos, "register: %s is a contiguous view of every rank's shard; register the shard %s itself", x, cv.Def.Operands[0])
	}
	if h != nil {
		s.regs[h] = &regInfo{op: op}
		s.order = append(s.order, h)
	}
}

func (c *transferChecker) transfer(op *ir.Op, s *xferScope) {
	h, local, t := op.Operands[0], op.Operands[1], op.Result()
	r, _ := s.reg(h)
	if r == nil {
		return // not a registration: the type checker said so
	}
	if r.deregistered != nil {
		c.v.errs.Add(op.Pos, "transfer: %s was deregistered at %s; a transfer needs a live registration", h, r.deregistered.Pos)
	}
	x := r.op.Operands[0]
	rt, lt := x.Tensor(), local.Tensor()
	if rt != nil && lt != nil && !c.v.badShard[x] && !c.v.badShard[local] {
		rs, err1 := rt.LocalShape(c.v.size)
		ls, err2 := lt.LocalShape(c.v.size)
		switch {
		case err1 != nil || err2 != nil:
		case rt.DType != lt.DType:
			c.v.errs.Add(op.Pos, "transfer: %s is %s but the registered %s is %s; the dtypes must match", local, lt.DType, x, rt.DType)
		case ir.Product(rs) != ir.Product(ls):
			es := int64(rt.DType.Size())
			c.v.errs.Add(op.Pos, "transfer: size mismatch: %s holds %d elements on each rank (%d bytes) but the registered %s holds %d (%d bytes); a transfer moves the whole registered tensor",
				local, ir.Product(ls), ir.Product(ls)*es, x, ir.Product(rs), ir.Product(rs)*es)
		}
	}
	if t != nil {
		s.pending[t] = &pendingXfer{op: op, local: local, root: local.Root(), read: op.WordAttr("dir", "") == "read"}
		s.order = append(s.order, t)
	}
}

func (c *transferChecker) wait(op *ir.Op, s *xferScope) {
	t := op.Operands[0]
	if t.Def == nil || t.Def.Code != ir.OpTransfer {
		return
	}
	if w, ok := s.waitedAt(t); ok {
		c.v.errs.Add(op.Pos, "wait: %s was already waited for at %s; wait once per transfer", t, w.Pos)
		return
	}
	if _, here := s.pending[t]; !here {
		for sc := s.parent; sc != nil; sc = sc.parent {
			if _, ok := sc.pending[t]; ok {
				c.v.errs.Add(op.Pos, "wait: %s is a transfer from outside this for loop; waiting for it in the body would wait on every iteration", t)
				return
			}
		}
	}
	delete(s.pending, t)
	s.waited[t] = op
}

func (c *transferChecker) deregister(op *ir.Op, s *xferScope) {
	h := op.Operands[0]
	r, here := s.reg(h)
	switch {
	case r == nil:
	case r.deregistered != nil:
		c.v.errs.Add(op.Pos, "deregister: %s is deregistered twice (first at %s)", h, r.deregistered.Pos)
	case !here:
		c.v.errs.Add(op.Pos, "deregister: %s is registered outside this for loop; deregistering it in the body would deregister it on every iteration", h)
	default:
		r.deregistered = op
	}
}

// inFlightUse reports an op that touches the local tensor of a transfer not
// yet waited for: any use while a read fills it, a write into it (or a
// free) while a write sends it.
func (c *transferChecker) inFlightUse(op *ir.Op, s *xferScope) {
	if op.Code == ir.OpWait || op.Code == ir.OpDeregister {
		return
	}
	reported := map[*ir.Value]bool{}
	for i, x := range op.Operands {
		if x.Lit != nil {
			continue
		}
		t, px := s.transferOn(x.Root())
		if px == nil || px.op == op || reported[t] {
			continue
		}
		if x == t {
			continue // the handle itself (only wait takes it)
		}
		switch {
		case px.read:
			reported[t] = true
			c.v.errs.Add(op.Pos, "%s: %s is being written by the transfer %s (dir=read) until `wait %s`; wait first", op.Code, x, t, t)
		case writesInto(op, i):
			reported[t] = true
			c.v.errs.Add(op.Pos, "%s: %s is being sent by the transfer %s (dir=write) until `wait %s`; wait before changing it", op.Code, x, t, t)
		}
	}
}

// writesInto reports whether op writes into (or frees) its i-th operand.
func writesInto(op *ir.Op, i int) bool {
	switch {
	case op.Code == ir.OpFree:
		return true
	case op.Code == ir.OpTransfer:
		return i == 1 && op.WordAttr("dir", "") == "read"
	}
	// copy, matmul, a collective, recv: into the destination they were given
	return op.Code.Info().Destination(len(op.Operands)) == i
}
