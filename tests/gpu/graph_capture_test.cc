// Captures of caller work on a real GPU (include/vyre_cuda.h, "Capturing
// caller work into a graph"): other CUDA code, played by raw driver calls on
// the capture stream (a copy from pinned host memory into b, then
// vyre_test_spin: ~1 ms, then a[i] += 1), and the library's own add
// (out = a + b) captured into one graph. Nothing runs until it is replayed;
// every replay must run the three in order (an add not ordered after the
// spin misses the +1, one not ordered after the copy reads the old b). The
// graph is replayed, and launched on a raw stream ahead of a read-back
// there; meanwhile another thread's dispatch runs outside the capture.
// Fresh random non-zero data every round, outputs poisoned, every element
// compared with the CPU.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu_test_env.h"
#include "raw_driver.h"

namespace vyre_test {
namespace {

constexpr uint32_t kBlock = 256;

uint64_t PointerOf(vyre_buffer buffer) {
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  EXPECT_VYRE_OK(vyre_buffer_info_get(buffer, &info));
  return info.device_pointer;
}

void Poison(vyre_buffer buffer, size_t count) {
  const std::vector<uint32_t> poison(count, kPoisonU32);
  EXPECT_VYRE_OK(vyre_buffer_upload(buffer, 0, poison.data(), count * 4));
}

// What the raw driver allocates and loads before the capture (a THREAD_LOCAL
// capture forbids this thread to allocate or load meanwhile): the spin
// kernel and its parameter words, and pinned host memory for b.
class ForeignWork {
 public:
  explicit ForeignWork(const RawDriver& cu) : cu_(cu) {}
  ~ForeignWork() {
    if (host_ != nullptr) cu_.cuMemFreeHost(host_);
    if (params_ != 0) cu_.cuMemFree(params_);
    if (module_ != nullptr) cu_.cuModuleUnload(module_);
  }
  ::testing::AssertionResult Prepare(uint32_t spin_microseconds, uint32_t n) {
    n_ = n;
    const uint32_t words[2] = {spin_microseconds, n};
    if (cu_.cuModuleLoadDataEx(&module_, vyre_gpu_test_kernels_ptx, 0, nullptr, nullptr) !=
            CUDA_SUCCESS ||
        cu_.cuModuleGetFunction(&spin_, module_, "vyre_test_spin") != CUDA_SUCCESS ||
        cu_.cuMemAlloc(&params_, sizeof(words)) != CUDA_SUCCESS ||
        cu_.cuMemcpyHtoDAsync(params_, words, sizeof(words), nullptr) != CUDA_SUCCESS ||
        cu_.cuStreamSynchronize(nullptr) != CUDA_SUCCESS ||
        cu_.cuMemHostAlloc(&host_, size_t{n} * 4, 0) != CUDA_SUCCESS) {
      return ::testing::AssertionFailure() << "preparing the raw driver's work";
    }
    return ::testing::AssertionSuccess();
  }
  uint32_t* host_b() { return static_cast<uint32_t*>(host_); }
  // On the capture stream: b <- host_b, then the spin and a[i] += 1.
  ::testing::AssertionResult Enqueue(CUdeviceptr a, CUdeviceptr b, CUstream stream) {
    if (cu_.cuMemcpyHtoDAsync(b, host_, size_t{n_} * 4, stream) != CUDA_SUCCESS) {
      return ::testing::AssertionFailure() << "the captured copy";
    }
    void* args[] = {&a, &params_};
    if (cu_.cuLaunchKernel(spin_, (n_ + kBlock - 1) / kBlock, 1, 1, kBlock, 1, 1, 0, stream, args,
                           nullptr) != CUDA_SUCCESS) {
      return ::testing::AssertionFailure() << "the captured spin";
    }
    return ::testing::AssertionSuccess();
  }

