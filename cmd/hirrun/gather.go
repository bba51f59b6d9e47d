package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/runtime"
	"github.com/hirlab/hir/runtime/store"
)

// Gathering a multi-process job's results on rank 0, through the job's
// store. Each rank publishes a header (its output summaries, its counters,
// and the dtype, shape and chunk count of each shard --output or --expect
// needs), after first storing those shards' bytes under keys of its own in
// chunks of at most gatherChunk bytes (the store takes values up to 64
// MiB). The headers
// are all-gathered with store.ExchangeAll, whose barriers fail at once,
// naming the rank, when a rank's process has died. Rank 0 then reads every
// shard, deletes the keys, and joins the shards as the in-process backends
// do (evaluator.Result.Logical). Replicated outputs are rank 0's own, so
// only sharded ones travel.

// gatherChunk is the largest value one shard chunk takes in the store.
var gatherChunk = 32 << 20

const gatherPrefix = "hirrun/result"

type rankHeader struct {
	Rank      int
	Summaries []string
	Stats     evaluator.Stats
	Startup   startup
	Shards    []shardHeader
}

type shardHeader struct {
	Name   string
	DType  string
	Shape  []int64
	Bytes  int
	Chunks int
}

func chunkKey(rank int, name string, i int) string {
	return fmt.Sprintf("%s/%d/%s/%d", gatherPrefix, rank, name, i)
}

// gatherResults collects every rank's report on rank 0. res holds this
// process's one rank; save names the outputs to be saved whole. On rank 0
// it returns every rank's report in rank order and a Result holding, for
// each rank, the outputs in save (for Result.Logical); elsewhere nil, nil.
// With no store (a world of one) it returns this process's own.
func gatherResults(c *store.Client, prog *ir.Program, res *evaluator.Result, save []string, world int, timeout time.Duration, st startup) ([]rankReport, *evaluator.Result, error) {
	own := reportsOf(prog, res, st)
	if c == nil || world == 1 {
		return own, res, nil
	}
	if len(res.Ranks) != 1 {
		return nil, nil, fmt.Errorf("gathering results: this process hosts %d ranks, want 1", len(res.Ranks))
	}
	if timeout <= 0 {
		timeout = runtime.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rr := res.Ranks[0]
	rank := rr.Rank
	hdr := rankHeader{Rank: rank, Summaries: own[0].Summaries, Stats: own[0].Stats, Startup: st}
	var mine []string // our chunk keys, removed if the exchange fails
	if rank != 0 {
		for _, name := range save {
			if v := outputValue(prog, name); v == nil || v.Tensor() == nil || v.Tensor().ShardAxis() < 0 {
				continue // replicated: rank 0's copy is saved
			}
			a := rr.Outputs[name]
			if a == nil {
				return nil, nil, fmt.Errorf("rank %d: output %%%s was not produced", rank, name)
			}
			sh := shardHeader{Name: name, DType: a.DType.String(), Shape: a.Shape, Bytes: len(a.Data)}
			for off := 0; off < len(a.Data); off += gatherChunk {
				key := chunkKey(rank, name, sh.Chunks)
				if err := c.Set(ctx, key, a.Data[off:min(off+gatherChunk, len(a.Data))]); err != nil {
					deleteKeys(c, mine)
					return nil, nil, fmt.Errorf("rank %d: sending output %%%s to rank 0: %w", rank, name, err)
				}
				mine = append(mine, key)
				sh.Chunks++
			}
			hdr.Shards = append(hdr.Shards, sh)
		}
	}
	raw, err := json.Marshal(hdr)
	if err != nil {
		return nil, nil, err
	}
	all, err := store.ExchangeAll(ctx, c, gatherPrefix, rank, world, raw, timeout)
	if err != nil {
		deleteKeys(c, mine)
		return nil, nil, fmt.Errorf("rank %d: gathering the results on rank 0: %w", rank, err)
	}
	if rank != 0 {
		return nil, nil, nil
	}

	reports := make([]rankReport, world)
	whole := &evaluator.Result{Ranks: make([]evaluator.RankResult, world)}
	for r, b := range all {
		var h rankHeader
		if err := json.Unmarshal(b, &h); err != nil || h.Rank != r {
			return nil, nil, fmt.Errorf("rank %d's results arrived malformed (%v)", r, err)
		}
		reports[r] = rankReport{Rank: r, Summaries: h.Summaries, Stats: h.Stats, Startup: h.Startup}
		if r == 0 {
			whole.Ranks[0] = rr
			continue
		}
		outs := map[string]*host.Array{}
		for _, sh := range h.Shards {
			a, err := readShard(ctx, c, r, sh, timeout)
			if err != nil {
				return nil, nil, err
			}
			outs[sh.Name] = a
		}
		whole.Ranks[r] = evaluator.RankResult{Rank: r, Outputs: outs, Stats: h.Stats}
	}
	return reports, whole, nil
}

func outputValue(prog *ir.Program, name string) *ir.Value {
	for _, out := range prog.Outputs {
		if out.Name == name {
			return out
		}
	}
	return nil
}

// readShard reads rank r's shard of an output from the store and deletes
// its keys.
func readShard(ctx context.Context, c *store.Client, r int, sh shardHeader, timeout time.Duration) (*host.Array, error) {
	dt, ok := ir.ParseDType(sh.DType)
	if !ok {
		return nil, fmt.Errorf("rank %d's shard of %%%s has dtype %q", r, sh.Name, sh.DType)
	}
	n := int64(dt.Size())
	for _, e := range sh.Shape {
		if e < 0 {
			return nil, fmt.Errorf("rank %d's shard of %%%s has shape %v", r, sh.Name, sh.Shape)
		}
		n *= e
	}
	if n != int64(sh.Bytes) {
		return nil, fmt.Errorf("rank %d's shard of %%%s is %d bytes for %s%v", r, sh.Name, sh.Bytes, dt, sh.Shape)
	}
	keys := make([]string, sh.Chunks)
	for i := range keys {
		keys[i] = chunkKey(r, sh.Name, i)
	}
	data := make([]byte, 0, sh.Bytes)
	if len(keys) > 0 {
		vals, err := c.GetAll(ctx, keys, timeout)
		if err != nil {
			return nil, fmt.Errorf("reading rank %d's shard of %%%s: %w", r, sh.Name, err)
		}
		for _, v := range vals {
			data = append(data, v...)
		}
		deleteKeys(c, keys)
	}
	if len(data) != sh.Bytes {
		return nil, fmt.Errorf("rank %d's shard of %%%s: %d bytes arrived of %d", r, sh.Name, len(data), sh.Bytes)
	}
	return &host.Array{DType: dt, Shape: sh.Shape, Data: data}, nil
}

// deleteKeys removes keys, best effort: they are ours, and a failure here
// leaves only garbage in a store that goes away with the job.
func deleteKeys(c *store.Client, keys []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, k := range keys {
		c.Delete(ctx, k)
	}
}
