#!/usr/bin/env bash
# The CUDA kernels at BERT-Large's shapes (benchmarks/bench_gpu_kernels.cpp) and PyTorch eager at
# the same shapes on the same GPU (scripts/bench/gpu_kernels_torch.py), one after the other in one
# run. Needs a GPU; without one every case reports "no CUDA device: <reason>".
#   scripts/bench_gpu_kernels.sh                 builds build/benchmarks/bench_gpu_kernels first
#   MEMTRAIN_BENCH_BIN=path scripts/bench_gpu_kernels.sh   runs a binary built elsewhere
#   --rounds N    alternates the two sides N times (default 2): one GPU's speed drifts with its
#                 clocks and temperature, so only rounds that alternate compare fairly
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS=${2:?--rounds needs a number}; shift 2 ;;
    *) echo "usage: scripts/bench_gpu_kernels.sh [--rounds N]" >&2; exit 2 ;;
  esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "scripts/bench_gpu_kernels.sh: --rounds $ROUNDS: expected a positive integer" >&2; exit 2; }
BIN=${MEMTRAIN_BENCH_BIN:-}
if [[ -z "$BIN" ]]; then
  MEMTRAIN_TARGET=bench_gpu_kernels bash scripts/build.sh
  BIN=build/benchmarks/bench_gpu_kernels
fi
PY=${MEMTRAIN_TORCH_PYTHON:-python3}
TORCH=0
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && TORCH=1
for ((round = 1; round <= ROUNDS; ++round)); do
  echo "== round $round: memtrain (median of 5 repetitions)"
  "$BIN" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_counters_tabular=true 2>&1 | grep -E "median|ERROR|^Benchmark" || true
  if ((TORCH)); then
    echo "== round $round: PyTorch eager, the same shapes (median of 20 iterations)"
    "$PY" -W ignore scripts/bench/gpu_kernels_torch.py
  fi
done
((TORCH)) || echo "== PyTorch: no CUDA build of torch importable from $PY; no side-by-side numbers"
