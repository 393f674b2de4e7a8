#!/usr/bin/env bash
# Builds the library, prints `vyre-cuda info` and runs the vector-add
# example. Without a GPU both print the library's Fix message instead.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap-debian.sh
source scripts/env.sh
cmake --preset cpu -DVYRE_CUDA_BUILD_TESTS=OFF
cmake --build --preset cpu -j"$(nproc)" --target vyre_cuda_cli vector_add
status=0
./build/cpu/tools/vyre-cuda info || status=$?
./build/cpu/examples/vector_add || status=$?
exit $status
