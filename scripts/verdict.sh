# Sourced by scripts/test.sh: counts what each step of the test command ran
# and ends the run with one verdict line, whatever way it ends.
#   suite NAME CMD...   runs a step that is not a ctest run (its exit decides)
#   ctest_suite NAME CTEST-ARGS...   runs ctest and counts its tests
# The verdict reads
#   verdict: N suites run, P tests passed, F failed, S skipped (why...)
# and names the failing step when there is one.
verdict_suites=0 verdict_passed=0 verdict_failed=0 verdict_skipped=0
verdict_failed_step="" verdict_why=""
declare -A verdict_skip_reasons=()

verdict_print() {
  local rc=$?
  local reasons="" key
  for key in "${!verdict_skip_reasons[@]}"; do
    reasons+="${reasons:+; }${verdict_skip_reasons[$key]} ${key}"
  done
  local line="verdict: ${verdict_suites} suites run, ${verdict_passed} tests passed, "
  line+="${verdict_failed} failed, ${verdict_skipped} skipped"
  [ -n "$reasons" ] && line+=" (${reasons})"
  if [ -n "$verdict_failed_step" ]; then
    line+="; FAILED in ${verdict_failed_step}"
  elif [ "$rc" != 0 ]; then
    line+="; FAILED (exit ${rc}) outside a counted step"
  fi
  echo "$line"
}
trap verdict_print EXIT

suite() {
  local name=$1
  shift
  verdict_suites=$((verdict_suites + 1))
  local rc=0
  "$@" || rc=$?
  [ "$rc" = 0 ] && return 0
  verdict_failed_step="$name"
  return "$rc"
}

# Why a test did not run: GPU tests skip without a GPU; the wheel test skips
# without a package index (exit 77); anything else is named.
verdict_skip_reason() {
  case "$1" in
    gpu.* | cli_egraph_gpu* | *gpu*) echo "without a GPU" ;;
    python_wheel) echo "without a package index" ;;
    *) echo "other ($1)" ;;
  esac
}

ctest_suite() {
  local name=$1
  shift
  verdict_suites=$((verdict_suites + 1))
  local log
  log=$(mktemp)
  local rc=0
  # pipefail (test.sh): rc is ctest's exit.
  ctest "$@" 2>&1 | tee "$log" || rc=$?
  local total failed
  # "100% tests passed, 0 tests failed out of 372" (CMake 3) or "100% tests
  # passed out of 372" (CMake 4, when none failed).
  total=$(sed -nE 's/.*tests passed.* out of ([0-9]+).*/\1/p' "$log" | tail -1)
  failed=$(sed -nE 's/.*tests passed, ([0-9]+) tests? failed out of.*/\1/p' "$log" | tail -1)
  local skipped_names
  skipped_names=$(sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+) \((Skipped|Not Run|Disabled)\)$/\1/p' "$log")
  local skipped=0 test reason
  for test in $skipped_names; do
    skipped=$((skipped + 1))
    reason=$(verdict_skip_reason "$test")
    verdict_skip_reasons[$reason]=$((${verdict_skip_reasons[$reason]:-0} + 1))
  done
  total=${total:-0} failed=${failed:-0}
  verdict_skipped=$((verdict_skipped + skipped))
  verdict_failed=$((verdict_failed + failed))
  verdict_passed=$((verdict_passed + total - failed - skipped))
  rm -f "$log"
  if [ "$rc" != 0 ]; then
    verdict_failed_step="$name"
    return "$rc"
  fi
}
