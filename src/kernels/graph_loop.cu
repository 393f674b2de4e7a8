// The loop graphs' control kernel (src/graph/graph_loop.cc): after each run
// of the body, counts the iteration and tells the conditional WHILE node
// whether to run the body again. cudaGraphSetConditional lives in the device
// runtime (cudadevrt), so this is built with -rdc and device-linked into
// machine code per architecture (cmake/VyreEmbedPtx.cmake,
// vyre_embed_devlinked_fatbin): it cannot ship as PTX.
#include <cuda_runtime.h>

extern "C" __global__ void vyre_loop_control(cudaGraphConditionalHandle handle,
                                             const unsigned* condition, unsigned* count,
                                             unsigned max_iterations) {
  const unsigned ran = *count + 1u;
  *count = ran;
  cudaGraphSetConditional(handle, (*condition != 0u && ran < max_iterations) ? 1u : 0u);
}
