// Test kernels for the GPU suite, compiled to PTX (compute_75) and embedded as
// vyre_gpu_test_kernels_ptx. Names and semantics of the first three are fixed
// by docs/ENGINE_CONTRACT.md ("Test kernels"); the fake driver knows them too.
//
// Default calling convention: one pointer per binding, then `params`, the
// dispatch's u32 parameter words (256 zero bytes when none were given).
#include <cooperative_groups.h>

typedef unsigned int u32;

namespace {

__device__ __forceinline__ u32 GlobalThreadIndex() {
  return blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

}  // namespace

// out[i] = a[i] + b[i] for i < params[0].
extern "C" __global__ void vyre_test_add_u32(const u32* a, const u32* b, u32* out,
                                             const u32* params) {
  const u32 n = params[0];
  const u32 i = GlobalThreadIndex();
  if (i < n) out[i] = a[i] + b[i];
}

// data[i] += 1 for i < params[0].
extern "C" __global__ void vyre_test_inc_u32(u32* data, const u32* params) {
  const u32 n = params[0];
  const u32 i = GlobalThreadIndex();
  if (i < n) data[i] += 1u;
}

// Explicit parameter list: y[i] = a * x[i] + y[i] for i < n.
extern "C" __global__ void vyre_test_saxpy_f32(float a, const float* x, float* y,
                                               unsigned long long n) {
  const unsigned long long i = GlobalThreadIndex();
  if (i < n) y[i] = a * x[i] + y[i];
}

// out[i] = in[i] at even i < params[0]; odd elements are never written, so
// they keep whatever the engine left there (zero for an OUTPUT binding).
extern "C" __global__ void vyre_test_write_even_u32(const u32* in, u32* out,
                                                    const u32* params) {
  const u32 n = params[0];
  const u32 i = GlobalThreadIndex();
  if (i < n && (i % 2u) == 0u) out[i] = in[i];
}

// Every thread busy-waits params[0] microseconds (by %globaltimer, with a
// clock64 cap so a timer that does not tick cannot hang the test), then
// data[i] += 1 for i < params[1].
extern "C" __global__ void vyre_test_spin(u32* data, const u32* params) {
  const unsigned long long wait_ns = 1000ull * params[0];
  // At most ~4 GHz: the cap ends the spin no earlier than intended on any GPU.
  const long long cycle_cap = 4000ll * static_cast<long long>(params[0]);
  const unsigned long long start_ns = GlobalTimerNs();
  const long long start_cycles = clock64();
  while (GlobalTimerNs() - start_ns < wait_ns && clock64() - start_cycles < cycle_cap) {
  }
  const u32 i = GlobalThreadIndex();
  if (i < params[1]) data[i] += 1u;
}

// Cooperative kernel (needs cuLaunchCooperativeKernel: the grid barrier traps
// without the grid workspace a cooperative launch provides). With
// n = params[0] == number of launched threads:
//   phase 1: scratch[i] = in[i] * 2
//   grid.sync()
//   phase 2: out[i] = scratch[(i + blockDim.x) % n] + 1, i.e. a value another
//            block wrote in phase 1.
extern "C" __global__ void vyre_test_grid_sync(const u32* in, u32* scratch, u32* out,
                                               const u32* params) {
  const u32 n = params[0];
  const u32 i = GlobalThreadIndex();
  if (i < n) scratch[i] = in[i] * 2u;
  cooperative_groups::this_grid().sync();
  if (i < n) out[i] = scratch[(i + blockDim.x) % n] + 1u;
}
