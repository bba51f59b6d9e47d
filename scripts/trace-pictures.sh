#!/bin/sh
# Regenerates the timeline pictures of docs/TRACE.md and docs/OVERLAP.md: runs testdata
# programs with --trace on the sim backend (the CPU runtime: no GPU needed)
# and draws each trace with scripts/tracesvg. Times differ from run to run;
# after changing only the renderer, run the three tracesvg commands alone
# (internal/timeline's test checks that each SVG is its JSON drawn).
set -e
cd "$(dirname "$0")/.."
go run ./cmd/hirrun run --repeat 3 --trace docs/images/trace-async_wait.json testdata/async_wait.hir --input x=random:seed=46 --input y=random:seed=53 >/dev/null
go run ./cmd/hirrun run --repeat 3 --trace docs/images/trace-streams_join.json testdata/streams_join.hir --input a=random:seed=5 --input b=random:seed=6 >/dev/null
go run ./cmd/hirrun run --repeat 3 --trace docs/images/trace-tp_all_gather_matmul.json testdata/tp_all_gather_matmul.hir --input x=random:seed=71 --input w=random:seed=72 >/dev/null
go run ./scripts/tracesvg -title "testdata/async_wait.hir: hirrun run --repeat 3 --trace (sim backend, the last run)" docs/images/trace-async_wait.json >docs/images/trace-async_wait.svg
go run ./scripts/tracesvg -title "testdata/streams_join.hir: hirrun run --repeat 3 --trace (sim backend, the last run)" docs/images/trace-streams_join.json >docs/images/trace-streams_join.svg
go run ./scripts/tracesvg -title "testdata/tp_all_gather_matmul.hir: hirrun run --repeat 3 --trace (sim backend, the last run)" docs/images/trace-tp_all_gather_matmul.json >docs/images/trace-tp_all_gather_matmul.svg
# The GPU picture (docs/images/trace-gpu-overlap.*) needs 2 GPUs: on the GPU
# machine, from the repository root, with hirrun built there:
#   hirrun run --backend cuda --nproc 2 --repeat 3 --trace docs/images/trace-gpu-overlap.json \
#     --trace-overlap --input x=random:seed=1 --input w=random:seed=2 docs/images/trace-gpu-overlap.hir
# then, here:
go run ./scripts/tracesvg -title "docs/images/trace-gpu-overlap.hir: hirrun run --backend cuda --nproc 2 --repeat 3 --trace --trace-overlap (2 x H100, the last run)" docs/images/trace-gpu-overlap.json >docs/images/trace-gpu-overlap.svg
