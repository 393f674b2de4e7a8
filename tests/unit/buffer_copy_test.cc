// vyre_buffer_copy / vyre_buffer_copy_async and the peer-access queries on
// the fake driver: every path (one context, two contexts of one device, two
// devices as peers, two devices staged through host memory), synchronous and
// asynchronous, ordered against dispatches before and after, and every
// refusal with its status and Fix.
//
// The ctest entries (tests/unit/CMakeLists.txt) run this binary with one fake
// device, with two (FAKE_CUDA_DEVICES=2) that are peers, with two that are
// not (FAKE_CUDA_PEER_ACCESS=0), and with every copy and kernel deferred
// until the host waits (FAKE_CUDA_DEFER_ALL=1), where a copy enqueued in the
// wrong order, or read before it ran, gives wrong bytes. The fake counts any
// driver misuse (a stream of one device used with another's context, memory
// of a device touched without peer access, an event recorded on another
// context's stream), and the fixture fails a test that caused one.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api_fake_fixture.h"
#include "descriptors.h"
#include "fake_cuda_client.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

constexpr uint8_t kPoisonByte = 0xEF;

uint32_t DeviceCount() {
  uint32_t count = 0;
  EXPECT_VYRE_OK(vyre_device_count(&count));
  return count;
}

vyre_context ContextOn(uint32_t ordinal) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.device_ordinal = ordinal;
  vyre_context context{0};
  EXPECT_VYRE_OK(vyre_context_create(&desc, &context));
  return context;
}

std::vector<uint8_t> Download(vyre_buffer buffer, uint64_t bytes) {
  std::vector<uint8_t> out(bytes, 0);
  EXPECT_VYRE_OK(vyre_buffer_download(buffer, 0, out.data(), bytes));
  return out;
}

// One copy case: fresh random source bytes, a poisoned destination, the copy,
// then every byte of both buffers compared with the CPU's answer.
struct CopyCase {
  uint64_t src_bytes = 4096;
  uint64_t dst_bytes = 4096;
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  uint64_t bytes = 4096;
  uint32_t flags = 0;
  bool async = false;
  uint32_t seed = 1;
};

void RunCopyCase(vyre_context src_context, vyre_context dst_context, const CopyCase& c) {
  SCOPED_TRACE(::testing::Message() << "src " << c.src_bytes << "@" << c.src_offset << " dst "
                                    << c.dst_bytes << "@" << c.dst_offset << " bytes " << c.bytes
                                    << (c.async ? " async" : " sync") << " flags " << c.flags);
  vyre_buffer src = MakeBuffer(src_context, c.src_bytes);
  vyre_buffer dst = MakeBuffer(dst_context, c.dst_bytes);
  const std::vector<uint8_t> data = RandomNonZeroBytes(c.src_bytes, c.seed);
  std::vector<uint8_t> expected(c.dst_bytes, kPoisonByte);
  ASSERT_VYRE_OK(vyre_buffer_upload(src, 0, data.data(), c.src_bytes));
  ASSERT_VYRE_OK(vyre_buffer_upload(dst, 0, expected.data(), c.dst_bytes));
  std::memcpy(expected.data() + c.dst_offset, data.data() + c.src_offset, c.bytes);

  vyre_buffer_copy_desc desc = CopyDesc(src, c.src_offset, dst, c.dst_offset, c.bytes, c.flags);
  if (c.async) {
    vyre_pending pending{0};
    ASSERT_VYRE_OK(vyre_buffer_copy_async(&desc, &pending));
    EXPECT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
    vyre_timing timing = VYRE_TIMING_INIT;
    EXPECT_VYRE_OK(vyre_pending_timing(pending, &timing));
    EXPECT_GE(timing.wall_ns, timing.wait_ns);
    EXPECT_VYRE_OK(vyre_pending_release(pending));
  } else {
    ASSERT_VYRE_OK(vyre_buffer_copy(&desc));
  }
  const std::vector<uint8_t> got = Download(dst, c.dst_bytes);
  EXPECT_SAME_BYTES(got.data(), expected.data(), c.dst_bytes);
  const std::vector<uint8_t> source_after = Download(src, c.src_bytes);
  EXPECT_SAME_BYTES(source_after.data(), data.data(), c.src_bytes);
  EXPECT_VYRE_OK(vyre_buffer_free(src));
  EXPECT_VYRE_OK(vyre_buffer_free(dst));
}

