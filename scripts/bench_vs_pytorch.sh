#!/usr/bin/env bash
# memtrain against PyTorch (Debian python3-torch) on the same BERT configuration, side by side
# in one run: tokens/s, their ratio, peak RSS, and memtrain's GEMM FLOP/s against the measured
# sgemm peak. Arguments go to scripts/bench/compare.py (--rounds, --steps, --warmup).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh --with-torch
MEMTRAIN_TARGET=memtrain bash scripts/build.sh
exec /usr/bin/python3 scripts/bench/compare.py "$@"
