package launch

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hirlab/hir/runtime/store"
)

// DefaultGracePeriod is how long Run waits after SIGTERM before it kills
// ranks that are still running.
const DefaultGracePeriod = 5 * time.Second

// LaunchConfig says what Run starts.
type LaunchConfig struct {
	// NProc is the number of ranks (the world size), at least 1.
	NProc int
	// Argv is the program and its arguments, the same for every rank;
	// usually hirrun itself (os.Executable()) with the user's arguments
	// minus --nproc.
	Argv []string
	// Env is the environment every rank starts from; nil means the
	// launcher's own. Run replaces the launcher variables in it.
	Env []string
	// Dir is the ranks' working directory; empty means the launcher's.
	Dir string
	// Stdout and Stderr receive the ranks' output, each line prefixed with
	// Prefix's answer; nil means os.Stdout and os.Stderr.
	Stdout, Stderr io.Writer
	// Prefix says what starts each line rank writes on stream ("stdout" or
	// "stderr"); nil means "[rank N] " on both. An empty prefix passes the
	// rank's lines through unchanged (hirrun gives rank 0's stdout, which
	// carries the job's results, no prefix).
	Prefix func(rank int, stream string) string
	// GracePeriod is the time between SIGTERM and SIGKILL when ranks are
	// stopped; zero means DefaultGracePeriod.
	GracePeriod time.Duration
	// Logger receives the store server's warnings; nil means slog.Default().
	Logger *slog.Logger
}

// RankError is Run's error when a rank fails: it names the rank and how it
// ended.
type RankError struct {
	Rank     int
	ExitCode int    // the rank's exit status, or 128 + the signal's number
	Signal   string // the signal that ended it, if one did
	Stopped  []int  // the ranks still running, which Run then stopped
}

func (e *RankError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "launch: rank %d ", e.Rank)
	if e.Signal != "" {
		fmt.Fprintf(&b, "was killed by signal %s", e.Signal)
	} else {
		fmt.Fprintf(&b, "exited with status %d", e.ExitCode)
	}
	if len(e.Stopped) > 0 {
		fmt.Fprintf(&b, "; stopped %s", rankList(e.Stopped))
	}
	return b.String()
}

// Status is the exit status a launcher should end with: the rank's (128
// plus the signal's number for a signal, as shells report it), never 0.
func (e *RankError) Status() int {
	if e.ExitCode > 0 {
		return e.ExitCode
	}
	return 1
}

// DefaultPrefix starts every line a rank writes: "[rank N] ".
func DefaultPrefix(rank int, stream string) string { return fmt.Sprintf("[rank %d] ", rank) }

