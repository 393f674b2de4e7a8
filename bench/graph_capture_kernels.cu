// Kernels of vyre_graph_capture_bench (graph_capture_bench.cc), embedded as
// PTX (vyre_graph_capture_kernels_ptx). The library's program and the raw
// driver's module are loaded from this same text.

// The "foreign" kernel: other CUDA code's work, launched with raw
// cuLaunchKernel on the capture stream (never through the library).
// y[i] = a * x[i] + y[i], rounded once (fused, as the CPU's std::fma).
extern "C" __global__ void foreign_axpy(float* y, const float* x, float a, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fmaf_rn(a, x[i], y[i]);
}

// The library's program, default vyre calling convention (one pointer per
// binding in declaration order, then the parameter words):
// y[i] = 0.5 * y[i] + x[i] for i < params[0] (bindings y INPUT_OUTPUT, x INPUT).
extern "C" __global__ void vyre_capture_bench_halve_add(float* y, const float* x,
                                                        const unsigned* params) {
  const unsigned n = params[0];
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fmaf_rn(y[i], 0.5f, x[i]);
}
