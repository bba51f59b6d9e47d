package passes

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

// checkText parses src as t.hir and runs the checking passes; it returns
// the error lines of either ("" when the program is accepted).
func checkText(t *testing.T, src string) string {
	t.Helper()
	p, err := parser.Parse("t.hir", []byte(src))
	if err == nil {
		err = Check(p, nil)
	}
	if err == nil {
		return ""
	}
	if _, ok := err.(ir.ErrorList); !ok {
		t.Errorf("the error is a %T, want ir.ErrorList", err)
	}
	return err.Error()
}

// TestIntegerLimits: every number the checker computes from a program
// (element counts, byte sizes, loop ranges) is exact; what does not fit in
// an int64 is rejected with the op's position, never wrapped.
func TestIntegerLimits(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"reshape product wraps to the input's count", `mesh 1
%x = alloc : f32[4294967296]
%y = reshape %x shape=[4294967296, 4294967297]
output %y
`, "t.hir:3:6: reshape: shape=[4294967296, 4294967297] has 18446744078004518912 elements, which do not fit in a 64-bit size"},
		{"reshape product wraps to 0", `mesh 1
%x = alloc : f32[4]
%y = reshape %x shape=[4294967296, 4294967296]
output %y
`, "t.hir:3:6: reshape: shape=[4294967296, 4294967296] has 18446744073709551616 elements, which do not fit in a 64-bit size"},
		{"reshape with a zero extent has 0 elements, not an overflow", `mesh 1
%x = alloc : f32[4]
%y = reshape %x shape=[4294967296, 4294967296, 0]
output %y
`, "t.hir:3:6: reshape: %x has 4 elements ([4]) but shape=[4294967296, 4294967296, 0] has 0"},
		{"broadcast result: elements", `mesh 1
%a = alloc : f32[4294967296, 1]
%b = alloc : f32[1, 4294967296]
%c = add %a, %b
%d = relu %c
output %d
`, "t.hir:4:1: add: %c : f32[4294967296, 4294967296]: 18446744073709551616 elements do not fit in a 64-bit size"},
		{"broadcast result: bytes", `mesh 2
%a = alloc : f32[2147483648/DIDx, 1]
%b = alloc : f32[1, 2147483648]
%c = mul %a, %b
output %c
`, "t.hir:4:1: mul: %c : f32[2147483648/DIDx, 2147483648]: 18446744073709551616 bytes (4611686018427387904 elements of 4 bytes) do not fit in a 64-bit size"},
		{"matmul result", `mesh 1
%a = alloc : f64[1073741824, 2]
%b = alloc : f64[2, 1073741824]
%c = matmul %a, %b
output %c
`, "t.hir:4:1: matmul: %c : f64[1073741824, 1073741824]: 9223372036854775808 bytes (1152921504606846976 elements of 8 bytes) do not fit in a 64-bit size"},
		{"fusion intermediate", `mesh 1
%a = alloc : f32[4294967296, 1]
%b = alloc : f32[1, 4294967296]
%g = fusion %a, %b {
  %t = add %a, %b
  %s = sum %t axes=[1]
  yield %s
}
output %g
`, "t.hir:5:3: add: %t : f32[4294967296, 4294967296]: 18446744073709551616 elements do not fit in a 64-bit size"},
		{"largest sizes that fit", `mesh 1
%a = alloc : bool[2147483648, 1]
%b = alloc : bool[1, 4294967295]
%c = where %a, %a, %b
%x = alloc : f32[4294967296]
%y = reshape %x shape=[65536, 65536]
%f = alloc : f32[2147483647, 1]
%g = alloc : f32[1, 536870912]
%h = add %f, %g
output %c, %y, %h
`, ""},
		{"loop range over the whole int64 range", `mesh 1
%m = alloc : f32[2, 8]
for %i = -9223372036854775808 to 9223372036854775807 step 9223372036854775807 {
  %r = select %m, %i
}
output %m
`, "t.hir:4:8: select: %i runs from -9223372036854775808 to 9223372036854775806, out of range for axis 0 of extent 2"},
		{"loop whose next index would wrap", `mesh 1
%m = alloc : f32[2, 8]
for %i = 1 to 9223372036854775807 step 9223372036854775807 {
  %r = select %m, %i
}
for %j = 9223372036854775806 to 9223372036854775807 step 4611686018427387904 {
  %s = select %m, %j
}
output %m
`, "t.hir:7:8: select: %j runs from 9223372036854775806 to 9223372036854775806, out of range for axis 0 of extent 2"},
		{"select index at the limit", `mesh 1
%m = alloc : f32[2, 8]
%r = select %m, 9223372036854775807 axis=1
output %r
`, "t.hir:3:6: select: index 9223372036854775807 is out of range for axis 1 of extent 8"},
		{"i64 literals", `mesh 1
%n = alloc : i64[4]
%a = add %n, 1e19
%b = add %n, 9223372036854775807.0
%c = add %n, -9223372036854775808.0
%d = add %n, 9223372036854775807
%e = add %n, -9223372036854775808
output %a, %b, %c, %d, %e
`, "t.hir:3:6: add: the literal 1e+19 does not fit the dtype i64\nt.hir:4:6: add: the literal 9.223372036854776e+18 does not fit the dtype i64"},
		{"peers and roots at the limits", `mesh 3
%n = alloc : i64[4]
send %n peer=+9223372036854775807
send %n peer=-9223372036854775808
send %n peer=9223372036854775807
%r = recv peer=-9223372036854775807 : i64[4]
%b = broadcast %n root=9223372036854775807
%c = reduce %n root=-9223372036854775808
output %r, %b, %c
`, strings.Join([]string{
			"t.hir:3:1: send: peer=+9223372036854775807 reaches past the mesh of 3 ranks (a relative peer lies between -2 and +2)",
			"t.hir:4:1: send: peer=-9223372036854775808 reaches past the mesh of 3 ranks (a relative peer lies between -2 and +2)",
			"t.hir:5:1: send: peer=9223372036854775807 is outside the mesh of 3 ranks (0..2)",
			"t.hir:6:6: recv: peer=-9223372036854775807 reaches past the mesh of 3 ranks (a relative peer lies between -2 and +2)",
			"t.hir:7:6: broadcast: root=9223372036854775807 is outside the mesh of 3 ranks (0..2)",
			"t.hir:8:6: reduce: root=-9223372036854775808 is outside the mesh of 3 ranks (0..2)",
		}, "\n")},
		{"step below 1", `mesh 1
for %i = 0 to 9223372036854775807 step -9223372036854775808 {
}
`, "t.hir:2:1: for: step must be positive, got -9223372036854775808"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, checkText(t, tt.src)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTypeSizesFromGo: a program built in Go skips the parser's checks of
// types; validate rejects every input and result type whose extents are
// below 1 or whose element count or byte size does not fit in an int64.
func TestTypeSizesFromGo(t *testing.T) {
	pos := func(line int) ir.Pos { return ir.NewPos("g.hir", line, 1) }
	b := ir.NewBuilder(ir.LinearMesh(2))
	in := b.Input("x", ir.Tensor(ir.F32, 1<<62, 2).Sharded(0))
	in.Pos = pos(1)
	neg := b.Input("n", ir.Tensor(ir.I32, 4, -8))
	neg.Pos = pos(2)
	a := b.Op(ir.OpAlloc).Name("a").Type(ir.Tensor(ir.F32, 4611686018427387904, 4)).Value()
	a.Pos = pos(3)
	r := b.Op(ir.OpRecv).Name("r").Peer(1, true).Type(ir.Tensor(ir.I64, math.MaxInt64/8+1)).Value()
	r.Pos = pos(4)
	z := b.Op(ir.OpAlloc).Name("z").Type(ir.Tensor(ir.F32, 0)).Value()
	z.Pos = pos(5)
	y := b.Unary(ir.OpRelu, in) // computed from a reported value: not reported again
	b.Output(a)
	b.Output(r)
	b.Output(y)
	b.Output(z)
	p, err := b.Program()
	if err != nil {
		t.Fatal(err)
	}
	err = Check(p, nil)
	want := strings.Join([]string{
		"g.hir:1:1: input %x : f32[4611686018427387904/DIDx, 2]: 9223372036854775808 elements do not fit in a 64-bit size",
		"g.hir:2:1: input %n : i32[4, -8]: axis 1 has extent -8; an extent must be at least 1",
		"g.hir:3:1: alloc: %a : f32[4611686018427387904, 4]: 18446744073709551616 elements do not fit in a 64-bit size",
		"g.hir:4:1: recv: %r : i64[1152921504606846976]: 9223372036854775808 bytes (1152921504606846976 elements of 8 bytes) do not fit in a 64-bit size",
		"g.hir:5:1: alloc: %z : f32[0]: axis 0 has extent 0; an extent must be at least 1",
	}, "\n")
	if err == nil {
		t.Fatalf("Check accepted the program, want:\n%s", want)
	}
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}
