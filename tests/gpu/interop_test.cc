// Interop with other CUDA code on a real GPU: memory from a raw cuMemAlloc
// wrapped with vyre_buffer_wrap, and vyre_context_wait_stream /
// vyre_context_signal_stream against a raw stream running a raw kernel.
// The raw driver calls come from tests/support/raw_driver.h (the same
// libcuda.so.1 the library loads, resolved at CUDA 12.0's ABI).
//
// The ordering tests use vyre_test_spin (every thread busy-waits, then
// data[i] += 1): the other side's work is enqueued while the spin still runs,
// so without the wait or signal it would run first and the bytes differ.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_env.h"
#include "raw_driver.h"

namespace vyre_test {
namespace {

constexpr uint32_t kSpinMicroseconds = 200000;  // 200 ms: far longer than any copy
constexpr uint32_t kSpinThreads = 256;

#define ASSERT_CU(expr) ASSERT_EQ((expr), CUDA_SUCCESS) << #expr
#define EXPECT_CU(expr) EXPECT_EQ((expr), CUDA_SUCCESS) << #expr

class InteropTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    raw_ = std::make_unique<RawPrimaryContext>(static_cast<int>(device().ordinal));
    ASSERT_TRUE(raw_->ok()) << "raw driver access: " << raw_->error();
  }
  void TearDown() override {
    const RawDriver* api = raw_ && raw_->ok() ? &raw_->api() : nullptr;
    if (api != nullptr) {
      if (module_ != nullptr) {
        EXPECT_CU(api->cuModuleUnload(module_));
      }
      if (stream_ != nullptr) {
        EXPECT_CU(api->cuStreamDestroy(stream_));
      }
      for (CUdeviceptr p : allocations_) {
        EXPECT_CU(api->cuMemFree(p));
      }
    }
    raw_.reset();
  }

  const RawDriver& api() const { return raw_->api(); }

  CUdeviceptr RawAlloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_CU(api().cuMemAlloc(&p, bytes));
    if (p != 0) allocations_.push_back(p);
    return p;
  }
  void RawWrite(CUdeviceptr dst, const void* src, size_t bytes) {
    ASSERT_CU(api().cuMemcpyHtoDAsync(dst, src, bytes, nullptr));
    ASSERT_CU(api().cuStreamSynchronize(nullptr));
  }
  std::vector<uint32_t> RawRead(CUdeviceptr src, size_t count) {
    std::vector<uint32_t> out(count, kPoisonU32);
    EXPECT_CU(api().cuMemcpyDtoHAsync(out.data(), src, count * 4, nullptr));
    EXPECT_CU(api().cuStreamSynchronize(nullptr));
    return out;
  }
  CUstream RawStream() {
    if (stream_ == nullptr) {
      EXPECT_CU(api().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    }
    return stream_;
  }
  // vyre_test_spin from the embedded PTX, loaded by the raw driver.
  CUfunction RawSpin() {
    if (module_ == nullptr) {
      EXPECT_CU(api().cuModuleLoadDataEx(&module_, vyre_gpu_test_kernels_ptx, 0, nullptr,
                                         nullptr));
    }
    CUfunction f = nullptr;
    if (module_ != nullptr) {
      EXPECT_CU(api().cuModuleGetFunction(&f, module_, "vyre_test_spin"));
    }
    return f;
  }

  vyre_buffer_wrap_desc WrapDesc(CUdeviceptr p, uint64_t bytes) {
    vyre_buffer_wrap_desc d = VYRE_BUFFER_WRAP_DESC_INIT;
    d.device_pointer = static_cast<uint64_t>(p);
    d.bytes = bytes;
    return d;
  }
  // Wraps [p, +bytes) into *out (call under ASSERT_NO_FATAL_FAILURE).
  void Wrap(CUdeviceptr p, uint64_t bytes, BufferHandle* out) {
    const vyre_buffer_wrap_desc d = WrapDesc(p, bytes);
    ASSERT_VYRE_OK(vyre_buffer_wrap(context(), &d, out->out()));
  }

  std::unique_ptr<RawPrimaryContext> raw_;
  std::vector<CUdeviceptr> allocations_;
  CUstream stream_ = nullptr;
  CUmodule module_ = nullptr;
};

