#!/usr/bin/env bash
# Issue 14's GPU benchmark in one command, on GPU 0: builds memtrain with CUDA, runs the GPU tests
# (tests/gpu: every CUDA kernel against its CPU twin, 5 fp32 training steps against the CPU), then
# times BERT-Large training at sequence 128 and 512, bf16 and fp32 with TF32 GEMMs, beside
# PyTorch eager with a masked-only head where a CUDA build of torch is importable
# (scripts/bench/gpu_train.py: tokens/s, MFU over the GPU's dense peak, the ratio, and both
# allocators' peak allocated and reserved bytes).
#   scripts/bench_gpu.sh [--steps N] [--warmup N] [--rounds N] [--python PATH]
# MEMTRAIN_BIN=path skips the build and the tests. Without a GPU the tests skip and every case
# reports memtrain's "no CUDA device: <reason>".
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${MEMTRAIN_BIN:-}" ]]; then
  command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || {
    echo "scripts/bench_gpu.sh: nvcc not found (the CUDA toolkit, /usr/local/cuda); memtrain would build without CUDA" >&2
    exit 2
  }
  MEMTRAIN_TARGET="memtrain gpu_tests" bash scripts/build.sh
  echo "== tests/gpu"
  build/tests/gpu_tests --gtest_brief=1
  MEMTRAIN_BIN=build/memtrain
fi
exec python3 scripts/bench/gpu_train.py --binary "$MEMTRAIN_BIN" "$@"
