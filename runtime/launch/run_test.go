//go:build linux

package launch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder collects the lines the ranks print and can wait for some.
type recorder struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	added chan struct{}
}

func newRecorder() *recorder { return &recorder{added: make(chan struct{}, 1)} }

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf.Write(p)
	select {
	case r.added <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Split(strings.TrimSuffix(r.buf.String(), "\n"), "\n")
}

// waitFor blocks until n lines end with suffix.
func (r *recorder) waitFor(t *testing.T, n int, suffix string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		count := 0
		for _, l := range r.lines() {
			if strings.HasSuffix(l, suffix) {
				count++
			}
		}
		if count >= n {
			return
		}
		select {
		case <-r.added:
		case <-timeout:
			require.FailNow(t, fmt.Sprintf("waited 60s for %d lines ending %q", n, suffix), "got:\n%s", strings.Join(r.lines(), "\n"))
		}
	}
}

func testConfig(mode string, nproc int, out, errs io.Writer) LaunchConfig {
	return LaunchConfig{
		NProc:       nproc,
		Argv:        []string{os.Args[0]},
		Env:         append(os.Environ(), childModeVar+"="+mode),
		Stdout:      out,
		Stderr:      errs,
		GracePeriod: 10 * time.Second,
		Logger:      quietLogger(),
	}
}

// gone reports whether pid has exited: no such process, or a zombie that
// nobody has reaped yet (the ranks' children are reparented).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return os.IsNotExist(err)
	}
	// The state follows the parenthesized command name.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

func requireGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for !gone(pid) {
			if time.Now().After(deadline) {
				require.FailNow(t, fmt.Sprintf("process %d is still running", pid))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func TestRunGivesRanksTheirEnvironment(t *testing.T) {
	out, errs := newRecorder(), newRecorder()
	cfg := testConfig("env", 3, out, errs)
	// Stale values from an enclosing job must not reach the ranks.
	cfg.Env = append(cfg.Env, "RANK=7", "NCCL_NVLS_ENABLE=1", "TORCHELASTIC_RUN_ID=old", "GROUP_RANK=4", "HIR_TEST_KEPT=yes")
	require.NoError(t, Run(context.Background(), cfg), "Run; stderr:\n%s", strings.Join(errs.lines(), "\n"))
	byRank := map[string][]string{}
	for _, l := range out.lines() {
		rank, rest, ok := strings.Cut(l, "] ")
		require.True(t, ok && strings.HasPrefix(rank, "[rank "), "line without a rank prefix: %q", l)
		byRank[rank+"]"] = append(byRank[rank+"]"], rest)
	}
	for r := range 3 {
		got := byRank[fmt.Sprintf("[rank %d]", r)]
		want := []string{
			fmt.Sprintf("RANK=%d", r), "WORLD_SIZE=3", fmt.Sprintf("LOCAL_RANK=%d", r), "LOCAL_WORLD_SIZE=3",
			"MASTER_ADDR=127.0.0.1", "NCCL_NVLS_ENABLE=0", "HIR_LAUNCHED=1",
			"TORCHELASTIC_RUN_ID=(unset)", "GROUP_RANK=(unset)", "HIR_TEST_KEPT=yes",
			"serve=false source=hirrun",
			"exchanged [r0 r1 r2]",
		}
		assert.Empty(t, cmp.Diff(want, got), "rank %d printed (-want +got)", r)
	}
	// A last line without a newline still comes out whole and prefixed.
	for r := range 3 {
		assert.Contains(t, errs.lines(), fmt.Sprintf("[rank %d] last words without a newline", r), "stderr")
	}
}

func TestRunStopsTheJobWhenARankFails(t *testing.T) {
	out, errs := newRecorder(), newRecorder()
	err := Run(context.Background(), testConfig("fail", 3, out, errs))
	var re *RankError
	require.ErrorAs(t, err, &re, "Run; stderr:\n%s", strings.Join(errs.lines(), "\n"))
	assert.EqualError(t, err, "launch: rank 1 exited with status 3; stopped ranks 0, 2")
	assert.Equal(t, 3, re.Status(), "Status()")
	assert.Contains(t, errs.lines(), "[rank 1] rank 1 gives up", "the failing rank's stderr is missing")
	// The ranks, and the children they started, are all gone.
	pids := pidsIn(out.lines())
	require.Len(t, pids, 6, "want 3 ranks and 3 grandchildren, in:\n%s", strings.Join(out.lines(), "\n"))
	requireGone(t, pids)
}

func TestRunNamesTheSignalThatKilledARank(t *testing.T) {
	out, errs := newRecorder(), newRecorder()
	err := Run(context.Background(), testConfig("selfkill", 2, out, errs))
	var re *RankError
	require.ErrorAs(t, err, &re, "Run; stderr:\n%s", strings.Join(errs.lines(), "\n"))
	require.EqualError(t, err, "launch: rank 1 was killed by signal killed; stopped rank 0", "Run; stderr:\n%s", strings.Join(errs.lines(), "\n"))
	assert.Equal(t, 128+int(syscall.SIGKILL), re.Status(), "Status()")
	requireGone(t, pidsIn(out.lines()))
}

func TestRunCancelStopsAllRanks(t *testing.T) {
	for _, mode := range []string{"block", "ignore-term"} {
		t.Run(mode, func(t *testing.T) {
			out, errs := newRecorder(), newRecorder()
			cfg := testConfig(mode, 2, out, errs)
			if mode == "ignore-term" {
				cfg.GracePeriod = 100 * time.Millisecond // then SIGKILL
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			result := make(chan error, 1)
			go func() { result <- Run(ctx, cfg) }()
			out.waitFor(t, 2, "] ready")
			cancel()
			err := <-result
			assert.ErrorIs(t, err, context.Canceled, "Run after cancel")
			assert.EqualError(t, err, "launch: interrupted; stopped ranks 0, 1: context canceled", "Run after cancel")
			pids := pidsIn(out.lines())
			require.Len(t, pids, 2, "found pids")
			requireGone(t, pids)
		})
	}
}

// A launcher killed with SIGKILL cannot stop its ranks: the kernel does
// (parent-death signal), so none is left orphaned.
func TestRanksDieWithTheLauncher(t *testing.T) {
	launcher := exec.Command(os.Args[0])
	launcher.Env = append(os.Environ(), childModeVar+"=launcher")
	stdout, err := launcher.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, launcher.Start())
	var lines []string
	sc := bufio.NewScanner(stdout)
	for len(pidsIn(lines)) < 2 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	pids := pidsIn(lines)
	if len(pids) != 2 {
		launcher.Process.Kill()
		launcher.Wait()
		require.FailNow(t, "the launcher's ranks did not print 2 pids", "printed %q", lines)
	}
	launcher.Process.Kill()
	launcher.Wait()
	requireGone(t, pids)
}

func TestRunRejectsBadConfigs(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		cfg  LaunchConfig
		want string
	}{
		{LaunchConfig{NProc: 0, Argv: []string{"x"}}, "launch: the number of ranks must be between 1 and 65536, not 0"},
		{LaunchConfig{NProc: 2}, "launch: no program to run"},
		{LaunchConfig{NProc: 2, Argv: []string{"/nonexistent/hir-test-program"}, Logger: quietLogger()},
			`launch: starting rank 0: fork/exec /nonexistent/hir-test-program: no such file or directory`},
	} {
		assert.EqualError(t, Run(ctx, c.cfg), c.want, "Run(%+v)", c.cfg)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, Run(canceled, LaunchConfig{NProc: 1, Argv: []string{"true"}}), context.Canceled, "Run with a canceled context")
}

func TestLineWriter(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	w := &lineWriter{mu: &mu, w: &out, prefix: "[rank 3] "}
	for _, chunk := range []string{"hel", "lo\nwor", "ld\n\nlast"} {
		w.Write([]byte(chunk))
	}
	w.flush()
	want := "[rank 3] hello\n[rank 3] world\n[rank 3] \n[rank 3] last\n"
	assert.Equal(t, want, out.String())

	// An endless line comes out in pieces rather than all held in memory.
	out.Reset()
	w.Write(bytes.Repeat([]byte("x"), maxPartialLine+10))
	assert.Equal(t, 1, strings.Count(out.String(), "[rank 3] "), "a %d-byte partial line: prefixed pieces written", maxPartialLine+10)
	assert.Equal(t, 0, len(w.buf), "a %d-byte partial line: bytes held", maxPartialLine+10)
}
