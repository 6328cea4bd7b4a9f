#!/usr/bin/env bash
# Installs the Debian 12 packages memtrain needs, only those missing (idempotent).
# Not root and something missing: prints the apt-get line to run and exits 1.
set -euo pipefail

PACKAGES=(cmake g++ make pkg-config libeigen3-dev libopenblas-dev libopenblas0-pthread libcli11-dev
  libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev libopenmpi-dev openmpi-bin
  libsentencepiece-dev sentencepiece nlohmann-json3-dev libxxhash-dev librandom123-dev libdnnl-dev
  ocl-icd-opencl-dev bible-kjv clang-format python3 libcpp-httplib-dev prometheus tmux)
# ocl-icd-opencl-dev is only a Recommends of libdnnl-dev, but Debian's dnnl-config.cmake runs
# find_package(OpenCL REQUIRED) (its GPU runtime is OpenCL): without it the configure fails.
# The PyTorch reference (fixtures, benchmark) and the plots (scripts/bert_large_memory.sh) are
# only needed by scripts that say so.
for arg in "$@"; do
  case "$arg" in
    --with-torch) PACKAGES+=(python3-torch python3-numpy) ;;
    --with-plots) PACKAGES+=(python3-matplotlib) ;;
  esac
done

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "memtrain: missing Debian packages: ${missing[*]}" >&2
  echo "memtrain: install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "memtrain: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
