package launch

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/runtime/store"
)

func torchEnvs(t *testing.T, world int) []Env {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	envs := make([]Env, world)
	for r := range envs {
		env, ok, err := fromLookup(lookupIn(map[string]string{
			"RANK": strconv.Itoa(r), "WORLD_SIZE": strconv.Itoa(world),
			"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": strconv.Itoa(port - 1),
		}))
		require.NoError(t, err, "fromLookup")
		require.True(t, ok, "fromLookup")
		envs[r] = env
	}
	return envs
}

// The ctx given to Join bounds joining only: the store rank 0 serves
// outlives it (a caller's usual `defer cancel()` must not take it away).
func TestJoinContextBoundsJoiningOnly(t *testing.T) {
	envs := torchEnvs(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	rv0, err := Join(ctx, envs[0], 10*time.Second, store.WithLogger(quietLogger()))
	require.NoError(t, err)
	cancel()
	bg := context.Background()
	rv1, err := Join(bg, envs[1], 10*time.Second)
	require.NoError(t, err, "joining after rank 0's join ctx ended")
	require.NoError(t, rv1.Client.Set(bg, "k", []byte("v")), "the store went away with Join's ctx")
	done := make(chan error, 1)
	go func() { done <- rv1.Close(bg) }()
	assert.NoError(t, rv0.Close(bg))
	assert.NoError(t, <-done)
}

// A serving rank that aborts takes the store with it: the others fail at
// once, not at their timeout.
func TestAbortOfTheServingRankFailsTheOthersAtOnce(t *testing.T) {
	envs := torchEnvs(t, 2)
	bg := context.Background()
	rv0, err := Join(bg, envs[0], time.Minute, store.WithLogger(quietLogger()))
	require.NoError(t, err)
	rv1, err := Join(bg, envs[1], time.Minute)
	require.NoError(t, err)
	defer rv1.Client.Close()
	waited := make(chan error, 1)
	go func() { waited <- rv1.Client.Barrier(bg, "b", 1, 2, time.Minute) }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	require.NoError(t, rv0.Abort())
	select {
	case err := <-waited:
		// Either the server names the rank that left, or the connection
		// ends with it: both at once.
		var be *store.BarrierError
		closed := errors.Is(err, store.ErrClosed)
		named := errors.As(err, &be) && strings.Contains(err.Error(), "rank 0 disconnected")
		assert.True(t, closed || named, "barrier: %v, want store.ErrClosed or rank 0 named as gone", err)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the barrier still waits 10s after the store's rank aborted")
	}
	t.Logf("rank 1 learned in %v", time.Since(start))
}
