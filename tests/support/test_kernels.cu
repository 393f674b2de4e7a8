// The test kernels named in docs/ENGINE_CONTRACT.md, compiled to PTX at build
// time (vyre_test_kernels_ptx). The fake CUDA driver runs the same names on
// the host; a real GPU runs this code.
extern "C" __global__ void vyre_test_add_u32(const unsigned* a, const unsigned* b, unsigned* out,
                                             const unsigned* params) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < params[0]) out[i] = a[i] + b[i];
}

extern "C" __global__ void vyre_test_inc_u32(unsigned* data, const unsigned* params) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < params[0]) data[i] += 1;
}

// A countdown to a fixpoint: for i < params[0], a positive data[i] drops by
// one, and *flag becomes 1 while some element is still positive after it
// (a loop graph's condition word: vyre_graph_loop_create).
extern "C" __global__ void vyre_test_countdown_u32(unsigned* data, unsigned* flag,
                                                   const unsigned* params) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < params[0] && data[i] != 0u) {
    data[i] -= 1u;
    if (data[i] != 0u) *flag = 1u;
  }
}

extern "C" __global__ void vyre_test_saxpy_f32(float a, const float* x, float* y,
                                               unsigned long long n) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Writes nothing: a dispatch of it leaves OUTPUT bindings as the engine's
// zeroing left them. (The fake driver does not run it either.)
extern "C" __global__ void vyre_test_noop_out_u32(unsigned* out, const unsigned* params) {
  (void)out;
  (void)params;
}

// Receives one parameter of each explicit kind so a test can check how they
// were marshalled: the fake driver records (a, b, c, d[0]) in its stats.
extern "C" __global__ void vyre_test_probe_params(unsigned long long a, const void* b,
                                                  unsigned c, const unsigned* d) {
  (void)a;
  (void)b;
  (void)c;
  (void)d;
}