 private:
  const RawDriver& cu_;
  uint32_t n_ = 0;
  CUmodule module_ = nullptr;
  CUfunction spin_ = nullptr;
  CUdeviceptr params_ = 0;
  void* host_ = nullptr;
};

using GraphCaptureGpuTest = GpuTest;

TEST_F(GraphCaptureGpuTest, ForeignWorkAndADispatchReplayInOrder) {
  RawPrimaryContext raw(static_cast<int>(device().ordinal));
  ASSERT_TRUE(raw.ok()) << raw.error();
  const RawDriver& cu = raw.api();
  const uint32_t n = 200 * kBlock + 11;
  ForeignWork foreign(cu);
  ASSERT_TRUE(foreign.Prepare(/*spin_microseconds=*/1000, n));
  ProgramHandle add;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32",
                                {Decl(VYRE_ROLE_INPUT, 4, "a"), Decl(VYRE_ROLE_INPUT, 4, "b"),
                                 Decl(VYRE_ROLE_OUTPUT, 4, "out")},
                                kBlock, &add));
  std::vector<uint32_t> a = rng().NonZeroU32(n);
  const std::vector<uint32_t> b0 = rng().NonZeroU32(n);
  BufferHandle ba, bb, out, eager_out;
  ASSERT_TRUE(CreateBufferWith(context(), a, &ba));
  ASSERT_TRUE(CreateBufferWith(context(), b0, &bb));
  ASSERT_TRUE(CreateBufferWith(context(), std::vector<uint32_t>(n, kPoisonU32), &out));
  ASSERT_TRUE(CreateBufferWith(context(), std::vector<uint32_t>(n, kPoisonU32), &eager_out));
  CUstream caller = nullptr;
  ASSERT_EQ(cu.cuStreamCreate(&caller, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);

  uint64_t stream = 0;
  ASSERT_VYRE_OK(vyre_capture_begin(context(), nullptr, &stream));
  ASSERT_TRUE(foreign.Enqueue(PointerOf(ba.get()), PointerOf(bb.get()),
                              reinterpret_cast<CUstream>(stream)));
  const std::vector<vyre_dispatch_binding> bindings = {Resident(ba.get()), Resident(bb.get()),
                                                       Resident(out.get())};
  const std::vector<uint32_t> words = {n};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, words);
  ASSERT_VYRE_OK(vyre_capture_dispatch(add.get(), &desc));
  // Another thread's dispatch runs now, outside the capture.
  std::thread other([&] {
    const std::vector<vyre_dispatch_binding> eager = {Resident(ba.get()), Resident(bb.get()),
                                                      Resident(eager_out.get())};
    const vyre_dispatch_desc d = DispatchDesc(eager, words);
    EXPECT_VYRE_OK(vyre_dispatch(add.get(), &d, nullptr));
    std::vector<uint32_t> got;
    EXPECT_TRUE(DownloadU32(eager_out.get(), n, &got));
    EXPECT_TRUE(AllElementsEqual(got, [&](size_t i) { return a[i] + b0[i]; },
                                 "another thread's dispatch during the capture"));
  });
  other.join();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_capture_end(context(), graph.out()));
  std::vector<uint32_t> got;
  ASSERT_TRUE(DownloadU32(out.get(), n, &got));
  EXPECT_TRUE(AllElementsEqual(got, [](size_t) { return kPoisonU32; }, "out: captured, not run"));
  vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
  ASSERT_VYRE_OK(vyre_graph_info_get(graph.get(), &info));
  EXPECT_EQ(info.kernel_node_count, 2u);

  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    const std::vector<uint32_t> b = rng().NonZeroU32(n);
    std::memcpy(foreign.host_b(), b.data(), size_t{n} * 4);
    for (uint32_t& v : a) v += 1;
    Poison(out.get(), n);
    if (round < 2) {
      ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
      ASSERT_TRUE(DownloadU32(out.get(), n, &got));
    } else {
      vyre_pending pending{0};
      ASSERT_VYRE_OK(vyre_graph_launch(graph.get(), nullptr, reinterpret_cast<uint64_t>(caller),
                                       &pending));
      got.assign(n, 0);
      ASSERT_EQ(cu.cuMemcpyDtoHAsync(got.data(), PointerOf(out.get()), size_t{n} * 4, caller),
                CUDA_SUCCESS);
      ASSERT_EQ(cu.cuStreamSynchronize(caller), CUDA_SUCCESS);
      ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
      ASSERT_VYRE_OK(vyre_pending_release(pending));
    }
    EXPECT_TRUE(AllElementsEqual(got, [&](size_t i) { return a[i] + b[i]; },
                                 "out = (a + 1 by the spin) + (b copied from the host)"));
  }
  EXPECT_EQ(cu.cuStreamDestroy(caller), CUDA_SUCCESS);
}


// The caller's own kernel, compiled at run time with NVRTC (loaded here as
// any program would: dlopen, nothing of the library's), launched raw on the
// capture stream before and after a library dispatch.
constexpr char kCallerSource[] = R"(
extern "C" __global__ void caller_scale(unsigned* x, unsigned k, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * k + 1u;
})";

