package evaluator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
)

// TestTimeoutIsTyped: a send nobody receives times out with a
// runtime.TimeoutError naming the peer, reachable with errors.As through the
// RunError and the "(rank 1 failed too)" of Run's aggregation.
func TestTimeoutIsTyped(t *testing.T) {
	src := "mesh 2\ninput %x : f32[4]\nsend %x peer=+1\n%r = recv peer=+1 : f32[4]\noutput %r\n"
	prog, err := parser.Parse("t.hir", []byte(src))
	require.NoError(t, err)
	require.ErrorContains(t, passes.Lower(prog, &passes.Context{}), "the ranks wait for each other forever")
	prog, err = parser.Parse("t.hir", []byte(src))
	require.NoError(t, err)
	lowerUnchecked(t, prog)
	rt, err := runtime.Open("sim", runtime.Config{WorldSize: 2, Timeout: 100 * time.Millisecond})
	require.NoError(t, err)
	defer rt.Close()
	j, err := evaluator.NewJob(prog, rt, evaluator.Options{Timeout: 100 * time.Millisecond})
	require.NoError(t, err)
	defer j.Close()
	_, err = j.Run(map[string]*host.Array{"x": host.Random(ir.F32, shape(4), 1)})
	require.Error(t, err)

	var re *evaluator.RunError
	require.True(t, errors.As(err, &re), "%T %v", err, err)
	var te *runtime.TimeoutError
	require.True(t, errors.As(err, &te), "%T %v", err, err)
	require.True(t, errors.Is(err, runtime.ErrTimeout))
	require.Equal(t, 100*time.Millisecond, te.After)
	require.Len(t, te.Missing, 1)
	require.Equal(t, 1-re.Rank, te.Missing[0], "the missing rank is the peer: %v", err)
	require.Contains(t, te.What, "send #0")
	require.Contains(t, err.Error(), "failed too")
	require.Equal(t, 1, strings.Count(err.Error(), "rank "+string(rune('0'+re.Rank))+": "), err.Error())
}

func TestNewJobNilRuntime(t *testing.T) {
	prog, err := parser.Parse("n.hir", []byte("mesh 1\ninput %x : f32[4]\n%y = relu %x\noutput %y\n"))
	require.NoError(t, err)
	require.NoError(t, passes.Lower(prog, &passes.Context{}))
	j, err := evaluator.NewJob(prog, nil, evaluator.Options{})
	require.Nil(t, j)
	require.EqualError(t, err, "evaluator.NewJob: the runtime is nil (open one with runtime.Open)")
	_, err = evaluator.NewJob(nil, nil, evaluator.Options{})
	require.EqualError(t, err, "evaluator.NewJob: the program is nil")
}

// lowerUnchecked lowers prog with every pass but deadlock: the tests of the
// run-time timeout run programs the checker would reject as ranks waiting
// for each other forever, to see what the runtime itself reports (as it
// does for programs too large for the deadlock pass to play).
func lowerUnchecked(t *testing.T, prog *ir.Program) {
	t.Helper()
	require.NoError(t, ir.Verify(prog))
	for _, p := range passes.Pipeline() {
		if p.Name != "deadlock" {
			require.NoError(t, p.Run(prog, &passes.Context{}), p.Name)
		}
	}
}

// TestRunErrorSaysTheRankOnce: a cause that names the rank again, at its
// start or under "input %x: ", does not repeat it.
func TestRunErrorSaysTheRankOnce(t *testing.T) {
	for cause, want := range map[string]string{
		"rank 1: out of memory":                  "rank 1: out of memory",
		"input %x: rank 1: symmetric alloc #0":   "rank 1: input %x: symmetric alloc #0",
		"input %x: rank 0 came late: the others": "rank 1: input %x: rank 0 came late: the others",
		"rank 0: the peer failed":                "rank 1: rank 0: the peer failed",
	} {
		e := &evaluator.RunError{Rank: 1, Err: errors.New(cause)}
		require.Equal(t, want, e.Error(), "cause %q", cause)
	}
}
