#!/usr/bin/env bash
# Tests the Rust bindings against a CMake build of the library:
#   bindings/rust/run-tests.sh [BUILD_DIR]        (default: build/cpu)
# BUILD_DIR must hold src/libvyre_cuda.so.0 and tests/support/libfake_cuda.so
# (cmake --build --preset cpu builds both).
#
# The toolchain is Debian 12's rustc-web and cargo-web (/usr/bin/rustc and
# /usr/bin/cargo; Rust 1.85, newer from bookworm's security updates), which
# scripts/bootstrap-debian.sh installs: the crates need Rust 1.77, and
# Debian's own rustc is 1.63. The script prints the toolchain it uses and
# stops with a Fix when those packages do not provide /usr/bin/cargo and
# /usr/bin/rustc, or when they are older than 1.77. VYRE_CUDA_CARGO=PATH
# runs another cargo instead (rustup's ~/.cargo/bin/cargo, say), with
# VYRE_CUDA_RUSTC, else the rustc beside that cargo, else rustc on PATH.
#
# Runs, offline (no registry crates are used), with the target directory
# BUILD_DIR/rust-target unless CARGO_TARGET_DIR is set:
#  1. `cargo test` over both crates on whatever driver the machine has (the
#     driver tests skip without one unless VYRE_CUDA_REQUIRE_GPU=1), then on
#     the fake driver (every test runs);
#  2. the examples on the fake driver (exit 0, "NAME: OK"), without a driver
#     (exit 2, the library's VYRE_STATUS_NO_DRIVER message and Fix on
#     stderr, as the C examples do) and without the library (exit 1, the
#     loader's message and Fix);
#  3. bindings/rust/README.md's program, as a user would build it: its
#     Cargo.toml and src/main.rs copied out of the README into a crate in a
#     temporary directory outside the workspace, depending on vyre-cuda by
#     path, built with VYRE_CUDA_LIB_DIR only, and run without
#     LD_LIBRARY_PATH or VYRE_CUDA_LIBRARY: on the fake driver (exit 0),
#     without a driver (exit 2) and without the library (exit 1);
#  4. `cargo test -p vyre-cuda` again with the fake driver deferring host
#     copies to the next wait (FAKE_CUDA_DEFER_COPIES=1), which catches host
#     memory read before its copy completed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${1:-$repo/build/cpu}"
build="$(cd "$build" && pwd)"
min_rust=1.77

fail() {
  echo "error: $*" >&2
  exit 1
}

# "rustc 1.96.0 (...)" or "cargo 1.96.0 (...)" -> 1.96.0
version_of() { sed -n 's/^[a-z-]* \([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' <<<"$1"; }
at_least_min() { [ "$(printf '%s\n%s\n' "$min_rust" "$1" | sort -V | head -1)" = "$min_rust" ]; }

# --- The toolchain ----------------------------------------------------------
if [ -n "${VYRE_CUDA_CARGO:-}" ]; then
  cargo_bin="$VYRE_CUDA_CARGO"
  [ -x "$cargo_bin" ] || fail "VYRE_CUDA_CARGO=$cargo_bin is not an executable. Fix: point it at a cargo (Rust $min_rust or newer), or unset it to use Debian's cargo-web."
  if [ -n "${VYRE_CUDA_RUSTC:-}" ]; then
    rustc_bin="$VYRE_CUDA_RUSTC"
  elif [ -x "$(dirname "$cargo_bin")/rustc" ]; then
    rustc_bin="$(dirname "$cargo_bin")/rustc"
  else
    rustc_bin="$(command -v rustc || true)"
  fi
  [ -n "$rustc_bin" ] && [ -x "$rustc_bin" ] || fail "no rustc for VYRE_CUDA_CARGO=$cargo_bin. Fix: set VYRE_CUDA_RUSTC to its rustc."
  origin="VYRE_CUDA_CARGO (an override, not the toolchain scripts/bootstrap-debian.sh installs)"