// The size classes every path runs: small, a page, unaligned sizes and
// offsets, and (staged) more than two 8 MiB pieces.
std::vector<CopyCase> SizeCases(bool large) {
  std::vector<CopyCase> cases = {
      {16, 16, 0, 0, 16, 0, false, 11},
      {4096, 4096, 0, 0, 4096, 0, false, 12},
      {4096, 8192, 0, 4096, 4096, 0, true, 13},
      {1000, 2000, 3, 997, 777, 0, false, 14},
      {1000, 2000, 1, 5, 1, 0, true, 15},
  };
  if (large) {
    const uint64_t big = (uint64_t{20} << 20) + 3;  // three pieces, the last one short
    cases.push_back({big + 8, big + 16, 5, 11, big, 0, false, 16});
    cases.push_back({big, big, 0, 0, big, 0, true, 17});
  }
  return cases;
}

using CopyTest = FakeDriverTest;

TEST_F(CopyTest, OneContextEverySizeSyncAndAsync) {
  const fake_cuda_stats before = FakeCuda::Stats();
  for (const CopyCase& c : SizeCases(/*large=*/true)) RunCopyCase(context_, context_, c);
  const fake_cuda_stats after = FakeCuda::Stats();
  EXPECT_EQ(after.memcpy_dtod - before.memcpy_dtod, SizeCases(true).size())
      << "one device-to-device copy each";
  EXPECT_EQ(after.memcpy_peer, before.memcpy_peer);
}

TEST_F(CopyTest, TwoContextsOfOneDeviceCopyDeviceToDeviceInOrder) {
  vyre_context other = MakeContext();
  const fake_cuda_stats before = FakeCuda::Stats();
  for (const CopyCase& c : SizeCases(/*large=*/false)) {
    RunCopyCase(context_, other, c);
    RunCopyCase(other, context_, c);
  }
  const fake_cuda_stats after = FakeCuda::Stats();
  EXPECT_EQ(after.memcpy_dtod - before.memcpy_dtod, 2 * SizeCases(false).size());
  EXPECT_VYRE_OK(vyre_context_destroy(other));
}

// How two contexts are ordered: a copy whose source still has work (the
// fake's hold keeps every stream busy) makes the destination's stream wait
// for it; one whose source is idle (a stream query says so) does not. An
// asynchronous copy also makes the source's stream wait for the copy (its
// later work may overwrite the range read); a synchronous one needs no such
// wait (the copy completed before it returned).
TEST_F(CopyTest, TwoContextsAreOrderedByEventsBothWays) {
  vyre_context other = MakeContext();
  vyre_buffer src = MakeBuffer(context_, 256);
  vyre_buffer dst = MakeBuffer(other, 256);
  vyre_buffer_copy_desc desc = CopyDesc(src, 0, dst, 0, 256);
  vyre_pending pending{0};
  fake_cuda_stats before = FakeCuda::Stats();
  {
    ScopedHold busy;
    ASSERT_VYRE_OK(vyre_buffer_copy_async(&desc, &pending));
  }
  fake_cuda_stats after = FakeCuda::Stats();
  EXPECT_EQ(after.stream_waits - before.stream_waits, 2u) << "a busy source: both ways";
  EXPECT_NE(after.last_wait_stream, after.last_wait_event_stream)
      << "the last wait joins the two contexts' streams";
  EXPECT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  before = FakeCuda::Stats();
  ASSERT_VYRE_OK(vyre_buffer_copy_async(&desc, &pending));
  after = FakeCuda::Stats();
  EXPECT_EQ(after.stream_waits - before.stream_waits, 1u)
      << "an idle source: only its later work waits for the copy";
  EXPECT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  before = FakeCuda::Stats();
  ASSERT_VYRE_OK(vyre_buffer_copy(&desc));
  after = FakeCuda::Stats();
  EXPECT_EQ(after.stream_waits, before.stream_waits) << "an idle source needs no event";
  EXPECT_EQ(after.memcpy_dtod - before.memcpy_dtod, 1u);
  for (vyre_buffer b : {src, dst}) EXPECT_VYRE_OK(vyre_buffer_free(b));
  EXPECT_VYRE_OK(vyre_context_destroy(other));
}

