#!/usr/bin/env bash
# On the GPU machine: Nsight Compute over the e-graph kernels of
# vyre_egraph_bench (one synthetic graph of --sizes M rows), so each kernel's
# time, DRAM/L2 traffic and stall reasons are measured where they run.
#   scripts/profile-egraph.sh [millions of rows, default 16]
# Reports go to $OUT (or build/gpu-out): pass.txt (the pass's refresh,
# partition and bucket kernels, or pass_group and pass_emit) and rebuild.txt
# (the rounds' insert, refresh and relink).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-build/gpu-out}"
mkdir -p "$out"
rows="${1:-16}"
[ -f .deps/env.sh ] && source .deps/env.sh
source scripts/env.sh
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
{ cmake --preset gpu && cmake --build --preset gpu -j"$(nproc)" --target vyre_egraph_bench; } \
  > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
bench=(build/gpu/bench/vyre_egraph_bench --sizes "$rows" --graphs 0 --cpu-seconds 0 --gpu-seconds 0.05)
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
          --section Occupancy --section LaunchStats --section SchedulerStats)
"$ncu" "${sections[@]}" --kernel-name regex:'vyre_eg_(refresh|pass_group|pass_emit|part_.*|bucket_.*|pair_set_clear)$' \
  --launch-skip 10 --launch-count 10 "${bench[@]}" > "$out/pass.txt" 2>&1
echo "pass profile exit $?"
"$ncu" "${sections[@]}" --kernel-name regex:'vyre_eg_(insert|refresh|relink)$' \
  --launch-skip 13 --launch-count 60 "${bench[@]}" > "$out/rebuild.txt" 2>&1
echo "rebuild profile exit $?"
grep -E "vyre_eg_|Duration|DRAM Throughput|Memory Throughput|L2 Hit|Achieved Occupancy" "$out/pass.txt" | head -60
