#!/usr/bin/env bash
# Issue 15's step breakdown: `memtrain train --profile-ops` of configs/bench-bert.yaml (BERT-Base
# width, 2 layers, micro-batch 8 x sequence 128, mock data) in fp32, bf16 and fp16, one run after
# the other, each printing its table (per op class and shape: calls and ms per step, share of
# the step, GFLOP/s or GB/s) and the start-of-run sgemm speed to compare the GEMM rows with.
# The first step is not profiled (first-touch page faults); the tables are of steps 2..N.
#
# Usage: scripts/bench_step_breakdown.sh [--steps N] [--no-build] [-- --set k=v ...]
#   --steps N    optimizer steps per run (default 8)
#   --no-build   use the memtrain already in $MEMTRAIN_BUILD_DIR (default build/)
#   -- ARGS      passed to every `memtrain train`
# Writes runs/bench-step-breakdown/<dtype>/op_profile.json and prints the tables. About 1 minute
# on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

steps=8
build=1
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps)
      [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || { echo "bench_step_breakdown.sh: --steps needs a positive integer" >&2; exit 2; }
      steps="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench_step_breakdown.sh: unknown argument $1; expected --steps N, --no-build or -- ARGS" >&2; exit 2 ;;
  esac
done
build_dir="${MEMTRAIN_BUILD_DIR:-build}"
if [[ $build -eq 1 ]]; then MEMTRAIN_TARGET=memtrain bash scripts/build.sh; fi
out=runs/bench-step-breakdown
rm -rf "$out"
mkdir -p "$out"
# bf16-fp32-gemm: bf16 storage with its GEMMs on float views (precision.bf16_gemm: fp32), the
# path every CPU without bf16 dot products takes, beside bf16 with the default (auto).
for run in fp32 bf16 bf16-fp32-gemm fp16; do
  dtype="${run%%-*}"
  gemm=auto
  [[ "$run" == bf16-fp32-gemm ]] && gemm=fp32
  echo "== $run"
  "$build_dir/memtrain" train --config configs/bench-bert.yaml --run-dir "$out/$run" \
    --set training.max_steps="$steps" --set precision.dtype="$dtype" --set precision.bf16_gemm="$gemm" \
    --profile-ops "${extra[@]}" > "$out/$run.log"
  grep -m1 "sgemm" "$out/$run.log" || true
  grep -m1 "memtrain: precision" "$out/$run.log" || true
  sed -n '/^op profile of/,$p' "$out/$run.log"
done
