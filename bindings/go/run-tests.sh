#!/usr/bin/env bash
# Tests the Go bindings against a CMake build of the library:
#   bindings/go/run-tests.sh [BUILD_DIR]        (default: build/cpu)
# BUILD_DIR must hold src/libvyre_cuda.so and tests/support/libfake_cuda.so
# (cmake --build --preset cpu builds both; tests/support/test_kernels.cubin
# and .fatbin are used when present). Needs Go >= 1.19 (Debian's golang-go).
#
# Runs, with cgo pointed at include/ and BUILD_DIR/src:
#   1. gofmt and go vet;
#   2. go test on the machine's driver (driver tests skip without one unless
#      VYRE_CUDA_REQUIRE_GPU=1), then with no driver at all
#      (VYRE_CUDA_DRIVER_LIBRARY=/nonexistent/...); TestNoDriver* re-run the
#      test binary in a child process without a driver in every run;
#   3. go test on the fake driver (every test runs) with GODEBUG=cgocheck=2,
#      which fails on any Go pointer stored in C memory; again under the race
#      detector; and again with the fake deferring host copies to the next
#      wait (FAKE_CUDA_DEFER_COPIES=1), which catches host memory used after
#      its call returned;
#   4. the examples on the fake driver, and vector_add without a driver
#      (exit code 2 and the message's Fix).
# Go works offline (GOPROXY=off, standard library only); its caches are
# BUILD_DIR/go-cache and BUILD_DIR/go-path. The test binary and the examples
# are left in BUILD_DIR/go-bin (rpath $ORIGIN/../src) to carry elsewhere.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${1:-$repo/build/cpu}"
build="$(cd "$build" && pwd)"

if ! command -v go >/dev/null 2>&1; then
  echo "error: go not found. Fix: install Go 1.19 or newer (Debian: apt-get install golang-go)." >&2
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

export CGO_ENABLED=1
export CGO_CFLAGS="-I$repo/include ${CGO_CFLAGS:-}"
export CGO_LDFLAGS="-L$lib_dir -Wl,-rpath,$lib_dir -Wl,-rpath,\$ORIGIN/../src ${CGO_LDFLAGS:-}"
export GOCACHE="$build/go-cache" GOPATH="$build/go-path" GOMODCACHE="$build/go-path/pkg/mod"
export GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local
export VYRE_CUDA_INCLUDE_DIR="$repo/include"
kernels=()
[ -e "$build/tests/support/test_kernels.cubin" ] && kernels=(VYRE_CUDA_TEST_KERNELS_DIR="$build/tests/support")
on_fake=(env VYRE_CUDA_DRIVER_LIBRARY="$fake" VYRE_CUDA_TEST_FAKE_DRIVER=1 "${kernels[@]}")
cd "$here"
go version

echo "== gofmt, go vet"
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "error: not gofmt-formatted: $unformatted. Fix: gofmt -w bindings/go." >&2
  exit 1
fi
go vet ./...

echo "== go test (the machine's driver; driver tests skip without one)"
go test -count=1 ./...

echo "== go test (no driver)"
env VYRE_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 VYRE_CUDA_REQUIRE_GPU= go test -count=1 ./...

echo "== go test (the fake driver, GODEBUG=cgocheck=2)"
"${on_fake[@]}" GODEBUG=cgocheck=2 go test -count=1 -v ./... 2>&1 | tee "$build/go-test-fake.log" |
  grep -E '^(--- |ok|FAIL|PASS|panic)' || true
if ! grep -q '^ok' "$build/go-test-fake.log" || grep -qE '^(--- FAIL|FAIL)' "$build/go-test-fake.log"; then
  tail -n 200 "$build/go-test-fake.log" >&2
  echo "error: go test on the fake driver failed; the whole log is $build/go-test-fake.log" >&2
  exit 1
fi
if grep -q -- '--- SKIP' "$build/go-test-fake.log"; then
  echo "error: a test skipped on the fake driver (every test must run there):" >&2
  grep -A1 -- '--- SKIP' "$build/go-test-fake.log" >&2
  exit 1
fi

echo "== go test -race (the fake driver)"
"${on_fake[@]}" go test -race -count=1 ./...

echo "== go test (the fake driver, host copies deferred to the next wait)"
"${on_fake[@]}" FAKE_CUDA_DEFER_COPIES=1 go test -count=1 ./...

echo "== examples (the fake driver), and vector_add without a driver"
mkdir -p "$build/go-bin"
go test -c -o "$build/go-bin/vyrecuda.test" .
go build -o "$build/go-bin/" ./examples/...
for example in vector_add triton_saxpy graph_replay; do
  "${on_fake[@]}" "$build/go-bin/$example" 100000
done
set +e
out="$(VYRE_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 "$build/go-bin/vector_add" 2>&1)"
rc=$?
set -e
if [ "$rc" -ne 2 ] || ! grep -q "Fix:" <<<"$out"; then
  echo "error: vector_add without a driver: exit $rc, expected 2 with a Fix: $out" >&2
  exit 1
fi

echo "Go bindings: all tests passed"
