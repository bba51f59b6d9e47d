//go:build linux

package launch

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hirrun gives rank 0's stdout no prefix: those lines are the job's
// result and must read exactly as a single process prints them.
func TestRunPrefixChoosesWhatStartsEachLine(t *testing.T) {
	out, errs := newRecorder(), newRecorder()
	cfg := testConfig("env", 2, out, errs)
	cfg.Prefix = func(rank int, stream string) string {
		if rank == 0 && stream == "stdout" {
			return ""
		}
		return DefaultPrefix(rank, stream)
	}
	require.NoError(t, Run(context.Background(), cfg), "Run; stderr:\n%s", strings.Join(errs.lines(), "\n"))
	var plain, prefixed int
	for _, l := range out.lines() {
		switch {
		case strings.HasPrefix(l, "[rank 1] "):
			prefixed++
		case strings.HasPrefix(l, "[rank"):
			assert.Fail(t, "unexpected prefix", "%q", l)
		default:
			plain++
		}
	}
	assert.Equal(t, 12, plain, "plain lines (rank 0):\n%s", strings.Join(out.lines(), "\n"))
	assert.Equal(t, 12, prefixed, "prefixed lines (rank 1):\n%s", strings.Join(out.lines(), "\n"))
	// Rank 0's stderr keeps its prefix, and its last line is completed.
	assert.Contains(t, errs.lines(), "[rank 0] last words without a newline", "stderr")
}

func TestLineWriterWithoutPrefixPassesBytesThrough(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	w := &lineWriter{mu: &mu, w: &out}
	long := strings.Repeat("y", maxPartialLine+10)
	in := "a\n" + long + "\nno newline at the end"
	for i := 0; i < len(in); i += 1000 {
		w.Write([]byte(in[i:min(i+1000, len(in))]))
	}
	w.flush()
	// Not assert.Equal: a diff of two strings this long says less than the sizes.
	assert.True(t, out.String() == in, "wrote %d bytes that differ from the %d given", out.Len(), len(in))
}
