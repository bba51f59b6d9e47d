#!/usr/bin/env bash
# Runs ON the GPU machine (see scripts/device-test), in one call of at most
# 10 minutes: the runtime/cuda tests (single-GPU, 2 and, with 4 GPUs, 4
# processes) and benchmarks; `hirrun topo`; every testdata program on
# `hirrun run --backend cuda` against its CPU golden (exact, then within
# tolerance); the too-large-tensor check; a check that no rank process or
# socket file was left behind. Prints one table; logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.device-bin
out=${OUT:-/tmp/device-out}
mkdir -p "$out/programs"
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off on these machines

device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | sed 's/^ *//; s/ / x /' | paste -sd, -)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
gpus=${gpus:-0}
sockdir="${TMPDIR:-/tmp}/hir-$(id -u)"
# Each step appends its row as it ends, so a call cut short by the time
# limit still brings back the rows done so far ($OUT/summary.md).
summary="$out/summary.md"
printf '| item | value |\n| --- | --- |\n| device | %s (driver %s) |\n' "${device:-none}" "${driver:-?}" >"$summary"
row() { printf '| %s | %s |\n' "$1" "$2" >>"$summary"; }
# A call's `timeout` stops this script with SIGTERM (bash runs the trap
# once its current step returns): print the rows done so far, so a call
# cut short still says what it found even where $OUT does not come back
# (the seventh session lost the testdata rows so).
trap 'echo; echo "(stopped by a signal: the rows done so far)"; cat "$summary"; [ -n "${programs_rows:-}" ] && printf "\n| program | status | detail |\n| --- | --- | --- |\n%s" "$programs_rows"; exit 124' TERM INT

# HIR_SWEEP_IF_H100=only on a lease that came as H200s: stop at once
# (the H100 sweeps below are all that call wanted).
if [ "${HIR_SWEEP_IF_H100:-0}" = only ] && ! echo "$device" | grep -q H100; then
  row "H100 sweep" "not run: the GPUs are $device"
  echo
  cat "$summary"
  exit 0
fi

# Every collective module compiled at once into the kernel cache first
# (TestCollectiveModulesCompile): on a freshly lent machine one NVRTC
# compile took 7-40 s in its first minutes (RUNTIME-CUDA.md), and a first
# collective test compiling seven one after another ran past its limit
# (ninth to eleventh sessions).
t0=$(date +%s)
timeout 150 "$bin/cuda.test" -test.run='^TestCollectiveModulesCompile$' -test.v -test.count=1 >"$out/compile-modules.log" 2>&1
row "collective modules compiled" "exit $? after $(($(date +%s) - t0)) s: $(grep -hoE 'all [0-9]+ modules in .*' "$out/compile-modules.log")"

# HIR_SWEEP_IF_H100=1: where the machine's GPUs are H100s (leases of the
# multi-GPU kinds have come as H200s for sessions on end, and the H100
# records date from the fourth session), run only the full collective
# sweeps, 8 KiB-1 GiB with --graph, on 2 and on 4 GPUs, into
# $OUT/bench-x2.json and -x4.json (docs/bench/h100-x2.json and -x4.json
# are made from them); elsewhere go on with the mode the call asked for
# (HIR_SWEEP_IF_H100=only stopped above).
if [ "${HIR_SWEEP_IF_H100:-0}" != 0 ] && echo "$device" | grep -q H100; then
  for w in 2 4; do
    [ "$gpus" -ge "$w" ] || continue
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((w - 1))) timeout 270 "$bin/hirrun" bench --nproc "$w" --graph --no-save --max-size 1GiB --format json >"$out/bench-x$w.json" 2>"$out/bench-x$w.err"
    row "hirrun bench --graph x$w (H100)" "exit $? ($(wc -c <"$out/bench-x$w.json") bytes)"
  done
  echo
  cat "$summary"
  exit 0
fi

