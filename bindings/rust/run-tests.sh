#!/usr/bin/env bash
# Tests the Rust bindings against a CMake build of the library:
#   bindings/rust/run-tests.sh [BUILD_DIR]        (default: build/cpu)
# BUILD_DIR must hold src/libvyre_cuda.so and tests/support/libfake_cuda.so
# (cmake --build --preset cpu builds both). Runs `cargo test` over both
# crates twice: on whatever driver the machine has (the driver tests skip
# without one unless VYRE_CUDA_REQUIRE_GPU=1) and on the fake driver (every
# test runs); then the examples on the fake driver, and again with the fake
# driver deferring host copies to the next wait (FAKE_CUDA_DEFER_COPIES=1),
# which catches host memory read before its copy completed.
# Cargo works offline (no registry crates are used); its target directory is
# BUILD_DIR/rust-target unless CARGO_TARGET_DIR is set.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${1:-$repo/build/cpu}"
build="$(cd "$build" && pwd)"

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo not found. Fix: install the Rust toolchain (rustup, Rust 1.77 or newer) or put cargo on PATH." >&2
  exit 1
fi
lib_dir="$build/src"
fake="$build/tests/support/libfake_cuda.so"
for f in "$lib_dir/libvyre_cuda.so" "$fake"; do
  if [ ! -e "$f" ]; then
    echo "error: $f is missing. Fix: build it first (cmake --preset cpu && cmake --build --preset cpu), or pass the build directory holding it." >&2
    exit 1
  fi
done

export VYRE_CUDA_LIB_DIR="$lib_dir"
export VYRE_CUDA_INCLUDE_DIR="$repo/include"
export VYRE_CUDA_TEST_KERNELS_DIR="$build/tests/support"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$build/rust-target}"
cd "$here"
cargo --version

echo "== cargo test (the machine's driver; driver tests skip without one)"
cargo test --offline --workspace

echo "== cargo test (the fake driver)"
VYRE_CUDA_DRIVER_LIBRARY="$fake" VYRE_CUDA_TEST_FAKE_DRIVER=1 cargo test --offline --workspace

echo "== examples (the fake driver)"
for example in vector_add triton_saxpy graph_replay; do
  VYRE_CUDA_DRIVER_LIBRARY="$fake" cargo run --offline --quiet -p vyre-cuda --example "$example" -- 100000
done

echo "== cargo test (the fake driver, host copies deferred to the next wait)"
VYRE_CUDA_DRIVER_LIBRARY="$fake" VYRE_CUDA_TEST_FAKE_DRIVER=1 FAKE_CUDA_DEFER_COPIES=1 \
  cargo test --offline -p vyre-cuda

echo "Rust bindings: all tests passed"
