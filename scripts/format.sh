#!/usr/bin/env bash
# Formats every tracked C++ file with .clang-format (Debian 12's clang-format 14).
#   scripts/format.sh           rewrites the files in place
#   scripts/format.sh --check   changes nothing; lists the unformatted files and exits 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."
CHECK=0
for a in "$@"; do
  case "$a" in
    --check) CHECK=1 ;;
    *) echo "usage: scripts/format.sh [--check]" >&2; exit 2 ;;
  esac
done
if ! command -v clang-format >/dev/null; then
  echo "memtrain: clang-format is missing; scripts/install_deps.sh installs it" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
if ((CHECK)); then
  report=$(mktemp)
  trap 'rm -f "$report"' EXIT
  if ! clang-format --dry-run -Werror "${files[@]}" 2>"$report"; then
    grep -o '^[^:]*:[0-9]*:[0-9]*: error' "$report" | cut -d: -f1 | sort -u |
      sed 's/^/memtrain: not formatted (run scripts\/format.sh): /' >&2
    exit 1
  fi
else
  clang-format -i "${files[@]}"
fi