# Collectives (issue 5): every collective x algorithm x dtype against the
# CPU runtime on 2 (and, with 4 GPUs, 4) processes, >1 GiB tensors, a
# missing rank, mismatched shapes, send/recv; then our kernels next to
# NCCL (latency 8 KiB..1 MiB, bus bandwidth 16 MiB..1 GiB). The tests are
# skipped in the package run above unless HIR_COLL_TESTS=1, so they run
# here with their own budget. HIR_COLL_ONLY=1 runs only this block.
coll_block() {
  HIR_COLL_TESTS=1 timeout 210 "$bin/cuda.test" -test.run='^(TestCollective|TestSendRecv)' -test.v -test.count=1 -test.timeout=200s >"$out/coll-tests.log" 2>&1
  local rc=$?
  ccount() { grep -cE "^ *--- $1: (TestCollective|TestSendRecv)" "$out/coll-tests.log" || true; }
  row "collectives vs CPU runtime" "$(ccount PASS) passed, $(ccount FAIL) failed, $(ccount SKIP) skipped (exit $rc; $(grep -hoE 'rank 0: [0-9]+ cases in [^,]+, [0-9]+ failed' "$out/coll-tests.log" | paste -sd';' -))"
  grep -E '^ *FAIL rank|stopping after|exited with' "$out/coll-tests.log" | head -8 | cut -c1-300 | tr '|' '/' | while read -r l; do row "collectives failure" "$l"; done
  # Fewer than 4 GPUs: the 4-rank correctness tests still run, with ranks
  # sharing GPUs (correctness only; NCCL cases are left out there).
  if [ "$gpus" -lt 4 ] && [ "$gpus" -ge 1 ]; then
    HIR_CUDA_SHARE_GPUS=1 HIR_COLL_TESTS=1 timeout 240 "$bin/cuda.test" -test.run='^(TestCollectives4|TestTransferRing4)$' -test.v -test.count=1 -test.timeout=230s >"$out/shared4-tests.log" 2>&1
    local rc4=$?
    row "4 ranks on $gpus GPUs (shared)" "$(grep -cE '^--- PASS' "$out/shared4-tests.log") passed, $(grep -cE '^--- FAIL' "$out/shared4-tests.log") failed (exit $rc4; $(grep -hoE 'rank 0: [0-9]+ cases in [^,]+, [0-9]+ failed' "$out/shared4-tests.log" | paste -sd';' -))"
  fi
  HIR_COLL_TESTS=1 timeout 110 "$bin/cuda.test" -test.run='^$' -test.bench='^BenchmarkCollectives$' -test.benchtime=1x -test.timeout=105s >"$out/coll-bench.log" 2>&1
  row "collectives benchmark" "exit $? (tables below)"
  grep -E '^BenchmarkCollectives' "$out/coll-bench.log" | while read -r name _iters rest; do
    set -- $rest
    while [ $# -ge 2 ]; do
      case "$2" in ns/op) ;; *) row "${2#*_}" "$1 ${2%%_*}" ;; esac
      shift 2
    done
  done
  sed -n '/^collectives on /,/^Benchmark/p' "$out/coll-bench.log" | grep -v '^Benchmark' >"$out/coll-bench.md"
}
if [ "${HIR_COLL_ONLY:-0}" = 1 ]; then
  coll_block
  echo
  cat "$summary"
  cat "$out/coll-bench.md" 2>/dev/null
  exit 0
fi