TEST_F(CopyTest, ZeroBytesCopiesNothingButChecksHandlesAndOffsets) {
  vyre_buffer a = MakeBuffer(context_, 64);
  vyre_buffer b = MakeBuffer(context_, 64);
  const std::vector<uint8_t> data = RandomNonZeroBytes(64, 3);
  ASSERT_VYRE_OK(vyre_buffer_upload(b, 0, data.data(), 64));
  const fake_cuda_stats before = FakeCuda::Stats();
  vyre_buffer_copy_desc desc = CopyDesc(a, 64, b, 0, 0);  // offset == size: allowed
  EXPECT_VYRE_OK(vyre_buffer_copy(&desc));
  vyre_pending pending{0};
  EXPECT_VYRE_OK(vyre_buffer_copy_async(&desc, &pending));
  EXPECT_VYRE_OK(vyre_pending_poll(pending));
  EXPECT_VYRE_OK(vyre_pending_wait(pending, 0));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  desc = CopyDesc(a, 0, a, 0, 0);  // the same range, but nothing overlaps
  EXPECT_VYRE_OK(vyre_buffer_copy(&desc));
  const fake_cuda_stats after = FakeCuda::Stats();
  EXPECT_EQ(after.memcpy_dtod, before.memcpy_dtod);
  EXPECT_EQ(after.stream_waits, before.stream_waits);
  desc = CopyDesc(a, 65, b, 0, 0);
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy(&desc), VYRE_STATUS_OUT_OF_RANGE, "vyre_buffer_copy");
  const std::vector<uint8_t> got = Download(b, 64);
  EXPECT_SAME_BYTES(got.data(), data.data(), 64);
  EXPECT_VYRE_OK(vyre_buffer_free(a));
  EXPECT_VYRE_OK(vyre_buffer_free(b));
}

TEST_F(CopyTest, RangesPastEitherBufferOrOverflowingAreOutOfRange) {
  vyre_buffer a = MakeBuffer(context_, 64);
  vyre_buffer b = MakeBuffer(context_, 32);
  struct Case {
    uint64_t src_offset, dst_offset, bytes;
    const char* side;
  } cases[] = {
      {0, 0, 33, "dst"},            // past the smaller destination
      {60, 0, 8, "src"},            // past the source's end
      {0, 30, 4, "dst"},            // past the destination's end
      {UINT64_MAX, 0, 2, "src"},    // offset + bytes overflows
      {0, UINT64_MAX - 1, 4, "dst"},
      {0, 0, UINT64_MAX, "src"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.src_offset << " " << c.dst_offset << " " << c.bytes);
    vyre_buffer_copy_desc desc = CopyDesc(a, c.src_offset, b, c.dst_offset, c.bytes);
    EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy(&desc), VYRE_STATUS_OUT_OF_RANGE, "vyre_buffer_copy");
    EXPECT_NE(LastErrorMessage().find(std::string("the ") + c.side + " range"), std::string::npos)
        << LastErrorMessage();
    vyre_pending pending{7};
    EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy_async(&desc, &pending), VYRE_STATUS_OUT_OF_RANGE,
                           "vyre_buffer_copy_async");
    EXPECT_EQ(pending.bits, 0u);
  }
  EXPECT_VYRE_OK(vyre_buffer_free(a));
  EXPECT_VYRE_OK(vyre_buffer_free(b));
}

TEST_F(CopyTest, OverlappingRangesInOneBufferAreRefused) {
  vyre_buffer a = MakeBuffer(context_, 256);
  const std::vector<uint8_t> data = RandomNonZeroBytes(256, 5);
  ASSERT_VYRE_OK(vyre_buffer_upload(a, 0, data.data(), 256));
  const uint64_t overlapping[][2] = {{0, 0}, {0, 1}, {1, 0}, {100, 163}, {163, 100}};
  for (const auto& o : overlapping) {
    vyre_buffer_copy_desc desc = CopyDesc(a, o[0], a, o[1], 64);
    EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy(&desc), VYRE_STATUS_INVALID_ARGUMENT,
                           "vyre_buffer_copy");
    EXPECT_NE(LastErrorMessage().find("overlap in one buffer"), std::string::npos);
    vyre_pending pending{0};
    EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy_async(&desc, &pending), VYRE_STATUS_INVALID_ARGUMENT,
                           "vyre_buffer_copy_async");
  }
  // Disjoint ranges of one buffer copy, touching ones included.
  vyre_buffer_copy_desc desc = CopyDesc(a, 0, a, 64, 64);
  ASSERT_VYRE_OK(vyre_buffer_copy(&desc));
  desc = CopyDesc(a, 190, a, 127, 63);
  ASSERT_VYRE_OK(vyre_buffer_copy(&desc));
  std::vector<uint8_t> expected = data;
  std::memcpy(expected.data() + 64, data.data(), 64);
  std::memmove(expected.data() + 127, expected.data() + 190, 63);
  const std::vector<uint8_t> got = Download(a, 256);
  EXPECT_SAME_BYTES(got.data(), expected.data(), 256);
  EXPECT_VYRE_OK(vyre_buffer_free(a));
}

