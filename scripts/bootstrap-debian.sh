#!/usr/bin/env bash
# Installs the Debian packages a build needs, if any are missing (Debian 12;
# the CUDA toolkit itself is expected at /usr/local/cuda). Run as root, or
# with sudo available.
set -euo pipefail
# clang and libclang-rt-14-dev: the fuzz preset (libFuzzer, ASan and UBSan
# runtimes, FuzzedDataProvider.h), which --no-install-recommends leaves out.
# golang-go: the Go bindings' tests (Go 1.19, cgo).
# abigail-tools: abidiff for the abi.abidiff test (scripts/abi-baseline.sh).
# dpkg-dev: dpkg-source, which unpacks Debian's Abseil source for the
# self-contained library (scripts/fetch-abseil-source.sh).
packages=(cmake ninja-build g++ pkg-config ccache python3
          libabsl-dev libgtest-dev libcli11-dev nlohmann-json3-dev
          clang libclang-rt-14-dev
          golang-go abigail-tools dpkg-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "bootstrap: nvcc not found. Fix: install the CUDA toolkit (it provides cuda.h and" \
       "nvcc, used at build time only) under /usr/local/cuda." >&2
  exit 1
fi