# LL and the collective sweep (issue 19): the LL replay tests, TestCollectives
# on 2 and 4 GPUs, then `hirrun bench --graph` on 2 and on 4 GPUs (JSON
# records in $OUT/bench-x2.json, -x4.json; HIR_BENCH_MAX, default 1GiB;
# HIR_BENCH_WORLDS, default "2 4"; HIR_LL_TP=0 skips the TP block).
# HIR_LL_ONLY=1 runs only this block; HIR_LL_SKIP_TESTS=1 only the sweeps.
if [ "${HIR_LL_ONLY:-0}" = 1 ]; then
  if [ "${HIR_LL_SKIP_TESTS:-0}" != 1 ]; then
    timeout 120 "$bin/cuda.test" -test.run='^(TestLLReplaysEqualEager|TestLLReplaysEqualEager4|TestGraphReplaysSynchroniseAcrossRanks)$' -test.v -test.count=1 -test.timeout=115s >"$out/ll-replays.log" 2>&1
    row "LL replays vs eager" "exit $?: $(grep -hE '^(--- |rank [0-9]+: [0-9]+ replays)' "$out/ll-replays.log" | sort | uniq -c | tr '\n' ';' | tr '|' '/')"
    HIR_COLL_TESTS=1 timeout 240 "$bin/cuda.test" -test.run='^(TestCollectives2|TestCollectives4)$' -test.v -test.count=1 -test.timeout=235s >"$out/coll-tests.log" 2>&1
    row "collectives vs CPU runtime" "exit $?: $(grep -hoE 'rank 0: [0-9]+ cases in [^,]+, [0-9]+ failed' "$out/coll-tests.log" | paste -sd';' -)"
    grep -E '^ *FAIL rank|stopping after|exited with' "$out/coll-tests.log" | head -12 | cut -c1-300 | tr '|' '/' | while read -r l; do row "collectives failure" "$l"; done
  fi
  # BenchmarkTPBlock (one_shot and ll collectives) and its PyTorch peer.
  if [ "$gpus" -ge 2 ] && [ "${HIR_LL_TP:-1}" = 1 ]; then
    CUDA_VISIBLE_DEVICES=0,1 timeout 150 "$bin/cuda.test" -test.run='^$' -test.bench='^BenchmarkTPBlock$' -test.benchtime=1x -test.timeout=145s >"$out/tp-block.log" 2>&1
    row "BenchmarkTPBlock" "exit $?"
    CUDA_VISIBLE_DEVICES=0,1 timeout 120 python3 -m torch.distributed.run --nproc_per_node=2 scripts/tp_block_peer.py >"$out/tp-block-peer.log" 2>&1
    row "tp_block_peer.py" "exit $?"
    grep -hE '^(tp-block|peer )' "$out/tp-block.log" "$out/tp-block-peer.log" | tr '|' '/' | while read -r l; do row "tp block" "$l"; done
  fi
  for w in ${HIR_BENCH_WORLDS:-2 4}; do
    [ "$gpus" -ge "$w" ] || continue
    vis=$(seq -s, 0 $((w - 1)))
    CUDA_VISIBLE_DEVICES=$vis timeout 280 "$bin/hirrun" bench --nproc "$w" --graph --no-save --max-size "${HIR_BENCH_MAX:-1GiB}" --format json >"$out/bench-x$w.json" 2>"$out/bench-x$w.err"
    row "hirrun bench --graph x$w" "exit $? ($(wc -c <"$out/bench-x$w.json") bytes)"
  done
  echo
  cat "$summary"
  exit 0
fi

# Overlap (issue 14, docs/OVERLAP.md): BenchmarkOverlap (the two
# tensor-parallel patterns at three shapes: communication alone, matmul
# alone, unpipelined, hir's pipelined decompositions) and PyTorch's figures
# (scripts/overlap_peer.py: NCCL and torch.ops.symm_mem's fused ops) in the
# same call. HIR_OVERLAP_ONLY=1 runs only this block; needs 2 GPUs.
if [ "${HIR_OVERLAP_ONLY:-0}" = 1 ]; then
  # HIR_COLL_BLOCKS=N passed through caps the collectives' grid (fewer
  # SMs taken from the matmul); the figures' variants say -blocksN.
  # The decompositions against the unpipelined program, eager and graph,
  # on 2 and (with 4 GPUs) 4 ranks.
  # HIR_OVERLAP_WORLD=4 times both on 4 GPUs (the tests are skipped then:
  # one call each keeps within the 10 minutes).
  world=${HIR_OVERLAP_WORLD:-2}
  vis=$(seq -s, 0 $((world - 1)))
  if [ "$world" = 2 ]; then
    timeout 150 "$bin/cuda.test" -test.run='^(TestDecompositionsOnGPU|TestDecompositionsOnGPU4)$' -test.v -test.count=1 -test.timeout=145s >"$out/decompositions.log" 2>&1
    row "decompositions vs unpipelined (eager, graph)" "exit $?: $(grep -E '^--- ' "$out/decompositions.log" | tr '\n' ' ')"
  fi
  CUDA_VISIBLE_DEVICES=$vis HIR_OVERLAP=1 HIR_OVERLAP_WORLD=$world timeout 300 "$bin/cuda.test" -test.run='^$' -test.bench='^BenchmarkOverlap$' -test.benchtime=1x -test.timeout=295s >"$out/overlap-bench.log" 2>&1
  row "overlap benchmark ($world GPUs)" "exit $?"
  CUDA_VISIBLE_DEVICES=$vis timeout 240 python3 -m torch.distributed.run --nproc_per_node="$world" scripts/overlap_peer.py >"$out/overlap-peer.log" 2>&1
  row "overlap peer (torch)" "exit $?"
  echo
  cat "$summary"
  echo
  grep -hE '^(peer )?overlap ' "$out/overlap-bench.log" "$out/overlap-peer.log"
  exit 0
