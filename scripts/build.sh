#!/usr/bin/env bash
# Configures and builds memtrain into build/ (Release). Extra arguments go to cmake configure;
# MEMTRAIN_TARGET builds only the targets it names (space-separated), MEMTRAIN_BUILD_DIR picks
# another build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${MEMTRAIN_BUILD_DIR:-build}
JOBS=${MEMTRAIN_JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
if [[ -n "${MEMTRAIN_TARGET:-}" ]]; then
  read -r -a targets <<<"$MEMTRAIN_TARGET"
  cmake --build "$BUILD_DIR" -j"$JOBS" --target "${targets[@]}"
else
  cmake --build "$BUILD_DIR" -j"$JOBS"
fi
