// Interop with other CUDA code in the process, on the fake driver:
// vyre_buffer_wrap over memory the test allocates with the driver itself
// (as CuPy or PyTorch would), and vyre_context_wait_stream /
// vyre_context_signal_stream against a stream the test creates.
//
// The "other CUDA code" is tests/support/raw_driver.h: the same fake driver
// instance the library loaded, called directly. The fake counts every
// cuMemFree of memory that is not a live allocation as misuse, and the test
// frees the wrapped memory itself at the end, so a library that freed
// borrowed memory (at free, trim or context destroy) fails twice: the
// memory is gone while the test still reads it, and the test's own free is
// a double free.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api_fake_fixture.h"
#include "fake_cuda_client.h"
#include "raw_driver.h"
#include "struct_size_util.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// The first line of the last error starts with `prefix` and holds `needles`.
::testing::AssertionResult MessageSays(const std::string& prefix,
                                       const std::vector<std::string>& needles) {
  const std::string message = LastErrorMessage();
  if (message.rfind(prefix, 0) != 0) {
    return ::testing::AssertionFailure() << "message does not start with '" << prefix
                                         << "': " << message;
  }
  for (const std::string& needle : needles) {
    if (!Contains(message, needle)) {
      return ::testing::AssertionFailure() << "message lacks '" << needle << "': " << message;
    }
  }
  return ::testing::AssertionSuccess();
}

// Device memory "other CUDA code" allocated: freed by the test, never by the
// library. Upload and download go through the raw driver on the NULL stream.
class RawMemory {
 public:
  RawMemory(const RawPrimaryContext& raw, size_t bytes) : raw_(raw), bytes_(bytes) {
    result_ = raw_.api().cuMemAlloc(&pointer_, bytes);
  }
  ~RawMemory() { Free(); }
  RawMemory(const RawMemory&) = delete;
  RawMemory& operator=(const RawMemory&) = delete;

