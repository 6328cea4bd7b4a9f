#!/usr/bin/env bash
# The BERT-Large memory-utilization experiments (issue 4, docs/memory-experiments.md): records
# one dry-run trace per setting (precision x recompute x shape), replays it under every
# allocator policy on each layout's device, asks `memtrain plan` for the largest micro-batch,
# and writes results/bert_large_memory/: cells.csv, table.md, commands.txt and the PNG plots.
# Prints the check of the issue's utilization targets. About 20 minutes on 2 cores (2026-12-01).
#   scripts/bert_large_memory.sh [--quick] [--config F] [--out DIR]
# --quick: a few cells only (a check of the pipeline). MEMTRAIN_BUILD_DIR picks the build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh --with-plots
BUILD_DIR=${MEMTRAIN_BUILD_DIR:-build}
MEMTRAIN_BUILD_DIR="$BUILD_DIR" MEMTRAIN_TARGET=memtrain bash scripts/build.sh -DMEMTRAIN_BUILD_BENCHMARKS=OFF
OUT=results/bert_large_memory
ARGS=()
while (($#)); do
  case "$1" in
    --quick) ARGS+=(--quick); shift ;;
    --config) ARGS+=(--config "$2"); shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) echo "usage: scripts/bert_large_memory.sh [--quick] [--config F] [--out DIR]" >&2; exit 2 ;;
  esac
done
/usr/bin/python3 scripts/experiments/run_grid.py --binary "$BUILD_DIR/memtrain" --out "$OUT" "${ARGS[@]}"
# report.py exits 1 when a setting's recording failed; the plots are still drawn.
status=0
/usr/bin/python3 scripts/experiments/report.py "$OUT" || status=$?
/usr/bin/python3 scripts/experiments/plots.py "$OUT"
exit "$status"
