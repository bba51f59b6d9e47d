#!/usr/bin/env bash
# Runs ON the GPU machine (binaries from scripts/device-test): ll's
# protocols side by side, `hirrun bench --graph` 64 KiB-4 MiB on 4 and on
# 2 GPUs with LL128 off (HIR_COLL_LL128_MIN=-1), at the default limits
# ("default") and up to what its staging holds ("big": LL128 up to 1.875
# MiB a piece), then one table per world and setting: the ll algorithm's
# time eager and in a graph (off/on), the fastest other algorithm in the
# graph run, NCCL in a graph. docs/bench/h200-ll128-ab.txt is its output.
set -u
cd "$(dirname "$0")/.."
bin=.device-bin
out=${OUT:-/tmp/ll128-ab}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off on these machines
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
for w in 4 2; do
  [ "${gpus:-0}" -ge "$w" ] || continue
  for m in off default big; do
    case $m in
    off) env=(HIR_COLL_LL128_MIN=-1) ;;
    default) env=() ;;
    big) env=(HIR_COLL_LL_BULK_MIN=1966080) ;;
    esac
    env "${env[@]}" CUDA_VISIBLE_DEVICES="$(seq -s, 0 $((w - 1)))" timeout 90 "$bin/hirrun" bench --nproc "$w" --graph --no-save \
      --min-size 64KiB --max-size 4MiB --format json >"$out/b-x$w-$m.json" 2>"$out/b-x$w-$m.err"
    echo "bench x$w $m: exit $?"
  done
  for on in default big; do
    echo "== x$w: LL128 off vs $on"
    python3 - "$out/b-x$w-off.json" "$out/b-x$w-$on.json" <<'PY'
import collections, json, sys
def index(f):
    d = collections.defaultdict(dict)
    for r in json.load(open(f))['records']:
        d[(r['op'], r['size_bytes'])][r['algo']] = r
    return d
off, on = index(sys.argv[1]), index(sys.argv[2])
g = lambda d, n, f: d.get(n, {}).get(f, float('nan'))
print("op size | ll eager off/on | ll graph off/on | best-other graph | nccl graph")
for k in sorted(on):
    a, b = off.get(k, {}), on[k]
    if 'll' not in b:
        continue
    other = min((v['graph_latency_us'], n) for n, v in b.items() if n not in ('ll', 'nccl'))
    print("%s %d | %.2f/%.2f | %.2f/%.2f | %.2f %s | %.2f" % (k[0], k[1], g(a, 'll', 'latency_us'), g(b, 'll', 'latency_us'),
          g(a, 'll', 'graph_latency_us'), g(b, 'll', 'graph_latency_us'), other[0], other[1], g(b, 'nccl', 'graph_latency_us')))
PY
  done
done
