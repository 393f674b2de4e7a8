// Large host data on the fake driver: the staging ring against a model (every
// byte lands where it should, for sizes and offsets around piece and chunk
// boundaries), pinned and registered host memory, and their bad input.
//
// Run with FAKE_CUDA_DEFER_COPIES=1: the fake then performs a copy only when
// the host waits for it, so a pinned chunk refilled (or read) before its DMA
// completed shows up as wrong bytes here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "api_fake_fixture.h"
#include "descriptors.h"
#include "fake_cuda_client.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint32_t kPoison = 0xDEADBEEFu;

struct Ring {
  uint64_t chunk_bytes;
  uint32_t chunk_count;
  uint32_t threads;
};

// Small chunks make every transfer wrap the ring many times; 1 MiB chunks
// with 4 threads split each piece's copy between threads.
const Ring kRings[] = {{64 * kKiB, 2, 1}, {64 * kKiB, 3, 3}, {1 * kMiB, 4, 4}};

vyre_context MakeStagingContext(const Ring& ring) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.staging_chunk_bytes = ring.chunk_bytes;
  desc.staging_chunk_count = ring.chunk_count;
  desc.staging_threads = ring.threads;
  vyre_context context{0};
  EXPECT_VYRE_OK(vyre_context_create(&desc, &context));
  return context;
}

std::vector<uint8_t> Bytes(size_t n, uint32_t seed) { return RandomNonZeroBytes(n, seed); }

// Page-aligned caller memory for vyre_host_register.
struct AlignedBytes {
  explicit AlignedBytes(size_t n) : size(n), data(static_cast<uint8_t*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))) {}
  ~AlignedBytes() { std::free(data); }
  size_t size;
  uint8_t* data;
};

class HostTransferTest : public FakeDriverTest {};

// Sizes around the 256 KiB staging limit, the 64 KiB granule and piece
// sizes, and a few large ones.
const uint64_t kSizes[] = {256 * kKiB + 1,  256 * kKiB + 4095, 5 * 64 * kKiB + 17,
                           1 * kMiB,        1 * kMiB + 3,      3 * kMiB + 5,
                           8 * kMiB + 123,  4 * kMiB - 1};

TEST_F(HostTransferTest, UploadAndDownloadMatchAModel) {
  for (const Ring& ring : kRings) {
    SCOPED_TRACE(::testing::Message() << "chunk " << ring.chunk_bytes << " x " << ring.chunk_count
                                      << ", " << ring.threads << " threads");
    vyre_context context = MakeStagingContext(ring);
    const uint64_t buffer_bytes = 12 * kMiB;
    vyre_buffer buffer = MakeBuffer(context, buffer_bytes);
    std::vector<uint8_t> model = Bytes(buffer_bytes, 7);
    ASSERT_VYRE_OK(vyre_buffer_upload(buffer, 0, model.data(), model.size()));
    std::mt19937_64 rng(ring.chunk_bytes + ring.chunk_count);
    uint32_t seed = 100;
    for (uint64_t size : kSizes) {
      SCOPED_TRACE(::testing::Message() << "size " << size);
      const uint64_t offset = rng() % (buffer_bytes - size);
      std::vector<uint8_t> data = Bytes(size, seed++);
      ASSERT_VYRE_OK(vyre_buffer_upload(buffer, offset, data.data(), size));
      std::copy(data.begin(), data.end(), model.begin() + offset);
      // Read back a different window: the new bytes and some around them.
      const uint64_t begin = offset - std::min<uint64_t>(offset, rng() % (300 * kKiB));
      const uint64_t end = std::min(buffer_bytes, offset + size + rng() % (300 * kKiB));
      std::vector<uint8_t> back(end - begin, 0xA5);
      ASSERT_VYRE_OK(vyre_buffer_download(buffer, begin, back.data(), back.size()));
      EXPECT_SAME_BYTES(back.data(), model.data() + begin, back.size());
    }
    std::vector<uint8_t> whole(buffer_bytes, 0x5A);
    ASSERT_VYRE_OK(vyre_buffer_download(buffer, 0, whole.data(), whole.size()));
    EXPECT_SAME_BYTES(whole.data(), model.data(), whole.size());
    EXPECT_VYRE_OK(vyre_buffer_free(buffer));
    EXPECT_VYRE_OK(vyre_context_destroy(context));
  }
  EXPECT_GT(FakeCuda::Stats().deferred_copies, before_.deferred_copies)
      << "run this suite with FAKE_CUDA_DEFER_COPIES=1 (ctest does)";
}