TEST_F(CopyTest, BuffersWrappingTheSameMemoryMayNotOverlap) {
  vyre_buffer owner = MakeBuffer(context_, 256);
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  ASSERT_VYRE_OK(vyre_buffer_info_get(owner, &info));
  vyre_buffer_wrap_desc wrap = VYRE_BUFFER_WRAP_DESC_INIT;
  wrap.device_pointer = info.device_pointer + 64;
  wrap.bytes = 128;
  vyre_buffer alias{0};
  ASSERT_VYRE_OK(vyre_buffer_wrap(context_, &wrap, &alias));
  // owner [70, 86) and alias [0, 16) = owner [64, 80) share six bytes.
  vyre_buffer_copy_desc desc = CopyDesc(owner, 70, alias, 0, 16);
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy(&desc), VYRE_STATUS_INVALID_ARGUMENT, "vyre_buffer_copy");
  EXPECT_NE(LastErrorMessage().find("wrap the same memory"), std::string::npos);
  desc = CopyDesc(owner, 0, alias, 0, 64);  // owner [0, 64) ends where alias begins
  EXPECT_VYRE_OK(vyre_buffer_copy(&desc));
  EXPECT_VYRE_OK(vyre_buffer_free(alias));
  EXPECT_VYRE_OK(vyre_buffer_free(owner));
}

TEST_F(CopyTest, BadHandlesNameTheirFieldAndStaleBuffersAreStale) {
  vyre_buffer live = MakeBuffer(context_, 64);
  vyre_buffer dead = MakeBuffer(context_, 64);
  ASSERT_VYRE_OK(vyre_buffer_free(dead));
  vyre_buffer_copy_desc desc = CopyDesc(vyre_buffer{0}, 0, live, 0, 4);
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy(&desc), VYRE_STATUS_INVALID_HANDLE, "vyre_buffer_copy");
  EXPECT_EQ(LastErrorMessage().rfind("vyre_buffer_copy: src: ", 0), 0u) << LastErrorMessage();
  desc = CopyDesc(live, 0, vyre_buffer{0}, 0, 4);
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy(&desc), VYRE_STATUS_INVALID_HANDLE, "vyre_buffer_copy");
  EXPECT_EQ(LastErrorMessage().rfind("vyre_buffer_copy: dst: ", 0), 0u) << LastErrorMessage();
  desc = CopyDesc(dead, 0, live, 0, 4);
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy(&desc), VYRE_STATUS_STALE_HANDLE, "vyre_buffer_copy");
  desc = CopyDesc(live, 0, dead, 0, 4);
  vyre_pending pending{0};
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy_async(&desc, &pending), VYRE_STATUS_STALE_HANDLE,
                         "vyre_buffer_copy_async");
  EXPECT_EQ(LastErrorMessage().rfind("vyre_buffer_copy_async: dst: ", 0), 0u);
  // A context handle is not a buffer handle.
  desc = CopyDesc(live, 0, vyre_buffer{context_.bits}, 0, 4);
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy(&desc), VYRE_STATUS_INVALID_HANDLE, "vyre_buffer_copy");
  // A buffer of a destroyed context is stale.
  vyre_context other = MakeContext();
  vyre_buffer orphan = MakeBuffer(other, 64);
  ASSERT_VYRE_OK(vyre_context_destroy(other));
  desc = CopyDesc(orphan, 0, live, 0, 4);
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy(&desc), VYRE_STATUS_STALE_HANDLE, "vyre_buffer_copy");
  EXPECT_VYRE_OK(vyre_buffer_free(live));
}

