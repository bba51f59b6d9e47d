package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRandomDefaultSeed: `--input x=random` is seed 0, as run's help says.
func TestRandomDefaultSeed(t *testing.T) {
	prog := writeProgram(t, "p.hir", "mesh 1\ninput %x : f32[6]\n%y = mul %x, 1.0\noutput %y\n")
	bare := hirrun("run", prog, "--input", "x=random")
	expectCode(t, bare, exitOK)
	zero := hirrun("run", prog, "--input", "x=random:seed=0")
	one := hirrun("run", prog, "--input", "x=random:seed=1")
	assert.NotEmpty(t, bare.stdout, "random printed nothing")
	assert.Equal(t, zero.stdout, bare.stdout, "random and random:seed=0 differ")
	assert.NotEqual(t, one.stdout, bare.stdout, "seeds 0 and 1 gave the same values")
	help := hirrun("run", "-h")
	expectContains(t, "run -h", help.stdout+help.stderr, "NAME=random alone means seed 0", "(random alone: seed 0)")
}

// TestRunDeadlockMessage: a send nobody can receive (both ranks send
// first, on one stream) is rejected before the run, in one line that names
// the place and the chain of waits, instead of hanging until the timeout.
// (The timeout itself, for programs past passes.DeadlockCheckLimit, is
// tested in evaluator: TestTimeoutIsTyped.)
func TestRunDeadlockMessage(t *testing.T) {
	prog := writeProgram(t, "p.hir", "mesh 2\ninput %x : f32[4]\nsend %x peer=+1\n%r = recv peer=-1 : f32[4]\noutput %r\n")
	r := hirrun("run", prog, "--input", "x=random:seed=1", "--timeout", "200ms")
	expectCode(t, r, exitFail)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	require.Len(t, lines, 1, "want one line, got %q", r.stderr)
	expectContains(t, "stderr", lines[0], prog+":3:1: send: the ranks wait for each other forever: on rank 0 the send at "+prog+":3:1 waits for rank 1's matching recv at "+prog+":4:6")
}

// TestRunErrorPositionOnce: an op that fails at run time is reported like a
// compile error, its position first and once, the rank once. (A checked
// program fails at run time only for a resource: here memory.)
func TestRunErrorPositionOnce(t *testing.T) {
	prog := writeProgram(t, "oom.hir", `mesh 2
input %x : f32[4]
%y = mul %x, 2.0
%s = stream
set_stream %s
%a = alloc : f32[1048576]
set_stream
output %y, %a
`)
	t.Setenv("HIR_SIM_MEMORY_LIMIT", "1MiB")
	r := hirrun("run", prog, "--input", "x=random:seed=1")
	expectCode(t, r, exitFail)
	msg := strings.TrimSpace(r.stderr)
	assert.True(t, strings.HasPrefix(msg, prog+":6:6: rank "), "want one line starting %s:6:6: rank, got %q", prog, r.stderr)
	assert.Equal(t, 1, strings.Count(msg, ":6:6"), "the position once, got %q", r.stderr)
	assert.NotContains(t, msg, "\n", "want one line, got %q", r.stderr)
	expectContains(t, "stderr", msg, "alloc: ", "out of memory")
	for _, twice := range []string{"rank 0: rank 0", "rank 1: rank 1"} {
		assert.NotContains(t, msg, twice, "the rank is said twice")
	}
}
