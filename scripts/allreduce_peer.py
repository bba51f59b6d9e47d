#!/usr/bin/env python3
"""Peer figures for BenchmarkGraphAllReduce, run on the GPU machine with
    python3 -m torch.distributed.run --nproc_per_node=2 scripts/allreduce_peer.py

An 8 KiB bf16 all_reduce per call, as ours is timed: 100 calls back to
back, 20 times (eager), or 100 calls captured in one CUDA graph replayed 20
times; PyTorch's NCCL (torch.distributed) and its symmetric-memory one-shot
and two-shot kernels (torch.ops.symm_mem). Rank 0 prints
"peer <name> <microseconds per call>"; a path that fails prints its error.
"""
import os
import time

import torch
import torch.distributed as dist

CALLS, REPLAYS, ELEMS = 100, 20, 4096


def timed(fn):
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(REPLAYS):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / REPLAYS / CALLS * 1e6


def eager(op):
    def run():
        for _ in range(CALLS):
            op()
    run()
    return timed(run)


def graphed(op):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            op()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(CALLS):
            op()
    g.replay()
    return timed(g.replay)


def main():
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    group = dist.group.WORLD.group_name
    x = torch.ones(ELEMS, dtype=torch.bfloat16, device="cuda")
    results = {}

    def measure(name, op):
        for mode, f in (("eager", eager), ("graph", graphed)):
            try:
                results[f"torch-{name}-{mode}"] = f"{f(op):.2f}"
            except Exception as e:  # keep going: the other figures stand
                results[f"torch-{name}-{mode}"] = f"error: {type(e).__name__}: {str(e)[:120]}"

    measure("nccl", lambda: dist.all_reduce(x))
    try:
        import torch.distributed._symmetric_memory as symm_mem

        if hasattr(symm_mem, "enable_symm_mem_for_group"):
            symm_mem.enable_symm_mem_for_group(group)
        buf = symm_mem.empty(ELEMS, dtype=torch.bfloat16, device="cuda")
        symm_mem.rendezvous(buf, group)
        buf.fill_(1)
        measure("symm-mem-one-shot", lambda: torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group))
        measure("symm-mem-two-shot", lambda: torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group))
    except Exception as e:
        results["torch-symm-mem"] = f"error: {type(e).__name__}: {str(e)[:160]}"
    if rank == 0:
        for k, v in results.items():
            print(f"peer {k} {v}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
