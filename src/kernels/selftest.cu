// The library's built-in self-test kernel: `vyre-cuda info --selftest` and
// the context smoke check run it to prove the JIT and launch path work.
extern "C" __global__ void vyre_selftest_add_u32(const unsigned* a, const unsigned* b,
                                                 unsigned* out, const unsigned* params) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < params[0]) out[i] = a[i] + b[i];
}