fi

# Graph mode (issue 12, docs/GRAPHS.md): every testdata program of 1, 2
# and 4 ranks in graph mode equals its eager run on the GPU over 100 Runs
# with fresh inputs (ranks share GPUs where the machine has fewer; about
# 4.5 minutes on one H100). HIR_GRAPH_ONLY=1 runs only this block.
if [ "${HIR_GRAPH_ONLY:-0}" = 1 ]; then
  share=0
  [ "$gpus" -lt 4 ] && share=1
  HIR_GRAPH_TESTS=1 HIR_CUDA_SHARE_GPUS=$share timeout 500 "$bin/cuda.test" -test.run='^(TestTestdataGraphOnGPU|TestGraphSplitsOnGPU)$' -test.v -test.count=1 -test.timeout=490s >"$out/graph-tests.log" 2>&1
  row "graph mode vs eager on cuda (100 Runs each)" "exit $?: $(grep -hoE '[0-9]+ ranks: [0-9]+ programs equal[^;]*;.*failed' "$out/graph-tests.log" | paste -sd';' - | tr '|' '/')"
  echo
  cat "$summary"
  exit 0
fi

# HIR_HIRRUN_ONLY=1 skips the package tests, benchmarks and collectives, and
# runs only the hirrun steps below (topo, testdata, too large, leftovers):
# about 2-4 minutes, for a call of its own.
tests_rc=0 bench_rc=0 cudabench_rc=0
if [ "${HIR_HIRRUN_ONLY:-0}" != 1 ]; then
timeout 280 "$bin/cuda.test" -test.v -test.count=1 -test.timeout=270s 2>&1 | tee "$out/cuda-tests.log"
tests_rc=${PIPESTATUS[0]}
# (BenchmarkOverlap skips itself here: its call is HIR_OVERLAP_ONLY=1.)
timeout 90 "$bin/cuda.test" -test.run='^$' -test.bench=. -test.benchtime=1x -test.timeout=85s 2>&1 | tee "$out/cuda-bench.log"
bench_rc=${PIPESTATUS[0]}
# The bare-launch peers, in the same call as BenchmarkLaunchOverhead: the
# same driver called through ctypes, and PyTorch eager and CUDA graph.
timeout 60 python3 scripts/launch_peer.py >"$out/launch-peer.log" 2>&1
# runtime/cuda/cudabench (hirrun bench's and topo's measurements): its
# tests, single-GPU and 2 processes, in their own binary.
timeout 60 "$bin/cudabench.test" -test.v -test.count=1 -test.timeout=55s 2>&1 | tee "$out/cudabench-tests.log"
cudabench_rc=${PIPESTATUS[0]}
# HIR_SKIP_COLL=1 leaves the collectives block to a call of its own
# (HIR_COLL_ONLY=1), so each call stays under the 10-minute limit.
[ "${HIR_SKIP_COLL:-0}" = 1 ] || coll_block
fi
touch "$out/cuda-tests.log" "$out/cuda-bench.log" "$out/cudabench-tests.log"
count() { grep -cE "^ *--- $1" "$out/cuda-tests.log" || true; }
row "runtime/cuda tests" "$(count PASS) passed, $(count FAIL) failed, $(count SKIP) skipped (exit $tests_rc; failed: $(grep -oE -- '--- FAIL: [A-Za-z0-9_/]+' "$out/cuda-tests.log" | sed 's/--- FAIL: //' | paste -sd' ' -))"
bcount() { grep -cE "^ *--- $1" "$out/cudabench-tests.log" || true; }
row "runtime/cuda/cudabench tests" "$(bcount PASS) passed, $(bcount FAIL) failed, $(bcount SKIP) skipped (exit $cudabench_rc; failed: $(grep -oE -- '--- FAIL: [A-Za-z0-9_/]+' "$out/cudabench-tests.log" | sed 's/--- FAIL: //' | paste -sd' ' -))"
row "benchmarks" "exit $bench_rc"
# "BenchmarkX  1  123 ns/op  394.1 GB/s_copy_push..." -> one row per metric.
grep -E '^Benchmark' "$out/cuda-bench.log" | while read -r name _iters rest; do
  set -- $rest
  while [ $# -ge 2 ]; do
    case "$2" in ns/op) ;; *) row "${2#*_}" "$1 ${2%%_*}" ;; esac
    shift 2
  done
