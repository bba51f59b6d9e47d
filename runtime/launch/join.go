package launch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hirlab/hir/runtime/store"
)

// Rendezvous is a rank's connection to its job's store, and the store
// itself on the rank that serves it.
type Rendezvous struct {
	Env     Env
	Client  *store.Client
	server  *store.Server // nil unless this rank serves
	timeout time.Duration
}

// closeBarrier is the barrier Close meets at; its name is reserved.
const closeBarrier = "hir/launch/close"

// Join connects this rank to the job's store, serving it first when
// env.ServeStore says this rank must. timeout bounds the connection attempt
// (the serving rank may start later than this one) and is the client's
// default wait.
func Join(ctx context.Context, env Env, timeout time.Duration, opts ...store.ServeOption) (*Rendezvous, error) {
	r := &Rendezvous{Env: env, timeout: timeout}
	if env.ServeStore {
		// ctx bounds joining, not the store's life (Serve closes the
		// server when its ctx ends): the store lasts until Close or Abort.
		srv, err := store.Serve(context.WithoutCancel(ctx), env.StoreAddr, env.Token, opts...)
		if err != nil {
			return nil, fmt.Errorf("launch: rank %d cannot serve the job's store at %s: %w", env.Rank, env.StoreAddr, err)
		}
		r.server = srv
	}
	c, err := store.Dial(ctx, env.StoreAddr, env.Token, store.WithRank(env.Rank), store.WithTimeout(timeout))
	if err != nil {
		if r.server != nil {
			r.server.Close()
		}
		return nil, fmt.Errorf("launch: rank %d: %w", env.Rank, err)
	}
	r.Client = c
	return r, nil
}

// Close leaves the store. It is collective: every rank calls it, and it
// first waits (up to the timeout) for all ranks to get there, so the
// serving rank does not take the store away from ranks still using it.
func (r *Rendezvous) Close(ctx context.Context) error {
	err := r.Client.Barrier(ctx, closeBarrier, r.Env.Rank, r.Env.WorldSize, r.timeout)
	if err != nil {
		err = fmt.Errorf("launch: rank %d leaving the store: %w", r.Env.Rank, err)
	}
	barrierOK := err == nil
	err = errors.Join(err, r.Client.Close())
	if r.server != nil {
		if barrierOK {
			// Let the other ranks read their answer and hang up first.
			wctx, cancel := context.WithTimeout(ctx, r.timeout)
			r.server.WaitConns(wctx, 0)
			cancel()
		}
		err = errors.Join(err, r.server.Close())
	}
	return err
}

// Abort leaves the store at once, without meeting the other ranks: for a
// rank that failed and must not wait for peers that may be stuck waiting
// for it. On the serving rank it takes the store away, so the others fail
// at once (store.ErrClosed) rather than at their timeout.
func (r *Rendezvous) Abort() error {
	err := r.Client.Close()
	if r.server != nil {
		err = errors.Join(err, r.server.Close())
	}
	return err
}
