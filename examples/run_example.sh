#!/bin/sh
# run_example.sh — runs an example (or the vyre-cuda command) for ctest and
# judges it by exit code and output, so one test works on both kinds of machine.
#
#   run_example.sh [--expect TEXT] [--no-gpu] -- COMMAND [ARGS...]
#
# Exit code 2 from an example means "this machine cannot run CUDA work" (no
# driver, driver too old, or no device); the example then must still explain
# itself with the library's "Fix:" sentence.
#
#   default:                   pass on (exit 0 and TEXT printed) -- it ran on a GPU
#                              or on (exit 2 and "Fix:" printed)  -- no GPU here (CI)
#   VYRE_CUDA_REQUIRE_GPU=1:   pass only on exit 0 and TEXT printed
#   --no-gpu:                  pass only on exit 2 and "Fix:" printed, and TEXT
#                              too if --expect was given (for runs that hide
#                              the driver on purpose)
#
# TEXT defaults to "OK" (GPU runs) and to nothing (--no-gpu runs).
set -u

expect=""
no_gpu=0
while [ $# -gt 0 ]; do
  case "$1" in
    --expect) expect="$2"; shift 2 ;;
    --no-gpu) no_gpu=1; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "run_example.sh: no command given. Fix: run_example.sh [--expect TEXT] [--no-gpu] -- COMMAND" >&2
  exit 1
fi

output=$("$@" 2>&1)
rc=$?
printf '%s\n' "$output"

contains() { printf '%s\n' "$output" | grep -F -q -- "$1"; }

if [ "$no_gpu" = 1 ]; then
  if [ "$rc" -eq 2 ] && contains "Fix:" && { [ -z "$expect" ] || contains "$expect"; }; then
    echo "run_example.sh: PASS (exit 2 with a Fix message, as expected without a driver)"
    exit 0
  fi
  echo "run_example.sh: FAIL: expected exit 2 and a \"Fix:\" message${expect:+ with \"$expect\"}, got exit $rc" >&2
  exit 1
fi

[ -n "$expect" ] || expect="OK"

if [ "$rc" -eq 0 ] && contains "$expect"; then
  echo "run_example.sh: PASS (ran on a GPU)"
  exit 0
fi
if [ "${VYRE_CUDA_REQUIRE_GPU:-0}" = 1 ]; then
  echo "run_example.sh: FAIL: VYRE_CUDA_REQUIRE_GPU=1 needs exit 0 and \"$expect\" in the output, got exit $rc" >&2
  exit 1
fi
if [ "$rc" -eq 2 ] && contains "Fix:"; then
  echo "run_example.sh: PASS (no usable GPU here: exit 2 with a Fix message; set VYRE_CUDA_REQUIRE_GPU=1 to require one)"
  exit 0
fi
echo "run_example.sh: FAIL: expected exit 0 with \"$expect\", or exit 2 with a \"Fix:\" message; got exit $rc" >&2
exit 1
