#!/usr/bin/env bash
# Issue 13's benchmark, in one run on one disk: checkpoint write throughput of bert-base
# (configs/bert-base.yaml on mock data: parameters, AdamW moments; about 1.3 GB) against `dd` of
# the same number of bytes to the same directory with an fsync at the end (the target: at
# least half of dd), the training time a checkpoint costs synchronously and with
# checkpoint.async (runs of the same steps with none, side by side), and the time from a
# restart (after SIGKILL) to the end of the first resumed step.
#
# Usage: scripts/bench_checkpoint.sh [--repeats N] [--dir DIR] [--no-build]
#   --repeats N   checkpoints (and dd runs) measured; medians are reported (default 3)
#   --dir DIR     where the runs and the dd file go (default runs/bench-checkpoint)
#   --no-build    use the memtrain already in $MEMTRAIN_BUILD_DIR (default build/)
# Prints a Markdown table. About 5-8 minutes on 2 cores and a local disk.
set -euo pipefail
cd "$(dirname "$0")/.."

repeats=3
dir=runs/bench-checkpoint
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeats) repeats="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "bench_checkpoint.sh: unknown argument $1; expected --repeats N, --dir DIR or --no-build" >&2; exit 2 ;;
  esac
done
if ! [[ "$repeats" =~ ^[0-9]+$ ]] || (( repeats < 1 )); then
  echo "bench_checkpoint.sh: --repeats $repeats; expected an integer >= 1" >&2
  exit 2
fi
build_dir=${MEMTRAIN_BUILD_DIR:-build}
if (( build )); then MEMTRAIN_TARGET=memtrain bash scripts/build.sh; fi
memtrain="$build_dir/memtrain"
rm -rf "$dir"
mkdir -p "$dir"

# One step per checkpoint; tiny batches so that the step is short next to the checkpoint.
common=(--config configs/bert-base.yaml --set data.mock=true --set data.seq_length=16
        --set training.micro_batch_size=1 --set training.global_batch_size=1
        --set training.eval_steps=1 --set training.eval_interval=1000000 --set training.log_interval=1
        --set training.lr_decay_steps=1000 --set checkpoint.keep_last=1000)
steps=$((repeats + 1))
"$memtrain" train "${common[@]}" --set training.max_steps=$steps --set checkpoint.interval=1 \
  --run-dir "$dir/with" > "$dir/with.log"
"$memtrain" train "${common[@]}" --set training.max_steps=$steps --set checkpoint.interval=0 \
  --run-dir "$dir/without" > "$dir/without.log"
bytes=$(du -sb "$dir/with/checkpoints/step-00000001" | cut -f1)

# Training time lost per checkpoint: steps long enough (micro-batch 8 x seq 64) that a
# background write can finish between checkpoints every 4 steps; the same steps with none.
lost=(--set data.seq_length=64 --set training.micro_batch_size=8 --set training.global_batch_size=8
      --set training.max_steps=$((4 * repeats)))
for mode in none sync async; do
  case $mode in
    none) extra=(--set checkpoint.interval=0) ;;
    sync) extra=(--set checkpoint.interval=4) ;;
    async) extra=(--set checkpoint.interval=4 --set checkpoint.async=true) ;;
  esac
  "$memtrain" train "${common[@]}" "${lost[@]}" "${extra[@]}" --run-dir "$dir/lost-$mode" > "$dir/lost-$mode.log"
done

# dd of the same bytes, fsynced, into the same directory.
dd_s=()
for ((i = 0; i < repeats; ++i)); do
  t0=$(date +%s.%N)
  dd if=/dev/zero of="$dir/dd.bin" bs=4M count=$(( (bytes + 4194303) / 4194304 )) conv=fsync status=none
  t1=$(date +%s.%N)
  dd_s+=("$(python3 -c "print($t1 - $t0)")")
  rm -f "$dir/dd.bin"
done

# Restart: SIGKILL after step 2 (checkpoint at 2), then resume and run step 3.
MEMTRAIN_FAULT=kill_at_step=2 "$memtrain" train "${common[@]}" --set training.max_steps=3 \
  --set checkpoint.interval=2 --run-dir "$dir/restart" > /dev/null 2>&1 || true
t0=$(date +%s.%N)
"$memtrain" train "${common[@]}" --set training.max_steps=3 --set checkpoint.interval=1000 \
  --run-dir "$dir/restart" --resume required > "$dir/restart.log"
t1=$(date +%s.%N)
restart_s=$(python3 -c "print($t1 - $t0)")

python3 - "$dir" "$bytes" "$restart_s" "$repeats" "${dd_s[@]}" <<'PY'
import json, re, statistics, sys
d, nbytes, restart_s, repeats = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
dd = [float(x) for x in sys.argv[5:]]
saves = [float(m) for m in re.findall(r"checkpoint of step \d+ saved to \S+ \(([0-9.]+) s\)", open(f"{d}/with.log").read())]
def step_s(run):
    return [json.loads(l)["time_forward_s"] + json.loads(l)["time_backward_s"] + json.loads(l)["time_optimizer_s"]
            for l in open(f"{d}/{run}/metrics.jsonl") if '"loss"' in l]
def wall(run):
    m = re.search(r"time\s+([0-9.]+) s", open(f"{d}/{run}.log").read())
    return float(m.group(1)) if m else float("nan")
loaded = re.search(r"resumed from checkpoint \S+ \(step 2\) in ([0-9.]+) s", open(f"{d}/restart.log").read())
save, ddm = statistics.median(saves), statistics.median(dd)
gb = nbytes / 1e9
print(f"| measure | value |\n|---|---|")
print(f"| checkpoint size | {gb:.2f} GB |")
print(f"| synchronous checkpoint, median of {len(saves)} | {save:.2f} s ({gb / save:.2f} GB/s) |")
print(f"| dd of the same bytes + fsync, median of {len(dd)} | {ddm:.2f} s ({gb / ddm:.2f} GB/s) |")
print(f"| checkpoint throughput / dd | {ddm / save:.2f} |")
print(f"| run wall time with a checkpoint every step / without ({len(saves)} steps) | {wall('with'):.1f} s / {wall('without'):.1f} s |")
lost = {m: wall(f"lost-{m}") for m in ("none", "sync", "async")}
med = {m: statistics.median(step_s(f"lost-{m}")) for m in ("none", "sync", "async")}
print(f"| {4 * repeats}-step runs (micro-batch 8, seq 64), a checkpoint every 4 steps: wall time with none / synchronous / asynchronous | {lost['none']:.1f} s / {lost['sync']:.1f} s / {lost['async']:.1f} s |")
print(f"| median step time in those runs: none / synchronous / asynchronous | {med['none']:.2f} s / {med['sync']:.2f} s / {med['async']:.2f} s |")
print(f"| training time lost per checkpoint, synchronous / asynchronous ({repeats} checkpoints; the last, at the end of the run, is waited for in both) | {(lost['sync'] - lost['none']) / repeats:.2f} s / {(lost['async'] - lost['none']) / repeats:.2f} s |")
print(f"| restart to end of the first resumed step (process start to exit) | {restart_s:.1f} s (load {float(loaded.group(1)) if loaded else float('nan'):.2f} s) |")
PY
