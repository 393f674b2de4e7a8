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
# python3-dev: Python.h, for the Python binding's compiled fast path
# (vyre_cuda._fast, bindings/python/src/_fast.c) in the test build and the wheel.
# python3-numpy: the Python binding's DLPack tests hand a capsule to numpy
# (numpy.from_dlpack must raise its own error for a CUDA buffer).
# rustc-web and cargo-web: the Rust bindings' toolchain (bindings/rust/
# run-tests.sh checks it is these): Rust 1.85 in bookworm, newer from its
# security updates, installed as /usr/bin/rustc and /usr/bin/cargo. The
# crates need Rust 1.77; Debian 12's rustc and cargo packages (1.63), which
# these two replace, are too old.
packages=(cmake ninja-build g++ pkg-config ccache python3 python3-dev
          libabsl-dev libgtest-dev libcli11-dev nlohmann-json3-dev
          clang libclang-rt-14-dev
          golang-go abigail-tools dpkg-dev
          rustc-web cargo-web python3-numpy)
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
