//go:build linux

package fdpass

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/runtime/store"
)

// TestFDPassingBetweenProcesses re-executes this test binary with
// envChild set; TestMain then runs the child's side instead of the tests
// and exits with its status.
const envChild = "HIR_FDPASS_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		if err := fdSenderChild(); err != nil {
			fmt.Fprintf(os.Stderr, "rank %s: %v\n", os.Getenv("RANK"), err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func openFDCount() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// pairExchange opens two connected exchanges in this process.
func pairExchange(t *testing.T, token0, token1 string) (*Exchange, *Exchange) {
	t.Helper()
	a, err := Listen(0, 2, token0)
	require.NoError(t, err)
	b, err := Listen(1, 2, token1)
	if err != nil {
		a.Close()
	}
	require.NoError(t, err)
	paths := []string{a.path, b.path}
	require.NoError(t, a.Connect(paths, time.Second))
	require.NoError(t, b.Connect(paths, time.Second))
	return a, b
}

func tempFileWith(t *testing.T, content string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "payload"))
	require.NoError(t, err)
	_, err = f.WriteString(content)
	require.NoError(t, err)
	return f
}

func readFD(t *testing.T, fd int) string {
	t.Helper()
	f := os.NewFile(uintptr(fd), "received")
	defer f.Close()
	_, err := f.Seek(0, io.SeekStart)
	require.NoError(t, err)
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return string(b)
}

func TestFDPassingBetweenGoroutinesLeavesNothingOpen(t *testing.T) {
	base := openFDCount()
	a, b := pairExchange(t, "tok", "tok")
	var wg sync.WaitGroup
	for key := uint64(0); key < 8; key++ {
		f := tempFileWith(t, fmt.Sprintf("payload %d", key))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer f.Close()
			assert.NoError(t, a.Send(1, key, int(f.Fd())))
		}()
	}
	for key := uint64(7); ; key-- { // out of order: the mailbox sorts it out
		fd, err := b.Recv(0, key, 5*time.Second, "test")
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("payload %d", key), readFD(t, fd), "key %d", key)
		if key == 0 {
			break
		}
	}
	wg.Wait()
	// An fd nobody takes is closed by close.
	f := tempFileWith(t, "unclaimed")
	require.NoError(t, b.Send(0, 99, int(f.Fd())))
	f.Close()
	waitFor(t, func() bool { return a.Pending() == 1 })
	a.Close()
	b.Close()
	assert.Equal(t, base, openFDCount(), "descriptors open after close (actual) and before (expected)")
	for _, p := range []string{a.path, b.path} {
		_, err := os.Stat(p)
		assert.Error(t, err, "socket file %s left behind", p)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.FailNow(t, "condition never held")
}

func TestRecvFailsAtOnceWhenThePeerGoes(t *testing.T) {
	a, b := pairExchange(t, "tok", "tok")
	defer a.Close()
	done := make(chan error, 1)
	go func() {
		_, err := a.Recv(1, 0, time.Minute, "symmetric alloc #0")
		done <- err
	}()
	b.Close() // the peer "dies" before sending
	select {
	case err := <-done:
		require.ErrorContains(t, err, "rank 1's connection ended before it sent its handle", "recv")
		require.ErrorContains(t, err, "did its process die?", "recv")
	case <-time.After(30 * time.Second):
		require.FailNow(t, "recv still waiting 30s after the peer closed")
	}
}

func TestWrongTokenIsRejected(t *testing.T) {
	a, err := Listen(0, 2, "right")
	require.NoError(t, err)
	defer a.Close()
	b, err := Listen(1, 2, "wrong")
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.Connect([]string{a.path, b.path}, time.Second))
	waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.rejected == 1 })
	f := tempFileWith(t, "x")
	defer f.Close()
	b.Send(0, 1, int(f.Fd())) // may or may not fail; a must never take it
	_, err = a.Recv(1, 1, 200*time.Millisecond, "test")
	require.Error(t, err, "a descriptor from an impostor was accepted")
}

func TestSocketUIDCheck(t *testing.T) {
	a, b := pairExchange(t, "tok", "tok")
	defer a.Close()
	defer b.Close()
	uid, err := peerUID(b.out[0])
	require.NoError(t, err)
	require.Equal(t, os.Getuid(), uid, "peer uid")
}

// Across processes: a child (this binary re-executed) sends the parent a
// descriptor of a file only it opened.
func TestFDPassingBetweenProcesses(t *testing.T) {
	base := openFDCount()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const token = "tok"
	srv, err := store.Serve(ctx, "127.0.0.1:0", token)
	require.NoError(t, err)
	defer srv.Close()
	c, err := store.Dial(ctx, srv.Addr(), token, store.WithRank(0))
	require.NoError(t, err)
	defer c.Close()
	x, err := Listen(0, 2, token)
	require.NoError(t, err)
	cmd := childCommand(ctx, "RANK=1", "MASTER_ADDR="+srv.Addr(), "HIR_JOB_TOKEN="+token,
		"HIR_TEST_DIR="+t.TempDir())
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	paths, err := store.ExchangeAll(ctx, c, "paths", 0, 2, []byte(x.path), time.Minute)
	require.NoError(t, err)
	require.NoError(t, x.Connect([]string{string(paths[0]), string(paths[1])}, time.Second))
	fd, err := x.Recv(1, 42, 30*time.Second, "test")
	require.NoError(t, err, out.String())
	assert.Equal(t, "from the child", readFD(t, fd), "read through the passed descriptor")
	c.Barrier(ctx, "done", 0, 2, time.Minute)
	require.NoError(t, cmd.Wait(), "child:\n%s", out.String())
	x.Close()
	c.Close()
	srv.Close()
	assert.LessOrEqual(t, openFDCount(), base, "descriptors open after close vs before")
}

func childCommand(ctx context.Context, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(append(os.Environ(), envChild+"=fd-sender"), env...)
	return cmd
}

func fdSenderChild() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	token := os.Getenv("HIR_JOB_TOKEN")
	c, err := store.Dial(ctx, os.Getenv("MASTER_ADDR"), token, store.WithRank(1))
	if err != nil {
		return err
	}
	defer c.Close()
	x, err := Listen(1, 2, token)
	if err != nil {
		return err
	}
	defer x.Close()
	paths, err := store.ExchangeAll(ctx, c, "paths", 1, 2, []byte(x.path), time.Minute)
	if err != nil {
		return err
	}
	if err := x.Connect([]string{string(paths[0]), string(paths[1])}, time.Second); err != nil {
		return err
	}
	name := filepath.Join(os.Getenv("HIR_TEST_DIR"), "child-"+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(name, []byte("from the child"), 0o600); err != nil {
		return err
	}
	fd, err := syscall.Open(name, syscall.O_RDONLY, 0)
	if err != nil {
		return err
	}
	os.Remove(name) // only the descriptor lets anyone read it now
	if err := x.Send(0, 42, fd); err != nil {
		return err
	}
	syscall.Close(fd)
	return c.Barrier(ctx, "done", 1, 2, time.Minute)
}
