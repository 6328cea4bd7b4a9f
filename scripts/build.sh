#!/usr/bin/env bash
# Configures and builds memtrain into build/ (Release). Extra arguments go to cmake configure;
# MEMTRAIN_TARGET builds one target only, MEMTRAIN_BUILD_DIR picks another build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${MEMTRAIN_BUILD_DIR:-build}
JOBS=${MEMTRAIN_JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
if [[ -n "${MEMTRAIN_TARGET:-}" ]]; then
  cmake --build "$BUILD_DIR" -j"$JOBS" --target "$MEMTRAIN_TARGET"
else
  cmake --build "$BUILD_DIR" -j"$JOBS"
fi
