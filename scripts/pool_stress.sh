#!/usr/bin/env bash
# The pool stress test of issue 45 (section 6): N random-size jobs on one memory pool under three
# regimes (no coordination, static reservations first come first served, memtrain's pool with
# priorities, elastic jobs and preemption), each job's final loss against its solo run, and a
# plot of the pool's use over time (scripts/experiments/pool_stress.py says what it does).
#   scripts/pool_stress.sh [--jobs N] [--seed S] [--scale] [--repeats R] [--out DIR] [--plot-to PNG]
# Default: 10 tiny jobs, about 10 minutes on a 2-core machine; --scale sizes BERT-Base/Large jobs
# for a real machine. Uses the built build/memtrain (MEMTRAIN_BUILD_DIR picks another build
# folder) and builds it only when it is missing. The plot needs python3-matplotlib
# (scripts/install_deps.sh --with-plots); without it the tables and the JSON are still written.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${MEMTRAIN_BUILD_DIR:-build}
if [[ ! -x "$BUILD_DIR/memtrain" ]]; then
  MEMTRAIN_TARGET=memtrain bash scripts/build.sh
fi
exec /usr/bin/python3 scripts/experiments/pool_stress.py --memtrain "$BUILD_DIR/memtrain" "$@"
