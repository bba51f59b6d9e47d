package passes

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hirlab/hir/parser"
)

// checkHazard checks src: want "" means accepted, else the error's start.
func checkHazard(t *testing.T, src, want string) {
	t.Helper()
	p, err := parser.Parse("r.hir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	err = Check(p, &Context{})
	switch {
	case want == "" && err != nil:
		t.Fatalf("rejected: %v", err)
	case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
		t.Fatalf("got %v\nwant %s…", err, want)
	}
}

// TestStreamHazardReads: a read on one stream of storage another stream wrote
// through another name is rejected at the read, naming the write and the
// fix; reading the write's result or its destination, a part the write
// did not touch, or reading after a wait is accepted.
func TestStreamHazardReads(t *testing.T) {
	const head = "mesh 1\ninput %a : f32[4, 8]\ninput %w : f32[8, 4]\n%s = stream\n%t = stream\n%buf = alloc : f32[2, 4, 4]\n%row = select %buf, 1\n%slot = select %buf, 1\n%other = select %buf, 0\n"
	for _, tc := range []struct {
		name, body, want string // want: "" accepted, else the error's start
	}{
		{"another view, before the write", "%p = matmul %a, %w, %slot\nset_stream %s\n%c = copy %row\nset_stream\noutput %c\n",
			"r.hir:12:6: copy reads %row on the stream %s, but matmul at r.hir:10:6 wrote that storage on the default stream and nothing orders the read after it (a use waits only for its value's producer): read matmul's result %p, or put `wait_stream` (no operand: the default stream's work) on the stream %s before the read"},
		{"the whole tensor", "%p = matmul %a, %w, %slot\nset_stream %s\n%c = copy %buf\nset_stream\noutput %c\n", "r.hir:12:6: copy reads %buf"},
		{"a write on a side stream, read on the default", "set_stream %t\n%p = matmul %a, %w, %slot\nset_stream\n%c = copy %row\noutput %c\n",
			"r.hir:13:6: copy reads %row on the default stream, but matmul at r.hir:11:6 wrote that storage on the stream %t and nothing orders the read after it (a use waits only for its value's producer): read matmul's result %p, or put `wait_stream %t` on the default stream before the read"},
		{"the result", "%p = matmul %a, %w, %slot\nset_stream %s\n%c = copy %p\nset_stream\noutput %c\n", ""},
		{"the destination", "%p = matmul %a, %w, %slot\nset_stream %s\n%c = copy %slot\nset_stream\noutput %c\n", ""},
		{"another part", "%p = matmul %a, %w, %slot\nset_stream %s\n%c = copy %other\nset_stream\noutput %c\n", ""},
		{"after wait_stream", "%p = matmul %a, %w, %slot\nset_stream %s\nwait_stream\n%c = copy %row\nset_stream\noutput %c\n", ""},
		{"after sync_stream", "%p = matmul %a, %w, %slot\nsync_stream\nset_stream %s\n%c = copy %row\nset_stream\noutput %c\n", ""},
		{"waiting through a third stream", "set_stream %t\n%p = matmul %a, %w, %slot\nset_stream\nwait_stream %t\nset_stream %s\nwait_stream\n%c = copy %row\nset_stream\noutput %c\n", ""},
		{"one stream", "%p = matmul %a, %w, %slot\n%c = copy %row\noutput %c\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) { checkHazard(t, head+tc.body, tc.want) })
	}
}

// TestStreamHazardWrites: a write on one stream into storage another stream
// read or wrote, with nothing ordering the two, is rejected too; after a
// wait it is accepted, as is a write into a part the other did not touch.
func TestStreamHazardWrites(t *testing.T) {
	const head = "mesh 1\ninput %a : f32[4, 8]\ninput %w : f32[8, 4]\n%s = stream\n%buf = alloc : f32[2, 4, 4]\n%row = select %buf, 1\n%slot = select %buf, 1\n%other = select %buf, 0\n"
	for _, tc := range []struct {
		name, body, want string
	}{
		{"a write after a read", "set_stream %s\n%c = copy %row\nset_stream\n%p = matmul %a, %w, %slot\noutput %c, %p\n",
			"r.hir:12:6: matmul writes %slot on the default stream while copy at r.hir:10:6 may still be reading that storage (%row) on the stream %s: nothing orders the write after the read; put `wait_stream %s` on the default stream before the write"},
		{"two writes", "set_stream %s\n%p = matmul %a, %w, %slot\nset_stream\n%q = matmul %a, %w, %row\noutput %q\n",
			"r.hir:12:6: matmul writes %row on the default stream, but matmul at r.hir:10:6 wrote that storage on the stream %s and nothing orders the two"},
		{"a write after a waited read", "set_stream %s\n%c = copy %row\nset_stream\nwait_stream %s\n%p = matmul %a, %w, %slot\noutput %c, %p\n", ""},
		{"a write into another part", "set_stream %s\n%c = copy %row\nset_stream\n%p = matmul %a, %w, %other\noutput %c, %p\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) { checkHazard(t, head+tc.body, tc.want) })
	}
}

// TestStreamHazardsCompareLimit: a loop over two streams writing disjoint
// rows with no waits leaves every write unordered against the other
// stream's; past hazardCompareLimit pairs the pass stops and leaves the
// program unchecked (here the hazard at its end goes unreported), below
// it the same hazard is reported.
func TestStreamHazardsCompareLimit(t *testing.T) {
	prog := func(n int) string {
		return fmt.Sprintf(`mesh 1
input %%x : f32[4]
%%a = stream
%%b = stream
%%buf = alloc : f32[%d, 4]
for %%i = 0 to %d {
  %%s = pick_stream %%a, %%b, %%i
  set_stream %%s
  %%row = select %%buf, %%i
  %%c = copy %%x, %%row
}
set_stream
%%all = copy %%buf
output %%all
`, n, n)
	}
	for _, tc := range []struct {
		rows     int
		rejected bool
	}{{100, true}, {6000, false}} {
		p, err := parser.Parse("limit.hir", []byte(prog(tc.rows)))
		if err != nil {
			t.Fatal(err)
		}
		err = Check(p, &Context{})
		if got := err != nil && strings.Contains(err.Error(), "copy reads %buf on the default stream"); got != tc.rejected {
			t.Errorf("%d rows: rejected %v, want %v (%v)", tc.rows, got, tc.rejected, err)
		}
	}
}
