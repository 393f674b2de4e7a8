#!/usr/bin/env bash
# The installed library is self-contained: builds the `release` preset
# (Abseil from Debian's source linked in, static PIC, hidden), installs it into
# a scratch prefix and checks the installed copy:
#   - NEEDED (readelf -d) of libvyre_cuda.so and of the vyre-cuda command lists
#     only libc, libstdc++, libgcc_s, libm, the dynamic loader (and libdl,
#     libpthread, librt for an older glibc); any libabsl_* fails by name;
#   - every undefined dynamic symbol is versioned by glibc, libstdc++ or
#     libgcc, so nothing is left for another library to provide;
#   - exports are exactly the header's vyre_* functions (check_symbols.cmake);
#   - abidiff against abi/vyre_cuda.abi (check_abidiff.cmake): the baseline
#     guards the library that is shipped, not only the development build;
#   - it loads and works: the pkg-config consumer, the loader header's test and
#     the vector-add and graph-replay examples run against the installed copy
#     with no driver (NO_DRIVER and its Fix) and on the fake driver (results
#     checked by the examples).
#
#   scripts/check-self-contained.sh [BUILD_WITH_FAKE_DRIVER]   (default build/cpu)
#
# The fake driver comes from a build with tests (the cpu preset). Run from
# scripts/test.sh after the cpu build; VYRE_RELEASE_BUILD_DIR overrides the
# release build folder (default build/release).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
jobs=$(nproc)
test_build="${1:-build/cpu}"
fake_driver="$test_build/tests/support/libfake_cuda.so"
[ -f "$fake_driver" ] || {
  echo "check-self-contained.sh: $fake_driver not found: the examples run on the fake driver." \
       "Fix: build the cpu preset first (cmake --build --preset cpu)." >&2
  exit 1
}
fake_driver=$(readlink -f "$fake_driver")

./scripts/fetch-abseil-source.sh > /dev/null
build="${VYRE_RELEASE_BUILD_DIR:-build/release}"
cmake --preset release -B "$build" > /dev/null
cmake --build "$build" -j"$jobs"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" > /dev/null
lib=$(find "$prefix" -name 'libvyre_cuda.so.*.*.*' -type f | head -1)
cli="$prefix/bin/vyre-cuda"
[ -n "$lib" ] || { echo "check-self-contained.sh: no libvyre_cuda.so.X.Y.Z under $prefix" >&2; exit 1; }
libdir=$(dirname "$lib")
failures=0
fail() { echo "check-self-contained.sh: FAIL: $*" >&2; failures=$((failures + 1)); }