// A vector add over three wrapped cuMemAlloc allocations, checked against the
// CPU through the library and through the raw driver; uploads and downloads
// through the handles land in the caller's memory; freeing the handles
// leaves the memory to the caller (freed in TearDown by cuMemFree).
TEST_F(InteropTest, VectorAddOverWrappedAllocations) {
  const size_t n = (size_t{1} << 20) + 7;
  const std::vector<uint32_t> a = rng().NonZeroU32(n), b = rng().NonZeroU32(n);
  const std::vector<uint32_t> poison(n, kPoisonU32);
  CUdeviceptr da = RawAlloc(n * 4), db = RawAlloc(n * 4), dout = RawAlloc(n * 4);
  ASSERT_TRUE(da && db && dout);
  RawWrite(da, a.data(), n * 4);
  RawWrite(db, b.data(), n * 4);
  RawWrite(dout, poison.data(), n * 4);

  BufferHandle wa, wb, wo;
  ASSERT_NO_FATAL_FAILURE(Wrap(da, n * 4, &wa));
  ASSERT_NO_FATAL_FAILURE(Wrap(db, n * 4, &wb));
  ASSERT_NO_FATAL_FAILURE(Wrap(dout, n * 4, &wo));
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  ASSERT_VYRE_OK(vyre_buffer_info_get(wo.get(), &info));
  EXPECT_EQ(info.flags, VYRE_BUFFER_INFO_FLAG_BORROWED);
  EXPECT_EQ(info.device_pointer, static_cast<uint64_t>(dout));

  ProgramHandle add;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32",
                                {Decl(VYRE_ROLE_INPUT), Decl(VYRE_ROLE_INPUT),
                                 Decl(VYRE_ROLE_OUTPUT)},
                                256, &add));
  const std::vector<vyre_dispatch_binding> bindings = {Resident(wa.get()), Resident(wb.get()),
                                                       Resident(wo.get())};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  ASSERT_VYRE_OK(vyre_dispatch(add.get(), &desc, nullptr));
  auto sum = [&](size_t i) { return a[i] + b[i]; };
  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(wo.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(out, sum, "wrapped output through vyre_buffer_download"));
  EXPECT_TRUE(AllElementsEqual(RawRead(dout, n), sum, "wrapped output through cuMemcpyDtoH"));

  // An upload through the handle reaches the caller's memory.
  const std::vector<uint32_t> a2 = rng().NonZeroU32(n);
  ASSERT_VYRE_OK(vyre_buffer_upload(wa.get(), 0, a2.data(), n * 4));
  ASSERT_VYRE_OK(vyre_dispatch(add.get(), &desc, nullptr));
  EXPECT_TRUE(AllElementsEqual(RawRead(dout, n), [&](size_t i) { return a2[i] + b[i]; },
                               "second add"));

  wa.reset();
  wb.reset();
  wo.reset();
  EXPECT_TRUE(AllElementsEqual(RawRead(da, n), [&](size_t i) { return a2[i]; },
                               "the caller's memory after vyre_buffer_free"));
}

TEST_F(InteropTest, PinnedHostMemoryAndUnknownPointersAreRefused) {
  void* pinned = nullptr;
  ASSERT_CU(api().cuMemHostAlloc(&pinned, 1 << 20, 0));
  vyre_buffer_wrap_desc d = WrapDesc(reinterpret_cast<CUdeviceptr>(pinned), 1 << 20);
  vyre_buffer out{0};
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_buffer_wrap(context(), &d, &out));
  EXPECT_TRUE(MessageContains(LastErrorMessage(),
                              {"vyre_buffer_wrap: ", "page-locked host memory", "Fix:"}));
  EXPECT_EQ(out.bits, 0u);
  EXPECT_CU(api().cuMemFreeHost(pinned));

  std::vector<uint32_t> host(1024, 1);
  d = WrapDesc(reinterpret_cast<CUdeviceptr>(host.data()), 4096);
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_buffer_wrap(context(), &d, &out));
  EXPECT_TRUE(MessageContains(LastErrorMessage(),
                              {"vyre_buffer_wrap: ", "not memory the CUDA driver knows", "Fix:"}));
}

TEST_F(InteropTest, RangePastTheAllocationIsRefused) {
  const size_t bytes = size_t{4} << 20;  // a multiple of the driver's 2 MiB granularity
  CUdeviceptr p = RawAlloc(bytes);
  ASSERT_NE(p, 0u);
  vyre_buffer out{0};
  vyre_buffer_wrap_desc d = WrapDesc(p, bytes + 1);
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_buffer_wrap(context(), &d, &out));
  EXPECT_TRUE(MessageContains(LastErrorMessage(),
                              {"vyre_buffer_wrap: ", "ends past its allocation",
                               "holds " + std::to_string(bytes) + " bytes",
                               std::to_string(bytes + 1) + " bytes were asked", "Fix:"}));
  d = WrapDesc(p + 4096, bytes - 4096 + 4);
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_buffer_wrap(context(), &d, &out));
  // The last byte exactly is fine.
  d = WrapDesc(p + 4096, bytes - 4096);
  BufferHandle inside;
  EXPECT_VYRE_OK(vyre_buffer_wrap(context(), &d, inside.out()));
}

