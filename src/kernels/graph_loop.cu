// The loop graphs' kernels (src/graph/graph_loop.cc). vyre_loop_control
// calls cudaGraphSetConditional, which lives in the device runtime
// (cudadevrt), so this is built with -rdc and device-linked into machine code
// per architecture (cmake/VyreEmbedPtx.cmake, vyre_embed_devlinked_fatbin):
// it cannot ship as PTX.
#include <cuda_runtime.h>

// Before the WHILE node, once per launch: no iteration counted, no round
// asked for. One node for both words (a memset node each cost more).
extern "C" __global__ void vyre_loop_start(unsigned* condition, unsigned* count) {
  *condition = 0u;
  *count = 0u;
}

// After each run of the body: counts the iteration and tells the WHILE node
// whether to run the body again. Going on, it clears the condition word for
// the next run here, which saves a memset node per iteration (~0.7 us on an
// H200); stopping, it leaves the word as the body left it (non-zero: the
// bound stopped the loop).
extern "C" __global__ void vyre_loop_control(cudaGraphConditionalHandle handle,
                                             unsigned* condition, unsigned* count,
                                             unsigned max_iterations) {
  const unsigned ran = *count + 1u;
  *count = ran;
  const bool again = *condition != 0u && ran < max_iterations;
  if (again) *condition = 0u;
  cudaGraphSetConditional(handle, again ? 1u : 0u);
}
