#!/usr/bin/env bash
# memtrain against PyTorch (Debian python3-torch) on the same BERT configuration, side by side
# in one run: memtrain fp32 against PyTorch with the MLM head at the masked positions only (like
# for like, the headline) and at every position (Hugging Face), and memtrain bf16 against
# PyTorch bf16 autocast; tokens/s, peak RSS, model FLOPs per token, their ratios, and memtrain's
# GEMM FLOP/s against the measured sgemm peak. Arguments go to scripts/bench/compare.py
# (--rounds, --steps, --warmup). MEMTRAIN_BIN names a memtrain binary to use instead of
# building build/memtrain.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh --with-torch
if [[ -z "${MEMTRAIN_BIN:-}" ]]; then
  MEMTRAIN_TARGET=memtrain bash scripts/build.sh
  export MEMTRAIN_BIN=build/memtrain
fi
exec /usr/bin/python3 scripts/bench/compare.py "$@"
