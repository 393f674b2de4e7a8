// The kernels named in docs/ENGINE_CONTRACT.md, run on the host (other
// kernels do nothing), and the launch every live or graph kernel goes through.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels.h"
#include "state.h"

namespace fake_driver {

// ---------------------------------------------------------------------------
// Kernels run on the host
// ---------------------------------------------------------------------------

namespace {

// Threads in the launch; element i runs when i < min(threads, n).
uint64_t ElementsToRun(uint64_t threads, uint64_t n) { return std::min(threads, n); }

template <typename T>
T* DevicePointer(CUdeviceptr p) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(p));
}

CUresult CheckKernelRange(const char* kernel, const char* arg, CUdeviceptr ptr, uint64_t bytes) {
  if (!DeviceRangeValid(ptr, bytes)) {
    return Misuse(CUDA_ERROR_ILLEGAL_ADDRESS,
                  "%s: argument %s [0x%llx, +%llu bytes) is outside every live allocation",
                  kernel, arg, static_cast<unsigned long long>(ptr),
                  static_cast<unsigned long long>(bytes));
  }
  return CUDA_SUCCESS;
}

CUresult BadArgs(const char* kernel) {
  return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: kernel arguments missing", kernel);
}

// (const u32* a, const u32* b, u32* out, const u32* params): out[i] = a[i] + b[i], i < n
CUresult RunAddU32(const char* name, const KernelArgs& args, uint64_t threads) {
  CUdeviceptr a, b, out, params;
  if (!args.Read(0, {}, &a) || !args.Read(1, {8}, &b) || !args.Read(2, {8, 8}, &out) ||
      !args.Read(3, {8, 8, 8}, &params)) {
    return BadArgs(name);
  }
  if (CUresult r = CheckKernelRange(name, "params", params, 4)) return r;
  uint64_t n = ElementsToRun(threads, *DevicePointer<uint32_t>(params));
  if (CUresult r = CheckKernelRange(name, "a", a, n * 4)) return r;
  if (CUresult r = CheckKernelRange(name, "b", b, n * 4)) return r;
  if (CUresult r = CheckKernelRange(name, "out", out, n * 4)) return r;
  const uint32_t* pa = DevicePointer<uint32_t>(a);
  const uint32_t* pb = DevicePointer<uint32_t>(b);
  uint32_t* pout = DevicePointer<uint32_t>(out);
  for (uint64_t i = 0; i < n; ++i) pout[i] = pa[i] + pb[i];
  return CUDA_SUCCESS;
}

// (u32* data, const u32* params): data[i] += 1, i < n
CUresult RunIncU32(const char* name, const KernelArgs& args, uint64_t threads) {
  CUdeviceptr data, params;
  if (!args.Read(0, {}, &data) || !args.Read(1, {8}, &params)) return BadArgs(name);
  if (CUresult r = CheckKernelRange(name, "params", params, 4)) return r;
  uint64_t n = ElementsToRun(threads, *DevicePointer<uint32_t>(params));
  if (CUresult r = CheckKernelRange(name, "data", data, n * 4)) return r;
  uint32_t* p = DevicePointer<uint32_t>(data);
  for (uint64_t i = 0; i < n; ++i) p[i] += 1;
  return CUDA_SUCCESS;
}

// (float a, const float* x, float* y, unsigned long long n): y[i] = a * x[i] + y[i]
CUresult RunSaxpyF32(const char* name, const KernelArgs& args, uint64_t threads) {
  float a;
  CUdeviceptr x, y;
  unsigned long long count;
  if (!args.Read(0, {}, &a) || !args.Read(1, {4}, &x) || !args.Read(2, {4, 8}, &y) ||
      !args.Read(3, {4, 8, 8}, &count)) {
    return BadArgs(name);
  }
  uint64_t n = ElementsToRun(threads, count);
  if (CUresult r = CheckKernelRange(name, "x", x, n * 4)) return r;
  if (CUresult r = CheckKernelRange(name, "y", y, n * 4)) return r;
  const float* px = DevicePointer<float>(x);
  float* py = DevicePointer<float>(y);
  for (uint64_t i = 0; i < n; ++i) py[i] = a * px[i] + py[i];
  return CUDA_SUCCESS;
}

// (u64 a, const void* b, u32 c, const u32* d): records a, b, c and d[0].
CUresult RunProbeParams(const char* name, const KernelArgs& args) {
  uint64_t a;
  CUdeviceptr b, d;
  uint32_t c;
  if (!args.Read(0, {}, &a) || !args.Read(1, {8}, &b) || !args.Read(2, {8, 8}, &c) ||
      !args.Read(3, {8, 8, 4}, &d)) {
    return BadArgs(name);
  }
  if (CUresult r = CheckKernelRange(name, "d", d, 4)) return r;
  fake_cuda_stats& st = S().stats;
  st.probe_a = a;
  st.probe_b = b;
  st.probe_c = c;
  st.probe_d0 = *DevicePointer<uint32_t>(d);
  ++st.probe_launches;
  return CUDA_SUCCESS;
}

