package passes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/parser"
)

// checkP2P is what Check says of src as file p.hir ("" when it accepts).
func checkP2P(t *testing.T, src string) string {
	t.Helper()
	prog, err := parser.Parse("p.hir", []byte(src))
	require.NoError(t, err)
	if err := Check(prog, &Context{Verified: true}); err != nil {
		return err.Error()
	}
	return ""
}

// TestSendRecvRejectionsNameBothSides: sends and recvs that cannot match
// are rejected with the position of the op that would wait forever and of
// the peer's side of the pair: its last partner, the send a mismatched
// recv meets, the ops of a cycle of waits.
func TestSendRecvRejectionsNameBothSides(t *testing.T) {
	const head = "mesh 2\ninput %x : f32[4]\n%s = stream\n" // ops start on line 4
	for _, c := range []struct{ name, body, want string }{
		{"a recv nobody sends to",
			"%r = recv peer=-1 : f32[4]\noutput %r\n",
			"p.hir:4:6: recv: rank 0 receives from rank 1 once, but rank 1 never sends to rank 0: receive #0 would wait forever; add the matching `send peer=...` on rank 1"},
		{"a send nobody receives",
			"send %x peer=+1\noutput %x\n",
			"p.hir:4:1: send: rank 0 sends to rank 1 once, but rank 1 never receives from rank 0: send #0 would wait forever; add the matching `recv peer=...` on rank 1"},
		{"one send too many, in a loop",
			"set_stream %s\nfor %i = 0 to 3 {\n  send %x peer=+1\n}\nset_stream\n%r = recv peer=-1 : f32[4]\n%q = recv peer=-1 : f32[4]\noutput %r, %q\n",
			"p.hir:6:3: send: rank 0 sends to rank 1 three times, but rank 1 receives from rank 0 only twice, the last at p.hir:10:6: send #2 would wait forever; add the matching `recv peer=...` on rank 1"},
		{"one recv too many",
			"set_stream %s\nsend %x peer=+1\nset_stream\n%r = recv peer=-1 : f32[4]\n%q = recv peer=-1 : f32[4]\noutput %r, %q\n",
			"p.hir:8:6: recv: rank 1 receives from rank 0 twice, but rank 0 sends to rank 1 only once, the last at p.hir:5:1: receive #1 would wait forever; add the matching `send peer=...` on rank 0"},
		{"dtypes that differ",
			"set_stream %s\nsend %x peer=+1\nset_stream\n%r = recv peer=-1 : i32[4]\noutput %r\n",
			"p.hir:7:6: recv: on rank 1, receive #0 from rank 0 wants i32 of 4 elements, but the send it meets (at p.hir:5:1) sends f32 of 4; they must agree in dtype and local element count"},
		{"sizes that differ",
			"set_stream %s\nsend %x peer=+1\nset_stream\n%r = recv peer=-1 : f32[2]\noutput %r\n",
			"p.hir:7:6: recv: on rank 1, receive #0 from rank 0 wants f32 of 2 elements, but the send it meets (at p.hir:5:1) sends f32 of 4; they must agree in dtype and local element count"},
		{"a cycle of waits: each rank receives before it sends",
			"%r = recv peer=+1 : f32[4]\nsend %x peer=+1\noutput %r\n",
			"p.hir:4:6: recv: the ranks wait for each other forever: on rank 0 the recv at p.hir:4:6 waits for rank 1's matching send at p.hir:5:1, queued on rank 1 behind the recv at p.hir:4:6 on the default stream; reorder the ops, or put one side on a stream of its own (testdata/send_recv.hir shows a ring shift)"},
	} {
		assert.Equal(t, c.want, checkP2P(t, head+c.body), c.name)
	}
}

// TestSendRecvPeersPerRank: peers are decided per rank, absolute or
// relative to it. Every rank sends to rank 1 (an absolute peer) and
// receives from its left neighbour (a relative one): rank 0's send meets
// rank 1's recv, but rank 1's send to itself, rank 2's send to rank 1 and
// rank 0's recv from rank 2 meet nothing. Each op is named once, for the
// first pair it breaks.
func TestSendRecvPeersPerRank(t *testing.T) {
	src := "mesh 3\ninput %x : f32[4]\n%s = stream\nset_stream %s\nsend %x peer=1\nset_stream\n%r = recv peer=-1 : f32[4]\noutput %r\n"
	assert.Equal(t, strings.Join([]string{
		"p.hir:5:1: send: rank 1 sends to rank 1 once, but rank 1 never receives from rank 1: send #0 would wait forever; add the matching `recv peer=...` on rank 1",
		"p.hir:7:6: recv: rank 0 receives from rank 2 once, but rank 2 never sends to rank 0: receive #0 would wait forever; add the matching `send peer=...` on rank 2",
	}, "\n"), checkP2P(t, src))
	// a ring shift both ways is fine
	ok := "mesh 3\ninput %x : f32[4]\n%s = stream\nset_stream %s\nsend %x peer=+1\nsend %x peer=-1\nset_stream\n%r = recv peer=-1 : f32[4]\n%q = recv peer=+1 : f32[4]\noutput %r, %q\n"
	assert.Empty(t, checkP2P(t, ok))
}

// TestCheckAcceptsEveryProgramThatRuns: no false rejections. Every
// testdata program whose golden shows a successful run (exit 0), and every
// example, passes Check.
func TestCheckAcceptsEveryProgramThatRuns(t *testing.T) {
	var files []string
	for _, pat := range []string{"../testdata/*.hir", "../testdata/contract/*.hir", "../examples/*.hir"} {
		m, err := filepath.Glob(pat)
		require.NoError(t, err)
		files = append(files, m...)
	}
	accepted := 0
	for _, f := range files {
		golden, err := os.ReadFile(strings.TrimSuffix(f, ".hir") + ".golden")
		if err == nil && !strings.Contains(string(golden), "\nexit 0\n") {
			continue // a program that fails on purpose
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		prog, err := parser.Parse(f, src)
		require.NoError(t, err, f)
		assert.NoError(t, Check(prog, &Context{Verified: true}), f)
		accepted++
	}
	require.Greater(t, accepted, 50, "programs checked: has testdata moved?")
	t.Logf("%d programs that run, all accepted", accepted)
}
