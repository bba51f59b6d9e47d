package passes

import (
	"strings"
	"testing"
)

// TestStreamBarrierOrdersTransfers: stream_barrier, like barrier, is a
// point every rank passes, so it orders a peer's transfer into a
// registered tensor before this rank's read of it (the race pass accepts
// the program); without it the read races the peer's write.
func TestStreamBarrierOrdersTransfers(t *testing.T) {
	const prog = `mesh 2
input %x : f32[4] symmetric
%h = register %x
%src = alloc : f32[4]
%t = transfer %h, %src dir=write peer=+1
wait %t
MEET
%y = neg %x
deregister %h
output %y
`
	for _, meet := range []string{"barrier", "stream_barrier"} {
		if got := checkText(t, strings.Replace(prog, "MEET", meet, 1)); got != "" {
			t.Errorf("with %s: %s", meet, got)
		}
	}
	if got := checkText(t, strings.Replace(prog, "MEET\n", "", 1)); !strings.Contains(got, "may be touched by two ranks at once") {
		t.Errorf("without a meeting: got %q, want the race", got)
	}
}
