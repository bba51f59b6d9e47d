package passes

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/hirlab/hir/ir"
)

// cellProgram builds `%y = <collective> %x algo=<algo>` on a mesh of 4 with a
// global input of the shape the collective takes. outMem is the memory of
// the result annotation; buffer passes an output buffer of that memory
// instead.
func cellProgram(t *testing.T, rule ir.CollectiveRule, outMem ir.MemoryType, buffer bool) *ir.Program {
	t.Helper()
	b := ir.NewBuilder(ir.LinearMesh(4))
	in := ir.Tensor(ir.F32, 8, 16)
	out := in.Clone()
	switch rule.Op {
	case ir.OpAllGather, ir.OpGather:
		in = in.Sharded(0)
	case ir.OpReduceScatter, ir.OpScatter:
		out = out.Sharded(0)
	case ir.OpAllToAll:
		in, out = in.Sharded(0), out.Sharded(1)
	}
	x := b.Input("x", in)
	operands := []*ir.Value{x}
	if buffer {
		operands = append(operands, b.Op(ir.OpAlloc).Name("buf").Type(out.In(outMem)).Value())
	}
	ob := b.Op(rule.Op, operands...).Name("y").Word("algo", rule.Algo.String())
	if rule.Op == ir.OpAllToAll {
		ob.Int("axis", 1)
	}
	if !buffer {
		ob.Type(out.In(outMem))
	}
	b.Output(ob.Value())
	p, err := b.Program()
	if err != nil {
		t.Fatalf("%s algo=%s: %v", rule.Op, rule.Algo, err)
	}
	return p
}

// TestSymmetricTable runs every collective × algorithm cell of the table with
// a global input, and a global or symmetric result or buffer, and checks
// what the symmetric pass does against the cell; the texts go to a golden.
func TestSymmetricTable(t *testing.T) {
	var all bytes.Buffer
	for _, rule := range ir.SymmetricRules() {
		for _, variant := range []struct {
			mem    ir.MemoryType
			buffer bool
		}{{ir.Global, false}, {ir.Symmetric, false}, {ir.Global, true}} {
			name := fmt.Sprintf("%s algo=%s out=%s buffer=%v", rule.Op, rule.Algo, variant.mem, variant.buffer)
			p := cellProgram(t, rule, variant.mem, variant.buffer)
			var explain bytes.Buffer
			err := LowerUntil(p, "symmetric", &Context{Explain: &explain})
			fmt.Fprintf(&all, "## %s\n", name)
			if err != nil {
				fmt.Fprintf(&all, "error: %v\n", err)
			} else {
				all.WriteString(p.String())
			}
			all.WriteString(explain.String())

			wantErr := rule.Access.WritesOutput && variant.mem != ir.Symmetric
			if wantErr != (err != nil) {
				t.Errorf("%s: error %v, want error: %v", name, err, wantErr)
				continue
			}
			if wantErr {
				out := "%y"
				if variant.buffer {
					out = "%buf"
				}
				for _, part := range []string{rule.Op.String(), "algo=" + rule.Algo.String(), "writes its output " + out + " remotely"} {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("%s: error %q does not name %q", name, err, part)
					}
				}
				continue
			}
			coll := p.Body.Ops[len(p.Body.Ops)-1]
			imported := coll.Operands[0].Name == "x.sym"
			if imported != rule.Access.ReadsInput {
				t.Errorf("%s: imported=%v, want %v:\n%s", name, imported, rule.Access.ReadsInput, p)
			}
			if imported {
				imp := p.Body.Ops[len(p.Body.Ops)-2]
				if imp.Code != ir.OpCopy || imp.Result() != coll.Operands[0] || coll.Operands[0].Tensor().Mem != ir.Symmetric {
					t.Errorf("%s: the import is not a symmetric copy right before the collective:\n%s", name, p)
				}
				if !strings.Contains(explain.String(), "imported it onto the symmetric heap as %x.sym") {
					t.Errorf("%s: explain says %q", name, explain.String())
				}
			}
		}
	}
	checkGolden(t, "testdata/symmetric_cells.golden", all.String())
}

func TestSymmetricUnknownAlgo(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(2))
	x := b.Input("x", ir.Tensor(ir.F32, 4))
	y := b.Collective(ir.OpReduceScatter, x, ir.AlgoTwoShot).Type(ir.Tensor(ir.F32, 4).Sharded(0).In(ir.Symmetric)).Value()
	b.Output(y)
	p, err := b.Program()
	if err != nil {
		t.Fatal(err)
	}
	err = Check(p, nil)
	want := "<input>: reduce_scatter has no algorithm two_shot; it supports auto, one_shot, ring, copy_engine, nccl or ll"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// An import is made once per value and block; a loop body reuses an import
// made before the loop.
func TestSymmetricReusesImports(t *testing.T) {
	b := ir.NewBuilder(ir.LinearMesh(2))
	x := b.Input("x", ir.Tensor(ir.F32, 4))
	y1 := b.Collective(ir.OpAllReduce, x, ir.AlgoOneShot).Name("y1").Value()
	y2 := b.Collective(ir.OpAllReduce, x, ir.AlgoOneShot).Name("y2").Value()
	b.For("i", 0, 2, 1, func(*ir.Value) {
		b.Collective(ir.OpBroadcast, x, ir.AlgoAuto).Name("y3")
	})
	b.Output(y1, y2)
	p, err := b.Program()
	if err != nil {
		t.Fatal(err)
	}
	var explain bytes.Buffer
	if err := Check(p, &Context{Explain: &explain}); err != nil {
		t.Fatal(err)
	}
	copies := 0
	p.Walk(func(op *ir.Op) {
		if op.Code == ir.OpCopy {
			copies++
		}
		if op.Code.IsCollective() && op.Operands[0].Name != "x.sym" {
			t.Errorf("%s reads %s, want %%x.sym", op, op.Operands[0])
		}
	})
	if copies != 1 {
		t.Errorf("%d imports, want 1:\n%s", copies, p)
	}
	if n := strings.Count(explain.String(), "\n"); n != 3 {
		t.Errorf("explain has %d notes, want 3:\n%s", n, explain.String())
	}
}
