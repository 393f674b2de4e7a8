#!/usr/bin/env bash
# Tests the Go bindings against a CMake build of the library:
#   bindings/go/run-tests.sh [BUILD_DIR]        (default: build/cpu)
# BUILD_DIR must hold src/libvyre_cuda.so, tests/support/libfake_cuda.so and
# tests/support/test_kernels.cubin and .fatbin (cmake --build --preset cpu
# builds them all; the targets are vyre_cuda, vyre_fake_cuda and
# vyre_test_kernel_binaries). Needs Go >= 1.19 (Debian's golang-go).
#
# Runs, with cgo pointed at BUILD_DIR/src (the package's #cgo CFLAGS finds
# include/):
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
#      (exit code 2 and the message's Fix);
#   5. a module outside the repository, in a temporary folder, as README.md
#      tells a user to write one: its program is README.md's (cut from the
#      file), its go.mod a require plus a replace made with README.md's
#      `go mod edit` line, built with only CGO_LDFLAGS set and the go
#      command's default -mod=readonly, then again in a go.work workspace;
#      run on the fake driver (its output checked) and without a driver
#      (exit code 2 and the Fix).
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
for f in "$lib_dir/libvyre_cuda.so" "$fake" "$build/tests/support/test_kernels.cubin" \
  "$build/tests/support/test_kernels.fatbin"; do
  if [ ! -e "$f" ]; then
    echo "error: $f is missing. Fix: build it first (cmake --preset cpu && cmake --build --preset cpu; or only --target vyre_cuda vyre_fake_cuda vyre_test_kernel_binaries), or pass the build directory holding it." >&2
    exit 1
  fi
done

export CGO_ENABLED=1
export CGO_CFLAGS="${CGO_CFLAGS:-}"
export CGO_LDFLAGS="-L$lib_dir -Wl,-rpath,$lib_dir -Wl,-rpath,\$ORIGIN/../src ${CGO_LDFLAGS:-}"
export GOCACHE="$build/go-cache" GOPATH="$build/go-path" GOMODCACHE="$build/go-path/pkg/mod"
export GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local
export VYRE_CUDA_INCLUDE_DIR="$repo/include"
on_fake=(env VYRE_CUDA_DRIVER_LIBRARY="$fake" VYRE_CUDA_TEST_FAKE_DRIVER=1
  VYRE_CUDA_TEST_KERNELS_DIR="$build/tests/support")
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

echo "== a module outside the repository (README.md's program): require + replace, then go.work"
outside="$(mktemp -d)"
trap 'rm -rf "$outside"' EXIT
module="$(awk '$1 == "module" { print $2 }' "$here/go.mod")"
edit_line="go mod edit -require=$module@v0.0.0 -replace=$module=\$vyre/bindings/go"
if ! grep -qxF "   $edit_line" "$here/README.md"; then
  echo "error: bindings/go/README.md does not tell a user to run: $edit_line. Fix: update its \"Depending on it\" steps for module $module." >&2
  exit 1
fi
marker='<!-- run-tests.sh: the program of a module outside the repository -->'
awk -v marker="$marker" '$0 == marker { state = 1; next }
  state == 1 { if ($0 != "```go") exit; state = 2; next }
  state == 2 { if ($0 == "```") exit; print }' "$here/README.md" >"$outside/main.go"
if ! grep -q '^package main$' "$outside/main.go"; then
  echo "error: no Go program follows \"$marker\" in bindings/go/README.md. Fix: keep the marker line right before the complete program's \`\`\`go block." >&2
  exit 1
fi
# check_outside DIR: DIR's hello runs on the fake driver and without a driver.
check_outside() {
  local out rc
  out="$("${on_fake[@]}" "$1/hello" 2>&1)" || {
    echo "error: README.md's program on the fake driver failed (exit $?): $out" >&2
    exit 1
  }
  for line in "device 0: " "graph replayed 3 times" "hello: OK"; do
    if ! grep -q "^$line" <<<"$out"; then
      echo "error: README.md's program on the fake driver printed no line \"$line...\": $out" >&2
      exit 1
    fi
  done
  set +e
  out="$(VYRE_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 "$1/hello" 2>&1)"
  rc=$?
  set -e
  if [ "$rc" -ne 2 ] || ! grep -q "^hello: .*Fix: " <<<"$out"; then
    echo "error: README.md's program without a driver: exit $rc, expected 2 with a Fix: $out" >&2
    exit 1
  fi
}
(
  # As a user has it: the go command's defaults (-mod=readonly, no
  # workspace), the header from the package's #cgo line, the library
  # named by CGO_LDFLAGS alone (README.md's step 3). GOPROXY=off stays: no
  # network is needed.
  unset GOFLAGS
  export GOWORK=off CGO_CFLAGS= CGO_LDFLAGS="-L$lib_dir -Wl,-rpath,$lib_dir"
  vyre="$repo"
  mkdir "$outside/hello" && cd "$outside/hello"
  cp ../main.go .
  go mod init example.com/hello 2>/dev/null
  eval "$edit_line"
  unformatted="$(gofmt -l .)"
  if [ -n "$unformatted" ]; then
    echo "error: README.md's program is not gofmt-formatted. Fix: gofmt it and paste it back." >&2
    exit 1
  fi
  go vet .
  go build -o hello .
  if [ -e go.sum ]; then
    echo "error: the outside module needed a go.sum (README.md says nothing goes there): $(cat go.sum)" >&2
    exit 1
  fi
  check_outside "$outside/hello"
  echo "require + replace: OK"

  mkdir "$outside/work" && cd "$outside/work"
  cp ../main.go .
  go mod init example.com/hello 2>/dev/null
  unset GOWORK
  go work init . "$repo/bindings/go"
  go build -o hello .
  check_outside "$outside/work"
  echo "go.work: OK"
)

echo "Go bindings: all tests passed"