// Run starts cfg.NProc ranks of cfg.Argv on this machine and waits for them.
// It serves the job's store on loopback (on a free port, with a fresh random
// token) and gives each rank torchrun's variables (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT: the
// store), HIR_STORE_TOKEN, HIR_LAUNCHED=1 and NCCL_NVLS_ENABLE=0.
//
// When a rank exits non-zero, or ctx ends (Ctrl-C), Run sends SIGTERM to
// every rank still running, SIGKILL after the grace period, and returns a
// *RankError naming the rank, or an error wrapping ctx's. Each rank runs in
// its own process group, which Run kills when the rank is done, and on
// Linux dies with the launcher, so nothing Run starts outlives it.
func Run(ctx context.Context, cfg LaunchConfig) error {
	if cfg.NProc < 1 || cfg.NProc > store.MaxWorld {
		return fmt.Errorf("launch: the number of ranks must be between 1 and %d, not %d", store.MaxWorld, cfg.NProc)
	}
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return errors.New("launch: no program to run")
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.GracePeriod <= 0 {
		cfg.GracePeriod = DefaultGracePeriod
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("launch: not started: %w", err)
	}

	token, err := newToken()
	if err != nil {
		return err
	}
	srv, err := store.Serve(context.Background(), "127.0.0.1:0", token, store.WithLogger(cfg.Logger))
	if err != nil {
		return fmt.Errorf("launch: cannot serve the job's store: %w", err)
	}
	defer srv.Close()

	base := cfg.Env
	if base == nil {
		base = os.Environ()
	}
	base = withoutLauncherVars(base)

	var outMu sync.Mutex // one line at a time, across all ranks and streams
	ranks := make([]*rankProc, cfg.NProc)
	for r := range ranks {
		cmd := exec.Command(cfg.Argv[0], cfg.Argv[1:]...)
		cmd.Dir = cfg.Dir
		cmd.Env = append(append([]string(nil), base...),
			EnvRank+"="+strconv.Itoa(r),
			EnvWorldSize+"="+strconv.Itoa(cfg.NProc),
			EnvLocalRank+"="+strconv.Itoa(r),
			EnvLocalWorldSize+"="+strconv.Itoa(cfg.NProc),
			EnvMasterAddr+"=127.0.0.1",
			EnvMasterPort+"="+strconv.Itoa(srv.Port()),
			EnvStoreToken+"="+token,
			EnvLaunched+"=1",
			EnvNVLS+"=0",
		)
		prefix := cfg.Prefix
		if prefix == nil {
			prefix = DefaultPrefix
		}
		p := &rankProc{
			rank:   r,
			cmd:    cmd,
			stdout: &lineWriter{mu: &outMu, w: cfg.Stdout, prefix: prefix(r, "stdout")},
			stderr: &lineWriter{mu: &outMu, w: cfg.Stderr, prefix: prefix(r, "stderr")},
		}
		cmd.SysProcAttr = sysProcAttr()
		ranks[r] = p
	}
	return supervise(ctx, ranks, cfg.GracePeriod)
}

type rankProc struct {
	rank           int
	cmd            *exec.Cmd
	stdout, stderr *lineWriter
	running        bool

	pipes   []*os.File // our ends of the rank's stdout and stderr
	copying sync.WaitGroup
}

// start starts the rank with its output on pipes of our own, rather than
// exec's, so that its Wait returns when the rank exits, not when the last
// process holding its output does.
func (p *rankProc) start() error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	p.cmd.Stdout, p.cmd.Stderr = outW, errW
	err = p.cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return err
	}
	p.pipes = []*os.File{outR, errR}
	p.copying.Go(func() { io.Copy(p.stdout, outR) })
	p.copying.Go(func() { io.Copy(p.stderr, errR) })
	return nil
}

// wait waits for the rank to exit, kills what it left in its process group,
// and drains its output: for at most grace, in case something it started
// escaped the group and still holds the pipes.
func (p *rankProc) wait(grace time.Duration) error {
	err := p.cmd.Wait()
	kill(p.cmd.Process)
	drained := make(chan struct{})
	go func() { p.copying.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(grace):
	}
	for _, f := range p.pipes {
		f.Close() // ends a copy still blocked in Read
	}
	<-drained
	p.stdout.flush()
	p.stderr.flush()
	return err
}

type rankExit struct {
	rank int
	err  error
}

