#!/usr/bin/env bash
# Builds the Rust and Go bindings' test and example binaries on a machine
# with cargo and go, against a CPU build of the library, and stages them in
# .deps/bindings/ (git-ignored) for the GPU machine, which has neither
# toolchain: scripts/gpu-bindings.sh runs them there against build/gpu's
# library.
#   scripts/stage-binding-tests.sh [BUILD_DIR]      (default: build/cpu)
# BUILD_DIR must hold src/libvyre_cuda.so (cmake --build BUILD_DIR --target
# vyre_cuda). The binaries carry no run path: they find libvyre_cuda.so.0
# through LD_LIBRARY_PATH, so on the GPU machine they load the library built
# there (this machine's needs Debian's Abseil). They are stripped and packed
# into .deps/bindings.tar.xz (about 3 MB): carry that file; gpu-bindings.sh
# unpacks it.
#
# Staged layout (.deps/bindings/):
#   rust/<crate>/<test target>   cargo's test executables, both crates (run
#                                from bindings/rust/<crate>, as cargo does)
#   rust/examples/<example>      release builds of the vyre-cuda examples,
#                                bench_overhead included
#   go/vyrecuda.test             go test -c of the package (run from
#                                bindings/go, as go test does)
#   go/<example>                 the examples, bench_overhead included
#   MANIFEST                     commit, source hash, toolchains, files
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
build="${1:-build/cpu}"
build="$(cd "$build" && pwd)"
lib_dir="$build/src"
stage="$repo/.deps/bindings"

if [ ! -e "$lib_dir/libvyre_cuda.so" ]; then
  echo "error: $lib_dir/libvyre_cuda.so is missing. Fix: cmake --preset cpu -B $build && cmake --build $build --target vyre_cuda" >&2
  exit 1
fi
if ! git check-ignore -q .deps/bindings; then
  echo "error: .deps/ is not git-ignored. Fix: add /.deps/ to .git/info/exclude." >&2
  exit 1
fi
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
for tool in cargo go strip readelf python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool not found. Fix: install it." >&2; exit 1; }
done

rm -rf "$stage"
mkdir -p "$stage/rust/examples" "$stage/go"
log="$build/stage-bindings.log"
: > "$log"

# Copies the executables named by cargo's JSON messages on stdin into the
# stage: test targets as rust/<crate dir>/<target>, examples as
# rust/examples/<name>. Prints the staged paths.
copy_cargo_artifacts() {
  python3 -c '
import json, os, shutil, sys
stage = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    kind = m["target"]["kind"]
    name = m["target"]["name"]
    if "example" in kind:
        dst = os.path.join(stage, "rust", "examples", name)
    elif m["profile"]["test"]:
        crate = os.path.basename(os.path.dirname(m["manifest_path"]))
        dst = os.path.join(stage, "rust", crate, name)
    else:
        continue
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy2(m["executable"], dst)
    print(dst)
' "$stage"
}

echo "== Rust: cargo test --no-run (both crates) and the examples (release)"
(
  cd bindings/rust
  export VYRE_CUDA_LIB_DIR="$lib_dir" VYRE_CUDA_INCLUDE_DIR="$repo/include"
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$build/rust-stage-target}"
  cargo --version
  cargo test --offline --workspace --no-run --message-format=json 2>>"$log" | copy_cargo_artifacts
  cargo build --offline --release -p vyre-cuda --examples --message-format=json 2>>"$log" |
    copy_cargo_artifacts
) || { tail -40 "$log" >&2; exit 1; }

echo "== Go: go test -c and the examples"
(
  cd bindings/go
  export CGO_ENABLED=1
  export CGO_CFLAGS="-I$repo/include ${CGO_CFLAGS:-}"
  # No -rpath: LD_LIBRARY_PATH decides which libvyre_cuda.so.0 is loaded.
  export CGO_LDFLAGS="-L$lib_dir"
  export GOCACHE="$build/go-cache" GOPATH="$build/go-path" GOMODCACHE="$build/go-path/pkg/mod"
  export GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local
  go version
  go vet ./... >>"$log" 2>&1
  go test -c -ldflags="-s -w" -o "$stage/go/vyrecuda.test" . >>"$log" 2>&1
  go build -ldflags="-s -w" -o "$stage/go/" ./examples/... >>"$log" 2>&1
  ls "$stage"/go/*
) || { tail -40 "$log" >&2; exit 1; }

echo "== strip, and check what the binaries need"
allowed='^(libvyre_cuda\.so\.0|libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|ld-linux-x86-64\.so\.2)$'
bad=0
max_glibc=0
while IFS= read -r -d '' f; do
  strip --strip-all "$f"
  dyn="$(readelf -d "$f")"
  if grep -qE 'RPATH|RUNPATH' <<<"$dyn"; then
    echo "error: $f has a run path: $(grep -E 'RPATH|RUNPATH' <<<"$dyn")" >&2
    bad=1
  fi
  while read -r needed; do
    if ! grep -qE "$allowed" <<<"$needed"; then
      echo "error: $f needs $needed, which the GPU machine may lack" >&2
      bad=1
    fi
  done < <(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<<"$dyn")
  v="$(readelf -V "$f" | grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_2\.//' | sort -n | tail -1)"
  [ -n "$v" ] && [ "$v" -gt "$max_glibc" ] && max_glibc="$v"
done < <(find "$stage" -type f -print0)
[ "$bad" = 0 ] || exit 1
# The GPU machine runs Ubuntu 24.04 (glibc 2.39).
if [ "$max_glibc" -gt 39 ]; then
  echo "error: the binaries need GLIBC_2.$max_glibc; the GPU machine has 2.39" >&2
  exit 1
fi

{
  echo "staged: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD -- bindings include || echo ' (with uncommitted changes)')"
  echo "source-hash: $("$repo/scripts/gpu-bindings.sh" --source-hash)"
  echo "library: $lib_dir/libvyre_cuda.so (linked against; not staged)"
  echo "needs: libvyre_cuda.so.0 through LD_LIBRARY_PATH, libc/libm/libgcc_s, GLIBC_2.$max_glibc at most"
  echo "toolchains: $(cd bindings/rust && cargo --version); $(go version)"
  echo "files:"
  (cd "$stage" && find . -type f ! -name MANIFEST | sort | sed 's|^\./|  |')
} > "$stage/MANIFEST"
cat "$stage/MANIFEST"
# What travels: one xz tarball (the stripped binaries are ~20 MB, packed ~3 MB);
# scripts/gpu-bindings.sh unpacks it into .deps/bindings/ there.
tar -C "$repo/.deps" -cJf "$stage.tar.xz.tmp" bindings
mv "$stage.tar.xz.tmp" "$stage.tar.xz"
echo "staged: $stage ($(du -sh "$stage" | cut -f1)) and $stage.tar.xz ($(du -h "$stage.tar.xz" | cut -f1)), the one to carry"
