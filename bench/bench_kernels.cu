// The benchmark kernels, embedded as PTX (vyre_bench_kernels_ptx). The vyre
// path and the raw driver path load this same PTX text.
// Default vyre calling convention: out[i] = a[i] + b[i] for i < params[0].
extern "C" __global__ void vyre_bench_add_u32(const unsigned* a, const unsigned* b,
                                              unsigned* out, const unsigned* params) {
  const unsigned n = params[0];
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

// data[i] += 1 for i < params[0]: the sequence cases chain 100 of these over
// one resident buffer, each launch depending on the one before.
extern "C" __global__ void vyre_bench_inc_u32(unsigned* data, const unsigned* params) {
  const unsigned n = params[0];
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1u;
}

// One tick of a counter (thread 0): state[0] += 1, and *flag = 1 unless the
// count reached a multiple of params[0]. A loop graph over it runs exactly
// params[0] iterations per launch from any multiple (graph_loop_bench.cc).
extern "C" __global__ void vyre_bench_tick(unsigned* state, unsigned* flag,
                                           const unsigned* params) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const unsigned s = state[0] + 1u;
  state[0] = s;
  if (s % params[0] != 0u) *flag = 1u;
}
