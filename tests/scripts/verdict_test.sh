#!/usr/bin/env bash
# The test command's last line is its verdict (scripts/verdict.sh): checked
# here on made-up steps, a passing run and a failing one, with a ctest run of
# tests that pass, skip (as GPU tests do without a GPU) and fail.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "verdict_test: $*" >&2; exit 1; }

# A ctest project: two that pass, one GPU test that skips, one that fails.
mkdir -p "$tmp/proj"
cat >"$tmp/proj/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(verdict_probe NONE)
enable_testing()
add_test(NAME unit.a COMMAND true)
add_test(NAME unit.b COMMAND true)
add_test(NAME gpu.Probe.Skips COMMAND sh -c "exit 77")
set_tests_properties(gpu.Probe.Skips PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME unit.c COMMAND sh -c "[ -z \"$VERDICT_FAIL\" ]")
CMAKE
cmake -S "$tmp/proj" -B "$tmp/build" >/dev/null || fail "cmake failed"

run() {  # run VERDICT_FAIL: the last line of a made-up test command
  VERDICT_FAIL=$1 bash -c "set -euo pipefail; source '$repo/scripts/verdict.sh'
    suite 'a step' true
    ctest_suite 'probe tests' --test-dir '$tmp/build'" >"$tmp/out" 2>&1
  echo $? >"$tmp/rc"
  tail -1 "$tmp/out"
}

line=$(run "")
[ "$(cat "$tmp/rc")" = 0 ] || fail "a passing run exited $(cat "$tmp/rc")"
want="verdict: 2 suites run, 3 tests passed, 0 failed, 1 skipped (1 without a GPU)"
[ "$line" = "$want" ] || fail "passing run: got '$line', want '$want'"

line=$(run 1)
[ "$(cat "$tmp/rc")" != 0 ] || fail "a failing run exited 0"
want="verdict: 2 suites run, 2 tests passed, 1 failed, 1 skipped (1 without a GPU); FAILED in probe tests"
[ "$line" = "$want" ] || fail "failing run: got '$line', want '$want'"

line=$(bash -c "set -euo pipefail; source '$repo/scripts/verdict.sh'; suite 'a broken step' false; echo unreachable" 2>&1 | tail -1)
want="verdict: 1 suites run, 0 tests passed, 0 failed, 0 skipped; FAILED in a broken step"
[ "$line" = "$want" ] || fail "failing step: got '$line', want '$want'"
echo "verdict_test: OK"
