#!/usr/bin/env python3
"""Prints the docs' table for one `hirrun bench --graph --format json` file
(docs/COLLECTIVES.md, "Figures"): per size up to --max bytes and per
collective, ll's time, hir's best (which algorithm), NCCL's and NCCL ÷
hir's best, in the graph column; then each column's geomean and the sizes
where NCCL is faster (below 0.97), over every size in the file.

    python3 scripts/bench-tables.py docs/bench/h200-x4.json [--max 16MiB]
"""
import collections, json, math, sys

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
SLACK = 0.97


def size_name(n):
    for unit, s in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {s}"
    return f"{n} B"


def parse_size(s):
    for suf, m in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if s.endswith(suf):
            return int(s[: -len(suf)]) * m
    return int(s)


def main(argv):
    path, limit = argv[0], 16 << 20
    if "--max" in argv:
        limit = parse_size(argv[argv.index("--max") + 1])
    d = json.load(open(path))
    t = collections.defaultdict(dict)
    for r in d["records"]:
        t[(r["op"], r["size_bytes"])][r["algo"]] = r
    print(f"`{path}` ({d.get('device')} × {d.get('world')}, {d.get('created', '')[:10]}), graph column, µs per call (NCCL ÷ hir's best: above 1 hir is faster):")
    print()
    print("| size | " + " | ".join(f"{op}: ll / best (algo) / NCCL / ratio" for op in OPS) + " |")
    print("| --- " * (len(OPS) + 1) + "|")
    sizes = sorted({s for (_, s) in t if s <= limit})
    for s in sizes:
        cells = []
        for op in OPS:
            a = t.get((op, s), {})
            g = {k: v.get("graph_latency_us") for k, v in a.items() if v.get("graph_latency_us")}
            ours = {k: v for k, v in g.items() if k != "nccl"}
            if not ours or "nccl" not in g:
                cells.append("–")
                continue
            algo = min(ours, key=ours.get)
            ll = f"{g['ll']:.2f}" if "ll" in g else "–"
            cells.append(f"{ll} / {ours[algo]:.2f} ({algo}) / {g['nccl']:.2f} / {g['nccl'] / ours[algo]:.2f}")
        print(f"| {size_name(s)} | " + " | ".join(cells) + " |")
    print()
    for col, name in (("latency_us", "eager"), ("graph_latency_us", "graph")):
        ratios = []
        for (op, s), a in t.items():
            if "nccl" not in a or not a["nccl"].get(col):
                continue
            ours = [v[col] for k, v in a.items() if k != "nccl" and v.get(col)]
            if ours:
                ratios.append(a["nccl"][col] / min(ours))
        g = math.exp(sum(map(math.log, ratios)) / len(ratios))
        lose = sum(r < SLACK for r in ratios)
        print(f"{name}: geomean NCCL/hir {g:.2f}, NCCL faster (below {SLACK}) at {lose} of {len(ratios)} sizes")


if __name__ == "__main__":
    main(sys.argv[1:])
