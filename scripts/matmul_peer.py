#!/usr/bin/env python3
"""torch.mm's figures for BenchmarkMatmulEnqueue (runtime/cuda), in the same
device call: the host's cost to enqueue one bf16 matmul (bursts of 20, the
best burst per call) and the GPU's time per matmul (events around 10 in a
row), at the same two shapes. Prints "peer matmul SHAPE enqueue US gpu US".
Then, for BenchmarkRunCost, torch.mm + torch.cuda.synchronize() at the
overlap benchmark's communication-bound shape (4096x4096x1024), 50 times:
"peer runcost matmul-4096x4096x1024 mm+sync min US median US".
"""
import time

import torch


def main():
    for m, k, n in [(64, 1024, 2048), (4096, 8192, 512)]:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            torch.mm(a, b)
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(30):
            t0 = time.perf_counter()
            for _ in range(20):
                torch.mm(a, b)
            best = min(best, time.perf_counter() - t0)
            torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(10):
            torch.mm(a, b)
        e1.record()
        e1.synchronize()
        print(f"peer matmul {m}x{k}x{n} enqueue {best / 20 * 1e6:.2f} gpu {e0.elapsed_time(e1) / 10 * 1e3:.2f}", flush=True)

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    walls = []
    for i in range(53):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.mm(a, b)
        torch.cuda.synchronize()
        if i >= 3:
            walls.append(time.perf_counter() - t0)
    walls.sort()
    print(f"peer runcost matmul-4096x4096x1024 mm+sync min {walls[0] * 1e6:.2f} median {walls[len(walls) // 2] * 1e6:.2f}", flush=True)


if __name__ == "__main__":
    main()
