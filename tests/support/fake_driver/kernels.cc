// The kernels the fake knows (the test kernels named in
// docs/ENGINE_CONTRACT.md and tests/support/test_kernels.cu, run on the host,
// and the library's own), the refusal of every other kernel, and the launch
// every live or graph kernel goes through.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
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
CUresult RunProbeParams(const char* name, const KernelArgs& args, uint64_t /*threads*/) {
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

// (u32* out, const u32* params): writes nothing, reads nothing. Its
// arguments are not read either: tests give it any binding set.
CUresult RunNoop(const char* /*name*/, const KernelArgs& /*args*/, uint64_t /*threads*/) {
  return CUDA_SUCCESS;
}

// (u32* data, u32* flag, const u32* params): for i < params[0], a positive
// data[i] drops by one, and *flag = 1 where one is still positive after.
CUresult RunCountdownU32(const char* name, const KernelArgs& args, uint64_t threads) {
  CUdeviceptr data, flag, params;
  if (!args.Read(0, {}, &data) || !args.Read(1, {8}, &flag) || !args.Read(2, {8, 8}, &params)) {
    return BadArgs(name);
  }
  if (CUresult r = CheckKernelRange(name, "params", params, 4)) return r;
  if (CUresult r = CheckKernelRange(name, "flag", flag, 4)) return r;
  uint64_t n = ElementsToRun(threads, *DevicePointer<uint32_t>(params));
  if (CUresult r = CheckKernelRange(name, "data", data, n * 4)) return r;
  uint32_t* p = DevicePointer<uint32_t>(data);
  for (uint64_t i = 0; i < n; ++i) {
    if (p[i] == 0) continue;
    p[i] -= 1;
    if (p[i] != 0) *DevicePointer<uint32_t>(flag) = 1;
  }
  return CUDA_SUCCESS;
}

// The library's loop control (src/kernels/graph_loop.cu):
// (CUgraphConditionalHandle h, u32* condition, u32* count, u32 max): counts,
// and goes on (clearing the condition) while it is set below the bound.
CUresult RunLoopControl(const char* name, const KernelArgs& args, uint64_t /*threads*/) {
  CUgraphConditionalHandle handle;
  CUdeviceptr condition, count;
  uint32_t max_iterations;
  if (!args.Read(0, {}, &handle) || !args.Read(1, {8}, &condition) ||
      !args.Read(2, {8, 8}, &count) || !args.Read(3, {8, 8, 8}, &max_iterations)) {
    return BadArgs(name);
  }
  if (CUresult r = CheckKernelRange(name, "condition", condition, 4)) return r;
  if (CUresult r = CheckKernelRange(name, "count", count, 4)) return r;
  auto it = S().conditionals.find(handle);
  if (it == S().conditionals.end()) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown conditional handle", name);
  }
  uint32_t* ran = DevicePointer<uint32_t>(count);
  uint32_t* word = DevicePointer<uint32_t>(condition);
  *ran += 1;
  const bool again = *word != 0 && *ran < max_iterations;
  if (again) *word = 0;
  it->second.value = again ? 1 : 0;
  return CUDA_SUCCESS;
}

// The loop's start: (u32* condition, u32* count), both zeroed.
CUresult RunLoopStart(const char* name, const KernelArgs& args, uint64_t /*threads*/) {
  CUdeviceptr condition, count;
  if (!args.Read(0, {}, &condition) || !args.Read(1, {8}, &count)) return BadArgs(name);
  if (CUresult r = CheckKernelRange(name, "condition", condition, 4)) return r;
  if (CUresult r = CheckKernelRange(name, "count", count, 4)) return r;
  *DevicePointer<uint32_t>(condition) = 0;
  *DevicePointer<uint32_t>(count) = 0;
  return CUDA_SUCCESS;
}

using KernelBody = CUresult (*)(const char* name, const KernelArgs& args, uint64_t threads);

struct KnownKernel {
  const char* name;
  // Runs the kernel on the host; null: accepted without running (below).
  KernelBody body;
  // The argument sizes a graph's kernel node keeps (none: it keeps no
  // arguments, for kernels that read none).
  size_t param_sizes[4];
  size_t param_count;
};

