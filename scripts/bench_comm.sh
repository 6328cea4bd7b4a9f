#!/usr/bin/env bash
# Issue 11's benchmark of data-parallel gradient synchronisation, from one run on this machine:
#  1. throughput: BERT-Base-size gradients (110 M f32 in 25 MiB buckets) summed through
#     memtrain's GradientSynchronizer against one bare MPI_Allreduce of the same bytes, 2 and 4
#     ranks (benchmarks/bench_gradient_sync; medians of alternating repeats);
#  2. overlap: data parallel 2 x 1 thread on BERT-Base width with 2 and with 12 layers
#     (configs/bench-bert.yaml, micro-batch 4, global batch 8), parallel.overlap_grad_reduce
#     true against false, alternating `--rounds` times. metrics.jsonl time_comm_exposed_s is
#     what backward did not hide; without overlap all of the sum is exposed, so the hidden share
#     is 1 - exposed(overlap) / exposed(no overlap), from the medians over the counted steps;
#  3. memory: the same data-parallel 2 run with parallel.zero_stage 1 against 0 (peak allocated
#     bytes per rank, metrics.jsonl), in the same rounds.
# The Markdown table goes to --out (README, "Performance").
#
# Usage: scripts/bench_comm.sh [--rounds N] [--steps N] [--repeats N] [--out FILE.md] [--no-build]
#   --rounds N   training runs per setting (default 2)
#   --steps N    optimizer steps per run (default 8; the first 2 are not counted)
#   --repeats N  repeats of each sum in part 1 (default 5)
#   --out FILE   the Markdown table (default runs/bench-comm/table.md)
#   --no-build   use what is in $MEMTRAIN_BUILD_DIR (default build/)
# About 6 minutes on 2 cores with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=2
steps=8
skip=2
repeats=5
out=runs/bench-comm/table.md
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "bench_comm.sh: unknown argument $1; expected --rounds N, --steps N, --repeats N, --out FILE or --no-build" >&2; exit 2 ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench_comm.sh: --rounds $rounds: expected a positive integer" >&2; exit 2; }
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "bench_comm.sh: --repeats $repeats: expected a positive integer" >&2; exit 2; }
[[ "$steps" =~ ^[0-9]+$ ]] && (( steps > skip )) || { echo "bench_comm.sh: --steps $steps: expected an integer above $skip" >&2; exit 2; }

bash scripts/install_deps.sh
build_dir="${MEMTRAIN_BUILD_DIR:-build}"
if (( build )); then
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DMEMTRAIN_BUILD_BENCHMARKS=ON >/dev/null
  cmake --build "$build_dir" -j"${MEMTRAIN_JOBS:-$(nproc)}" --target memtrain bench_gradient_sync >/dev/null
fi
bin="$build_dir/memtrain"
bench="$build_dir/benchmarks/bench_gradient_sync"
for f in "$bin" "$bench"; do
  [[ -x "$f" ]] || { echo "bench_comm.sh: $f not found (run without --no-build)" >&2; exit 1; }
done

work="$(dirname "$out")/runs"
rm -rf "$work"
mkdir -p "$work"
root=()
if [[ "$(id -u)" == 0 ]]; then root=(--allow-run-as-root); fi

for np in 2 4; do
  echo "bench_comm.sh: synchroniser against MPI_Allreduce, $np ranks" >&2
  mpirun "${root[@]}" --oversubscribe -np "$np" "$bench" --repeats "$repeats" > "$work/sync-$np.json"
done

common=(--config configs/bench-bert.yaml --set "training.max_steps=$steps" --set training.log_interval=1
        --set training.num_threads=1 --set training.micro_batch_size=4)
for round in $(seq 1 "$rounds"); do
  for overlap in true false; do
    echo "bench_comm.sh: data parallel 2, overlap_grad_reduce $overlap, round $round of $rounds" >&2
    mpirun "${root[@]}" -np 2 --bind-to core "$bin" train "${common[@]}" \
      --set "parallel.overlap_grad_reduce=$overlap" --run-dir "$work/overlap-$overlap-$round" \
      > "$work/overlap-$overlap-$round.log" 2>&1
  done
  for overlap in true false; do
    echo "bench_comm.sh: data parallel 2, 12 layers, overlap_grad_reduce $overlap, round $round of $rounds" >&2
    mpirun "${root[@]}" -np 2 --bind-to core "$bin" train "${common[@]}" --set model.num_hidden_layers=12 \
      --set "parallel.overlap_grad_reduce=$overlap" --run-dir "$work/overlap12-$overlap-$round" \
      > "$work/overlap12-$overlap-$round.log" 2>&1
  done
  echo "bench_comm.sh: data parallel 2, ZeRO-1, round $round of $rounds" >&2
  mpirun "${root[@]}" -np 2 --bind-to core "$bin" train "${common[@]}" \
    --set parallel.zero_stage=1 --run-dir "$work/zero1-$round" > "$work/zero1-$round.log" 2>&1
