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
// A countdown to a fixpoint (a loop graph's body): for i < params[0], a
// positive data[i] drops by one, and *flag becomes 1 while some element is
// still positive after it.
extern "C" __global__ void vyre_test_countdown_u32(u32* data, u32* flag, const u32* params) {
  const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < params[0] && data[i] != 0u) {
    data[i] -= 1u;
    if (data[i] != 0u) *flag = 1u;
  }
}

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

// --- Graph and sequence suites (graph_test.cc, sequence_test.cc) -----------

// Explicit parameter list with Triton-style trailing scratch pointers, which
// the program declares VYRE_PARAM_NULL_POINTER:
//   params {SCALAR32 0, BINDING 0, BINDING 1, SCALAR64 1, NULL_POINTER, NULL_POINTER}
// y[i] = a * x[i] + y[i] (wrapping) for i < n. If either scratch pointer is
// not null every element gets 0xDEADBEEF instead, so a wrong parameter layout
// shows in every element.
extern "C" __global__ void vyre_test_axpy_scratch_u32(u32 a, const u32* x, u32* y,
                                                      unsigned long long n, void* scratch0,
                                                      void* scratch1) {
  const unsigned long long i = GlobalThreadIndex();
  if (i >= n) return;
  if (scratch0 != nullptr || scratch1 != nullptr) {
    y[i] = 0xDEADBEEFu;
    return;
  }
  y[i] = a * x[i] + y[i];
}

// Dynamic shared memory (extern __shared__): each block stages its slice of
// `in` in shared memory, params[1] slots apart (so a launch needs
// blockDim.x * params[1] * 4 bytes), and writes it back mirrored inside the
// block. With n = params[0], t = threadIdx.x, B = blockDim.x and
// m = blockIdx.x * B + (B - 1 - t): out[i] = in[m] for i < n and m < n; other
// elements are not written.
extern "C" __global__ void vyre_test_block_reverse_u32(const u32* in, u32* out,
                                                       const u32* params) {
  extern __shared__ u32 tile[];
  const u32 n = params[0];
  const u32 stride = params[1];
  const u32 t = threadIdx.x;
  const u32 i = GlobalThreadIndex();
  tile[t * stride] = i < n ? in[i] : 0u;
  __syncthreads();
  const u32 mirror = blockDim.x - 1u - t;
  const u32 source = blockIdx.x * blockDim.x + mirror;
  if (i < n && source < n) out[i] = tile[mirror * stride];
}

// 2-D grid and 2-D blocks: with width = params[0], height = params[1], for
// x < width and y < height, idx = y * width + x:
//   out[idx] = a[idx] + b[idx] + (y << 16) + x
extern "C" __global__ void vyre_test_add_2d_u32(const u32* a, const u32* b, u32* out,
                                                const u32* params) {
  const u32 width = params[0];
  const u32 height = params[1];
  const u32 x = blockIdx.x * blockDim.x + threadIdx.x;
  const u32 y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < width && y < height) {
    const u32 idx = y * width + x;
    out[idx] = a[idx] + b[idx] + (y << 16) + x;
  }
}