TEST_F(CopyTest, DescriptorNullStructSizeFlagsAndOutPointer) {
  vyre_buffer a = MakeBuffer(context_, 64);
  vyre_buffer b = MakeBuffer(context_, 64);
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy(nullptr), VYRE_STATUS_INVALID_ARGUMENT,
                         "vyre_buffer_copy");
  vyre_pending pending{0};
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy_async(nullptr, &pending), VYRE_STATUS_INVALID_ARGUMENT,
                         "vyre_buffer_copy_async");
  vyre_buffer_copy_desc desc = CopyDesc(a, 0, b, 0, 4);
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy_async(&desc, nullptr), VYRE_STATUS_INVALID_ARGUMENT,
                         "vyre_buffer_copy_async");
  desc.struct_size = 8;
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy(&desc), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
                         "vyre_buffer_copy");
  // A newer caller's larger struct: accepted with a zero tail, refused with
  // anything else there.
  struct Larger {
    vyre_buffer_copy_desc desc;
    uint64_t tail;
  } larger{CopyDesc(a, 0, b, 0, 4), 0};
  larger.desc.struct_size = sizeof(Larger);
  EXPECT_VYRE_OK(vyre_buffer_copy(&larger.desc));
  larger.tail = 1;
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy(&larger.desc), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
                         "vyre_buffer_copy");
  desc = CopyDesc(a, 0, b, 0, 4, /*flags=*/0x6);
  EXPECT_VYRE_ERROR_FROM(vyre_buffer_copy(&desc), VYRE_STATUS_INVALID_ARGUMENT, "vyre_buffer_copy");
  EXPECT_NE(LastErrorMessage().find("VYRE_BUFFER_COPY_FLAG_STAGED"), std::string::npos);
  // STAGED between buffers of one device is ignored: a device copy.
  desc = CopyDesc(a, 0, b, 0, 4, VYRE_BUFFER_COPY_FLAG_STAGED);
  EXPECT_VYRE_OK(vyre_buffer_copy(&desc));
  EXPECT_VYRE_OK(vyre_buffer_free(a));
  EXPECT_VYRE_OK(vyre_buffer_free(b));
}

TEST_F(CopyTest, AsyncCopyIsPendingUntilTheDeviceCompletesAndKeepsFreedBuffers) {
  vyre_buffer src = MakeBuffer(context_, 4096);
  vyre_buffer dst = MakeBuffer(context_, 4096);
  const std::vector<uint8_t> data = RandomNonZeroBytes(4096, 21);
  ASSERT_VYRE_OK(vyre_buffer_upload(src, 0, data.data(), 4096));
  vyre_pending pending{0};
  {
    ScopedHold hold;
    vyre_buffer_copy_desc desc = CopyDesc(src, 0, dst, 0, 4096);
    ASSERT_VYRE_OK(vyre_buffer_copy_async(&desc, &pending));
    EXPECT_VYRE_ERROR(vyre_pending_poll(pending), VYRE_STATUS_NOT_READY);
    EXPECT_VYRE_ERROR(vyre_pending_wait(pending, 1000), VYRE_STATUS_TIMEOUT);
    EXPECT_EQ(Telemetry(context_).live_pendings, 1u);
    // Freeing the source while the copy runs is safe: its memory stays.
    EXPECT_VYRE_OK(vyre_buffer_free(src));
  }
  EXPECT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_VYRE_ERROR(vyre_pending_wait(pending, VYRE_WAIT_FOREVER), VYRE_STATUS_INVALID_STATE);
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_EQ(Telemetry(context_).live_pendings, 0u);
  const std::vector<uint8_t> got = Download(dst, 4096);
  EXPECT_SAME_BYTES(got.data(), data.data(), 4096);
  EXPECT_VYRE_OK(vyre_buffer_free(dst));
}

