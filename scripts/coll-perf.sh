#!/usr/bin/env bash
# Runs ON the GPU machine (build first with scripts/device-test): the
# collective correctness tests (every collective x algorithm x dtype
# against the CPU runtime, also with the variants the sweeps time),
# host-versus-GPU latency (and a CPU profile of the host), the
# collective benchmark, sweeps of the tuning variables, and `hirrun
# bench` (whose table is copied to $OUT). One call; logs under $OUT,
# summaries on stdout. HIR_PERF_STEPS picks steps.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.device-bin
out=${OUT:-/tmp/device-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off on these machines
export HIR_COLL_TABLE=/tmp/hir-coll-table/collectives.json
steps=${HIR_PERF_STEPS:-tests latency bench hirrun auto}
has() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }
bench() { # label, env...: BenchmarkCollectives under env, its table appended to sweep.log
  local label=$1; shift
  echo "== $label" >>"$out/sweep.log"
  env HIR_COLL_TESTS=1 "$@" timeout 100 "$bin/cuda.test" -test.run='^$' -test.bench='^BenchmarkCollectives$' -test.benchtime=1x -test.timeout=95s >"$out/tmp.log" 2>&1
  echo "exit $?" >>"$out/sweep.log"
  sed -n '/^collectives on /,/^Benchmark/p' "$out/tmp.log" | grep -v '^Benchmark' | grep -v '^$' >>"$out/sweep.log"
  grep -E 'FAIL|panic|error' "$out/tmp.log" | head -5 >>"$out/sweep.log"
}
tests() { # label, regexp, env...
  local label=$1 re=$2; shift 2
  local t0=$(date +%s)
  env HIR_COLL_TESTS=1 "$@" timeout 230 "$bin/cuda.test" -test.run="$re" -test.v -test.count=1 -test.timeout=220s >"$out/tmp.log" 2>&1
  local rc=$?
  cat "$out/tmp.log" >>"$out/tests.log"
  echo "## tests ($label): exit $rc in $(( $(date +%s) - t0 ))s; $(grep -cE '^ *--- PASS' "$out/tmp.log") passed, $(grep -cE '^ *--- FAIL' "$out/tmp.log") failed"
  grep -hoE 'rank 0: [0-9]+ cases in [^,]+, [0-9]+ failed' "$out/tmp.log"
  grep -E '^ *FAIL rank|stopping after|exited with|--- FAIL' "$out/tmp.log" | head -12 | cut -c1-400
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv,noheader
if has tests; then
  tests default '^(TestCollective|TestSendRecv)'
fi
if has variants; then
  tests "two_shot with a copy-engine gather" '^(TestCollectives2|TestCollectivesOver1GiB)$' HIR_COLL_TWO_SHOT_CE_MIN=1 HIR_COLL_CASES=algo=two_shot
  tests "copy_engine pulling" '^TestCollectives2$' HIR_COLL_CE_PUSH=0 HIR_COLL_CASES=algo=copy_engine
fi
if has latency; then
  for ll in ${HIR_PERF_LL:-262144}; do
    HIR_COLL_LL_MAX=$ll HIR_COLL_TESTS=1 HIR_COLL_LATENCY=1 HIR_COLL_PPROF=$out timeout 120 "$bin/cuda.test" -test.run='^TestCollectiveLatency$' -test.v -test.count=1 >"$out/tmp.log" 2>&1
    echo "## latency (LL up to $ll bytes): exit $?"
    grep -hE '^ *(LATENCY|PPROF)' "$out/tmp.log" | sort -u
    cp "$out/tmp.log" "$out/latency-$ll.log"
  done
fi
if has bench; then
  t0=$(date +%s)
  bench "default"
  echo "## bench (default) in $(( $(date +%s) - t0 ))s"
  sed -n '/^== default/,$p' "$out/sweep.log"
fi
if has sweep; then
  big=16777216,268435456,1073741824
  bench "copy_engine pulls (large)" HIR_COLL_CE_PUSH=0 HIR_COLL_BENCH_SIZES=$big
  bench "two_shot gather on the copy engines from 16 MiB (large)" HIR_COLL_TWO_SHOT_CE_MIN=16777216 HIR_COLL_BENCH_SIZES=$big
  bench "LL up to 256KiB (small)" HIR_COLL_LL_MAX=262144 HIR_COLL_BENCH_SIZES=8192,65536,131072,262144
  echo "## sweeps"
  sed -n '/^== copy_engine pulls/,$p' "$out/sweep.log" | grep -E '^==|all_reduce|all_gather|exit|FAIL|panic' | grep -v 'size |'
fi
if has hirrun; then
  t0=$(date +%s)
  timeout 200 "$bin/hirrun" bench --nproc 2 --dtypes bf16,f32 >"$out/hirrun-bench.log" 2>&1
  echo "## hirrun bench: exit $? in $(( $(date +%s) - t0 ))s"
  sed -n '/^fastest per size/,$p' "$out/hirrun-bench.log" | grep -E 'all_reduce|fastest|collective|auto table'
  grep -E 'hirrun:|error' "$out/hirrun-bench.log" | head -5
  cp "$HIR_COLL_TABLE" "$out/collectives.json" 2>/dev/null
fi
if has auto; then # auto follows the table hirrun bench just saved
  HIR_COLL_TESTS=1 HIR_COLL_AUTO_TABLE=$HIR_COLL_TABLE timeout 60 "$bin/cuda.test" -test.run='^TestCollectiveAutoFollowsTable$' -test.v -test.count=1 >"$out/auto.log" 2>&1
  echo "## auto follows the table: exit $?"
  grep -E 'auto calls followed|FAIL|ran .* the table says' "$out/auto.log" | head -6
fi
rm -f "$out/tmp.log"
