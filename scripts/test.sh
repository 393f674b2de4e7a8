#!/usr/bin/env bash
# Builds and runs every test: the CPU suites, the GPU suites (which skip
# without a GPU unless VYRE_CUDA_REQUIRE_GPU=1), the examples and the Python
# binding, the self-contained release library as installed, then the CPU
# suites again under AddressSanitizer and UBSan, and the
# API suites on the fake driver (8-thread dispatch, threaded graph tests,
# the 8-thread device-fault tests and the staging ring's threads included)
# under ThreadSanitizer, and last the libFuzzer targets (clang, ASan + UBSan,
# the fake driver): their seeds and regression inputs replayed, then each
# target fuzzed for VYRE_FUZZ_SECONDS (default 20) seconds, one per core at a
# time (about 1.5 minutes on 2 cores); scripts/fuzz.sh runs them longer.
# The last line is the verdict: suites run, tests passed, failed and skipped
# (and why), and the step that failed if one did (scripts/verdict.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/verdict.sh
./scripts/bootstrap-debian.sh
source scripts/env.sh
jobs=$(nproc)
cmake --preset cpu
cmake --build --preset cpu -j"$jobs"
ctest_suite "cpu tests" --preset cpu -j"$jobs"
# The installed library is the self-contained one (release preset: Abseil
# built in from Debian's source): its NEEDED list, symbols and abidiff, and the
# examples against the installed copy on this build's fake driver.
suite "self-contained library" ./scripts/check-self-contained.sh build/cpu
# The Rust bindings: cargo test over both crates (with and without the fake
# driver), their examples (exit codes and messages with and without a driver)
# and bindings/rust/README.md's program as a crate outside the workspace,
# against this build. It runs (and checks that it runs) the toolchain the
# bootstrap installed, Debian's rustc-web and cargo-web (Rust >= 1.77);
# VYRE_CUDA_CARGO=PATH overrides.
suite "Rust bindings" ./bindings/rust/run-tests.sh build/cpu
# The Go bindings: go test with and without a driver and on the fake driver
# (cgocheck=2, -race, deferred copies), and their examples (needs Go >= 1.19).
suite "Go bindings" ./bindings/go/run-tests.sh build/cpu
cmake --preset asan
cmake --build --preset asan -j"$jobs"
# The Python test loads the library into an uninstrumented interpreter, which
# ASan cannot do; it ran above.
ctest_suite "asan tests" --preset asan -j"$jobs" -LE python
cmake --preset tsan
cmake --build --preset tsan -j"$jobs" --target api_fake_driver_test fault_injection_test graph_fake_test host_transfer_test device_fault_test copy_workers_test
ctest_suite "tsan tests" --preset tsan -j"$jobs" -R '^unit\.(api_fake_driver|fault_injection|graph_fake_driver|host_transfer|device_fault|copy_workers)$'
cmake --preset fuzz
cmake --build --preset fuzz -j"$jobs"
ctest_suite "fuzz replays" --preset fuzz -j"$jobs"
suite "fuzzing" env FUZZ_CI=1 FUZZ_NO_BUILD=1 FUZZ_JOBS="$jobs" ./scripts/fuzz.sh all \
  "${VYRE_FUZZ_SECONDS:-20}"
