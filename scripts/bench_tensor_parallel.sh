#!/usr/bin/env bash
# Issue 10's benchmark: tokens/s of BERT-Base width with 2 layers (configs/bench-bert.yaml, mock
# data, seq 128, global batch 8) as 1 rank x 2 threads, tensor parallel 2 x 1 thread and data
# parallel 2 x 1 thread, plus the bytes and time of the tensor-parallel collectives per step
# (metrics.jsonl tp_comm_bytes, time_tp_comm_s). The three layouts run one after the other,
# `--rounds` times in turn (the machine is shared and noisy: compare within a round), and the
# table gives medians over all rounds of each layout's per-step figures after the first
# `--skip` steps, with ratios against 1 x 2 threads.
#
# Usage: scripts/bench_tensor_parallel.sh [--rounds N] [--steps N] [--out FILE.md] [--no-build]
#   --rounds N   times each layout runs (default 2)
#   --steps N    optimizer steps per run (default 14; the first 3 are not counted)
#   --out FILE   where the Markdown table goes (default runs/bench-tensor-parallel/table.md)
#   --no-build   use the memtrain already in $MEMTRAIN_BUILD_DIR (default build/)
# About 5 minutes on 2 cores with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=2
steps=14
skip=3
out=runs/bench-tensor-parallel/table.md
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "bench_tensor_parallel.sh: unknown argument $1; expected --rounds N, --steps N, --out FILE or --no-build" >&2; exit 2 ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench_tensor_parallel.sh: --rounds $rounds: expected a positive integer" >&2; exit 2; }
[[ "$steps" =~ ^[0-9]+$ ]] && (( steps > skip )) || { echo "bench_tensor_parallel.sh: --steps $steps: expected an integer above $skip" >&2; exit 2; }

bash scripts/install_deps.sh
build_dir="${MEMTRAIN_BUILD_DIR:-build}"
if (( build )); then MEMTRAIN_TARGET=memtrain bash scripts/build.sh; fi
bin="$build_dir/memtrain"
[[ -x "$bin" ]] || { echo "bench_tensor_parallel.sh: $bin not found (run scripts/build.sh)" >&2; exit 1; }

work="$(dirname "$out")/runs"
rm -rf "$work"
mkdir -p "$work"
root=()
if [[ "$(id -u)" == 0 ]]; then root=(--allow-run-as-root); fi
common=(--config configs/bench-bert.yaml --set "training.max_steps=$steps" --set training.log_interval=1)

for round in $(seq 1 "$rounds"); do
  echo "bench_tensor_parallel.sh: round $round of $rounds" >&2
  "$bin" train "${common[@]}" --set training.num_threads=2 --run-dir "$work/single-$round" > "$work/single-$round.log" 2>&1
  mpirun "${root[@]}" -np 2 --bind-to core "$bin" train "${common[@]}" --set training.num_threads=1 \
    --set parallel.tensor_model_parallel_size=2 --run-dir "$work/tp2-$round" > "$work/tp2-$round.log" 2>&1
  mpirun "${root[@]}" -np 2 --bind-to core "$bin" train "${common[@]}" --set training.num_threads=1 \
    --set training.micro_batch_size=4 --run-dir "$work/dp2-$round" > "$work/dp2-$round.log" 2>&1
done

mkdir -p "$(dirname "$out")"
python3 - "$work" "$rounds" "$skip" "$out" <<'PY'
import json, statistics, sys, os
work, rounds, skip, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def steps(run):
    rows = []
    for line in open(os.path.join(work, run, "metrics.jsonl")):
        m = json.loads(line)
        if "loss" in m and m["step"] > skip:
            rows.append(m)
    return rows
layouts = [("single", "1 rank x 2 threads"), ("tp2", "tensor parallel 2 x 1 thread"),
           ("dp2", "data parallel 2 x 1 thread")]
med = {}
for key, _ in layouts:
    rows = [m for r in range(1, rounds + 1) for m in steps(f"{key}-{r}")]
    med[key] = {k: statistics.median(m[k] for m in rows)
                for k in ("tokens_per_s", "tp_comm_bytes", "time_tp_comm_s", "time_comm_s",
                          "time_forward_s", "time_backward_s")}
    med[key]["n"] = len(rows)
    med[key]["loss"] = rows[-1]["loss"]
base = med["single"]["tokens_per_s"]
lines = ["| layout | tokens/s (median) | vs 1 x 2 threads | tp collectives per step | "
         "tp collective time per step | dp gradient sum per step | steps counted |",
         "|---|---|---|---|---|---|---|"]
for key, name in layouts:
    m = med[key]
    tp = f"{m['tp_comm_bytes'] / 2**20:.1f} MiB" if m["tp_comm_bytes"] > 0 else "-"
    tpt = f"{1000 * m['time_tp_comm_s']:.1f} ms" if m["tp_comm_bytes"] > 0 else "-"
    dp = f"{1000 * m['time_comm_s']:.1f} ms"
    lines.append(f"| {name} | {m['tokens_per_s']:.0f} | {m['tokens_per_s'] / base:.2f} | {tp} | "
                 f"{tpt} | {dp} | {m['n']} |")
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text)
PY
echo "bench_tensor_parallel.sh: table in $out; runs in $work" >&2
