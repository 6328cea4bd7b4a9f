#!/usr/bin/env bash
# Builds and runs benchmarks/bench_bf16_gemm (Google Benchmark): a bench-bert step's Linear
# products through OpenBLAS's sgemm (float operands) and through oneDNN's bf16 matmul (bf16
# operands, Note [bf16 GEMMs through oneDNN]), taking turns in every repetition; prints the
# median GFLOP/s of each and their ratio per shape.
#   scripts/bench_bf16_gemm.sh [--repetitions N]
# MEMTRAIN_BUILD_DIR picks the build folder (default build). OpenBLAS follows OPENBLAS_CORETYPE,
# oneDNN ONEDNN_MAX_CPU_ISA.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=5
while (($#)); do
  case "$1" in
    --repetitions)
      [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || { echo "bench_bf16_gemm.sh: --repetitions needs a positive integer" >&2; exit 2; }
      REPS="$2"; shift 2 ;;
    *) echo "usage: scripts/bench_bf16_gemm.sh [--repetitions N]" >&2; exit 2 ;;
  esac
done
bash scripts/install_deps.sh
BUILD_DIR=${MEMTRAIN_BUILD_DIR:-build}
JOBS=${MEMTRAIN_JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DMEMTRAIN_BUILD_BENCHMARKS=ON >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target bench_bf16_gemm >/dev/null
OUT="$BUILD_DIR/bench_bf16_gemm.json"
"$BUILD_DIR/benchmarks/bench_bf16_gemm" --benchmark_repetitions="$REPS" --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true --benchmark_out="$OUT" --benchmark_out_format=json >/dev/null
/usr/bin/python3 - "$OUT" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
runs = data["benchmarks"]
med = {}
for r in runs:
    if r.get("aggregate_name") != "median" or "FLOP/s" not in r:
        continue
    kind, shape = r["run_name"].split("/", 1)
    med[(kind, shape)] = r["FLOP/s"] / 1e9
print(f"{'shape (N, C, OC, threads)':<40} {'sgemm GFLOP/s':>14} {'bf16 GFLOP/s':>13} {'ratio':>6}")
for (kind, shape), sgemm in sorted(med.items()):
    if kind != "BM_LinearSgemm":
        continue
    bf16 = med.get(("BM_LinearBf16OneDnn", shape))
    ratio = f"{bf16 / sgemm:6.2f}" if bf16 else "     -"
    print(f"{shape:<40} {sgemm:14.1f} {bf16 if bf16 else float('nan'):13.1f} {ratio}")
PY
