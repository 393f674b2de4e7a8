#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset: clang, ASan + UBSan, the
# fake CUDA driver; no GPU needed) and runs them.
#
#   scripts/fuzz.sh [TARGET|all] [SECONDS] [-- LIBFUZZER_FLAGS...]
#
# TARGET is program_create, dispatch, buffer_ranges, egraph_columns,
# egraph_json or all (the default); SECONDS is the time per target (default
# 600). Targets run one after another; FUZZ_JOBS=N runs N at once.
#
# The corpus grows in $FUZZ_WORK/<target>/corpus (default build/fuzz-work), so
# a later run starts where this one stopped; the seeds in
# tests/fuzz/corpus/<target>/ are read, never written. A crash, leak, timeout
# or out-of-memory stops that target and leaves its input in
# $FUZZ_WORK/<target>/artifacts/; the script then exits 1. Replay one with
#   build/fuzz/tests/fuzz/<target>_fuzz <file>
# and, once fixed, keep it as a regression: copy it to
# tests/fuzz/regressions/<target>/<what_it_found>.bin (ctest --preset fuzz
# replays every file there as fuzz_regression.<target>.<what_it_found>).
#
# FUZZ_CI=1 (scripts/test.sh): fresh temporary corpora, nothing kept.
# FUZZ_NO_BUILD=1: use the targets already built.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(program_create dispatch buffer_ranges egraph_columns egraph_json)
target=${1:-all}
seconds=${2:-600}
shift $(( $# < 2 ? $# : 2 ))
if [ "${1:-}" = "--" ]; then shift; fi
extra=("$@")

if [ "$target" = all ]; then
  targets=("${all_targets[@]}")
else
  case " ${all_targets[*]} " in
    *" $target "*) targets=("$target") ;;
    *) echo "fuzz.sh: unknown target '$target'. Fix: use one of: ${all_targets[*]} all." >&2
       exit 2 ;;
  esac
fi
case "$seconds" in
  ''|*[!0-9]*) echo "fuzz.sh: SECONDS '$seconds' is not a number. Fix: pass whole seconds." >&2
               exit 2 ;;
esac

if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then
  source scripts/env.sh
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j"$(nproc)"
fi

work=${FUZZ_WORK:-build/fuzz-work}
if [ "${FUZZ_CI:-0}" = 1 ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

# Longest input per target: room for code images and JSON, small elsewhere.
max_len() {
  case "$1" in
    program_create|egraph_json) echo 16384 ;;
    *) echo 4096 ;;
  esac
}

run_one() {
  local t=$1
  local dir="$work/$t"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  local log="$dir/fuzz.log"
  echo "fuzz: $t for ${seconds}s (log: $log)"
  # Findings of this run only: inputs kept from an earlier one (fixed or
  # not) do not fail it.
  local started="$dir/.started"
  : >"$started"
  local status=0
  # The fake driver, no NVRTC and a 256 MiB fake device come from the
  # target itself (tests/fuzz/fuzz_support.cc) unless set here.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:protect_shadow_gap=0} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "build/fuzz/tests/fuzz/${t}_fuzz" "$dir/corpus" "tests/fuzz/corpus/$t" \
      -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=30 -max_len="$(max_len "$t")" \
      -print_final_stats=1 -artifact_prefix="$dir/artifacts/" ${extra[@]+"${extra[@]}"} \
      >"$log" 2>&1 || status=$?
  local runs found
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  found=$(find "$dir/artifacts" -type f -newer "$started")
  if [ "$status" -ne 0 ] || [ -n "$found" ]; then
    echo "fuzz: $t FAILED (exit $status) after ${runs:-?} runs; the end of its log:" >&2
    tail -n 60 "$log" >&2
    echo "fuzz: $t: inputs it found:" >&2
    for f in $found; do
      ls -l "$f" >&2
      # FUZZ_CI's temporary directory goes away: print the input too.
      if [ "${FUZZ_CI:-0}" = 1 ]; then echo "fuzz: $(basename "$f") base64: $(base64 -w0 "$f")" >&2; fi
    done
    return 1
  fi
  echo "fuzz: $t OK: ${runs:-?} runs, corpus $(ls "$dir/corpus" | wc -l) inputs"
}

jobs=${FUZZ_JOBS:-1}
failed=0
pids=()
for t in "${targets[@]}"; do
  if [ "$jobs" -le 1 ]; then
    run_one "$t" || failed=1
  else
    run_one "$t" &
    pids+=($!)
    if [ "${#pids[@]}" -ge "$jobs" ]; then
      wait "${pids[0]}" || failed=1
      pids=("${pids[@]:1}")
    fi
  fi
done
for p in ${pids[@]+"${pids[@]}"}; do wait "$p" || failed=1; done
exit "$failed"
