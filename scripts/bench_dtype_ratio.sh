#!/usr/bin/env bash
# Issue 15's 16-bit target, measured alone: memtrain fp32 and fp16 (or the dtypes given) on
# configs/bench-bert.yaml taking turns in each round, each round's ratio printed, medians and a
# JSON line at the end (scripts/bench/dtype_ratio.py). Arguments go to that script: --rounds N
# (default 7), --steps N (timed steps a run, default 6), --warmup N (default 2), --dtypes
# fp32,fp16[,bf16] (the first is the denominator). MEMTRAIN_BIN names a memtrain binary to use
# instead of building build/memtrain. About 2 minutes for 7 rounds of fp32 and fp16 on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${MEMTRAIN_BIN:-}" ]]; then
  MEMTRAIN_TARGET=memtrain bash scripts/build.sh
  export MEMTRAIN_BIN=build/memtrain
fi
exec python3 scripts/bench/dtype_ratio.py "$@"
