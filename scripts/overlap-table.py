#!/usr/bin/env python3
"""Prints docs/OVERLAP.md's table from one overlap file (the `overlap ...`
lines BenchmarkOverlap prints and the `peer overlap ...` lines of
scripts/overlap_peer.py from the same device call), in ms:

    python3 scripts/overlap-table.py docs/bench/overlap-h200-x2.txt
"""
import collections, sys

rows = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    f = line.split()
    if not f:
        continue
    who = "torch" if f[0] == "peer" else "hir"
    if who == "torch":
        f = f[1:]
    if len(f) != 5 or f[0] != "overlap":
        continue
    _, pattern, shape, variant, ms = f
    rows[(pattern, shape)][(who, variant)] = float(ms)

# Every variant but these is a pipelined decomposition (eager, or -graph:
# replayed from a CUDA graph), as ../shared/tools/overlapgoals.py reads them.
alone = ("comm", "matmul", "unpipelined")
print("| pattern, shape | hir comm | hir matmul | hir unpipelined | hir best pipelined | torch comm | torch matmul | torch unpipelined | torch fused |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for (pattern, shape), r in rows.items():
    best = min(((ms, v) for (who, v), ms in r.items() if who == "hir" and v not in alone), default=None)
    cell = lambda k: f"{r[k]:.3f}" if k in r else "–"
    b = f"{best[0]:.3f} ({best[1]})" if best else "–"
    print(f"| {pattern.replace('_', ' ')} {shape} | {cell(('hir', 'comm'))} | {cell(('hir', 'matmul'))} | {cell(('hir', 'unpipelined'))} | {b} | "
          f"{cell(('torch', 'comm'))} | {cell(('torch', 'matmul'))} | {cell(('torch', 'unpipelined'))} | {cell(('torch', 'torch-fused'))} |")