echo "== ldd $lib"
ldd "$lib"
allowed='^(libc\.so\.6|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libm\.so\.6|ld-linux[-a-z0-9_.]*\.so\.[0-9]+|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1)$'
check_needed() {  # FILE [EXTRA_ALLOWED_REGEX]
  local needed bad
  needed=$(readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
  echo "NEEDED of $(basename "$1"): $(echo $needed)"
  bad=$(printf '%s\n' $needed | grep -Ev "$allowed" | grep -Ev "${2:-^$}" || true)
  if printf '%s\n' $needed | grep -q '^libabsl'; then
    fail "$(basename "$1") needs Abseil: $(printf '%s\n' $needed | grep '^libabsl' | tr '\n' ' ')" \
         "(Fix: build with -DVYRE_CUDA_STATIC_ABSL=ON, the release preset)"
  elif [ -n "$bad" ]; then
    fail "$(basename "$1") needs libraries outside libc, libstdc++, libgcc_s, libm: $(echo $bad)"
  fi
}
check_needed "$lib"
[ -x "$cli" ] && check_needed "$cli" '^libvyre_cuda\.so\.[0-9]+$'
if ldd "$lib" | grep -q 'not found'; then
  fail "ldd finds no file for: $(ldd "$lib" | grep 'not found' | tr '\n' ' ')"
fi
# Undefined symbols: each must come from glibc, libstdc++ (GLIBCXX, CXXABI) or
# libgcc (GCC); an unversioned one (weak __gmon_start__, the ITM hooks aside)
# would be left for whatever the process happens to have loaded.
unversioned=$(nm -D --undefined-only "$lib" | awk '$1 == "U" || $1 == "w" {print $2}' |
              grep -v '@' | grep -Ev '^(__gmon_start__|_ITM_(de)?registerTMCloneTable|__cxa_finalize)$' || true)
[ -z "$unversioned" ] || fail "undefined symbols without a version: $(echo $unversioned)"
foreign=$(nm -D --undefined-only "$lib" | awk '{print $NF}' | grep '@' |
          grep -Ev '@(GLIBC|GLIBCXX|CXXABI|GCC)_[0-9.]+$' || true)
[ -z "$foreign" ] || fail "undefined symbols from other libraries: $(echo $foreign)"
if nm -D "$lib" | grep -qi absl; then
  fail "Abseil symbols in the dynamic table: $(nm -D "$lib" | grep -i absl | head -5 | tr '\n' ' ')"
fi

echo "== exports"
cmake -DNM=nm -DLIBRARY="$lib" -DHEADER=include/vyre_cuda.h -DSYMBOLS=abi/vyre_cuda.symbols \
      -P tests/abi/check_symbols.cmake || fail "exports (check_symbols.cmake)"
if command -v abidiff > /dev/null; then
  echo "== abidiff"
  if report=$(cmake -DABIDIFF="$(command -v abidiff)" -DBASELINE=abi/vyre_cuda.abi \
                    -DLIBRARY="$lib" -DHEADERS=include -P tests/abi/check_abidiff.cmake 2>&1); then
    printf '%s\n' "$report" | tail -1
  else
    printf '%s\n' "$report" >&2
    fail "abidiff against abi/vyre_cuda.abi (check_abidiff.cmake)"
  fi
else
  fail "abidiff not found (Fix: apt-get install abigail-tools; scripts/bootstrap-debian.sh does)"
fi

echo "== the installed library at work"
# The pkg-config consumer: installs again into its own prefix, builds a C99
# program from the .pc file and runs it with no driver.
cmake -DBUILD_DIR="$build" -DWORK_DIR="$work/consumer" -DSOURCE=tests/abi/install_consumer.c \
      -DCC=cc -P tests/abi/install_check.cmake || fail "pkg-config consumer (install_check.cmake)"
cc=(cc -std=c99 -Wall -Werror -I"$prefix/include")
"${cc[@]}" examples/vector_add.c -o "$work/vector_add" -L"$libdir" -lvyre_cuda
"${cc[@]}" examples/graph_replay.c -o "$work/graph_replay" -L"$libdir" -lvyre_cuda
"${cc[@]}" examples/triton_saxpy.c -o "$work/triton_saxpy" -L"$libdir" -lvyre_cuda
"${cc[@]}" tests/abi/loader_test.c -o "$work/loader_test" -ldl
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
run() {  # EXPECTED_TEXT ENVIRONMENT... -- COMMAND...
  local expect="$1" out rc=0
  shift
  local env_args=()
  while [ "$1" != -- ]; do env_args+=("$1"); shift; done
  shift
  out=$(env "${env_args[@]}" "$@" 2>&1) || rc=$?
  if printf '%s\n' "$out" | grep -qF -- "$expect"; then
    echo "ok: $(basename "$1") (${env_args[*]##*/}): $(printf '%s\n' "$out" | grep -F -- "$expect" | head -1)"
  else
    printf '%s\n' "$out" >&2
    fail "$(basename "$1") with ${env_args[*]} printed no '$expect' (exit $rc)"
  fi
}
no_driver=VYRE_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1
run "Fix:" "$no_driver" -- "$work/vector_add"
run "loader_test: OK" "$no_driver" -- "$work/loader_test" "$lib" abi/vyre_cuda.symbols
run "vector_add: OK" VYRE_CUDA_DRIVER_LIBRARY="$fake_driver" VYRE_CUDA_REQUIRE_GPU=1 -- "$work/vector_add"
run "graph_replay: OK" VYRE_CUDA_DRIVER_LIBRARY="$fake_driver" VYRE_CUDA_REQUIRE_GPU=1 -- "$work/graph_replay"
run "triton_saxpy: OK" VYRE_CUDA_DRIVER_LIBRARY="$fake_driver" VYRE_CUDA_REQUIRE_GPU=1 -- "$work/triton_saxpy"
[ -x "$cli" ] && run "Fix:" "$no_driver" -- "$cli" info

if ((failures)); then
  echo "check-self-contained.sh: $failures check(s) failed" >&2
  exit 1
fi
echo "check-self-contained.sh: OK ($(basename "$lib"), $(du -k "$lib" | cut -f1) KiB, needs only" \
     "libc, libstdc++, libgcc_s, libm)"
