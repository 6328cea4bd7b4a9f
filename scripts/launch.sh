#!/usr/bin/env bash
# Launches `memtrain train` on N ranks through mpirun, with the flags a user would otherwise
# look up: --allow-run-as-root only as root, --oversubscribe only when the ranks outnumber this
# machine's cores, each rank bound to its cores, and training.num_threads = cores / ranks.
#
#   scripts/launch.sh -n N [--hostfile F] CONFIG [memtrain train arguments]
#
# Examples:
#   scripts/launch.sh -n 2 configs/tiny.yaml --set parallel.tensor_model_parallel_size=2
#   scripts/launch.sh -n 16 --hostfile hosts configs/bert-large.yaml
# With a hostfile (Open MPI's format: "node1 slots=8"), ranks fill each node's slots in order,
# so the tensor-parallel groups (adjacent ranks) stay inside a node. Plain
# `mpirun -np N build/memtrain train --config CONFIG` keeps working; this only adds flags.
# MEMTRAIN_BIN overrides the binary (default build/memtrain, built when missing).
# Exit status: memtrain's (mpirun passes it on); 2 for a usage error of this script.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

usage() {
  echo "usage: scripts/launch.sh -n N [--hostfile F] CONFIG [memtrain train arguments]" >&2
  echo "launch.sh: $1" >&2
  exit 2
}

ranks=""
hostfile=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n|-np) [[ $# -ge 2 ]] || usage "$1 needs a rank count"; ranks="$2"; shift 2 ;;
    --hostfile) [[ $# -ge 2 ]] || usage "--hostfile needs a file"; hostfile="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) usage "unknown option $1 (options: -n N, --hostfile F; memtrain's come after CONFIG)" ;;
    *) break ;;
  esac
done
[[ -n "$ranks" ]] || usage "missing -n N"
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || usage "-n $ranks: expected a positive integer"
[[ $# -ge 1 ]] || usage "missing CONFIG (a YAML file, e.g. configs/tiny.yaml)"
config="$1"; shift
[[ -f "$config" ]] || usage "CONFIG $config: no such file"
if [[ -n "$hostfile" && ! -f "$hostfile" ]]; then usage "--hostfile $hostfile: no such file"; fi

if ! command -v mpirun > /dev/null; then bash "$repo/scripts/install_deps.sh"; fi
bin="${MEMTRAIN_BIN:-$repo/build/memtrain}"
if [[ ! -x "$bin" ]]; then
  MEMTRAIN_TARGET=memtrain bash "$repo/scripts/build.sh"
fi

cores="$(nproc)"
flags=()
if [[ "$(id -u)" == 0 ]]; then flags+=(--allow-run-as-root); fi
threads=1
if [[ -n "$hostfile" ]]; then
  # Each node's slots decide the placement; one thread per slot is the safe default.
  flags+=(--hostfile "$hostfile" --bind-to core --map-by slot)
elif (( ranks > cores )); then
  # More ranks than cores: Open MPI refuses without --oversubscribe, and binding several
  # ranks to one core would serialise them, so they float.
  flags+=(--oversubscribe --bind-to none)
else
  threads=$(( cores / ranks ))
  # Each rank gets `threads` adjacent cores (Open MPI's processing-element count).
  flags+=(--map-by "slot:PE=$threads" --bind-to core)
fi

echo "launch.sh: mpirun -np $ranks ${flags[*]} memtrain train --config $config" \
  "(training.num_threads=$threads)" >&2
exec mpirun -np "$ranks" "${flags[@]}" "$bin" train --config "$config" \
  --set "training.num_threads=$threads" "$@"
