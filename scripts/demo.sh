#!/usr/bin/env bash
# Builds the library, prints `vyre-cuda info` and runs the vector-add
# example. Without a GPU both print the library's Fix message instead.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap-debian.sh
source scripts/env.sh
# Its own build folder: the test build's settings stay as they are.
cmake --preset cpu -B build/demo -DVYRE_CUDA_BUILD_TESTS=OFF
cmake --build build/demo -j"$(nproc)" --target vyre_cuda_cli vector_add
status=0
./build/demo/tools/vyre-cuda info || status=$?
./build/demo/examples/vector_add || status=$?
exit $status
