//go:build linux

package launch

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
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
	if err := Run(context.Background(), cfg); err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, strings.Join(errs.lines(), "\n"))
	}
	var plain, prefixed int
	for _, l := range out.lines() {
		switch {
		case strings.HasPrefix(l, "[rank 1] "):
			prefixed++
		case strings.HasPrefix(l, "[rank"):
			t.Errorf("unexpected prefix: %q", l)
		default:
			plain++
		}
	}
	if plain != 12 || prefixed != 12 {
		t.Errorf("%d plain lines (rank 0) and %d prefixed (rank 1), want 12 each:\n%s", plain, prefixed, strings.Join(out.lines(), "\n"))
	}
	// Rank 0's stderr keeps its prefix, and its last line is completed.
	found := false
	for _, l := range errs.lines() {
		found = found || l == "[rank 0] last words without a newline"
	}
	if !found {
		t.Errorf("stderr:\n%s", strings.Join(errs.lines(), "\n"))
	}
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
	if out.String() != in {
		t.Errorf("wrote %d bytes that differ from the %d given", out.Len(), len(in))
	}
}