// Every kernel the fake accepts. Any other kernel is refused at launch
// (KernelRefusal): a test of it on the fake would pass while computing nothing.
constexpr KnownKernel kKnownKernels[] = {
    // The test kernels (docs/ENGINE_CONTRACT.md, "Test kernels";
    // tests/support/test_kernels.cu, tests/kernels/*.ptx).
    {"vyre_test_add_u32", RunAddU32, {8, 8, 8, 8}, 4},
    {"vyre_test_inc_u32", RunIncU32, {8, 8}, 2},
    {"vyre_test_saxpy_f32", RunSaxpyF32, {4, 8, 8, 8}, 4},
    {"vyre_test_noop_out_u32", RunNoop, {}, 0},
    {"vyre_test_probe_params", RunProbeParams, {8, 8, 4, 8}, 4},
    {"vyre_test_countdown_u32", RunCountdownU32, {8, 8, 8}, 3},
    // The library's loop graphs' control kernel (a WHILE node's condition).
    {"vyre_loop_control", RunLoopControl, {8, 8, 8, 4}, 4},
    {"vyre_loop_start", RunLoopStart, {8, 8}, 2},
    // The library's self-test and the examples' vector add
    // (examples/vector_add_ptx.h, so their happy paths run on this driver too).
    {"vyre_selftest_add_u32", RunAddU32, {8, 8, 8, 8}, 4},
    {"vyre_example_add_u32", RunAddU32, {8, 8, 8, 8}, 4},
    // The kernels with which the library creates a GPU e-graph image:
    // accepted and not run, so image creation, reads, writes and releases can
    // be tested here. The image holds its uploaded columns; what these
    // kernels compute (row signatures the caller did not give, the
    // union-find, the row records) is not computed. The pass and rebuild
    // kernels are refused like any other: their results need a GPU.
    {"vyre_eg_signatures", nullptr, {}, 0},
    {"vyre_eg_init_parent", nullptr, {}, 0},
    {"vyre_eg_pack_rows", nullptr, {}, 0},
    // Creation and appends check the uploaded columns on the device: run
    // here (egraph_kernels.cc), so their refusals are tested on the fake.
    // Appends also rebase the new rows' offsets, mark them for the next
    // rebuild and rebuild the parent index: accepted and not run.
    {"vyre_eg_validate", RunEgraphValidate, {}, 0},
    {"vyre_eg_rebase_offsets", nullptr, {}, 0},
    {"vyre_eg_mark_rows", nullptr, {}, 0},
    {"vyre_eg_index_count", nullptr, {}, 0},
    {"vyre_eg_scan_reduce", nullptr, {}, 0},
    {"vyre_eg_scan_top", nullptr, {}, 0},
    {"vyre_eg_scan_down", nullptr, {}, 0},
    {"vyre_eg_index_scatter", nullptr, {}, 0},
};

const KnownKernel* FindKnownKernel(const std::string& name) {
  for (const KnownKernel& k : kKnownKernels) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

// The calling thread's last refused launch: the kernel's name (cut to the
// buffer), until fake_cuda_take_refused_kernel takes it or the thread's next
// launch call. Plain bytes, not a std::string: a thread_local with a
// destructor in a dlopen'ed library crashed LeakSanitizer's exit-time scan.
constexpr size_t kRefusedKernelBytes = 1024;
thread_local char refused_kernel[kRefusedKernelBytes];
thread_local size_t refused_kernel_length = 0;

}  // namespace

void ClearRefusedKernel() { refused_kernel_length = 0; }

CUresult KernelRefusal(const std::string& name, const char* fn) {
  if (FindKnownKernel(name) != nullptr) return CUDA_SUCCESS;
  refused_kernel_length = std::min(name.size(), kRefusedKernelBytes);
  std::memcpy(refused_kernel, name.data(), refused_kernel_length);
  std::fprintf(stderr,
               "fake CUDA driver: %s: kernel %s refused: this fake driver runs only the test "
               "kernels of docs/ENGINE_CONTRACT.md; run it on a real GPU\n",
               fn, name.c_str());
  return CUDA_ERROR_NOT_SUPPORTED;
}

size_t TakeRefusedKernel(char* name, size_t size) {
  if (refused_kernel_length == 0) return 0;
  const size_t length = refused_kernel_length;
  if (name != nullptr && size > 0) {
    const size_t copied = std::min(length, size - 1);
    std::memcpy(name, refused_kernel, copied);
    name[copied] = '\0';
  }
  refused_kernel_length = 0;
  return length + 1;
}

// The argument sizes of the kernels that run on the host, as a graph's
// kernel node keeps them; none for the kernels that read no arguments.
std::vector<size_t> KernelParamSizes(const std::string& name) {
  const KnownKernel* k = FindKnownKernel(name);
  if (k == nullptr) return {};
  return std::vector<size_t>(k->param_sizes, k->param_sizes + k->param_count);
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
  const KnownKernel* k = FindKnownKernel(name);
  if (k == nullptr || k->body == nullptr) return CUDA_SUCCESS;  // refused before, or not run
  return k->body(name.c_str(), args, threads);
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