else
  cargo_bin=/usr/bin/cargo
  rustc_bin=/usr/bin/rustc
  bootstrap_fix="Fix: run scripts/bootstrap-debian.sh as root (it installs Debian 12's rustc-web and cargo-web, Rust $min_rust or newer, which replace Debian's rustc 1.63 and cargo), or set VYRE_CUDA_CARGO to another cargo (Rust $min_rust or newer; rustup's: VYRE_CUDA_CARGO=\$HOME/.cargo/bin/cargo)."
  command -v dpkg-query >/dev/null 2>&1 || fail "dpkg-query not found: this is not a Debian system, so the toolchain scripts/bootstrap-debian.sh installs is not there. Fix: set VYRE_CUDA_CARGO to a cargo (Rust $min_rust or newer)."
  origin=""
  for pair in cargo-web:/usr/bin/cargo rustc-web:/usr/bin/rustc; do
    package="${pair%%:*}" file="${pair#*:}"
    owner="$( (dpkg-query -S "$file" 2>/dev/null || true) | sed -n 's/^\([^:,]*\): .*/\1/p' | head -1)"
    if [ "$owner" != "$package" ]; then
      if [ -n "$owner" ]; then
        fail "$file comes from the Debian package $owner, not from $package. $bootstrap_fix"
      fi
      fail "$file is not installed (Debian package $package). $bootstrap_fix"
    fi
    origin+="${origin:+, }$package $(dpkg-query -W -f='${Version}' "$package")"
  done
  origin="Debian's $origin (scripts/bootstrap-debian.sh)"
fi
rustc_version="$("$rustc_bin" --version)"
cargo_version="$("$cargo_bin" --version)"
for v in "$rustc_version" "$cargo_version"; do
  n="$(version_of "$v")"
  [ -n "$n" ] && at_least_min "$n" ||
    fail "'$v' is older than Rust $min_rust (the crates use offset_of!). ${bootstrap_fix:-Fix: point VYRE_CUDA_CARGO at a newer cargo.}"
done
echo "rust toolchain: $cargo_bin ($cargo_version) and $rustc_bin ($rustc_version), from $origin"
# cargo runs $RUSTC (and doctests $RUSTDOC), whatever rustc is first on PATH.
export RUSTC="$rustc_bin"
[ -x "$(dirname "$rustc_bin")/rustdoc" ] && export RUSTDOC="$(dirname "$rustc_bin")/rustdoc"
cargo() { "$cargo_bin" "$@"; }

# --- The library and the fake driver ----------------------------------------
lib_dir="$build/src"
fake="$build/tests/support/libfake_cuda.so"
for f in "$lib_dir/libvyre_cuda.so.0" "$fake"; do
  if [ ! -e "$f" ]; then
    fail "$f is missing. Fix: build it first (cmake --preset cpu && cmake --build --preset cpu), or pass the build directory holding it."
  fi
done
# The build script remembers this library: the programs load it at run time
# from there, with no run path and no LD_LIBRARY_PATH.
export VYRE_CUDA_LIB_DIR="$lib_dir"
export VYRE_CUDA_INCLUDE_DIR="$repo/include"
export VYRE_CUDA_TEST_KERNELS_DIR="$build/tests/support"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$build/rust-target}"
unset VYRE_CUDA_LIBRARY
no_driver=/nonexistent/libcuda.so.1
no_library=/nonexistent/libvyre_cuda.so.0
cd "$here"

# expect CODE TEXT... -- COMMAND...: runs COMMAND (stdout and stderr kept),
# and fails unless it exits with CODE and its output holds every TEXT.
expect() {
  local code=$1 texts=() out rc=0
  shift
  while [ "$1" != "--" ]; do texts+=("$1"); shift; done
  shift
  out="$("$@" 2>&1)" || rc=$?
  printf '%s\n' "$out" | sed 's/^/    /'
  [ "$rc" = "$code" ] || fail "exit $rc, expected $code: $*"
  local t
  for t in "${texts[@]}"; do
    grep -qF -- "$t" <<<"$out" || fail "'$t' is missing from the output of: $*"
  done
}

echo "== cargo test (the machine's driver; driver tests skip without one)"
cargo test --offline --workspace