done

grep -E '^peer ' "$out/launch-peer.log" 2>/dev/null | while read -r _ name us; do row "peer $name" "$us µs"; done

# HIR_PACKAGE_ONLY=1 stops here (package tests, benchmarks, launch peers),
# leaving the hirrun steps to a HIR_HIRRUN_ONLY=1 call of their own.
if [ "${HIR_PACKAGE_ONLY:-0}" = 1 ]; then
  echo
  cat "$summary"
  exit $(( tests_rc != 0 || bench_rc != 0 ))
fi

have_hirrun=0
[ -x "$bin/hirrun" ] && have_hirrun=1

# hirrun topo: peer access, GB/s and latency for every ordered pair of GPUs.
topo_status="not built"
if [ $have_hirrun = 1 ]; then
  timeout 45 "$bin/hirrun" topo --nproc "$gpus" >"$out/topo.log" 2>&1
  rc=$?
  topo_status="exit $rc (table below)"
fi
row "hirrun topo" "$topo_status"

# Every testdata program with a golden (testdata/contract included: the
# programs the checker accepts that test its promise), on CUDA with
# --nproc = its mesh,
# compared with the golden's exit status and stdout byte for byte (and
# stderr for goldens of failing programs). pass: identical; unsupported:
# the run stopped at an op the CUDA runtime does not do yet; differs: ran,
# but printed other bytes (compute may differ in the last bits: see the
# tolerance check below); fail: anything else; skip: more ranks than GPUs
# (or out of time).
mesh_size() {
  local m
  m=$(sed -n 's/^mesh[[:space:]]*//p' "$1" | head -1)
  case "$m" in
    "") echo 1 ;;
    \[*) echo "$m" | tr -cd ',' | wc -c | awk '{print $1 + 1}' ;;
    *) echo "${m%%[^0-9]*}" ;;
  esac
}
section() { # the lines of golden $1 between "-- $2 --" and the next section
  awk -v s="-- $2 --" '$0 == s {on = 1; next} /^-- (stdout|stderr) --$/ {on = 0} on' "$1"
}
programs_rows=""
declare -A programs_count=()
if [ $have_hirrun = 1 ]; then
  deadline=$(( $(date +%s) + ${HIR_EXACT_SECS:-150} ))
  for f in testdata/*.hir testdata/cuda/*.hir testdata/contract/*.hir; do
    golden=${f%.hir}.golden
    [ -f "$golden" ] || continue
    name=${f#testdata/}
    name=${name%.hir}
    log="$out/programs/${name//\//_}"
    mesh=$(mesh_size "$f")
    want_rc=$(sed -n '2s/^exit //p' "$golden")
    # A program whose golden fails is rejected before any rank starts.
    # More ranks than GPUs: the ranks share GPUs (HIR_CUDA_SHARE_GPUS=1),
    # which tests correctness only; NCCL refuses two ranks on one GPU.
    share=0 shared=""
    if [ "$mesh" -gt "$gpus" ]; then share=1 shared=" (ranks share GPUs)"; fi
    if [ "$share" = 1 ] && [ "$want_rc" = 0 ] && grep -q 'algo=nccl' "$f"; then
      status=skip detail="needs $mesh GPUs (NCCL refuses shared GPUs)"
    elif [ "$(date +%s)" -ge "$deadline" ]; then
      status=skip detail="out of time (${HIR_EXACT_SECS:-150} s for all programs)"
    else
      read -r -a args <<<"$(sed -n '1s#^// args:##p' "$f")"
      # 60 s: a fresh machine's first NCCL communicator on 3 GPUs took
      # more than 30 (RUNTIME-CUDA.md, "The kernel cache")
      t0=$(date +%s.%N)
      HIR_CUDA_SHARE_GPUS=$share timeout 60 "$bin/hirrun" run --backend cuda --nproc "$mesh" "${args[@]}" "$f" >"$log.out" 2>"$log.err"
      rc=$?
      echo "$rc" >"$log.rc" # the tolerance step below compares this run's output
      secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
      section "$golden" stdout >"$log.want"
      section "$golden" stderr >"$log.wanterr"
      first_err=$(grep -v '^$' "$log.err" | head -1 | cut -c1-150 | tr '|' '/')
      if [ "$rc" = "$want_rc" ] && cmp -s "$log.out" "$log.want" && { [ "$rc" = 0 ] || cmp -s "$log.err" "$log.wanterr"; }; then
        status=pass detail="$(printf '%.1f s' "$secs")$shared"
      elif grep -q 'unsupported on cuda yet' "$log.err"; then
        status=unsupported detail=$(grep -o 'unsupported on cuda yet: .*' "$log.err" | head -1 | cut -c1-110 | tr '|' '/')
      elif [ "$rc" = 0 ] && [ "$want_rc" = 0 ]; then
        status=differs detail="first differing line: $(diff "$log.want" "$log.out" | grep -m1 '^>' | cut -c3-120 | tr '|' '/')"
      else
        status=fail detail="exit $rc (want $want_rc): $first_err"
      fi
    fi
    programs_count[$status]=$(( ${programs_count[$status]:-0} + 1 ))
    programs_rows+="| $name | $status | $detail |"$'\n'
  done
fi
programs_status="not built"
if [ $have_hirrun = 1 ]; then
  programs_status=""
  for s in pass unsupported differs fail skip; do
    programs_status+="${programs_count[$s]:-0} $s, "
  done
  programs_status="${programs_status%, } (rows below)"
fi
row "testdata on --backend cuda, exact" "$programs_status"

# Graph mode: every program the exact step ran to success, again with
# --graph --repeat 3 (warm-up, capture, replay), against that eager cuda
# output; programs with an op the cuda runtime cannot capture yet must be
# refused before they run ("cannot be captured in a graph").
if [ $have_hirrun = 1 ] && [ "${HIR_GRAPH_SECS:-120}" != 0 ]; then
  declare -A graph_count=()
  graph_fails=""
  deadline=$(( $(date +%s) + ${HIR_GRAPH_SECS:-120} ))
  for f in testdata/*.hir testdata/cuda/*.hir testdata/contract/*.hir; do
    name=${f#testdata/}
    name=${name%.hir}
    log="$out/programs/${name//\//_}"
    [ -f "$log.out" ] && [ -s "$log.out" ] || continue
    [ "$(date +%s)" -ge "$deadline" ] && { graph_count[skip]=$(( ${graph_count[skip]:-0} + 1 )); continue; }
    mesh=$(mesh_size "$f")
    share=0
    [ "$mesh" -gt "$gpus" ] && share=1
    read -r -a args <<<"$(sed -n '1s#^// args:##p' "$f")"
    HIR_CUDA_SHARE_GPUS=$share timeout 30 "$bin/hirrun" run --backend cuda --graph --repeat 3 --nproc "$mesh" "${args[@]}" "$f" >"$log.graph.out" 2>"$log.graph.err"
    rc=$?
    if [ "$rc" = 0 ] && cmp -s "$log.graph.out" "$log.out"; then
      status=same
    elif [ "$rc" != 0 ] && grep -q 'cannot be captured in a graph' "$log.graph.err"; then
      status=refused
    elif [ "$rc" = 0 ]; then
      status=differs graph_fails+="$name (differs) "
    else
      status=fail graph_fails+="$name (exit $rc: $(grep -v '^$' "$log.graph.err" | head -1 | cut -c1-100 | tr '|' '/')) "
    fi
    graph_count[$status]=$(( ${graph_count[$status]:-0} + 1 ))
  done
  row "testdata on cuda, --graph vs eager" "${graph_count[same]:-0} same, ${graph_count[refused]:-0} refused before running, ${graph_count[differs]:-0} differ, ${graph_count[fail]:-0} fail, ${graph_count[skip]:-0} out of time"
  [ -n "$graph_fails" ] && row "graph-mode failures" "$graph_fails"
fi

# Bad input: a tensor larger than the device is a clear error on every
# rank (size asked, device, free memory), exit 1.
large_status="not built"
if [ $have_hirrun = 1 ] && [ "$gpus" -ge 1 ]; then
  share=0
  [ "$gpus" -lt 2 ] && share=1
  HIR_CUDA_SHARE_GPUS=$share timeout 30 "$bin/hirrun" run --backend cuda testdata/cuda/bad/too_large.hir >"$out/too_large.log" 2>&1
  rc=$?
  if [ $rc = 1 ] && grep -q 'out of memory: .* does not fit: device' "$out/too_large.log" && grep -q ' free of ' "$out/too_large.log"; then
    large_status="pass: $(grep -m1 -o 'out of memory: .*' "$out/too_large.log" | cut -c1-140)"
  else
    large_status="FAIL: exit $rc: $(grep -v '^$' "$out/too_large.log" | head -2 | paste -sd' ' - | cut -c1-160)"
  fi
fi
row "tensor too large for the device" "$large_status"

# Every testdata program on CUDA against its CPU golden within the dtype's
# tolerance (TestGoldenOnBackend; up to 4 ranks, sharing GPUs where the
# machine has fewer), from the exact step's saved runs (HIR_GOLDEN_OUTPUTS:
# each program runs once per call; those that step did not reach, or
# timed out, run here). One line per program in $out/golden-cuda.log.
golden_status="not built"
if [ -x "$bin/hirrun.test" ] && [ $have_hirrun = 1 ]; then
  saved="$(cd "$out" && pwd)/programs"
  (cd cmd/hirrun && HIR_GOLDEN_OUTPUTS="$saved" HIR_GOLDEN_BACKEND=cuda HIRRUN="../../$bin/hirrun" HIR_GOLDEN_MAX_RANKS=4 HIR_GOLDEN_GPUS="$gpus" HIR_CUDA_SHARE_GPUS=1 \
    timeout "${HIR_GOLDEN_SECS:-150}" "../../$bin/hirrun.test" -test.run='^TestGoldenOnBackend$' -test.v -test.count=1 -test.timeout="$(( ${HIR_GOLDEN_SECS:-150} - 5 ))s") \
    >"$out/golden-cuda.log" 2>&1
  rc=$?
  gcount() { grep -cE "^ +--- $1: TestGoldenOnBackend/" "$out/golden-cuda.log" || true; }
  golden_status="$(gcount PASS) passed, $(gcount FAIL) failed, $(gcount SKIP) skipped (exit $rc; failed: $(grep -oE -- '--- FAIL: TestGoldenOnBackend/[a-z0-9_/]+' "$out/golden-cuda.log" | sed 's#^--- FAIL: TestGoldenOnBackend/##' | paste -sd' ' -))"
fi
row "testdata goldens on cuda, within tolerance" "$golden_status"

# Nothing left behind: no hirrun or test process, no socket file.
sleep 1
# (processes whose program is one of ours: not a shell whose command line
# merely names one, as the run tool's own wrapper does)
pgrep -af "^[^ ]*$bin/(hirrun|cuda\.test|cudabench\.test)" | grep -v "^$$ " >"$out/leftover.log"
leftover_procs=$(wc -l <"$out/leftover.log")
leftover_socks=$(find "$sockdir" -name '*.sock' 2>/dev/null | wc -l)

row "left behind" "$leftover_procs processes, $leftover_socks socket files in $sockdir$( [ "$leftover_procs" -gt 0 ] && printf ' (%s)' "$(cut -c1-80 "$out/leftover.log" | paste -sd';' - | tr '|' '/')")"
echo
cat "$summary"
if [ -n "$programs_rows" ]; then
  echo
  echo "| program | on cuda | detail |"
  echo "| --- | --- | --- |"
  printf '%s' "$programs_rows"
fi
if [ -s "$out/topo.log" ]; then
  echo
  echo '```'
  cat "$out/topo.log"
  echo '```'
fi
if [ -s "$out/coll-bench.md" ]; then
  cat "$out/coll-bench.md"
fi
# One-sided transfers (BenchmarkTransferAcrossProcesses writes it): GB/s
# of READ/WRITE next to the plain copy, 4 KiB .. 1 GiB, and small-transfer
# latency post to completion.
if [ -s "$out/transfer-bench.md" ]; then
  cat "$out/transfer-bench.md"
fi
exit $(( tests_rc != 0 || bench_rc != 0 ))