TEST_F(HostTransferTest, ManyRangesInOneCall) {
  vyre_context context = MakeStagingContext(kRings[1]);
  const uint64_t buffer_bytes = 6 * kMiB;
  vyre_buffer buffer = MakeBuffer(context, buffer_bytes);
  std::vector<uint8_t> model(buffer_bytes, 0);
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer, 0, model.data(), model.size()));
  // Disjoint ranges of mixed sizes, small and large.
  const uint64_t sizes[] = {16, 300 * kKiB, 4096, 1 * kMiB + 7, 64 * kKiB, 2 * kMiB + 1};
  std::vector<std::vector<uint8_t>> sources;
  std::vector<vyre_upload_range> uploads;
  uint64_t cursor = 32;
  for (uint64_t size : sizes) {
    sources.push_back(Bytes(size, static_cast<uint32_t>(size)));
    uploads.push_back({cursor, size, sources.back().data()});
    std::copy(sources.back().begin(), sources.back().end(), model.begin() + cursor);
    cursor += (size + 15) / 16 * 16 + 4096;
  }
  ASSERT_LE(cursor, buffer_bytes);
  ASSERT_VYRE_OK(vyre_buffer_upload_ranges(buffer, uploads.data(), uploads.size()));
  std::vector<std::vector<uint8_t>> targets;
  std::vector<vyre_download_range> downloads;
  for (const vyre_upload_range& u : uploads) {
    // One byte before and after each range, where the model holds zeros.
    targets.emplace_back(u.bytes + 2, 0xEE);
    downloads.push_back({u.offset - 1, u.bytes + 2, targets.back().data()});
  }
  ASSERT_VYRE_OK(vyre_buffer_download_ranges(buffer, downloads.data(), downloads.size()));
  for (size_t i = 0; i < downloads.size(); ++i) {
    EXPECT_SAME_BYTES(targets[i].data(), model.data() + downloads[i].offset, targets[i].size());
  }
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_context_destroy(context));
}

struct HostAdd {
  HostAdd(size_t n, uint32_t seed)
      : a(RandomNonZeroU32(n, seed)), b(RandomNonZeroU32(n, seed + 1)), out(n, kPoison) {}
  void Bind(const uint32_t* in_a, const uint32_t* in_b, uint32_t* result) {
    const uint64_t bytes = a.size() * 4;
    spec.bindings = {HostIn(in_a, bytes), HostIn(in_b, bytes), HostOut(result, bytes)};
    spec.param_words = {static_cast<uint32_t>(a.size())};
  }
  std::vector<uint32_t> a, b, out;
  DispatchSpec spec;
};

TEST_F(HostTransferTest, HostDispatchAtBoundarySizesMatchesCpu) {
  for (const Ring& ring : kRings) {
    vyre_context context = MakeStagingContext(ring);
    vyre_program add = MakeProgram(context, AddSpec());
    uint32_t seed = 1;
    for (size_t n : {size_t{65537}, size_t{262145}, size_t{(1 << 20) + 3}, size_t{3 << 20}}) {
      SCOPED_TRACE(::testing::Message() << n << " elements, chunk " << ring.chunk_bytes);
      HostAdd sync(n, seed++);
      sync.Bind(sync.a.data(), sync.b.data(), sync.out.data());
      vyre_dispatch_desc desc = sync.spec.Desc();
      ASSERT_VYRE_OK(vyre_dispatch(add, &desc, nullptr));
      EXPECT_TRUE(SameU32(sync.out, CpuAdd(sync.a, sync.b)));

      HostAdd async(n, seed++);
      async.Bind(async.a.data(), async.b.data(), async.out.data());
      desc = async.spec.Desc();
      vyre_pending pending{0};
      ASSERT_VYRE_OK(vyre_dispatch_async(add, &desc, &pending));
      // The inputs were consumed at enqueue: overwriting them now is allowed.
      std::vector<uint32_t> expected = CpuAdd(async.a, async.b);
      std::fill(async.a.begin(), async.a.end(), 0u);
      ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
      EXPECT_VYRE_OK(vyre_pending_release(pending));
      EXPECT_TRUE(SameU32(async.out, expected));
    }
    EXPECT_VYRE_OK(vyre_program_destroy(add));
    EXPECT_VYRE_OK(vyre_context_destroy(context));
  }
}

