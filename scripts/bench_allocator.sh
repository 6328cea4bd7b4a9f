#!/usr/bin/env bash
# Builds and runs benchmarks/bench_allocator (Google Benchmark), then prints three tables:
# the cached alloc+free pair per policy against glibc malloc/free (median CPU time over
# repetitions; target <= 100 ns for best_fit), replay throughput in events/s (target >= 5 M/s),
# and utilization on the transformer trace (target >= 0.95 for best_fit and vmm_stitch).
#   scripts/bench_allocator.sh [--repetitions N] [--out FILE.json]
# MEMTRAIN_BUILD_DIR picks the build folder (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=5
OUT=""
while (($#)); do
  case "$1" in
    --repetitions) REPS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) echo "usage: scripts/bench_allocator.sh [--repetitions N] [--out FILE.json]" >&2; exit 2 ;;
  esac
done
BUILD_DIR=${MEMTRAIN_BUILD_DIR:-build}
JOBS=${MEMTRAIN_JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DMEMTRAIN_BUILD_BENCHMARKS=ON >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target bench_allocator
[[ -n "$OUT" ]] || OUT="$BUILD_DIR/bench_allocator.json"
"$BUILD_DIR/benchmarks/bench_allocator" --benchmark_repetitions="$REPS" \
  --benchmark_report_aggregates_only=true --benchmark_out="$OUT" --benchmark_out_format=json >/dev/null
/usr/bin/python3 - "$OUT" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
med = {r["run_name"]: r for r in runs if r.get("aggregate_name") == "median"}
policies = ["no_cache", "pytorch", "best_fit", "vmm_stitch"]

print("alloc+free pair, cached path (median CPU ns; ratio to glibc malloc/free)")
print(f"{'policy':<12}{'4 KiB':>10}{'ratio':>8}{'1 MiB':>10}{'ratio':>8}")
glibc = {b: med[f"BM_MallocFree/bytes:{b}"]["cpu_time"] for b in (4096, 1048576)}
for i, p in enumerate(policies):
    row = f"{p:<12}"
    for b in (4096, 1048576):
        t = med[f"BM_CachedAllocFree/policy:{i}/bytes:{b}"]["cpu_time"]
        row += f"{t:>10.1f}{t / glibc[b]:>8.2f}"
    print(row)
print(f"{'glibc':<12}{glibc[4096]:>10.1f}{1:>8.2f}{glibc[1048576]:>10.1f}{1:>8.2f}")

print("\nreplay throughput, transformer trace (median, million events/s of CPU time)")
print(f"{'policy':<12}{'direct':>10}{'replay_trace':>14}")
for i, p in enumerate(policies):
    d = med[f"BM_ReplayDirect/policy:{i}"]["items_per_second"] / 1e6
    r = med[f"BM_ReplayTrace/policy:{i}"]["items_per_second"] / 1e6
    print(f"{p:<12}{d:>10.2f}{r:>14.2f}")

print("\ntransformer trace (BERT-Large shapes, B=8, 24 steps): utilization = peak allocated / peak reserved")
print(f"{'policy':<12}{'schedule':<12}{'device':>8}{'util':>8}{'frag@peak':>11}{'reserved GiB':>14}{'live GiB':>10}{'ooms':>6}")
for cap in (80, 16):
    for s, sname in enumerate(["cycled", "increasing", "random"]):
        for i, p in enumerate(policies):
            key = f"BM_TransformerUtilization/policy:{i}/seq:{s}/capacity_GiB:{cap}/iterations:1"
            if key not in med:
                continue
            r = med[key]
            print(f"{p:<12}{sname:<12}{cap:>6}Gi{r['utilization']:>8.3f}{r['frag_at_peak']:>11.3f}"
                  f"{r['peak_reserved_GiB']:>14.2f}{r['peak_live_GiB']:>10.2f}{int(r['ooms']):>6}")
PY
