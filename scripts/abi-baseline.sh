#!/usr/bin/env bash
# Writes abi/vyre_cuda.abi, the abidw baseline that the abi.abidiff test
# compares the built library with (Debian's abigail-tools). Run it after an
# intended change of the public ABI (a new function, a field appended to a
# descriptor), from a build with debug info, and commit the result:
#   scripts/abi-baseline.sh [build/cpu/src/libvyre_cuda.so]
set -euo pipefail
cd "$(dirname "$0")/.."
library="${1:-build/cpu/src/libvyre_cuda.so}"
command -v abidw > /dev/null || {
  echo "abi-baseline.sh: abidw not found. Fix: apt-get install abigail-tools." >&2
  exit 1
}
[ -f "$library" ] || {
  echo "abi-baseline.sh: $library not found. Fix: build the cpu preset first (cmake --build --preset cpu)." >&2
  exit 1
}
# Only what the library exports, described by the types of include/.
abidw --headers-dir include --drop-private-types --exported-interfaces-only \
      --drop-undefined-syms --no-corpus-path --no-comp-dir-path \
      --out-file abi/vyre_cuda.abi "$(readlink -f "$library")"
echo "wrote abi/vyre_cuda.abi ($(grep -c '<function-decl' abi/vyre_cuda.abi) functions)"