// supervise starts the ranks and waits for them all, stopping the rest when
// one fails or ctx ends.
func supervise(ctx context.Context, ranks []*rankProc, grace time.Duration) error {
	exits := make(chan rankExit, len(ranks))
	startErr := make(chan error, 1)
	released := make(chan struct{})
	// Start ranks from a goroutine locked to its OS thread, and keep the
	// thread until every rank has been reaped: the parent-death signal is
	// tied to the starting thread, and Go may end idle threads.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for _, p := range ranks {
			if err := p.start(); err != nil {
				startErr <- fmt.Errorf("launch: starting rank %d: %w", p.rank, err)
				break
			}
			p.running = true
			go func() { exits <- rankExit{p.rank, p.wait(grace)} }()
		}
		close(startErr)
		<-released
	}()
	defer close(released)

	running := 0
	err := <-startErr
	for _, p := range ranks {
		if p.running {
			running++
		}
	}

	var failure error
	var stopping bool
	var killAfter <-chan time.Time
	done := ctx.Done()
	stop := func() {
		stopping = true
		done = nil
		for _, p := range ranks {
			if p.running {
				terminate(p.cmd.Process)
			}
		}
		killAfter = time.After(grace)
	}
	stillRunning := func() []int {
		var out []int
		for _, p := range ranks {
			if p.running {
				out = append(out, p.rank)
			}
		}
		return out
	}
	if err != nil {
		failure = err
		stop()
	}
	for running > 0 {
		select {
		case ex := <-exits:
			p := ranks[ex.rank]
			p.running = false
			running--
			if ex.err != nil && !stopping {
				failure = exitError(ex, stillRunning())
				stop()
			}
		case <-done:
			stopped := stillRunning()
			failure = fmt.Errorf("launch: interrupted; stopped %s: %w", rankList(stopped), context.Cause(ctx))
			stop()
		case <-killAfter:
			for _, p := range ranks {
				if p.running {
					kill(p.cmd.Process)
				}
			}
		}
	}
	return failure
}

func exitError(ex rankExit, stopped []int) error {
	re := &RankError{Rank: ex.rank, ExitCode: -1, Stopped: stopped}
	var ee *exec.ExitError
	if !errors.As(ex.err, &ee) {
		// Wait itself failed: report it as is.
		return fmt.Errorf("launch: rank %d: %w", ex.rank, ex.err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		re.Signal = ws.Signal().String()
		re.ExitCode = 128 + int(ws.Signal())
		return re
	}
	re.ExitCode = ee.ExitCode()
	return re
}

// launcherVars are replaced in the ranks' environment; a stale value from
// an enclosing job (torchrun's, another hirrun's) must not leak through.
var launcherVars = map[string]bool{
	EnvRank: true, EnvWorldSize: true, EnvLocalRank: true, EnvLocalWorldSize: true,
	EnvMasterAddr: true, EnvMasterPort: true, EnvStoreToken: true, EnvStoreAddr: true,
	EnvLaunched: true, EnvNVLS: true,
	"GROUP_RANK": true, "GROUP_WORLD_SIZE": true, "ROLE_RANK": true, "ROLE_WORLD_SIZE": true, "ROLE_NAME": true,
}

func withoutLauncherVars(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if launcherVars[name] || strings.HasPrefix(name, "TORCHELASTIC_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("launch: making a job token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func rankList(ranks []int) string {
	if len(ranks) == 0 {
		return "no ranks"
	}
	parts := make([]string, len(ranks))
	for i, r := range ranks {
		parts[i] = strconv.Itoa(r)
	}
	if len(ranks) == 1 {
		return "rank " + parts[0]
	}
	return "ranks " + strings.Join(parts, ", ")
}

// maxPartialLine is how much of a line without its newline a lineWriter
// holds back before it writes it anyway.
const maxPartialLine = 64 << 10

// lineWriter prefixes every line a rank writes, and writes whole lines only,
// so lines of different ranks never mix.
type lineWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	var out []byte
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		out = append(append(out, l.prefix...), l.buf[:i+1]...)
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) >= maxPartialLine {
		out = append(append(out, l.prefix...), l.buf...)
		if l.prefix != "" {
			// The rest of the line will come with a prefix of its own.
			out = append(out, '\n')
		}
		l.buf = nil
	}
	if len(l.buf) == 0 {
		l.buf = nil // let go of a large backing array
	}
	if len(out) > 0 {
		l.mu.Lock()
		_, err := l.w.Write(out)
		l.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// flush writes a last line that had no newline (completing it, unless the
// rank's lines pass through unprefixed).
func (l *lineWriter) flush() {
	if len(l.buf) == 0 {
		return
	}
	out := append([]byte(l.prefix), l.buf...)
	if l.prefix != "" {
		out = append(out, '\n')
	}
	l.buf = nil
	l.mu.Lock()
	l.w.Write(out)
	l.mu.Unlock()
}