// NVRTC's PTX of kCallerSource, or "" with *why set.
std::string CompileWithNvrtc(std::string* why) {
  void* lib = nullptr;
  for (const char* name : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"}) {
    if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  }
  if (lib == nullptr) {
    *why = "libnvrtc.so not found";
    return "";
  }
  using Create = int (*)(void**, const char*, const char*, int, const char* const*,
                         const char* const*);
  using Compile = int (*)(void*, int, const char* const*);
  using Size = int (*)(void*, size_t*);
  using Get = int (*)(void*, char*);
  using Destroy = int (*)(void**);
  auto create = reinterpret_cast<Create>(dlsym(lib, "nvrtcCreateProgram"));
  auto compile = reinterpret_cast<Compile>(dlsym(lib, "nvrtcCompileProgram"));
  auto size = reinterpret_cast<Size>(dlsym(lib, "nvrtcGetPTXSize"));
  auto get = reinterpret_cast<Get>(dlsym(lib, "nvrtcGetPTX"));
  auto destroy = reinterpret_cast<Destroy>(dlsym(lib, "nvrtcDestroyProgram"));
  if (!create || !compile || !size || !get || !destroy) {
    *why = "libnvrtc.so lacks an entry point";
    return "";
  }
  void* program = nullptr;
  std::string ptx;
  const char* options[] = {"--gpu-architecture=compute_75"};
  if (create(&program, kCallerSource, "caller.cu", 0, nullptr, nullptr) == 0 &&
      compile(program, 1, options) == 0) {
    size_t bytes = 0;
    if (size(program, &bytes) == 0 && bytes > 0) {
      ptx.resize(bytes);
      if (get(program, &ptx[0]) != 0) ptx.clear();
    }
  }
  if (program != nullptr) destroy(&program);
  if (ptx.empty()) *why = "NVRTC did not compile the caller's kernel";
  return ptx;
}

TEST_F(GraphCaptureGpuTest, NvrtcKernelsOfTheCallerAroundADispatch) {
  std::string why;
  const std::string ptx = CompileWithNvrtc(&why);
  if (ptx.empty()) VYRE_GPU_SKIP_OR_FAIL(why);
  RawPrimaryContext raw(static_cast<int>(device().ordinal));
  ASSERT_TRUE(raw.ok()) << raw.error();
  const RawDriver& cu = raw.api();
  CUmodule module = nullptr;
  CUfunction scale = nullptr;
  ASSERT_EQ(cu.cuModuleLoadDataEx(&module, ptx.c_str(), 0, nullptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuModuleGetFunction(&scale, module, "caller_scale"), CUDA_SUCCESS);
  const uint32_t n = 100 * kBlock + 29;
  ProgramHandle add;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32",
                                {Decl(VYRE_ROLE_INPUT, 4, "a"), Decl(VYRE_ROLE_INPUT, 4, "b"),
                                 Decl(VYRE_ROLE_OUTPUT, 4, "out")},
                                kBlock, &add));
  BufferHandle ba, bb, out;
  ASSERT_TRUE(CreateBufferWith(context(), rng().NonZeroU32(n), &ba));
  ASSERT_TRUE(CreateBufferWith(context(), rng().NonZeroU32(n), &bb));
  ASSERT_TRUE(CreateBufferWith(context(), std::vector<uint32_t>(n, kPoisonU32), &out));
  CUdeviceptr pa = PointerOf(ba.get()), pout = PointerOf(out.get());
  auto launch = [&](CUdeviceptr* x, uint32_t k, uint64_t stream) {
    uint32_t kk = k, nn = n;
    void* args[] = {x, &kk, &nn};
    return cu.cuLaunchKernel(scale, (n + kBlock - 1) / kBlock, 1, 1, kBlock, 1, 1, 0,
                             reinterpret_cast<CUstream>(stream), args, nullptr);
  };

  uint64_t stream = 0;
  ASSERT_VYRE_OK(vyre_capture_begin(context(), nullptr, &stream));
  ASSERT_EQ(launch(&pa, 3, stream), CUDA_SUCCESS);  // a = 3a + 1
  const std::vector<vyre_dispatch_binding> bindings = {Resident(ba.get()), Resident(bb.get()),
                                                       Resident(out.get())};
  const std::vector<uint32_t> words = {n};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, words);
  ASSERT_VYRE_OK(vyre_capture_dispatch(add.get(), &desc));  // out = a + b
  ASSERT_EQ(launch(&pout, 5, stream), CUDA_SUCCESS);       // out = 5 out + 1
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_capture_end(context(), graph.out()));

  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    const std::vector<uint32_t> a = rng().NonZeroU32(n), b = rng().NonZeroU32(n);
    ASSERT_VYRE_OK(vyre_buffer_upload(ba.get(), 0, a.data(), uint64_t{n} * 4));
    ASSERT_VYRE_OK(vyre_buffer_upload(bb.get(), 0, b.data(), uint64_t{n} * 4));
    Poison(out.get(), n);
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
    std::vector<uint32_t> got_a, got_out;
    ASSERT_TRUE(DownloadU32(ba.get(), n, &got_a));
    ASSERT_TRUE(DownloadU32(out.get(), n, &got_out));
    EXPECT_TRUE(AllElementsEqual(got_a, [&](size_t i) { return a[i] * 3u + 1u; }, "a"));
    EXPECT_TRUE(AllElementsEqual(
        got_out, [&](size_t i) { return (a[i] * 3u + 1u + b[i]) * 5u + 1u; }, "out"));
  }
  graph.reset();
  EXPECT_EQ(cu.cuModuleUnload(module), CUDA_SUCCESS);
}

}  // namespace
}  // namespace vyre_test