TEST_F(HostTransferTest, HostInputOutputThroughTheRing) {
  vyre_context context = MakeStagingContext(kRings[1]);
  vyre_program inc = MakeProgram(context, IncSpec());
  std::vector<uint32_t> data = RandomNonZeroU32((1 << 20) + 5, 77);
  std::vector<uint32_t> expected = data;
  for (uint32_t& v : expected) v += 1;
  DispatchSpec spec;
  spec.bindings = {HostInOut(data.data(), data.size() * 4)};
  spec.param_words = {static_cast<uint32_t>(data.size())};
  vyre_dispatch_desc desc = spec.Desc();
  ASSERT_VYRE_OK(vyre_dispatch(inc, &desc, nullptr));
  EXPECT_TRUE(SameU32(data, expected));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
  EXPECT_VYRE_OK(vyre_context_destroy(context));
}

TEST_F(HostTransferTest, PinnedBindingsAreCopiedInPlace) {
  const size_t n = 1 << 20;  // 4 MiB per binding: 4 pieces each through the ring
  vyre_program add = MakeProgram(context_, AddSpec());
  uint32_t* pinned[3] = {};
  for (uint32_t*& p : pinned) {
    void* memory = nullptr;
    ASSERT_VYRE_OK(vyre_host_alloc(context_, n * 4, &memory));
    ASSERT_NE(memory, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(memory) % 4096, 0u);
    p = static_cast<uint32_t*>(memory);
  }
  HostAdd host(n, 5);
  std::copy(host.a.begin(), host.a.end(), pinned[0]);
  std::copy(host.b.begin(), host.b.end(), pinned[1]);
  std::fill(pinned[2], pinned[2] + n, kPoison);

  // Pageable first, for the operation count to compare with.
  host.Bind(host.a.data(), host.b.data(), host.out.data());
  vyre_telemetry t0 = Telemetry(context_);
  vyre_dispatch_desc desc = host.spec.Desc();
  ASSERT_VYRE_OK(vyre_dispatch(add, &desc, nullptr));
  vyre_telemetry t1 = Telemetry(context_);
  EXPECT_TRUE(SameU32(host.out, CpuAdd(host.a, host.b)));
  EXPECT_GE(t1.h2d_operations - t0.h2d_operations, 8u) << "4 pieces per pageable input";
  EXPECT_GE(t1.d2h_operations - t0.d2h_operations, 4u);

  host.Bind(pinned[0], pinned[1], pinned[2]);
  desc = host.spec.Desc();
  ASSERT_VYRE_OK(vyre_dispatch(add, &desc, nullptr));
  vyre_telemetry t2 = Telemetry(context_);
  EXPECT_LE(t2.h2d_operations - t1.h2d_operations, 3u) << "one DMA per pinned input";
  EXPECT_EQ(t2.d2h_operations - t1.d2h_operations, 1u) << "one DMA into the pinned output";
  std::vector<uint32_t> result(pinned[2], pinned[2] + n);
  EXPECT_TRUE(SameU32(result, CpuAdd(host.a, host.b)));

  // Async from pinned memory: the copies run after the call returns.
  std::fill(pinned[2], pinned[2] + n, kPoison);
  vyre_pending pending{0};
  ASSERT_VYRE_OK(vyre_dispatch_async(add, &desc, &pending));
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  result.assign(pinned[2], pinned[2] + n);
  EXPECT_TRUE(SameU32(result, CpuAdd(host.a, host.b)));

  for (uint32_t* p : pinned) EXPECT_VYRE_OK(vyre_host_free(p));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(HostTransferTest, RegisteredMemoryIsCopiedInPlace) {
  const uint64_t bytes = 3 * kMiB + 4096;
  AlignedBytes memory(bytes);
  std::vector<uint8_t> data = Bytes(bytes, 31);
  std::memcpy(memory.data, data.data(), bytes);
  const fake_cuda_stats s0 = FakeCuda::Stats();
  ASSERT_VYRE_OK(vyre_host_register(context_, memory.data, bytes));
  EXPECT_EQ(FakeCuda::Stats().registered_ranges_live, s0.registered_ranges_live + 1);
  vyre_buffer buffer = MakeBuffer(context_, bytes);
  vyre_telemetry t0 = Telemetry(context_);
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer, 0, memory.data, bytes));
  // A range inside the registered memory is also copied in place.
  std::memset(memory.data, 0, bytes);
  ASSERT_VYRE_OK(vyre_buffer_download(buffer, 4096, memory.data + 4096, bytes - 4096));
  vyre_telemetry t1 = Telemetry(context_);
  EXPECT_EQ(t1.h2d_operations - t0.h2d_operations, 1u);
  EXPECT_EQ(t1.d2h_operations - t0.d2h_operations, 1u);
  EXPECT_SAME_BYTES(memory.data + 4096, data.data() + 4096, bytes - 4096);
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_host_unregister(memory.data));
  EXPECT_EQ(FakeCuda::Stats().registered_ranges_live, s0.registered_ranges_live);
}