TEST_F(CopyTest, DestroyingTheDestinationContextReleasesAnUnwaitedCopy) {
  vyre_context other = MakeContext();
  vyre_buffer src = MakeBuffer(context_, 1024);
  vyre_buffer dst = MakeBuffer(other, 1024);
  vyre_buffer_copy_desc desc = CopyDesc(src, 0, dst, 0, 1024);
  vyre_pending pending{0};
  ASSERT_VYRE_OK(vyre_buffer_copy_async(&desc, &pending));
  ASSERT_VYRE_OK(vyre_context_destroy(other));
  EXPECT_VYRE_ERROR(vyre_pending_wait(pending, 0), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_ERROR(vyre_buffer_copy(&desc), VYRE_STATUS_STALE_HANDLE);
  // The source's context goes on.
  vyre_buffer again = MakeBuffer(context_, 1024);
  desc = CopyDesc(src, 0, again, 0, 1024);
  EXPECT_VYRE_OK(vyre_buffer_copy(&desc));
  EXPECT_VYRE_OK(vyre_buffer_free(again));
  EXPECT_VYRE_OK(vyre_buffer_free(src));
}

// A dispatch before the copy (inc on the source), the copy, and a dispatch
// after it (inc on the destination), all asynchronous and waited on only at
// the end: the destination holds source + 2, the source + 1. Under
// FAKE_CUDA_DEFER_ALL=1 nothing runs until the host waits, so bytes read or
// copied out of order show.
void RunOrderedChain(vyre_context src_context, vyre_context dst_context, uint32_t flags,
                     bool sync_copy = false) {
  SCOPED_TRACE(::testing::Message() << "flags " << flags << (sync_copy ? " sync" : " async"));
  constexpr uint32_t kCount = 1024;
  constexpr uint64_t kBytes = kCount * 4;
  vyre_program inc_src = MakeProgram(src_context, IncSpec());
  vyre_program inc_dst = MakeProgram(dst_context, IncSpec());
  vyre_buffer src = MakeBuffer(src_context, kBytes);
  vyre_buffer dst = MakeBuffer(dst_context, kBytes);
  const std::vector<uint32_t> data = RandomNonZeroU32(kCount, 31);
  ASSERT_VYRE_OK(vyre_buffer_upload(src, 0, data.data(), kBytes));
  const std::vector<uint32_t> poison(kCount, kPoison);
  ASSERT_VYRE_OK(vyre_buffer_upload(dst, 0, poison.data(), kBytes));

  DispatchSpec before = ResidentInc(src, 0, kBytes, kCount);
  vyre_dispatch_desc before_desc = before.Desc();
  vyre_pending first{0}, copy{0}, last{0};
  ASSERT_VYRE_OK(vyre_dispatch_async(inc_src, &before_desc, &first));
  vyre_buffer_copy_desc desc = CopyDesc(src, 0, dst, 0, kBytes, flags);
  if (sync_copy) {
    ASSERT_VYRE_OK(vyre_buffer_copy(&desc));
  } else {
    ASSERT_VYRE_OK(vyre_buffer_copy_async(&desc, &copy));
  }
  DispatchSpec after = ResidentInc(dst, 0, kBytes, kCount);
  vyre_dispatch_desc after_desc = after.Desc();
  ASSERT_VYRE_OK(vyre_dispatch_async(inc_dst, &after_desc, &last));
  EXPECT_VYRE_OK(vyre_pending_wait(last, VYRE_WAIT_FOREVER));
  if (!sync_copy) {
    EXPECT_VYRE_OK(vyre_pending_wait(copy, VYRE_WAIT_FOREVER));
    EXPECT_VYRE_OK(vyre_pending_release(copy));
  }
  EXPECT_VYRE_OK(vyre_pending_wait(first, VYRE_WAIT_FOREVER));
  for (vyre_pending p : {first, last}) EXPECT_VYRE_OK(vyre_pending_release(p));

  std::vector<uint32_t> src_expected(data), dst_expected(data);
  for (uint32_t i = 0; i < kCount; ++i) {
    src_expected[i] += 1;
    dst_expected[i] += 2;
  }
  std::vector<uint32_t> got(kCount, 0);
  ASSERT_VYRE_OK(vyre_buffer_download(dst, 0, got.data(), kBytes));
  EXPECT_TRUE(SameU32(got, dst_expected)) << "destination: inc, copy, inc";
  ASSERT_VYRE_OK(vyre_buffer_download(src, 0, got.data(), kBytes));
  EXPECT_TRUE(SameU32(got, src_expected)) << "source: inc only";
  for (vyre_buffer b : {src, dst}) EXPECT_VYRE_OK(vyre_buffer_free(b));
  EXPECT_VYRE_OK(vyre_program_destroy(inc_src));
  EXPECT_VYRE_OK(vyre_program_destroy(inc_dst));
}

TEST_F(CopyTest, OrderedBetweenDispatchesInOneContext) { RunOrderedChain(context_, context_, 0); }

TEST_F(CopyTest, OrderedBetweenDispatchesOfTwoContextsOfOneDevice) {
  vyre_context other = MakeContext();
  RunOrderedChain(context_, other, 0);
  RunOrderedChain(context_, other, 0, /*sync_copy=*/true);
  EXPECT_VYRE_OK(vyre_context_destroy(other));
}

TEST_F(CopyTest, PeerQueriesOfOneDevice) {
  uint32_t can = 7;
  EXPECT_VYRE_OK(vyre_device_can_access_peer(0, 0, &can));
  EXPECT_EQ(can, 0u) << "a device is never its own peer";
  const uint32_t count = DeviceCount();
  EXPECT_VYRE_ERROR_FROM(vyre_device_can_access_peer(0, count, &can), VYRE_STATUS_NO_DEVICE,
                         "vyre_device_can_access_peer");
  EXPECT_VYRE_ERROR_FROM(vyre_device_can_access_peer(count, 0, &can), VYRE_STATUS_NO_DEVICE,
                         "vyre_device_can_access_peer");
  EXPECT_VYRE_ERROR_FROM(vyre_device_can_access_peer(0, 0, nullptr),
                         VYRE_STATUS_INVALID_ARGUMENT, "vyre_device_can_access_peer");
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  ASSERT_VYRE_OK(vyre_context_device_info(context_, &info));
  EXPECT_EQ(info.peer_access_mask & 1u, 0u);
  // A caller of the first release (no peer_access_mask) still works, and
  // the bytes past its struct are left alone.
  struct V1 {
    unsigned char bytes[offsetof(vyre_device_info, peer_access_mask)];
    uint64_t guard;
  } v1;
  std::memset(&v1, 0xAB, sizeof(v1));
  const uint32_t v1_size = offsetof(vyre_device_info, peer_access_mask);
  std::memcpy(v1.bytes, &v1_size, sizeof(v1_size));
  EXPECT_VYRE_OK(vyre_device_info_get(0, reinterpret_cast<vyre_device_info*>(&v1)));
  EXPECT_EQ(v1.guard, 0xABABABABABABABABull);
  EXPECT_VYRE_OK(vyre_context_device_info(context_, reinterpret_cast<vyre_device_info*>(&v1)));
  EXPECT_EQ(v1.guard, 0xABABABABABABABABull);
}

// --- two devices (FAKE_CUDA_DEVICES=2, peers or not) -----------------------

class CopyTwoDevicesTest : public FakeDriverTest {
 protected:
  void SetUp() override {
    FakeDriverTest::SetUp();
    if (HasFatalFailure()) return;
    if (DeviceCount() < 2) GTEST_SKIP() << "needs FAKE_CUDA_DEVICES=2 (its own ctest entries)";
    second_ = ContextOn(1);
    ASSERT_NE(second_.bits, 0u);
    uint32_t can = 0;
    ASSERT_VYRE_OK(vyre_device_can_access_peer(0, 1, &can));
    peers_ = can != 0;
  }
  void TearDown() override {
    if (second_.bits != 0) {
      EXPECT_VYRE_OK(vyre_context_destroy(second_));
    }
    FakeDriverTest::TearDown();
  }

  vyre_context second_{0};
  bool peers_ = false;
};

TEST_F(CopyTwoDevicesTest, DeviceInfoAndQueryAgreeOnPeers) {
  uint32_t forward = 9, backward = 9;
  ASSERT_VYRE_OK(vyre_device_can_access_peer(0, 1, &forward));
  ASSERT_VYRE_OK(vyre_device_can_access_peer(1, 0, &backward));
  EXPECT_EQ(forward, backward);
  vyre_device_info info0 = VYRE_DEVICE_INFO_INIT, info1 = VYRE_DEVICE_INFO_INIT;
  ASSERT_VYRE_OK(vyre_device_info_get(0, &info0));
  ASSERT_VYRE_OK(vyre_context_device_info(second_, &info1));
  EXPECT_EQ(info1.ordinal, 1u);
  EXPECT_EQ(info0.peer_access_mask, forward ? 0x2u : 0u);
  EXPECT_EQ(info1.peer_access_mask, backward ? 0x1u : 0u);
}

TEST_F(CopyTwoDevicesTest, EverySizeBothWaysSyncAndAsync) {
  const fake_cuda_stats before = FakeCuda::Stats();
  size_t copies = 0;
  for (const CopyCase& c : SizeCases(/*large=*/true)) {
    RunCopyCase(context_, second_, c);
    RunCopyCase(second_, context_, c);
    copies += 2;
  }
  const fake_cuda_stats after = FakeCuda::Stats();
  if (peers_) {
    EXPECT_EQ(after.memcpy_peer - before.memcpy_peer, copies) << "one peer copy each";
    // Enabled once per pair and direction, not per copy.
    EXPECT_EQ(after.peer_enables - before.peer_enables, 2u);
  } else {
    EXPECT_EQ(after.memcpy_peer, before.memcpy_peer) << "no peer access: staged";
    EXPECT_EQ(after.peer_enables, before.peer_enables);
    EXPECT_GE(after.memcpy_dtoh - before.memcpy_dtoh, copies);
  }
}

TEST_F(CopyTwoDevicesTest, StagedFlagGoesThroughHostMemoryEvenBetweenPeers) {
  const fake_cuda_stats before = FakeCuda::Stats();
  for (CopyCase c : SizeCases(/*large=*/true)) {
    c.flags = VYRE_BUFFER_COPY_FLAG_STAGED;
    RunCopyCase(second_, context_, c);
  }
  const fake_cuda_stats after = FakeCuda::Stats();
  EXPECT_EQ(after.memcpy_peer, before.memcpy_peer);
  EXPECT_EQ(after.peer_enables, before.peer_enables) << "STAGED leaves peer mappings alone";
  // The 20 MiB cases went in three pieces each; telemetry counts them.
  vyre_telemetry t = Telemetry(context_);
  EXPECT_GT(t.h2d_operations, 0u);
}

TEST_F(CopyTwoDevicesTest, OrderedBetweenDispatchesOnBothDevices) {
  RunOrderedChain(context_, second_, 0);
  RunOrderedChain(second_, context_, 0);
  RunOrderedChain(context_, second_, VYRE_BUFFER_COPY_FLAG_STAGED);
  RunOrderedChain(second_, context_, 0, /*sync_copy=*/true);
  RunOrderedChain(context_, second_, VYRE_BUFFER_COPY_FLAG_STAGED, /*sync_copy=*/true);
}

TEST_F(CopyTwoDevicesTest, AsyncCopyKeepsBuffersOfADestroyedSourceContext) {
  vyre_context third = ContextOn(1);
  vyre_buffer src = MakeBuffer(third, 8192);
  vyre_buffer dst = MakeBuffer(context_, 8192);
  const std::vector<uint8_t> data = RandomNonZeroBytes(8192, 41);
  ASSERT_VYRE_OK(vyre_buffer_upload(src, 0, data.data(), 8192));
  vyre_pending pending{0};
  {
    ScopedHold hold;
    vyre_buffer_copy_desc desc = CopyDesc(src, 0, dst, 0, 8192);
    ASSERT_VYRE_OK(vyre_buffer_copy_async(&desc, &pending));
    EXPECT_VYRE_ERROR(vyre_pending_poll(pending), VYRE_STATUS_NOT_READY);
  }
  // The source's context goes first; the copy (the destination's) still
  // completes with the right bytes.
  EXPECT_VYRE_OK(vyre_context_destroy(third));
  EXPECT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  const std::vector<uint8_t> got = Download(dst, 8192);
  EXPECT_SAME_BYTES(got.data(), data.data(), 8192);
  EXPECT_VYRE_OK(vyre_buffer_free(dst));
}

TEST_F(CopyTwoDevicesTest, ReleasedWithoutAWaitTheCopyStillCompletes) {
  vyre_buffer src = MakeBuffer(context_, 1 << 20);
  vyre_buffer dst = MakeBuffer(second_, 1 << 20);
  const std::vector<uint8_t> data = RandomNonZeroBytes(1 << 20, 43);
  ASSERT_VYRE_OK(vyre_buffer_upload(src, 0, data.data(), data.size()));
  for (uint32_t flags : {0u, static_cast<uint32_t>(VYRE_BUFFER_COPY_FLAG_STAGED)}) {
    vyre_buffer_copy_desc desc = CopyDesc(src, 0, dst, 0, data.size(), flags);
    vyre_pending pending{0};
    ASSERT_VYRE_OK(vyre_buffer_copy_async(&desc, &pending));
    EXPECT_VYRE_OK(vyre_pending_release(pending));
    const std::vector<uint8_t> got = Download(dst, data.size());
    EXPECT_SAME_BYTES(got.data(), data.data(), data.size());
  }
  EXPECT_VYRE_OK(vyre_buffer_free(src));
  EXPECT_VYRE_OK(vyre_buffer_free(dst));
}

}  // namespace
}  // namespace vyre_test
