#!/usr/bin/env bash
# The main job: install what is missing, build, prepare the KJV corpus and train configs/main.yaml
# (MEMTRAIN_CONFIG=configs/other.yaml trains another config).
# Arguments are passed to `memtrain train` (e.g. --set training.max_steps=50).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
MEMTRAIN_TARGET=memtrain bash scripts/build.sh
exec build/memtrain train --config "${MEMTRAIN_CONFIG:-configs/main.yaml}" "$@"
