#!/usr/bin/env python3
"""PyTorch's figures for BenchmarkOverlap (runtime/cuda), run on the GPU
machine in the same device call as ours:

    python3 -m torch.distributed.run --nproc_per_node=2 scripts/overlap_peer.py

The same two tensor-parallel patterns at the same three shapes, bf16, 2
ranks: all_gather + matmul (A_shard [M/2, K], B [K, N/2]) and matmul +
reduce_scatter (A [M, K/2], B [K/2, N]). Each timed as communication alone
(NCCL through torch.distributed), matmul alone, the unpipelined sequence
(NCCL then matmul, or matmul then NCCL), and PyTorch's fused op on
symmetric memory (torch.ops.symm_mem.fused_all_gather_matmul /
fused_matmul_reduce_scatter). Best of 5 steps after 2 warm-ups, each step
after a barrier and synchronised, as ours. Rank 0 prints
"peer overlap PATTERN SHAPE VARIANT MS".
"""
import os
import time

import torch
import torch.distributed as dist

SHAPES = [("comm-bound", 4096, 8192, 1024), ("balanced", 8192, 8192, 4096), ("compute-bound", 16384, 8192, 8192)]


def best_ms(step):
    for _ in range(2):
        step()
    best = float("inf")
    for _ in range(5):
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def symm_ops(group_name):
    """The fused ops and whatever enabling they need in this torch."""
    try:
        from torch.distributed._symmetric_memory import enable_symm_mem_for_group

        enable_symm_mem_for_group(group_name)
    except Exception:
        pass  # newer torch: on by default
    return torch.ops.symm_mem


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    group_name = dist.group.WORLD.group_name
    ops = None
    try:
        ops = symm_ops(group_name)
    except Exception as e:
        if rank == 0:
            print(f"peer overlap symm_mem unavailable: {type(e).__name__}: {str(e)[:120]}", flush=True)
    dt = torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(rank)
    rows = {}
    for shape, m, k, n in SHAPES:
        # all_gather + matmul
        a_shard = torch.randn(m // world, k, device="cuda", dtype=dt, generator=g)
        b = torch.randn(k, n // world, device="cuda", dtype=dt, generator=g) * 0.02
        gathered = torch.empty(m, k, device="cuda", dtype=dt)
        rows[("all_gather_matmul", shape, "comm")] = best_ms(lambda: dist.all_gather_into_tensor(gathered, a_shard))
        rows[("all_gather_matmul", shape, "matmul")] = best_ms(lambda: torch.mm(gathered, b))

        def ag_unpipelined():
            dist.all_gather_into_tensor(gathered, a_shard)
            return torch.mm(gathered, b)

        rows[("all_gather_matmul", shape, "unpipelined")] = best_ms(ag_unpipelined)
        if ops is not None:
            try:
                rows[("all_gather_matmul", shape, "torch-fused")] = best_ms(
                    lambda: ops.fused_all_gather_matmul(a_shard, [b], 0, group_name, return_A=False))
            except Exception as e:
                rows[("all_gather_matmul", shape, "torch-fused")] = f"error: {type(e).__name__}: {str(e)[:100]}"
        del a_shard, b, gathered
        # matmul + reduce_scatter
        a = torch.randn(m, k // world, device="cuda", dtype=dt, generator=g)
        b = torch.randn(k // world, n, device="cuda", dtype=dt, generator=g) * 0.02
        p = torch.mm(a, b)
        out = torch.empty(m // world, n, device="cuda", dtype=dt)
        rows[("matmul_reduce_scatter", shape, "comm")] = best_ms(lambda: dist.reduce_scatter_tensor(out, p))
        rows[("matmul_reduce_scatter", shape, "matmul")] = best_ms(lambda: torch.mm(a, b))

        def rs_unpipelined():
            dist.reduce_scatter_tensor(out, torch.mm(a, b))

        rows[("matmul_reduce_scatter", shape, "unpipelined")] = best_ms(rs_unpipelined)
        if ops is not None:
            try:
                rows[("matmul_reduce_scatter", shape, "torch-fused")] = best_ms(
                    lambda: ops.fused_matmul_reduce_scatter(a, b, "sum", 0, group_name))
            except Exception as e:
                rows[("matmul_reduce_scatter", shape, "torch-fused")] = f"error: {type(e).__name__}: {str(e)[:100]}"
        del a, b, p, out
        torch.cuda.empty_cache()
    if rank == 0:
        for (pattern, shape, variant), v in rows.items():
            print(f"peer overlap {pattern} {shape} {variant} {v if isinstance(v, str) else f'{v:.3f}'}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