  bool ok() const { return result_ == CUDA_SUCCESS && pointer_ != 0; }
  CUdeviceptr get() const { return pointer_; }
  size_t bytes() const { return bytes_; }
  CUresult Free() {
    if (pointer_ == 0) return CUDA_SUCCESS;
    CUresult r = raw_.api().cuMemFree(pointer_);
    pointer_ = 0;
    return r;
  }
  void Write(const void* src, size_t bytes, size_t offset = 0) const {
    ASSERT_EQ(raw_.api().cuMemcpyHtoDAsync(pointer_ + offset, src, bytes, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(raw_.api().cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  }
  std::vector<uint32_t> ReadU32(size_t count, size_t offset = 0) const {
    std::vector<uint32_t> out(count, kPoison);
    EXPECT_EQ(raw_.api().cuMemcpyDtoHAsync(out.data(), pointer_ + offset, count * 4, nullptr),
              CUDA_SUCCESS);
    EXPECT_EQ(raw_.api().cuStreamSynchronize(nullptr), CUDA_SUCCESS);
    return out;
  }

 private:
  const RawPrimaryContext& raw_;
  size_t bytes_;
  CUdeviceptr pointer_ = 0;
  CUresult result_ = CUDA_ERROR_UNKNOWN;
};

vyre_buffer_wrap_desc WrapDesc(CUdeviceptr pointer, uint64_t bytes) {
  vyre_buffer_wrap_desc desc = VYRE_BUFFER_WRAP_DESC_INIT;
  desc.device_pointer = static_cast<uint64_t>(pointer);
  desc.bytes = bytes;
  return desc;
}

class InteropTest : public FakeDriverTest {
 protected:
  void SetUp() override {
    FakeDriverTest::SetUp();
    if (HasFatalFailure()) return;
    std::string why;
    ASSERT_NE(RawDriver::Get(&why), nullptr) << why;
  }

  vyre_buffer Wrap(CUdeviceptr pointer, uint64_t bytes) {
    vyre_buffer_wrap_desc desc = WrapDesc(pointer, bytes);
    vyre_buffer buffer{0};
    EXPECT_VYRE_OK(vyre_buffer_wrap(context_, &desc, &buffer));
    return buffer;
  }

  vyre_status WrapStatus(const vyre_buffer_wrap_desc* desc) {
    vyre_buffer buffer{0xABCDu};
    vyre_status status = vyre_buffer_wrap(context_, desc, &buffer);
    if (status == VYRE_STATUS_OK) {
      EXPECT_NE(buffer.bits, 0u);
      // Freeing clears the last error: keep the wrap's (OK) result only.
      EXPECT_VYRE_OK(vyre_buffer_free(buffer));
      return status;
    }
    EXPECT_EQ(buffer.bits, 0u) << "a refused wrap must leave *out 0";
    return status;
  }
};

// Three wrapped buffers as the vector add's resident bindings; the result is
// read through the library and through the raw driver; the handles report
// BORROWED; live_buffers counts them and device_bytes_live does not.
TEST_F(InteropTest, WrappedBuffersAreResidentBindings) {
  RawPrimaryContext raw;
  ASSERT_TRUE(raw.ok()) << raw.error();
  const size_t n = 1000;
  RawMemory a(raw, n * 4), b(raw, n * 4), out(raw, n * 4);
  ASSERT_TRUE(a.ok() && b.ok() && out.ok());
  const std::vector<uint32_t> va = RandomNonZeroU32(n, 101), vb = RandomNonZeroU32(n, 102);
  const std::vector<uint32_t> poison(n, kPoison);
  a.Write(va.data(), n * 4);
  b.Write(vb.data(), n * 4);
  out.Write(poison.data(), n * 4);

  const vyre_telemetry before = Telemetry(context_);
  vyre_buffer wa = Wrap(a.get(), n * 4), wb = Wrap(b.get(), n * 4), wo = Wrap(out.get(), n * 4);
  const vyre_telemetry wrapped = Telemetry(context_);
  EXPECT_EQ(wrapped.live_buffers, before.live_buffers + 3);
  EXPECT_EQ(wrapped.device_bytes_live, before.device_bytes_live)
      << "borrowed memory is not the context's";

  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  ASSERT_VYRE_OK(vyre_buffer_info_get(wb, &info));
  EXPECT_EQ(info.flags, VYRE_BUFFER_INFO_FLAG_BORROWED);
  EXPECT_EQ(info.bytes, n * 4);
  EXPECT_EQ(info.device_pointer, static_cast<uint64_t>(b.get()));
  EXPECT_EQ(info.context.bits, context_.bits);
  vyre_buffer owned = MakeBuffer(context_, 64);
  ASSERT_VYRE_OK(vyre_buffer_info_get(owned, &info));
  EXPECT_EQ(info.flags, 0u) << "owned buffers are not borrowed";
  EXPECT_VYRE_OK(vyre_buffer_free(owned));

  vyre_program add = MakeProgram(context_, AddSpec());
  DispatchSpec spec;
  spec.bindings = {Resident(wa), Resident(wb), Resident(wo)};
  spec.param_words = {uint32_t(n)};
  vyre_dispatch_desc desc = spec.Desc();
  ASSERT_VYRE_OK(vyre_dispatch(add, &desc, nullptr));
  const std::vector<uint32_t> expected = CpuAdd(va, vb);
  std::vector<uint32_t> back(n, kPoison);
  ASSERT_VYRE_OK(vyre_buffer_download(wo, 0, back.data(), n * 4));
  EXPECT_TRUE(SameU32(back, expected));
  EXPECT_TRUE(SameU32(out.ReadU32(n), expected)) << "the caller's memory holds the result";

  // Async too, after fresh inputs through the library's upload.
  const std::vector<uint32_t> va2 = RandomNonZeroU32(n, 103);
  ASSERT_VYRE_OK(vyre_buffer_upload(wa, 0, va2.data(), n * 4));
  EXPECT_TRUE(SameU32(a.ReadU32(n), va2)) << "the upload reached the caller's memory";
  out.Write(poison.data(), n * 4);
  vyre_pending pending{0};
  ASSERT_VYRE_OK(vyre_dispatch_async(add, &desc, &pending));
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_TRUE(SameU32(out.ReadU32(n), CpuAdd(va2, vb)));

  EXPECT_VYRE_OK(vyre_program_destroy(add));
  for (vyre_buffer w : {wa, wb, wo}) EXPECT_VYRE_OK(vyre_buffer_free(w));
  EXPECT_EQ(Telemetry(context_).live_buffers, before.live_buffers);
  // The memory is still the caller's: readable, and freed by the caller.
  EXPECT_TRUE(SameU32(b.ReadU32(n), vb));
  EXPECT_EQ(a.Free(), CUDA_SUCCESS);
  EXPECT_EQ(b.Free(), CUDA_SUCCESS);
  EXPECT_EQ(out.Free(), CUDA_SUCCESS);
}

// A wrap of a sub-range of an allocation: copies and kernels stay inside it,
// the bytes around it are untouched, and upload/download ranges work.
TEST_F(InteropTest, WrapOfASubRangeStaysInsideIt) {
  RawPrimaryContext raw;
  ASSERT_TRUE(raw.ok()) << raw.error();
  const size_t total = 4096, offset = 256, n = 512;  // words wrapped
  RawMemory memory(raw, total * 4);
  ASSERT_TRUE(memory.ok());
  const std::vector<uint32_t> around = RandomNonZeroU32(total, 111);
  memory.Write(around.data(), total * 4);
  vyre_buffer w = Wrap(memory.get() + offset * 4, n * 4);

  const std::vector<uint32_t> data = RandomNonZeroU32(n, 112);
  const std::vector<uint32_t> patch = RandomNonZeroU32(16, 113);
  std::vector<vyre_upload_range> ups = {{0, n * 4, data.data()}, {40, 64, patch.data()}};
  ASSERT_VYRE_OK(vyre_buffer_upload_ranges(w, ups.data(), ups.size()));
  std::vector<uint32_t> expected = data;
  std::memcpy(expected.data() + 10, patch.data(), 64);

  vyre_program inc = MakeProgram(context_, IncSpec());
  const DispatchSpec spec = ResidentInc(w, 0, 0, uint32_t(n), 2);
  vyre_dispatch_desc desc = spec.Desc();
  ASSERT_VYRE_OK(vyre_dispatch(inc, &desc, nullptr));
  for (uint32_t& v : expected) v += 2;

  std::vector<uint32_t> head(8, kPoison), tail(8, kPoison);
  std::vector<vyre_download_range> downs = {{0, 32, head.data()}, {(n - 8) * 4, 32, tail.data()}};
  ASSERT_VYRE_OK(vyre_buffer_download_ranges(w, downs.data(), downs.size()));
  EXPECT_TRUE(SameU32(head, std::vector<uint32_t>(expected.begin(), expected.begin() + 8)));
  EXPECT_TRUE(SameU32(tail, std::vector<uint32_t>(expected.end() - 8, expected.end())));

  std::vector<uint32_t> whole_expected = around;
  std::copy(expected.begin(), expected.end(), whole_expected.begin() + offset);
  EXPECT_TRUE(SameU32(memory.ReadU32(total), whole_expected))
      << "the bytes outside the wrapped range changed";

  // The wrapped range is the buffer's size: one byte past it is refused.
  uint32_t word = 0;
  EXPECT_VYRE_ERROR(vyre_buffer_download(w, n * 4 - 2, &word, 4), VYRE_STATUS_OUT_OF_RANGE);
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
  EXPECT_VYRE_OK(vyre_buffer_free(w));
  EXPECT_EQ(memory.Free(), CUDA_SUCCESS);
}

// Free releases the handle only: twice is STALE_HANDLE, and so is every use
// afterwards; the memory stays the caller's.
TEST_F(InteropTest, FreeReleasesTheHandleNotTheMemory) {
  RawPrimaryContext raw;
  ASSERT_TRUE(raw.ok()) << raw.error();
  const size_t n = 256;
  RawMemory memory(raw, n * 4);
  ASSERT_TRUE(memory.ok());
  const std::vector<uint32_t> data = RandomNonZeroU32(n, 121);
  vyre_buffer w = Wrap(memory.get(), n * 4);
  ASSERT_VYRE_OK(vyre_buffer_upload(w, 0, data.data(), n * 4));
  const fake_cuda_stats before_free = FakeCuda::Stats();
  ASSERT_VYRE_OK(vyre_buffer_free(w));
  const fake_cuda_stats after_free = FakeCuda::Stats();
  EXPECT_EQ(after_free.device_allocations_live, before_free.device_allocations_live)
      << "vyre_buffer_free freed borrowed memory";

  EXPECT_VYRE_ERROR(vyre_buffer_free(w), VYRE_STATUS_STALE_HANDLE);
  std::vector<uint32_t> back(n, kPoison);
  EXPECT_VYRE_ERROR(vyre_buffer_download(w, 0, back.data(), n * 4), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_ERROR(vyre_buffer_upload(w, 0, data.data(), n * 4), VYRE_STATUS_STALE_HANDLE);
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  EXPECT_VYRE_ERROR(vyre_buffer_info_get(w, &info), VYRE_STATUS_STALE_HANDLE);
  vyre_program inc = MakeProgram(context_, IncSpec());
  DispatchSpec spec = ResidentInc(w, 0, 0, uint32_t(n));
  vyre_dispatch_desc desc = spec.Desc();
  EXPECT_VYRE_ERROR(vyre_dispatch(inc, &desc, nullptr), VYRE_STATUS_STALE_HANDLE);
  EXPECT_TRUE(SameU32(memory.ReadU32(n), data));

  // The same memory may be wrapped again, and twice at once.
  vyre_buffer again = Wrap(memory.get(), n * 4);
  vyre_buffer twice = Wrap(memory.get(), n * 4);
  EXPECT_NE(again.bits, twice.bits);
  spec.bindings = {Resident(again)};
  desc = spec.Desc();
  ASSERT_VYRE_OK(vyre_dispatch(inc, &desc, nullptr));
  ASSERT_VYRE_OK(vyre_buffer_download(twice, 0, back.data(), n * 4));
  std::vector<uint32_t> expected = data;
  for (uint32_t& v : expected) v += 1;
  EXPECT_TRUE(SameU32(back, expected));
  EXPECT_VYRE_OK(vyre_buffer_free(again));
  EXPECT_VYRE_OK(vyre_buffer_free(twice));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
  EXPECT_EQ(memory.Free(), CUDA_SUCCESS);
}

// A wrapped buffer freed while an async dispatch still uses it: the handle is
// stale at once, the work completes on the caller's memory, which the library
// never frees.
TEST_F(InteropTest, FreeWhileADispatchIsPendingWaitsForIt) {
  RawPrimaryContext raw;
  ASSERT_TRUE(raw.ok()) << raw.error();
  const size_t n = 300;
  RawMemory memory(raw, n * 4);
  ASSERT_TRUE(memory.ok());
  const std::vector<uint32_t> data = RandomNonZeroU32(n, 131);
  memory.Write(data.data(), n * 4);
  vyre_buffer w = Wrap(memory.get(), n * 4);
  vyre_program inc = MakeProgram(context_, IncSpec());
  const DispatchSpec spec = ResidentInc(w, 0, 0, uint32_t(n));
  vyre_dispatch_desc desc = spec.Desc();
  vyre_pending pending{0};
  {
    ScopedHold hold;
    ASSERT_VYRE_OK(vyre_dispatch_async(inc, &desc, &pending));
    ASSERT_VYRE_OK(vyre_buffer_free(w));
    EXPECT_VYRE_ERROR(vyre_buffer_free(w), VYRE_STATUS_STALE_HANDLE);
  }
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  std::vector<uint32_t> expected = data;
  for (uint32_t& v : expected) v += 1;
  EXPECT_TRUE(SameU32(memory.ReadU32(n), expected));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
  EXPECT_EQ(memory.Free(), CUDA_SUCCESS) << "the library freed borrowed memory";
}

// Trim does not touch borrowed memory; destroying the context makes the
// handle stale and leaves the memory (and its bytes) to the caller.
TEST_F(InteropTest, WrappedMemorySurvivesTrimAndContextDestroy) {
  RawPrimaryContext raw;
  ASSERT_TRUE(raw.ok()) << raw.error();
  const size_t n = 1024;
  RawMemory memory(raw, n * 4);
  ASSERT_TRUE(memory.ok());
  const std::vector<uint32_t> data = RandomNonZeroU32(n, 141);
  vyre_buffer w = Wrap(memory.get(), n * 4);
  ASSERT_VYRE_OK(vyre_buffer_upload(w, 0, data.data(), n * 4));
  const uint64_t live = FakeCuda::Stats().device_allocations_live;
  ASSERT_VYRE_OK(vyre_context_trim(context_));
  std::vector<uint32_t> back(n, kPoison);
  ASSERT_VYRE_OK(vyre_buffer_download(w, 0, back.data(), n * 4));
  EXPECT_TRUE(SameU32(back, data)) << "after trim";

  const fake_cuda_stats before_destroy = FakeCuda::Stats();
  EXPECT_LE(before_destroy.device_allocations_live, live);
  DestroyContext();
  const fake_cuda_stats after = FakeCuda::Stats();
  EXPECT_EQ(after.misuse_errors, before_destroy.misuse_errors);
  EXPECT_VYRE_ERROR(vyre_buffer_download(w, 0, back.data(), n * 4), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_ERROR(vyre_buffer_free(w), VYRE_STATUS_STALE_HANDLE);
  EXPECT_TRUE(SameU32(memory.ReadU32(n), data)) << "the caller's memory after context destroy";
  EXPECT_EQ(memory.Free(), CUDA_SUCCESS) << "the library freed borrowed memory";
  EXPECT_EQ(FakeCuda::Stats().misuse_errors, before_destroy.misuse_errors);
}

// Every refused input: the status, *out left 0, and a first line
// "vyre_buffer_wrap: <why>. Fix: <what to do>." (EXPECT_VYRE_ERROR checks the
// layout) that says what was wrong.
TEST_F(InteropTest, WrapRefusesBadInputs) {
  RawPrimaryContext raw;
  ASSERT_TRUE(raw.ok()) << raw.error();
  RawMemory memory(raw, 4096);
  ASSERT_TRUE(memory.ok());
  const std::string what = "vyre_buffer_wrap: ";

  vyre_buffer out{0};
  vyre_buffer_wrap_desc good = WrapDesc(memory.get(), 4096);
  EXPECT_VYRE_ERROR(vyre_buffer_wrap(context_, nullptr, &out), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageSays(what, {"NULL"}));
  EXPECT_VYRE_ERROR(vyre_buffer_wrap(context_, &good, nullptr), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageSays(what, {"out is NULL"}));
  EXPECT_VYRE_ERROR(vyre_buffer_wrap(vyre_context{0}, &good, &out), VYRE_STATUS_INVALID_HANDLE);
  EXPECT_VYRE_ERROR(vyre_buffer_wrap(vyre_context{0x1234567812345678ull}, &good, &out),
                    VYRE_STATUS_INVALID_HANDLE);

  for (uint32_t size : TooSmallSizes<vyre_buffer_wrap_desc>()) {
    vyre_buffer_wrap_desc small = WithStructSize(good, size);
    EXPECT_VYRE_ERROR(WrapStatus(&small), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE) << size;
    EXPECT_TRUE(MessageSays(what, {"vyre_buffer_wrap_desc"}));
  }
  LargerStruct<vyre_buffer_wrap_desc> dirty(good, 16, 0x5A);
  EXPECT_VYRE_ERROR(WrapStatus(dirty.get()), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);
  LargerStruct<vyre_buffer_wrap_desc> clean(good, 16, 0);
  EXPECT_VYRE_OK(WrapStatus(clean.get())) << "a newer caller's zero tail is accepted";

  vyre_buffer_wrap_desc d = good;
  d.flags = 1;
  EXPECT_VYRE_ERROR(WrapStatus(&d), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageSays(what, {"flags is 0x1", "Fix: pass flags 0"}));

  d = good;
  d.device_pointer = 0;
  EXPECT_VYRE_ERROR(WrapStatus(&d), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageSays(what, {"device_pointer is 0", "Fix:"}));

  d = good;
  d.bytes = 0;
  EXPECT_VYRE_ERROR(WrapStatus(&d), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageSays(what, {"bytes is 0", "Fix: wrap at least one byte"}));

  // Past the allocation's end: the message names the allocation's size and
  // the bytes asked.
  d = WrapDesc(memory.get(), 4097);
  EXPECT_VYRE_ERROR(WrapStatus(&d), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageSays(what, {"ends past its allocation", "holds 4096 bytes",
                                 "4097 bytes were asked", "Fix: pass bytes of at most 4096"}));
  d = WrapDesc(memory.get() + 4000, 100);
  EXPECT_VYRE_ERROR(WrapStatus(&d), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageSays(what, {"holds 4096 bytes", "96 are left", "100 bytes were asked"}));
  // device_pointer + bytes overflows 64 bits.
  d = WrapDesc(memory.get() + 8, ~uint64_t{0} - 4);
  EXPECT_VYRE_ERROR(WrapStatus(&d), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageSays(what, {"ends past its allocation"}));

  // Page-locked host memory (cuMemHostAlloc) is not device memory.
  void* pinned = nullptr;
  ASSERT_EQ(raw.api().cuMemHostAlloc(&pinned, 4096, 0), CUDA_SUCCESS);
  d = WrapDesc(reinterpret_cast<CUdeviceptr>(pinned), 4096);
  EXPECT_VYRE_ERROR(WrapStatus(&d), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageSays(what, {"page-locked host memory", "Fix: wrap device memory"}));
  EXPECT_EQ(raw.api().cuMemFreeHost(pinned), CUDA_SUCCESS);

  // Plain host memory, a freed allocation and a made-up address are unknown
  // to the driver.
  std::vector<uint8_t> host(4096, 1);
  RawMemory freed(raw, 4096);
  ASSERT_TRUE(freed.ok());
  const CUdeviceptr gone = freed.get();
  ASSERT_EQ(freed.Free(), CUDA_SUCCESS);
  for (uint64_t pointer : {static_cast<uint64_t>(reinterpret_cast<uintptr_t>(host.data())),
                           static_cast<uint64_t>(gone), uint64_t{0x10}}) {
    d = WrapDesc(static_cast<CUdeviceptr>(pointer), 64);
    EXPECT_VYRE_ERROR(WrapStatus(&d), VYRE_STATUS_INVALID_ARGUMENT) << std::hex << pointer;
    EXPECT_TRUE(MessageSays(what, {"is not memory the CUDA driver knows",
                                   "Fix: pass a pointer from cudaMalloc, cuMemAlloc"}));
  }

  // A destroyed context.
  vyre_context other = MakeContext();
  ASSERT_VYRE_OK(vyre_context_destroy(other));
  EXPECT_VYRE_ERROR(vyre_buffer_wrap(other, &good, &out), VYRE_STATUS_STALE_HANDLE);
  EXPECT_EQ(Telemetry(context_).live_buffers, 0u) << "a refused wrap left a buffer behind";
  EXPECT_EQ(memory.Free(), CUDA_SUCCESS);
}

// ---------------------------------------------------------------------------
// Stream ordering
// ---------------------------------------------------------------------------

class RawStream {
 public:
  explicit RawStream(const RawPrimaryContext& raw) : raw_(raw) {
    result_ = raw_.api().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING);
  }
  ~RawStream() {
    if (stream_ != nullptr) raw_.api().cuStreamDestroy(stream_);
  }
  RawStream(const RawStream&) = delete;
  RawStream& operator=(const RawStream&) = delete;
  bool ok() const { return result_ == CUDA_SUCCESS; }
  CUstream get() const { return stream_; }
  uint64_t bits() const { return reinterpret_cast<uint64_t>(stream_); }

 private:
  const RawPrimaryContext& raw_;
  CUstream stream_ = nullptr;
  CUresult result_ = CUDA_ERROR_UNKNOWN;
};

TEST_F(InteropTest, StreamZeroIsRefusedWithTheConvention) {
  for (auto call : {&vyre_context_wait_stream, &vyre_context_signal_stream}) {
    EXPECT_VYRE_ERROR(call(context_, 0), VYRE_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(MessageSays("vyre_context_", {"cu_stream is 0", "Fix: pass 1 for the legacy "
                                              "default stream", "DLPack"}));
    EXPECT_VYRE_ERROR(call(vyre_context{0}, 1), VYRE_STATUS_INVALID_HANDLE);
    vyre_buffer buffer = MakeBuffer(context_, 16);
    EXPECT_VYRE_ERROR(call(vyre_context{buffer.bits}, 1), VYRE_STATUS_INVALID_HANDLE);
    EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  }
  vyre_context other = MakeContext();
  ASSERT_VYRE_OK(vyre_context_destroy(other));
  EXPECT_VYRE_ERROR(vyre_context_wait_stream(other, 1), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_ERROR(vyre_context_signal_stream(other, 1), VYRE_STATUS_STALE_HANDLE);
}

// wait: an event recorded on cu_stream, waited for by the context's stream;
// signal: the other way round. The legacy (1) and per-thread (2) default
// streams are accepted. One event serves every call: none is created after
// the first (until a trim releases it).
TEST_F(InteropTest, WaitAndSignalJoinTheStreams) {
  RawPrimaryContext raw;
  ASSERT_TRUE(raw.ok()) << raw.error();
  RawStream stream(raw);
  ASSERT_TRUE(stream.ok());
  const fake_cuda_stats s0 = FakeCuda::Stats();
  ASSERT_VYRE_OK(vyre_context_wait_stream(context_, stream.bits()));
  const fake_cuda_stats s1 = FakeCuda::Stats();
  EXPECT_EQ(s1.stream_waits, s0.stream_waits + 1);
  EXPECT_EQ(s1.last_wait_event_stream, stream.bits()) << "the event was not recorded on cu_stream";
  const uint64_t context_stream = s1.last_wait_stream;
  EXPECT_NE(context_stream, stream.bits());
  EXPECT_GT(context_stream, 2u) << "the context waits on its own (created) stream";
  EXPECT_EQ(s1.events_live, s0.events_live + 1);

  ASSERT_VYRE_OK(vyre_context_signal_stream(context_, stream.bits()));
  const fake_cuda_stats s2 = FakeCuda::Stats();
  EXPECT_EQ(s2.stream_waits, s1.stream_waits + 1);
  EXPECT_EQ(s2.last_wait_stream, stream.bits()) << "cu_stream did not wait";
  EXPECT_EQ(s2.last_wait_event_stream, context_stream)
      << "the event was not recorded on the context's stream";

  for (uint64_t special : {uint64_t{1}, uint64_t{2}}) {
    ASSERT_VYRE_OK(vyre_context_wait_stream(context_, special));
    EXPECT_EQ(FakeCuda::Stats().last_wait_event_stream, special);
    EXPECT_EQ(FakeCuda::Stats().last_wait_stream, context_stream);
    ASSERT_VYRE_OK(vyre_context_signal_stream(context_, special));
    EXPECT_EQ(FakeCuda::Stats().last_wait_stream, special);
    EXPECT_EQ(FakeCuda::Stats().last_wait_event_stream, context_stream);
  }
  // Steady state: no driver object is made.
  for (int i = 0; i < 100; ++i) {
    ASSERT_VYRE_OK(vyre_context_wait_stream(context_, stream.bits()));
    ASSERT_VYRE_OK(vyre_context_signal_stream(context_, stream.bits()));
  }
  const fake_cuda_stats s3 = FakeCuda::Stats();
  EXPECT_EQ(s3.events_live, s1.events_live);
  EXPECT_EQ(s3.streams_live, s1.streams_live);
  EXPECT_EQ(s3.stream_waits, s2.stream_waits + 4 + 200);
  ASSERT_VYRE_OK(vyre_context_trim(context_));
  EXPECT_EQ(FakeCuda::Stats().events_live, s0.events_live) << "trim releases the event";
  ASSERT_VYRE_OK(vyre_context_signal_stream(context_, stream.bits()));
  EXPECT_EQ(FakeCuda::Stats().events_live, s0.events_live + 1);
}

// Work on the caller's stream, then the library's, then the caller's again,
// on one wrapped buffer: a memset on cu_stream, wait, an increment by the
// library, signal, a copy out on cu_stream. (Under FAKE_CUDA_DEFER_ALL=1 none
// of it runs before the host waits for cu_stream.)
TEST_F(InteropTest, WaitAndSignalOrderWorkOnABorrowedBuffer) {
  RawPrimaryContext raw;
  ASSERT_TRUE(raw.ok()) << raw.error();
  RawStream stream(raw);
  ASSERT_TRUE(stream.ok());
  const size_t n = 777;
  RawMemory memory(raw, n * 4);
  ASSERT_TRUE(memory.ok());
  vyre_buffer w = Wrap(memory.get(), n * 4);
  vyre_program inc = MakeProgram(context_, IncSpec());
  const DispatchSpec spec = ResidentInc(w, 0, 0, uint32_t(n), 3);
  vyre_dispatch_desc desc = spec.Desc();

  for (uint32_t round = 0; round < 3; ++round) {
    const uint32_t value = RandomNonZeroU32(1, 150 + round)[0] & 0x7FFFFFFFu;
    ASSERT_EQ(raw.api().cuMemsetD32Async(memory.get(), value, n, stream.get()), CUDA_SUCCESS);
    ASSERT_VYRE_OK(vyre_context_wait_stream(context_, stream.bits()));
    vyre_pending pending{0};
    ASSERT_VYRE_OK(vyre_dispatch_async(inc, &desc, &pending));
    ASSERT_VYRE_OK(vyre_context_signal_stream(context_, stream.bits()));
    std::vector<uint32_t> out(n, kPoison);
    ASSERT_EQ(raw.api().cuMemcpyDtoHAsync(out.data(), memory.get(), n * 4, stream.get()),
              CUDA_SUCCESS);
    ASSERT_EQ(raw.api().cuStreamSynchronize(stream.get()), CUDA_SUCCESS);
    EXPECT_TRUE(SameU32(out, std::vector<uint32_t>(n, value + 3))) << "round " << round;
    ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
    EXPECT_VYRE_OK(vyre_pending_release(pending));
  }
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
  EXPECT_VYRE_OK(vyre_buffer_free(w));
  EXPECT_EQ(memory.Free(), CUDA_SUCCESS);
}

// A sequence and a graph over a wrapped buffer run on the caller's memory.
TEST_F(InteropTest, GraphsAndSequencesBindWrappedBuffers) {
  RawPrimaryContext raw;
  ASSERT_TRUE(raw.ok()) << raw.error();
  const size_t n = 512;
  RawMemory memory(raw, n * 4);
  ASSERT_TRUE(memory.ok());
  const std::vector<uint32_t> data = RandomNonZeroU32(n, 161);
  memory.Write(data.data(), n * 4);
  vyre_buffer w = Wrap(memory.get(), n * 4);
  vyre_program inc = MakeProgram(context_, IncSpec());
  const DispatchSpec spec = ResidentInc(w, 0, 0, uint32_t(n));
  vyre_dispatch_desc desc = spec.Desc();

  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_graph_record(inc, &desc, &graph));
  for (int i = 0; i < 4; ++i) ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));

  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.kind = VYRE_STEP_DISPATCH;
  step.program = inc;
  step.dispatch = &desc;
  vyre_sequence_desc seq_desc = VYRE_SEQUENCE_DESC_INIT;
  seq_desc.steps = &step;
  seq_desc.step_count = 1;
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(vyre_sequence_create(context_, &seq_desc, &sequence));
  ASSERT_VYRE_OK(vyre_sequence_run(sequence, nullptr));
  ASSERT_VYRE_OK(vyre_sequence_run(sequence, nullptr));

  std::vector<uint32_t> expected = data;
  for (uint32_t& v : expected) v += 6;
  EXPECT_TRUE(SameU32(memory.ReadU32(n), expected));
  // Freeing the handle while the graph binds it: replays are refused, the
  // memory stays the caller's.
  ASSERT_VYRE_OK(vyre_buffer_free(w));
  EXPECT_VYRE_ERROR(vyre_graph_replay(graph, nullptr, nullptr), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_ERROR(vyre_sequence_run(sequence, nullptr), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
  EXPECT_TRUE(SameU32(memory.ReadU32(n), expected));
  EXPECT_EQ(memory.Free(), CUDA_SUCCESS);
}

// After a device fault the context refuses wraps and stream ordering with
// DEVICE_FAULT, before any driver call (own ctest entry: the fault resets the
// fake device).
class InteropFaultTest : public InteropTest {};

TEST_F(InteropFaultTest, AFaultedContextRefusesWithDeviceFault) {
  RawMemory* memory = nullptr;
  {
    RawPrimaryContext raw;
    ASSERT_TRUE(raw.ok()) << raw.error();
    memory = new RawMemory(raw, 1024);  // reclaimed by the reset below
    ASSERT_TRUE(memory->ok());
    vyre_buffer w = Wrap(memory->get(), 1024);
    vyre_program inc = MakeProgram(context_, IncSpec());
    ASSERT_TRUE(FakeCuda::InjectFault(CUDA_ERROR_ILLEGAL_ADDRESS));
    const DispatchSpec spec = ResidentInc(w, 0, 0, 256);
    vyre_dispatch_desc desc = spec.Desc();
    EXPECT_VYRE_ERROR(vyre_dispatch(inc, &desc, nullptr), VYRE_STATUS_DEVICE_FAULT);
    const uint64_t pointer_queries = FakeCuda::Stats().pointer_queries;
    const uint64_t waits = FakeCuda::Stats().stream_waits;
    vyre_buffer_wrap_desc wrap = WrapDesc(memory->get(), 1024);
    vyre_buffer out{0};
    EXPECT_VYRE_ERROR(vyre_buffer_wrap(context_, &wrap, &out), VYRE_STATUS_DEVICE_FAULT);
    EXPECT_VYRE_ERROR(vyre_context_wait_stream(context_, 1), VYRE_STATUS_DEVICE_FAULT);
    EXPECT_VYRE_ERROR(vyre_context_signal_stream(context_, 1), VYRE_STATUS_DEVICE_FAULT);
    EXPECT_EQ(FakeCuda::Stats().pointer_queries, pointer_queries);
    EXPECT_EQ(FakeCuda::Stats().stream_waits, waits);
    EXPECT_VYRE_ERROR(vyre_buffer_free(w), VYRE_STATUS_DEVICE_FAULT);
    EXPECT_VYRE_ERROR(vyre_program_destroy(inc), VYRE_STATUS_DEVICE_FAULT);
    (void)memory->Free();  // refused by the faulted device; the reset reclaims it
  }
  EXPECT_VYRE_ERROR(vyre_context_destroy(context_), VYRE_STATUS_DEVICE_FAULT);
  context_ = vyre_context{0};
  delete memory;
  // A fresh context works (the reset reclaimed everything: that is the
  // baseline from here on).
  before_ = FakeCuda::Stats();
  context_ = MakeContext();
  EXPECT_NE(context_.bits, 0u);
  EXPECT_VYRE_OK(vyre_context_wait_stream(context_, 1));
  ASSERT_VYRE_OK(vyre_context_trim(context_));
}

}  // namespace
}  // namespace vyre_test