// The vector adds: the tests', the self-test's and the examples'
// (examples/vector_add_ptx.h, so their happy paths run on this driver too).
bool IsAddU32(const std::string& name) {
  return name == "vyre_test_add_u32" || name == "vyre_selftest_add_u32" ||
         name == "vyre_example_add_u32";
}

}  // namespace

// The argument sizes of the kernels that run on the host; other kernels do
// nothing, so a graph keeps no arguments for them.
std::vector<size_t> KernelParamSizes(const std::string& name) {
  if (IsAddU32(name)) return {8, 8, 8, 8};
  if (name == "vyre_test_inc_u32") return {8, 8};
  if (name == "vyre_test_saxpy_f32") return {4, 8, 8, 8};
  if (name == "vyre_test_probe_params") return {8, 8, 4, 8};
  return {};
}

// Copies a launch's argument values into a packed buffer (the layout of a
// CU_LAUNCH_PARAM_BUFFER_POINTER block), as a graph's kernel node keeps them.
CUresult PackKernelArgs(const std::string& name, const KernelArgs& args,
                        std::vector<unsigned char>* packed) {
  packed->clear();
  size_t offset = 0;
  const std::vector<size_t> sizes = KernelParamSizes(name);
  for (size_t i = 0; i < sizes.size(); ++i) {
    offset = (offset + sizes[i] - 1) / sizes[i] * sizes[i];
    packed->resize(offset + sizes[i]);
    if (!args.ReadBytes(i, offset, sizes[i], packed->data() + offset)) {
      return BadArgs(name.c_str());
    }
    offset += sizes[i];
  }
  return CUDA_SUCCESS;
}

namespace {

CUresult RunKernel(const std::string& name, const KernelArgs& args, uint64_t threads) {
  if (IsAddU32(name)) return RunAddU32(name.c_str(), args, threads);
  if (name == "vyre_test_inc_u32") return RunIncU32(name.c_str(), args, threads);
  if (name == "vyre_test_saxpy_f32") return RunSaxpyF32(name.c_str(), args, threads);
  if (name == "vyre_test_probe_params") return RunProbeParams(name.c_str(), args);
  return CUDA_SUCCESS;  // other kernels do nothing
}

}  // namespace

CUresult CheckLaunchShape(const FakeFunction& f, const LaunchShape& shape) {
  for (int d = 0; d < 3; ++d) {
    if (shape.grid[d] == 0 || shape.block[d] == 0) return CUDA_ERROR_INVALID_VALUE;
    if (shape.grid[d] > static_cast<unsigned>(kMaxGridDim[d])) return CUDA_ERROR_INVALID_VALUE;
    if (shape.block[d] > static_cast<unsigned>(kMaxBlockDim[d])) return CUDA_ERROR_INVALID_VALUE;
  }
  uint64_t threads = uint64_t{shape.block[0]} * shape.block[1] * shape.block[2];
  if (threads > static_cast<uint64_t>(kMaxThreadsPerBlock)) return CUDA_ERROR_INVALID_VALUE;
  if (shape.shared_bytes > static_cast<unsigned>(f.max_dynamic_shared_bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// Counts a launch of `shape` and runs the kernel on the host. An armed fault
// fires instead: the launch succeeds, runs nothing, and the device is sticky.
CUresult RunLaunch(const std::string& name, const LaunchShape& shape, const KernelArgs& args,
                   bool cooperative) {
  fake_cuda_stats& st = S().stats;
  if (S().armed_fault != CUDA_SUCCESS) {
    (S().armed_latent ? S().latent : S().sticky) = S().armed_fault;
    S().armed_fault = CUDA_SUCCESS;
    ++st.faults;
    ++st.kernel_launches;
    return CUDA_SUCCESS;
  }
  ++st.kernel_launches;
  if (cooperative) ++st.cooperative_launches;
  std::copy(shape.grid, shape.grid + 3, st.last_grid);
  std::copy(shape.block, shape.block + 3, st.last_block);
  st.last_shared_bytes = shape.shared_bytes;
  std::snprintf(st.last_kernel, sizeof(st.last_kernel), "%s", name.c_str());
  uint64_t block_threads = uint64_t{shape.block[0]} * shape.block[1] * shape.block[2];
  uint64_t blocks = uint64_t{shape.grid[0]} * shape.grid[1] * shape.grid[2];
  return RunKernel(name, args, blocks * block_threads);
}

}  // namespace fake_driver
