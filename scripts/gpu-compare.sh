#!/usr/bin/env bash
# Runs on the GPU machine: the same benchmarks from a baseline source tree and
# from this one, built side by side and run in alternation on one machine, so
# a change's before and after are compared under the same conditions.
#   scripts/gpu-compare.sh BASE_SRC [ROUNDS]
# BASE_SRC: a source tree of the baseline (e.g. `git archive <rev> | tar -x`).
# Writes $OUT/compare/<base|new>-<case>-<round>.{md,log}; prints the tables.
# VYRE_COMPARE_CASES picks the benchmarks (default "dispatch graphs egraph").
set -uo pipefail
cd "$(dirname "$0")/.."
base_src=${1:?usage: scripts/gpu-compare.sh BASE_SRC [ROUNDS]}
rounds=${2:-2}
out="${OUT:-build/gpu-out}/compare"
mkdir -p "$out"
[ -f .deps/env.sh ] && source .deps/env.sh
source scripts/env.sh
opts=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVYRE_CUDA_BUILD_BENCH=ON
      -DVYRE_CUDA_BUILD_TESTS=OFF -DVYRE_CUDA_BUILD_EXAMPLES=OFF)
targets=(--target vyre_cuda_bench vyre_egraph_bench)
jobs=$(( $(nproc) / 2 ))
build() {
  cmake -S "$1" -B "$2" "${opts[@]}" >"$out/configure-$3.log" 2>&1 &&
    cmake --build "$2" -j"$jobs" "${targets[@]}" >"$out/build-$3.log" 2>&1
}
build "$base_src" build/compare-base base & base_pid=$!
build . build/compare-new new || { tail -30 "$out/build-new.log"; exit 1; }
wait "$base_pid" || { tail -30 "$out/build-base.log"; exit 1; }
cases=${VYRE_COMPARE_CASES:-dispatch graphs egraph}
for round in $(seq 1 "$rounds"); do
  for variant in base new; do
    bin=build/compare-$variant/bench
    for c in $cases; do
      tag="$variant-$c-$round"
      case "$c" in
        dispatch | graphs)
          VYRE_BENCH_OUT="$out/$tag.md" timeout 120 "$bin/vyre_cuda_bench" --cases "$c" \
            --seconds "${VYRE_COMPARE_SECONDS:-0.3}" >"$out/$tag.log" 2>&1 ;;
        egraph)
          VYRE_BENCH_OUT="$out/$tag.md" timeout 120 "$bin/vyre_egraph_bench" --sizes 16 \
            --graphs 0 --cpu-seconds 1 --gpu-seconds 0.5 >"$out/$tag.log" 2>&1 ;;
      esac
      echo "== $tag exit $?"
    done
  done
done
for f in "$out"/*.md; do
  echo "==== $(basename "$f")"
  cat "$f"
done