echo "== cargo test (the fake driver)"
VYRE_CUDA_DRIVER_LIBRARY="$fake" VYRE_CUDA_TEST_FAKE_DRIVER=1 cargo test --offline --workspace

echo "== examples: the fake driver (exit 0), no driver (exit 2), no library (exit 1)"
cargo build --offline --quiet -p vyre-cuda --examples
examples="$CARGO_TARGET_DIR/debug/examples"
for example in vector_add triton_saxpy graph_replay; do
  echo "-- $example"
  expect 0 "$example: OK" -- env VYRE_CUDA_DRIVER_LIBRARY="$fake" "$examples/$example" 100000
  expect 2 "$example: vyre_context_create failed: VYRE_STATUS_NO_DRIVER (CUresult 0)" \
    "$no_driver" "Fix: " -- env VYRE_CUDA_DRIVER_LIBRARY="$no_driver" "$examples/$example" 1000
  expect 1 "$example: vyre_context_create failed: VYRE_CUDA_LIBRARY_NOT_LOADED" \
    "VYRE_CUDA_LIBRARY=$no_library" "Fix: " -- env VYRE_CUDA_LIBRARY="$no_library" "$examples/$example" 1000
done

echo "== bindings/rust/README.md's program, in a crate outside the workspace"
outside="$(mktemp -d "${TMPDIR:-/tmp}/vyre-cuda-rust-outside.XXXXXX")"
trap 'rm -rf "$outside"' EXIT
# The fenced block after the line "<!-- test: FILE -->" of the README.
readme_block() {
  awk -v marker="<!-- test: $1 -->" '
    $0 == marker { found = 1; next }
    found == 1 && /^```/ { found = 2; next }
    found == 2 && /^```/ { exit }
    found == 2 { print }' "$here/README.md"
}
mkdir -p "$outside/src"
readme_block Cargo.toml | sed "s|/path/to/vyre-cuda|$repo|" >"$outside/Cargo.toml"
readme_block src/main.rs >"$outside/src/main.rs"
for f in Cargo.toml src/main.rs; do
  [ -s "$outside/$f" ] || fail "bindings/rust/README.md has no block after '<!-- test: $f -->'. Fix: keep the marker line before the README's $f."
done
grep -q "path = \"$repo/bindings/rust/vyre-cuda\"" "$outside/Cargo.toml" ||
  fail "the README's Cargo.toml does not depend on /path/to/vyre-cuda/bindings/rust/vyre-cuda. Fix: keep that path in it (this script puts the repository there)."
(cd "$outside" && cargo build --offline --quiet)
program="$CARGO_TARGET_DIR/debug/vyre-cuda-hello"
[ -x "$program" ] || fail "$program was not built. Fix: keep the package name vyre-cuda-hello in the README's Cargo.toml."
if readelf -d "$program" | grep -q 'NEEDED.*libvyre_cuda'; then
  fail "$program links libvyre_cuda (readelf -d): the bindings are meant to load it at run time."
fi
run_outside() { (cd / && env -u LD_LIBRARY_PATH -u VYRE_CUDA_LIBRARY "$@"); }
echo "-- the fake driver"
expect 0 "vyre-cuda-hello: OK" -- run_outside VYRE_CUDA_DRIVER_LIBRARY="$fake" "$program"
echo "-- no driver"
expect 2 "VYRE_STATUS_NO_DRIVER" "Fix: " -- run_outside VYRE_CUDA_DRIVER_LIBRARY="$no_driver" "$program"
echo "-- no library"
expect 1 "VYRE_CUDA_LIBRARY_NOT_LOADED" "Fix: " -- run_outside VYRE_CUDA_LIBRARY="$no_library" "$program"

echo "== cargo test (the fake driver, host copies deferred to the next wait)"
VYRE_CUDA_DRIVER_LIBRARY="$fake" VYRE_CUDA_TEST_FAKE_DRIVER=1 FAKE_CUDA_DEFER_COPIES=1 \
  cargo test --offline -p vyre-cuda

echo "Rust bindings: all tests passed ($rustc_version)"
