package launch

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/runtime/store"
)

// Ranks started by torchrun: rank 0 serves the store on MASTER_PORT+1, the
// others connect to it, and Close lets every rank finish before the store
// goes away.
func TestJoinUnderTorchrun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	storePort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	const world = 3
	for round := range 3 {
		results := make([][][]byte, world)
		errs := make([]error, world)
		var wg sync.WaitGroup
		for r := range world {
			wg.Go(func() {
				env, ok, err := fromLookup(lookupIn(map[string]string{
					"RANK": strconv.Itoa(r), "WORLD_SIZE": strconv.Itoa(world), "LOCAL_RANK": strconv.Itoa(r),
					"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": strconv.Itoa(storePort - 1),
					"TORCHELASTIC_RUN_ID": fmt.Sprint("run", round),
				}))
				if err != nil || !ok {
					errs[r] = fmt.Errorf("fromLookup: %v %v", ok, err)
					return
				}
				ctx := context.Background()
				rv, err := Join(ctx, env, 30*time.Second, store.WithLogger(quietLogger()))
				if err != nil {
					errs[r] = err
					return
				}
				results[r], errs[r] = store.ExchangeAll(ctx, rv.Client, "x", r, world, []byte{byte(r)}, 30*time.Second)
				if err := rv.Close(ctx); err != nil && errs[r] == nil {
					errs[r] = err
				}
			})
		}
		wg.Wait()
		for r := range world {
			require.NoError(t, errs[r], "round %d rank %d", round, r)
			assert.Empty(t, cmp.Diff([][]byte{{0}, {1}, {2}}, results[r]), "round %d rank %d (-want +got)", round, r)
		}
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
