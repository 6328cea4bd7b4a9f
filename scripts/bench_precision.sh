#!/usr/bin/env bash
# Issue 5's benchmark: tokens/s and peak allocated bytes of bert-base (configs/bert-base.yaml on
# mock data, micro-batch 8) for precision fp32/fp16/bf16 x recompute none/selective/full at
# sequence length 128, plus selective (and its fp32/none baseline) at 512, with the ratios
# against fp32/none of the same length. One memtrain run per cell, one after the other.
# tokens/s is the median over the steps after the first (the first pays for the allocator's
# first segments and cold caches); peak allocated bytes is the allocator's peak over the run.
#
# Usage: scripts/bench_precision.sh [--steps N] [--out FILE.md] [--no-build] [-- --set k=v ...]
#   --steps N      optimizer steps per cell at seq 128 (default 4; seq 512 runs N-1, at least 2)
#   --out FILE     where the Markdown table goes (default runs/bench-precision/table.md)
#   --no-build     use the memtrain already in $MEMTRAIN_BUILD_DIR (default build/)
#   -- ARGS        passed to every `memtrain train` (e.g. -- --set model.num_hidden_layers=2 for
#                  a quick look; the table then is not bert-base's, and says so)
# A cell whose setting this build rejects (exit 2: a feature not built yet) is shown as n/a.
# About 8-10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

steps=4
out=runs/bench-precision/table.md
build=1
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench_precision.sh: unknown argument $1; expected --steps N, --out FILE or --no-build" >&2; exit 2 ;;
  esac
done
if ! [[ "$steps" =~ ^[0-9]+$ ]] || (( steps < 2 )); then
  echo "bench_precision.sh: --steps $steps; expected an integer >= 2 (the first step is not timed)" >&2
  exit 2
fi

build_dir=${MEMTRAIN_BUILD_DIR:-build}
if (( build )); then MEMTRAIN_TARGET=memtrain bash scripts/build.sh; fi
memtrain="$build_dir/memtrain"
[[ -x "$memtrain" ]] || { echo "bench_precision.sh: $memtrain is not built" >&2; exit 2; }

work=$(dirname "$out")/cells
rm -rf "$work"
mkdir -p "$work"
cells=()
for seq in 128 512; do
  if (( seq == 128 )); then
    combos="fp32:none fp32:selective fp32:full fp16:none fp16:selective fp16:full bf16:none bf16:selective bf16:full"
    n=$steps
  else
    combos="fp32:none fp32:selective"
    n=$(( steps > 2 ? steps - 1 : 2 ))
  fi
  for combo in $combos; do
    dtype=${combo%%:*}
    recompute=${combo##*:}
    name="$dtype-$recompute-$seq"
    echo "bench_precision: $name ($n steps)" >&2
    set +e
    "$memtrain" train --config configs/bert-base.yaml --run-dir "$work/$name" \
      --set data.mock=true --set data.seq_length="$seq" \
      --set training.micro_batch_size=8 --set training.global_batch_size=8 \
      --set training.max_steps="$n" --set training.warmup_steps=0 --set training.log_interval=1 \
      --set training.eval_interval="$n" --set training.eval_steps=1 \
      --set precision.dtype="$dtype" --set memory.recompute="$recompute" ${extra[@]+"${extra[@]}"} \
      > "$work/$name.log" 2>&1
    rc=$?
    set -e
    if (( rc != 0 && rc != 2 )); then
      echo "bench_precision.sh: $name failed (exit $rc); see $work/$name.log" >&2
      tail -3 "$work/$name.log" >&2
      exit 1
    fi
    cells+=("$name:$dtype:$recompute:$seq:$rc")
  done
done

{
  /usr/bin/python3 scripts/bench/precision_table.py "$work" "${cells[@]}"
  if (( ${#extra[@]} )); then echo; echo "Extra arguments to every run: ${extra[*]}"; fi
} > "$out"
cat "$out"
echo "bench_precision: table written to $out" >&2
