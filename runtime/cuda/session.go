package cuda

import (
	"context"
	"errors"
	"unsafe"

	"github.com/hirlab/hir/runtime/store"
)

// What hirrun needs of a rank beyond runtime.Runtime: the job's store (to
// gather the ranks' results on rank 0) and a way out that does not wait
// for peers.

// Store is the job's rendezvous store, nil for a world of one. It stays
// open until Close or Abort.
func (rt *Runtime) Store() *store.Client { return rt.dev.Opts.Store }

// Abort frees everything the rank holds, locally, and leaves the store
// without meeting the other ranks: for a rank that failed, whose peers may
// be waiting for it (at a barrier, in a symmetric allocation) and must
// learn at once that it is gone rather than at their timeout. Close after
// Abort does nothing.
func (rt *Runtime) Abort() error {
	rt.closeOnce.Do(func() {
		rt.closeErr = rt.dev.close()
		if rt.abortStore != nil {
			rt.closeErr = errors.Join(rt.closeErr, rt.abortStore())
		}
	})
	return rt.closeErr
}

// Ordinal is the CUDA device ordinal this rank runs on.
func (d *Device) Ordinal() int { return d.Opts.Device }

// CanAccessPeer is cuDeviceCanAccessPeer: whether this rank's GPU can
// load from and store to memory of the GPU with the given ordinal.
func (d *Device) CanAccessPeer(ordinal int) (bool, error) {
	if ordinal == d.Opts.Device {
		return true, nil
	}
	peer, err := d.Drv.GetDevice(ordinal)
	if err != nil {
		return false, err
	}
	var ok int32
	err = d.Drv.DeviceCanAccessPeer.Call3(uintptr(unsafe.Pointer(&ok)), uintptr(d.Dev), uintptr(peer))
	return ok != 0, err
}

// ExchangeAll all-gathers value under key through the job's store
// (store.ExchangeAll, bounded by the rank's timeout); every rank calls it
// with the same key. The measuring tools (package cudabench) share their
// figures through it.
func (d *Device) ExchangeAll(key string, value []byte) ([][]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.Opts.Timeout)
	defer cancel()
	return store.ExchangeAll(ctx, d.Opts.Store, key, d.Opts.Rank, d.Opts.WorldSize, value, d.Opts.Timeout)
}
