package parser

import (
	"strings"
	"testing"
)

// TestIntegerLiteralsBeyondInt64: an integer that does not fit in an int64,
// wherever the grammar takes one, is a parse error at the integer's
// position (never a wrapped value); so is a float beyond f64 and a tensor
// type whose byte size could not fit in an int64.
func TestIntegerLiteralsBeyondInt64(t *testing.T) {
	src := `mesh 9223372036854775808

input %x : f32[9223372036854775808]
%a = add %x, 9223372036854775808
%b = add %x, -9223372036854775809
%c = reshape %x shape=[4, 18446744073709551616]
send %x peer=+9223372036854775808
%d = broadcast %x root=99999999999999999999
for %i = -9223372036854775809 to 9223372036854775808 step 99999999999999999999 {
}
%e = add %x, 1e400
%s = select %x, 9223372036854775808
%t = alloc : f32[4611686018427387904, 4]
%u = alloc : i32[1152921504606846976, 2]
%v = alloc : bool[4611686018427387904, 2]
output %a
`
	want := []struct{ pos, text string }{
		{"t.hir:1:6", "9223372036854775808"},
		{"t.hir:3:16", "9223372036854775808"},
		{"t.hir:4:14", "9223372036854775808"},
		{"t.hir:5:14", "-9223372036854775809"},
		{"t.hir:6:27", "18446744073709551616"},
		{"t.hir:7:14", "+9223372036854775808"},
		{"t.hir:8:24", "99999999999999999999"},
		{"t.hir:9:10", "-9223372036854775809"},
		{"t.hir:9:34", "9223372036854775808"},
		{"t.hir:9:59", "99999999999999999999"},
		{"t.hir:11:14", "1e400"},
		{"t.hir:12:17", "9223372036854775808"},
		{"t.hir:13:14", "f32[4611686018427387904, 4]"},
		{"t.hir:14:14", "i32[1152921504606846976, 2]"},
		{"t.hir:15:14", "bool[4611686018427387904, 2]"},
	}
	_, err := Parse("t.hir", []byte(src))
	if err == nil {
		t.Fatal("the program parsed")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Errorf("%d errors, want %d:\n%s", len(lines), len(want), err)
	}
	for i := 0; i < min(len(lines), len(want)); i++ {
		w := want[i]
		if !strings.HasPrefix(lines[i], w.pos+": ") || !strings.Contains(lines[i], w.text) {
			t.Errorf("error %d is %q, want one at %s naming %s", i, lines[i], w.pos, w.text)
		}
	}
}

// TestIntegerLiteralsAtTheLimits: the int64 limits themselves parse to
// their exact values, and a type of 2^63-1 bytes is not too large.
func TestIntegerLiteralsAtTheLimits(t *testing.T) {
	src := `mesh 1
input %x : i64[4]
input %y : bool[9223372036854775807]
input %z : f64[3, 384307168202282325]
%a = add %x, 9223372036854775807
%b = add %x, -9223372036854775808
for %i = -9223372036854775808 to 9223372036854775807 step 9223372036854775807 {
}
output %a, %b
`
	p, err := Parse("t.hir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ops := p.Body.Ops
	if got := ops[0].Operands[1].Lit.Int; got != 9223372036854775807 {
		t.Errorf("max literal = %d", got)
	}
	if got := ops[1].Operands[1].Lit.Int; got != -9223372036854775808 {
		t.Errorf("min literal = %d", got)
	}
	f := ops[2]
	if from, to, step := f.IntAttr("from", 0), f.IntAttr("to", 0), f.IntAttr("step", 1); from != -9223372036854775808 || to != 9223372036854775807 || step != 9223372036854775807 {
		t.Errorf("for bounds = %d, %d, %d", from, to, step)
	}
}