TEST_F(HostTransferTest, PinnedApiRefusesBadInput) {
  void* out = reinterpret_cast<void*>(0x1234);
  EXPECT_VYRE_ERROR(vyre_host_alloc(context_, 0, &out), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(out, nullptr) << "a failed alloc leaves *out NULL";
  EXPECT_VYRE_ERROR(vyre_host_alloc(context_, 64, nullptr), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_ERROR(vyre_host_alloc(vyre_context{0}, 64, &out), VYRE_STATUS_INVALID_HANDLE);
  EXPECT_VYRE_ERROR(vyre_host_free(nullptr), VYRE_STATUS_INVALID_ARGUMENT);
  int stack_value = 0;
  EXPECT_VYRE_ERROR(vyre_host_free(&stack_value), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_ERROR(vyre_host_unregister(&stack_value), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_ERROR(vyre_host_unregister(nullptr), VYRE_STATUS_INVALID_ARGUMENT);

  void* pinned = nullptr;
  ASSERT_VYRE_OK(vyre_host_alloc(context_, 10000, &pinned));
  // Inside, but not the start; and the wrong release call.
  EXPECT_VYRE_ERROR(vyre_host_free(static_cast<char*>(pinned) + 16), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_ERROR(vyre_host_unregister(pinned), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(LastErrorMessage().find("other call of the pair"), std::string::npos)
      << LastErrorMessage();
  // Registering memory the library already pinned overlaps it.
  EXPECT_VYRE_ERROR(vyre_host_register(context_, pinned, 100), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(LastErrorMessage().find("overlaps"), std::string::npos) << LastErrorMessage();
  EXPECT_VYRE_OK(vyre_host_free(pinned));
  EXPECT_VYRE_ERROR(vyre_host_free(pinned), VYRE_STATUS_INVALID_ARGUMENT) << "double free";

  AlignedBytes memory(64 * kKiB);
  EXPECT_VYRE_ERROR(vyre_host_register(context_, nullptr, 100), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_ERROR(vyre_host_register(context_, memory.data, 0), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_ERROR(vyre_host_register(vyre_context{0}, memory.data, 100),
                    VYRE_STATUS_INVALID_HANDLE);
  EXPECT_VYRE_ERROR(
      vyre_host_register(context_, reinterpret_cast<void*>(UINTPTR_MAX - 10), 100),
      VYRE_STATUS_OUT_OF_RANGE);
  ASSERT_VYRE_OK(vyre_host_register(context_, memory.data + 4096, 8192));
  // Same range, a range starting inside, one ending inside, one covering it.
  EXPECT_VYRE_ERROR(vyre_host_register(context_, memory.data + 4096, 8192),
                    VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_ERROR(vyre_host_register(context_, memory.data + 8192, 8192),
                    VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_ERROR(vyre_host_register(context_, memory.data, 4097), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_ERROR(vyre_host_register(context_, memory.data, 64 * kKiB),
                    VYRE_STATUS_INVALID_ARGUMENT);
  // Adjacent ranges do not overlap.
  ASSERT_VYRE_OK(vyre_host_register(context_, memory.data, 4096));
  ASSERT_VYRE_OK(vyre_host_register(context_, memory.data + 12288, 4096));
  EXPECT_VYRE_ERROR(vyre_host_unregister(memory.data + 4097), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_ERROR(vyre_host_free(memory.data + 4096), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_OK(vyre_host_unregister(memory.data + 4096));
  EXPECT_VYRE_ERROR(vyre_host_unregister(memory.data + 4096), VYRE_STATUS_INVALID_ARGUMENT)
      << "unregistering twice";
  EXPECT_VYRE_OK(vyre_host_unregister(memory.data));
  EXPECT_VYRE_OK(vyre_host_unregister(memory.data + 12288));
}

TEST_F(HostTransferTest, FreeWhilePendingIsDeferredAndUnregisterIsRefused) {
  const size_t n = 1 << 18;  // 1 MiB: over the staging limit, so copied in place
  vyre_program add = MakeProgram(context_, AddSpec());
  void* in_a = nullptr;
  void* out = nullptr;
  ASSERT_VYRE_OK(vyre_host_alloc(context_, n * 4, &in_a));
  ASSERT_VYRE_OK(vyre_host_alloc(context_, n * 4, &out));
  AlignedBytes registered(n * 4);
  ASSERT_VYRE_OK(vyre_host_register(context_, registered.data, n * 4));
  HostAdd host(n, 9);
  std::copy(host.a.begin(), host.a.end(), static_cast<uint32_t*>(in_a));
  std::memcpy(registered.data, host.b.data(), n * 4);
  std::fill(static_cast<uint32_t*>(out), static_cast<uint32_t*>(out) + n, kPoison);
  host.Bind(static_cast<uint32_t*>(in_a), reinterpret_cast<uint32_t*>(registered.data),
            static_cast<uint32_t*>(out));
  const std::vector<uint32_t> expected = CpuAdd(host.a, host.b);
  vyre_pending pending{0};
  fake_cuda_stats enqueued{};
  {
    ScopedHold hold;
    vyre_dispatch_desc desc = host.spec.Desc();
    ASSERT_VYRE_OK(vyre_dispatch_async(add, &desc, &pending));
    enqueued = FakeCuda::Stats();
    EXPECT_VYRE_OK(vyre_host_free(in_a));
    EXPECT_EQ(FakeCuda::Stats().pinned_allocations_live, enqueued.pinned_allocations_live)
        << "memory a pending dispatch copies from must outlive vyre_host_free";
    EXPECT_VYRE_ERROR(vyre_host_unregister(registered.data), VYRE_STATUS_INVALID_STATE);
    EXPECT_NE(LastErrorMessage().find("vyre_pending_wait"), std::string::npos);
  }
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  std::vector<uint32_t> result(static_cast<uint32_t*>(out), static_cast<uint32_t*>(out) + n);
  EXPECT_TRUE(SameU32(result, expected));
  EXPECT_EQ(FakeCuda::Stats().pinned_allocations_live, enqueued.pinned_allocations_live - 1)
      << "released once the dispatch completed";
  EXPECT_VYRE_OK(vyre_host_unregister(registered.data));
  EXPECT_VYRE_OK(vyre_host_free(out));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(HostTransferTest, DestroyingTheContextReleasesItsHostMemory) {
  const fake_cuda_stats s0 = FakeCuda::Stats();
  vyre_context other = MakeContext();
  void* pinned = nullptr;
  ASSERT_VYRE_OK(vyre_host_alloc(other, 100000, &pinned));
  AlignedBytes memory(8192);
  ASSERT_VYRE_OK(vyre_host_register(other, memory.data, 8192));
  EXPECT_EQ(FakeCuda::Stats().registered_ranges_live, s0.registered_ranges_live + 1);
  vyre_telemetry t = Telemetry(other);
  EXPECT_GE(t.pinned_bytes_live, 100000u);
  ASSERT_VYRE_OK(vyre_context_destroy(other));
  const fake_cuda_stats s1 = FakeCuda::Stats();
  EXPECT_EQ(s1.registered_ranges_live, s0.registered_ranges_live);
  EXPECT_EQ(s1.pinned_allocations_live, s0.pinned_allocations_live);
  EXPECT_VYRE_ERROR(vyre_host_free(pinned), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(LastErrorMessage().find("context destroyed"), std::string::npos);
  EXPECT_VYRE_ERROR(vyre_host_unregister(memory.data), VYRE_STATUS_INVALID_ARGUMENT);
  // The memory is the caller's again: registering it anew works.
  ASSERT_VYRE_OK(vyre_host_register(context_, memory.data, 8192));
  EXPECT_VYRE_OK(vyre_host_unregister(memory.data));
}

TEST_F(HostTransferTest, ContextDescriptorRefusesAbsurdStaging) {
  struct Case {
    uint64_t chunk_bytes;
    uint32_t chunk_count;
    uint32_t threads;
    const char* field;
  } cases[] = {
      {1, 0, 0, "staging_chunk_bytes"},
      {64 * kKiB + 1, 0, 0, "staging_chunk_bytes"},
      {32 * kKiB, 0, 0, "staging_chunk_bytes"},
      {512 * kMiB, 0, 0, "staging_chunk_bytes"},
      {UINT64_MAX, 0, 0, "staging_chunk_bytes"},
      {0, 1, 0, "staging_chunk_count"},
      {0, 65, 0, "staging_chunk_count"},
      {0, UINT32_MAX, 0, "staging_chunk_count"},
      {0, 0, 65, "staging_threads"},
      {0, 0, UINT32_MAX, "staging_threads"},
      {256 * kMiB, 64, 0, "4 GiB"},
  };
  for (const Case& c : cases) {
    vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
    desc.staging_chunk_bytes = c.chunk_bytes;
    desc.staging_chunk_count = c.chunk_count;
    desc.staging_threads = c.threads;
    vyre_context context{0x77};
    EXPECT_VYRE_ERROR(vyre_context_create(&desc, &context), VYRE_STATUS_INVALID_ARGUMENT)
        << c.field;
    EXPECT_NE(LastErrorMessage().find(c.field), std::string::npos) << LastErrorMessage();
    EXPECT_EQ(context.bits, 0u);
  }
  // A version-1 descriptor (before the staging fields) still works.
  vyre_context_desc v1 = VYRE_CONTEXT_DESC_INIT;
  v1.struct_size = 24;
  vyre_context context{0};
  ASSERT_VYRE_OK(vyre_context_create(&v1, &context));
  EXPECT_VYRE_OK(vyre_context_destroy(context));
}

TEST_F(HostTransferTest, TrimReleasesTheStagingChunks) {
  vyre_context context = MakeStagingContext(kRings[2]);
  const vyre_telemetry t0 = Telemetry(context);
  vyre_buffer buffer = MakeBuffer(context, 4 * kMiB);
  std::vector<uint8_t> data = Bytes(4 * kMiB, 3);
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer, 0, data.data(), data.size()));
  EXPECT_GE(Telemetry(context).pinned_bytes_live, t0.pinned_bytes_live + 4 * kMiB)
      << "the ring's four 1 MiB chunks";
  ASSERT_VYRE_OK(vyre_context_trim(context));
  EXPECT_EQ(Telemetry(context).pinned_bytes_live, t0.pinned_bytes_live);
  // And the ring comes back on the next large copy.
  std::vector<uint8_t> back(data.size(), 0);
  ASSERT_VYRE_OK(vyre_buffer_download(buffer, 0, back.data(), back.size()));
  EXPECT_SAME_BYTES(back.data(), data.data(), data.size());
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_context_destroy(context));
}

TEST_F(HostTransferTest, ThreadsShareTheRing) {
  vyre_context context = MakeStagingContext(kRings[1]);
  vyre_program add = MakeProgram(context, AddSpec());
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        const uint64_t bytes = (1 + t) * 300 * kKiB + round * 4096 + 4;
        std::vector<uint8_t> data = Bytes(bytes, 1000 * t + round);
        vyre_buffer buffer{0};
        if (vyre_buffer_alloc(context, bytes, &buffer) != VYRE_STATUS_OK) ++failures[t];
        if (vyre_buffer_upload(buffer, 0, data.data(), bytes) != VYRE_STATUS_OK) ++failures[t];
        std::vector<uint8_t> back(bytes, 0);
        if (vyre_buffer_download(buffer, 0, back.data(), bytes) != VYRE_STATUS_OK) ++failures[t];
        if (back != data) ++failures[t];
        vyre_buffer_free(buffer);
        HostAdd host((1 << 17) + t, 50 * t + round);
        host.Bind(host.a.data(), host.b.data(), host.out.data());
        vyre_dispatch_desc desc = host.spec.Desc();
        if (vyre_dispatch(add, &desc, nullptr) != VYRE_STATUS_OK) ++failures[t];
        if (host.out != CpuAdd(host.a, host.b)) ++failures[t];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_VYRE_OK(vyre_program_destroy(add));
  EXPECT_VYRE_OK(vyre_context_destroy(context));
}

}  // namespace
}  // namespace vyre_test
