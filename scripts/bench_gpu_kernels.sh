#!/usr/bin/env bash
# The CUDA kernels at BERT-Large's shapes (benchmarks/bench_gpu_kernels.cpp) and PyTorch eager at
# the same shapes on the same GPU (scripts/bench/gpu_kernels_torch.py), one after the other in one
# run. Needs a GPU; without one every case reports "no CUDA device: <reason>".
#   scripts/bench_gpu_kernels.sh                 builds build/benchmarks/bench_gpu_kernels first
#   MEMTRAIN_BENCH_BIN=path scripts/bench_gpu_kernels.sh   runs a binary built elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${MEMTRAIN_BENCH_BIN:-}
if [[ -z "$BIN" ]]; then
  MEMTRAIN_TARGET=bench_gpu_kernels bash scripts/build.sh
  BIN=build/benchmarks/bench_gpu_kernels
fi
echo "== memtrain (median of 5 repetitions)"
"$BIN" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_counters_tabular=true 2>&1 | grep -E "median|ERROR|Run on|CPU|^-|Benchmark" || true
PY=${MEMTRAIN_TORCH_PYTHON:-python3}
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "== PyTorch eager, the same shapes (median of 20 iterations)"
  "$PY" scripts/bench/gpu_kernels_torch.py
else
  echo "== PyTorch: no CUDA build of torch importable from $PY; no side-by-side numbers"
fi
