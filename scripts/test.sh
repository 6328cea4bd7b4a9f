#!/usr/bin/env bash
# Installs what is missing, builds, and runs the test suite through CTest.
#   scripts/test.sh          unit tests (label `slow` excluded), plus the memory/ sanitizer build
#   scripts/test.sh --slow   everything, including tests labelled `slow`
set -euo pipefail
cd "$(dirname "$0")/.."
SLOW=0
for a in "$@"; do
  case "$a" in
    --slow) SLOW=1 ;;
    *) echo "usage: scripts/test.sh [--slow]" >&2; exit 2 ;;
  esac
done
# --slow also compares memtrain with PyTorch (tests/cli/slow/export_pytorch_test.cpp).
if ((SLOW)); then
  bash scripts/install_deps.sh --with-torch
else
  bash scripts/install_deps.sh
fi
# Every tracked C++ file as .clang-format says (clang-format 14, Debian 12's): a diff fails here,
# before the build. `scripts/format.sh` rewrites them in place.
bash scripts/format.sh --check
bash scripts/build.sh
JOBS=${MEMTRAIN_JOBS:-$(nproc)}
if ((SLOW)); then
  (cd build && ctest --output-on-failure -j"$JOBS" --timeout 1800)
else
  (cd build && ctest --output-on-failure -j"$JOBS" -LE slow --timeout 600)
fi
# memory/ under AddressSanitizer + UndefinedBehaviorSanitizer (its own small build).
MEMTRAIN_BUILD_DIR=build-asan bash scripts/build.sh -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMEMTRAIN_SANITIZE=ON -DMEMTRAIN_ONLY_MEMORY=ON -DMEMTRAIN_BUILD_BENCHMARKS=OFF
(cd build-asan && ctest --output-on-failure -j"$JOBS" -LE slow --timeout 900)