done

mkdir -p "$(dirname "$out")"
python3 - "$work" "$rounds" "$skip" "$out" <<'PY'
import json, statistics, sys, os
work, rounds, skip, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
lines = ["| ranks | gradient elements (f32) | buckets | bare MPI_Allreduce | synchroniser | "
         "synchroniser / bare throughput |", "|---|---|---|---|---|---|"]
for np in (2, 4):
    s = json.loads(open(os.path.join(work, f"sync-{np}.json")).read())
    lines.append(f"| {np} | {s['elements'] / 1e6:.1f} M | {s['buckets']} | "
                 f"{1000 * s['bare_allreduce_s']:.0f} ms ({s['bare_gb_per_s']:.2f} GB/s) | "
                 f"{1000 * s['synchronizer_s']:.0f} ms ({s['synchronizer_gb_per_s']:.2f} GB/s) | "
                 f"{s['ratio']:.2f} |")
def rows(setting, prefix="overlap-"):
    out = []
    for r in range(1, rounds + 1):
        for line in open(os.path.join(work, f"{prefix}{setting}-{r}", "metrics.jsonl")):
            m = json.loads(line)
            if "loss" in m and m["step"] > skip:
                out.append(m)
    return out
lines += ["", "| data parallel 2 x 1 thread, BERT-Base width | exposed gradient sync per step | "
          "backward per step | tokens/s | gradient bytes per step | steps counted |",
          "|---|---|---|---|---|---|"]
hidden = {}
for layers, prefix in ((2, "overlap-"), (12, "overlap12-")):
    med = {}
    for setting in ("true", "false"):
        rs = rows(setting, prefix)
        med[setting] = {k: statistics.median(m[k] for m in rs)
                        for k in ("time_comm_exposed_s", "tokens_per_s", "time_backward_s", "comm_bytes")}
        med[setting]["n"] = len(rs)
    hidden[layers] = 1 - med["true"]["time_comm_exposed_s"] / med["false"]["time_comm_exposed_s"]
    for setting, name in (("false", "overlap_grad_reduce: false"), ("true", "overlap_grad_reduce: true")):
        m = med[setting]
        lines.append(f"| {layers} layers, {name} | {1000 * m['time_comm_exposed_s']:.1f} ms | "
                     f"{1000 * m['time_backward_s']:.0f} ms | {m['tokens_per_s']:.0f} | "
                     f"{m['comm_bytes'] / 2**20:.1f} MiB | {m['n']} |")
# The tied word embedding (30522 x 768): the embeddings' backward, the last stage, writes the
# rows of the batch's tokens; the others go right after the decoder (Note [The tied
# embedding's rows are summed in two parts]). Its share of the bytes, for the record.
C, V, I, P = 768, 30522, 3072, 512
layer = 4 * (C * C + C) + 2 * 2 * C + (I * C + I) + (C * I + C)
for layers in (2, 12):
    total = layers * layer + V * C + P * C + 2 * C + 2 * C + (C * C + C) + 2 * C + V
    lines += ["", f"{layers} layers: share of the gradient sync hidden behind backward {100 * hidden[layers]:.0f} % "
              f"(the tied word embedding holds {V * C / 1e6:.1f} M of the {total / 1e6:.1f} M gradients, "
              f"{100 * V * C / total:.0f} % of the bytes; its rows outside the batch go before the encoder's "
              f"backward)."]
z = {}
for name, rs in (("0", rows("true")), ("1", rows("", prefix="zero1"))):
    z[name] = {k: statistics.median(m[k] for m in rs)
               for k in ("peak_allocated_bytes", "tokens_per_s", "comm_bytes", "loss")}
lines += ["", "| data parallel 2, BERT-Base width, 2 layers, fp32 | peak allocated per rank | tokens/s | "
          "gradient-sync bytes per step | loss (median) |", "|---|---|---|---|---|"]
for name in ("0", "1"):
    m = z[name]
    lines.append(f"| parallel.zero_stage: {name} | {m['peak_allocated_bytes'] / 2**20:.1f} MiB | "
                 f"{m['tokens_per_s']:.0f} | {m['comm_bytes'] / 2**20:.1f} MiB | {m['loss']:.4f} |")
lines += ["", f"ZeRO-1 / stage 0 peak allocated: "
          f"{z['1']['peak_allocated_bytes'] / z['0']['peak_allocated_bytes']:.3f}."]
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text)
PY
echo "bench_comm.sh: table in $out; runs in $work" >&2
