#!/usr/bin/env bash
# Issue 12's benchmark of gradient compression, from one run on this machine: the data-parallel
# sum of BERT-Base-size gradients (110 M f32 in 25 MiB buckets) through memtrain's
# GradientSynchronizer with compression.method none, PowerSGD rank 1, 4 and 16, and 1-bit, on 2
# and 4 ranks (benchmarks/bench_compression; medians of alternating repeats, the slowest rank's).
# Per method: payload bytes per rank and step, the time of the sum, the part of it inside
# collectives and the rest (compression and decompression), and the speed-up over none.
# The Markdown table goes to --out (README, "Performance").
#
# Usage: scripts/bench_compression.sh [--repeats N] [--scale S] [--out FILE.md] [--no-build]
#   --repeats N  repeats of each method (default 5)
#   --scale S    multiplies BERT-Base's hidden sizes (default 1)
#   --out FILE   the Markdown table (default runs/bench-compression/table.md)
#   --no-build   use what is in $MEMTRAIN_BUILD_DIR (default build/)
# About 2 minutes on 2 cores with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

repeats=5
scale=1
out=runs/bench-compression/table.md
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeats) repeats="$2"; shift 2 ;;
    --scale) scale="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "bench_compression.sh: unknown argument $1; expected --repeats N, --scale S, --out FILE or --no-build" >&2; exit 2 ;;
  esac
done
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "bench_compression.sh: --repeats $repeats: expected a positive integer" >&2; exit 2; }
[[ "$scale" =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "bench_compression.sh: --scale $scale: expected a positive number" >&2; exit 2; }

bash scripts/install_deps.sh
build_dir="${MEMTRAIN_BUILD_DIR:-build}"
if (( build )); then
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DMEMTRAIN_BUILD_BENCHMARKS=ON >/dev/null
  cmake --build "$build_dir" -j"${MEMTRAIN_JOBS:-$(nproc)}" --target bench_compression >/dev/null
fi
bench="$build_dir/benchmarks/bench_compression"
[[ -x "$bench" ]] || { echo "bench_compression.sh: $bench not found (run without --no-build)" >&2; exit 1; }

work="$(dirname "$out")/runs"
rm -rf "$work"
mkdir -p "$work"
root=()
if [[ "$(id -u)" == 0 ]]; then root=(--allow-run-as-root); fi
for np in 2 4; do
  echo "bench_compression.sh: $np ranks" >&2
  mpirun "${root[@]}" --oversubscribe -np "$np" "$bench" --repeats "$repeats" --scale "$scale" > "$work/compression-$np.jsonl"
done

mkdir -p "$(dirname "$out")"
python3 - "$work" "$out" <<'PY'
import json, os, sys
work, out = sys.argv[1], sys.argv[2]
lines = ["| ranks | method | bytes per rank and step | fewer bytes than none | sum per step | "
         "in collectives | compression + decompression | speed-up over none |",
         "|---|---|---|---|---|---|---|---|"]
for np in (2, 4):
    for line in open(os.path.join(work, f"compression-{np}.jsonl")):
        m = json.loads(line)
        lines.append(f"| {np} | {m['method'].replace('powersgd_r', 'powersgd rank ')} | {m['bytes'] / 1e6:.2f} MB | "
                     f"{m['byte_ratio']:.1f}x | {1000 * m['sync_s']:.0f} ms | {1000 * m['collective_s']:.0f} ms | "
                     f"{1000 * m['compress_s']:.0f} ms | {m['speedup']:.2f}x |")
elements = json.loads(open(os.path.join(work, "compression-2.jsonl")).readline())["elements"]
text = "\n".join(lines) + f"\n\n{elements / 1e6:.1f} M f32 gradient elements per rank.\n"
open(out, "w").write(text)
print(text)
PY