// Raw stream: a spinning raw kernel adds 1 to the wrapped memory. The context
// waits for that stream, then uploads fresh data: the upload must land after
// the kernel, so the bytes are exactly the upload's.
TEST_F(InteropTest, WaitStreamOrdersLibraryWorkAfterARawKernel) {
  const size_t n = kSpinThreads;
  CUdeviceptr data = RawAlloc(n * 4), params = RawAlloc(8);
  ASSERT_TRUE(data && params);
  const uint32_t words[2] = {kSpinMicroseconds, static_cast<uint32_t>(n)};
  RawWrite(params, words, sizeof(words));
  const std::vector<uint32_t> before = rng().NonZeroU32(n);
  RawWrite(data, before.data(), n * 4);
  BufferHandle w;
  ASSERT_NO_FATAL_FAILURE(Wrap(data, n * 4, &w));

  CUfunction spin = RawSpin();
  CUstream stream = RawStream();
  ASSERT_TRUE(spin != nullptr && stream != nullptr);
  void* args[] = {&data, &params};
  ASSERT_CU(api().cuLaunchKernel(spin, 1, 1, 1, kSpinThreads, 1, 1, 0, stream, args, nullptr));
  ASSERT_VYRE_OK(vyre_context_wait_stream(context(), reinterpret_cast<uint64_t>(stream)));
  const std::vector<uint32_t> fresh = rng().NonZeroU32(n);
  ASSERT_VYRE_OK(vyre_buffer_upload(w.get(), 0, fresh.data(), n * 4));
  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(w.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return fresh[i]; },
                               "the upload after vyre_context_wait_stream"));
  ASSERT_CU(api().cuStreamSynchronize(stream));
  EXPECT_TRUE(AllElementsEqual(RawRead(data, n), [&](size_t i) { return fresh[i]; },
                               "after the raw stream finished"));
}

// The context runs vyre_test_spin on the wrapped memory (async) and signals
// a raw stream (a created one, then the legacy default stream, 1); a copy
// enqueued on that stream afterwards must read the kernel's result.
TEST_F(InteropTest, SignalStreamOrdersRawWorkAfterLibraryWork) {
  const size_t n = kSpinThreads;
  CUdeviceptr data = RawAlloc(n * 4);
  ASSERT_NE(data, 0u);
  BufferHandle w;
  ASSERT_NO_FATAL_FAILURE(Wrap(data, n * 4, &w));
  ProgramHandle spin;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_spin",
                                {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, kSpinThreads, &spin));
  const std::vector<vyre_dispatch_binding> bindings = {Resident(w.get())};
  const std::vector<uint32_t> params = {kSpinMicroseconds, kSpinThreads};
  vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  desc.grid[0] = desc.grid[1] = desc.grid[2] = 1;
  CUstream created = RawStream();
  ASSERT_NE(created, nullptr);

  for (uint64_t stream : {reinterpret_cast<uint64_t>(created), uint64_t{1}}) {
    SCOPED_TRACE(stream == 1 ? "CU_STREAM_LEGACY" : "a created stream");
    const std::vector<uint32_t> before = rng().NonZeroU32(n);
    ASSERT_VYRE_OK(vyre_buffer_upload(w.get(), 0, before.data(), n * 4));
    PendingHandle pending;
    ASSERT_VYRE_OK(vyre_dispatch_async(spin.get(), &desc, pending.out()));
    ASSERT_VYRE_OK(vyre_context_signal_stream(context(), stream));
    std::vector<uint32_t> out(n, kPoisonU32);
    ASSERT_CU(api().cuMemcpyDtoHAsync(out.data(), data, n * 4, reinterpret_cast<CUstream>(stream)));
    ASSERT_CU(api().cuStreamSynchronize(reinterpret_cast<CUstream>(stream)));
    EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return before[i] + 1; },
                                 "the copy after vyre_context_signal_stream"));
    ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  }
}

// A raw memset on the raw stream, wait, the library increments on its own
// stream, signal, a raw read on the raw stream: three rounds, no host sync in
// between.
TEST_F(InteropTest, WaitAndSignalChainWithoutHostSynchronisation) {
  const size_t n = (size_t{1} << 16) + 3;
  CUdeviceptr data = RawAlloc(n * 4);
  ASSERT_NE(data, 0u);
  BufferHandle w;
  ASSERT_NO_FATAL_FAILURE(Wrap(data, n * 4, &w));
  ProgramHandle inc;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_inc_u32",
                                {Decl(VYRE_ROLE_INPUT_OUTPUT)}, 256, &inc));
  const std::vector<vyre_dispatch_binding> bindings = {Resident(w.get())};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  desc.fixpoint_iterations = 5;
  CUstream stream = RawStream();
  ASSERT_NE(stream, nullptr);
  for (int round = 0; round < 3; ++round) {
    const uint32_t value = rng().NonZeroU32(1)[0] & 0x7FFFFFFFu;
    ASSERT_CU(api().cuMemsetD32Async(data, value, n, stream));
    ASSERT_VYRE_OK(vyre_context_wait_stream(context(), reinterpret_cast<uint64_t>(stream)));
    PendingHandle pending;
    ASSERT_VYRE_OK(vyre_dispatch_async(inc.get(), &desc, pending.out()));
    ASSERT_VYRE_OK(vyre_context_signal_stream(context(), reinterpret_cast<uint64_t>(stream)));
    std::vector<uint32_t> out(n, kPoisonU32);
    ASSERT_CU(api().cuMemcpyDtoHAsync(out.data(), data, n * 4, stream));
    ASSERT_CU(api().cuStreamSynchronize(stream));
    EXPECT_TRUE(AllElementsEqual(out, [&](size_t) { return value + 5; }, "round"));
    ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  }
}

}  // namespace
}  // namespace vyre_test
