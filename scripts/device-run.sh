#!/usr/bin/env bash
# Runs ON the GPU machine (see scripts/device-test): the runtime/cuda tests
# (single-GPU, 2 and, with 4 GPUs, 4 processes), its benchmarks and, when
# built, a hirrun smoke run; then prints one table. Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.device-bin
out=${OUT:-/tmp/device-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off on these machines

device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | sed 's/^ *//; s/ / x /' | paste -sd, -)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)

timeout 420 "$bin/cuda.test" -test.v -test.count=1 -test.timeout=400s 2>&1 | tee "$out/cuda-tests.log"
tests_rc=${PIPESTATUS[0]}
timeout 150 "$bin/cuda.test" -test.run='^$' -test.bench=. -test.benchtime=1x -test.timeout=140s 2>&1 | tee "$out/cuda-bench.log"
bench_rc=${PIPESTATUS[0]}

hirrun_status="not built"
if [ -x "$bin/hirrun" ]; then
  timeout 60 "$bin/hirrun" run --backend cuda examples/quickstart.hir >"$out/hirrun.log" 2>&1
  rc=$?
  hirrun_status="run --backend cuda examples/quickstart.hir: exit $rc: $(grep -v '^$' "$out/hirrun.log" | tail -1 | cut -c1-160)"
fi

# Every succeeding testdata program on CUDA, compared with its CPU golden
# (programs with more ranks than GPUs are skipped). One line per program in
# $out/golden-cuda.log: --- PASS/FAIL/SKIP: TestGoldenOnBackend/NAME.
golden_status="not built"
if [ -x "$bin/hirrun.test" ] && [ -x "$bin/hirrun" ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  (cd cmd/hirrun && HIR_GOLDEN_BACKEND=cuda HIRRUN="../../$bin/hirrun" HIR_GOLDEN_MAX_RANKS="${gpus:-0}" \
    timeout 120 "../../$bin/hirrun.test" -test.run='^TestGoldenOnBackend$' -test.v -test.count=1 -test.timeout=110s) \
    >"$out/golden-cuda.log" 2>&1
  rc=$?
  gcount() { grep -cE "^ +--- $1: TestGoldenOnBackend/" "$out/golden-cuda.log" || true; }
  golden_status="$(gcount PASS) passed, $(gcount FAIL) failed, $(gcount SKIP) skipped (exit $rc; failed: $(grep -oE -- '--- FAIL: TestGoldenOnBackend/[a-z0-9_]+' "$out/golden-cuda.log" | sed 's#.*/##' | paste -sd' ' -))"
fi

count() { grep -cE "^ *--- $1" "$out/cuda-tests.log" || true; }
echo
echo "| item | value |"
echo "| --- | --- |"
echo "| device | ${device:-none} (driver ${driver:-?}) |"
echo "| runtime/cuda tests | $(count PASS) passed, $(count FAIL) failed, $(count SKIP) skipped (exit $tests_rc) |"
echo "| benchmarks | exit $bench_rc |"
# "BenchmarkX  1  123 ns/op  394.1 GB/s_copy_push..." -> one row per metric.
grep -E '^Benchmark' "$out/cuda-bench.log" | while read -r name _iters rest; do
  set -- $rest
  while [ $# -ge 2 ]; do
    case "$2" in ns/op) ;; *) echo "| ${2#*_} | $1 ${2%%_*} |" ;; esac
    shift 2
  done
done
# Compute kernels (issue 4): which cuBLAS loaded (and where Python's is, to
# compare), what ran the kernels, and the disk kernel cache across processes.
blas=$(grep -m1 -oE 'matmul: cuBLAS.*' "$out/cuda-tests.log" | cut -c9-220)
pyblas=$(python3 -c 'import glob, site; print(" ".join(sorted(p for d in site.getsitepackages() for p in glob.glob(d + "/nvidia/*/lib/libcublas.so*"))) or "none")' 2>/dev/null | cut -c1-200)
echo "| cuBLAS (runtime) | ${blas:-no line in the test log} |"
echo "| cuBLAS (python's site-packages) | ${pyblas:-python3 missing} |"
echo "| kernels by implementation | $(grep -m1 -oE 'kernels by implementation: map\[[^]]*\]' "$out/cuda-tests.log" | cut -c28-) |"
grep -oE '^METRIC kernel-cache-[a-z-]+ [0-9.]+ s' "$out/cuda-tests.log" | while read -r _ name value unit; do echo "| $name | $value $unit |"; done
echo "| hirrun | $hirrun_status |"
echo "| testdata goldens on cuda | $golden_status |"
exit $(( tests_rc != 0 || bench_rc != 0 ))
