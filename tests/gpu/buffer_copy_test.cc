// vyre_buffer_copy on real devices: one context, two contexts of one device,
// and (with two GPUs) peer and staged copies both ways; every size class
// (small, 4 KiB, unaligned sizes and offsets, 64 MiB), every byte compared
// with the CPU's answer on fresh random data over a poisoned destination.
// Ordering uses vyre_test_spin (busy-waits, then data[i] += 1): the copy is
// enqueued while the spin on the source still runs, so a copy not ordered
// after it would read the old bytes. Threads copy and dispatch at once.
//
// The two-GPU tests skip with a message on a machine with one device, and
// fail instead under VYRE_CUDA_REQUIRE_GPUS=2 (the 2-GPU machine's run).
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu_test_env.h"

namespace vyre_test {
namespace {

constexpr uint32_t kSpinMicroseconds = 100000;  // 100 ms: far longer than any copy here
constexpr uint32_t kSpinThreads = 256;
constexpr uint8_t kPoisonByte = 0xEF;

struct SizeClass {
  const char* name;
  uint64_t src_bytes, dst_bytes, src_offset, dst_offset, bytes;
};

const SizeClass kSizeClasses[] = {
    {"small", 64, 64, 0, 0, 16},
    {"4KiB", 4096, 4096, 0, 0, 4096},
    {"4KiB at an offset", 8192, 12288, 4096, 8192, 4096},
    {"unaligned", 10007, 10009, 3, 5, 9999},
    {"one byte", 33, 33, 31, 1, 1},
    {"64MiB", uint64_t{64} << 20, uint64_t{64} << 20, 0, 0, uint64_t{64} << 20},
    {"64MiB unaligned", (uint64_t{64} << 20) + 8, (uint64_t{64} << 20) + 8, 7, 1,
     (uint64_t{64} << 20) + 1},
};

std::vector<uint8_t> RandomBytes(RandomSource& rng, uint64_t bytes) {
  std::vector<uint32_t> words = rng.NonZeroU32((bytes + 3) / 4);
  std::vector<uint8_t> out(bytes);
  std::memcpy(out.data(), words.data(), bytes);
  for (uint8_t& b : out) b = b == 0 ? 1 : b;  // never zero, bytewise too
  return out;
}

::testing::AssertionResult SameBytes(const std::vector<uint8_t>& actual,
                                     const std::vector<uint8_t>& expected, const char* what) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << what << ": sizes differ";
  }
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] != expected[i] && wrong++ == 0) first = i;
  }
  if (wrong == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << wrong << " of " << actual.size() << " bytes wrong; first at " << first
         << ": " << int(actual[first]) << ", expected " << int(expected[first]);
}

// One size class from src_context to dst_context, checked byte by byte.
void CopyAndCheck(RandomSource& rng, vyre_context src_context, vyre_context dst_context,
                  const SizeClass& s, bool async, uint32_t flags) {
  SCOPED_TRACE(::testing::Message() << s.name << (async ? " async" : " sync") << " flags "
                                    << flags);
  BufferHandle src, dst;
  ASSERT_VYRE_OK(vyre_buffer_alloc(src_context, s.src_bytes, src.out()));
  ASSERT_VYRE_OK(vyre_buffer_alloc(dst_context, s.dst_bytes, dst.out()));
  const std::vector<uint8_t> data = RandomBytes(rng, s.src_bytes);
  std::vector<uint8_t> expected(s.dst_bytes, kPoisonByte);
  ASSERT_VYRE_OK(vyre_buffer_upload(src.get(), 0, data.data(), s.src_bytes));
  ASSERT_VYRE_OK(vyre_buffer_upload(dst.get(), 0, expected.data(), s.dst_bytes));
  std::memcpy(expected.data() + s.dst_offset, data.data() + s.src_offset, s.bytes);
  vyre_buffer_copy_desc desc =
      CopyDesc(src.get(), s.src_offset, dst.get(), s.dst_offset, s.bytes, flags);
  if (async) {
    PendingHandle pending;
    ASSERT_VYRE_OK(vyre_buffer_copy_async(&desc, pending.out()));
    ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  } else {
    ASSERT_VYRE_OK(vyre_buffer_copy(&desc));
  }
  std::vector<uint8_t> got(s.dst_bytes, 0);
  ASSERT_VYRE_OK(vyre_buffer_download(dst.get(), 0, got.data(), s.dst_bytes));
  EXPECT_TRUE(SameBytes(got, expected, "destination"));
  std::vector<uint8_t> source(s.src_bytes, 0);
  ASSERT_VYRE_OK(vyre_buffer_download(src.get(), 0, source.data(), s.src_bytes));
  EXPECT_TRUE(SameBytes(source, data, "source (unchanged)"));
}

void EverySizeClass(RandomSource& rng, vyre_context src, vyre_context dst, uint32_t flags = 0) {
  for (const SizeClass& s : kSizeClasses) {
    for (bool async : {false, true}) CopyAndCheck(rng, src, dst, s, async, flags);
  }
}

vyre_context_desc DescFor(uint32_t ordinal) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.device_ordinal = ordinal;
  return desc;
}

// A spin (+1, 100 ms) on the source, the copy, a spin (+1) on the
// destination, all asynchronous: the destination must hold data + 2, the
// source data + 1.
void SpinCopySpin(RandomSource& rng, vyre_context src_context, vyre_context dst_context,
                  uint32_t flags, bool sync_copy = false) {
  SCOPED_TRACE(::testing::Message() << "flags " << flags << (sync_copy ? " sync" : " async"));
  const size_t n = kSpinThreads;
  const std::vector<uint32_t> data = rng.NonZeroU32(n);
  BufferHandle src, dst;
  ASSERT_TRUE(CreateBufferWith(src_context, data, &src));
  ASSERT_TRUE(CreateBufferWith(dst_context, std::vector<uint32_t>(n, kPoisonU32), &dst));
  ProgramHandle spin_src, spin_dst;
  ASSERT_TRUE(CreateTestProgram(src_context, "vyre_test_spin",
                                {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, kSpinThreads,
                                &spin_src));
  ASSERT_TRUE(CreateTestProgram(dst_context, "vyre_test_spin",
                                {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, kSpinThreads,
                                &spin_dst));
  const std::vector<uint32_t> params = {kSpinMicroseconds, kSpinThreads};
  const std::vector<vyre_dispatch_binding> on_src = {Resident(src.get())};
  const std::vector<vyre_dispatch_binding> on_dst = {Resident(dst.get())};
  vyre_dispatch_desc before = DispatchDesc(on_src, params);
  vyre_dispatch_desc after = DispatchDesc(on_dst, params);
  PendingHandle first, copy, last;
  ASSERT_VYRE_OK(vyre_dispatch_async(spin_src.get(), &before, first.out()));
  vyre_buffer_copy_desc desc = CopyDesc(src.get(), 0, dst.get(), 0, n * 4, flags);
  if (sync_copy) {
    // The source is busy spinning: the synchronous copy must wait for it.
    ASSERT_VYRE_OK(vyre_buffer_copy(&desc));
  } else {
    ASSERT_VYRE_OK(vyre_buffer_copy_async(&desc, copy.out()));
  }
  ASSERT_VYRE_OK(vyre_dispatch_async(spin_dst.get(), &after, last.out()));
  ASSERT_VYRE_OK(vyre_pending_wait(last.get(), VYRE_WAIT_FOREVER));
  if (!sync_copy) {
    ASSERT_VYRE_OK(vyre_pending_wait(copy.get(), VYRE_WAIT_FOREVER));
  }
  ASSERT_VYRE_OK(vyre_pending_wait(first.get(), VYRE_WAIT_FOREVER));
  std::vector<uint32_t> got;
  ASSERT_TRUE(DownloadU32(dst.get(), n, &got));
  EXPECT_TRUE(AllElementsEqual(got, [&](size_t i) { return data[i] + 2; },
                               "destination: spin, copy, spin"));
  ASSERT_TRUE(DownloadU32(src.get(), n, &got));
  EXPECT_TRUE(AllElementsEqual(got, [&](size_t i) { return data[i] + 1; }, "source: spin"));
}

// Threads copy and dispatch at once: each thread uploads its own random
// data to A (of `contexts[t % 2]`), incs A, copies A to B (of the other
// context), incs B, all asynchronous, then checks B = data + 2.
void ConcurrentCopiesAndDispatches(vyre_context a, vyre_context b) {
  constexpr int kThreads = 8;
  constexpr int kIterations = 20;
  constexpr size_t kCount = 64 * 1024;
  std::atomic<int> failures{0};
  std::string first_failure;
  std::atomic<bool> recorded{false};
  auto fail = [&](const std::string& why) {
    if (!recorded.exchange(true)) first_failure = why;
    ++failures;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      vyre_context from = t % 2 ? a : b;
      vyre_context to = t % 2 ? b : a;
      RandomSource rng(0x5eed0000u + t);
      ProgramHandle inc_from, inc_to;
      const std::vector<vyre_binding_decl> decls = {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")};
      if (!CreateTestProgram(from, "vyre_test_inc_u32", decls, 256, &inc_from) ||
          !CreateTestProgram(to, "vyre_test_inc_u32", decls, 256, &inc_to)) {
        return fail("program creation: " + DescribeLastError());
      }
      BufferHandle src, dst;
      if (vyre_buffer_alloc(from, kCount * 4, src.out()) != VYRE_STATUS_OK ||
          vyre_buffer_alloc(to, kCount * 4, dst.out()) != VYRE_STATUS_OK) {
        return fail("alloc: " + DescribeLastError());
      }
      const std::vector<uint32_t> params = {static_cast<uint32_t>(kCount)};
      const std::vector<vyre_dispatch_binding> on_src = {Resident(src.get())};
      const std::vector<vyre_dispatch_binding> on_dst = {Resident(dst.get())};
      vyre_dispatch_desc inc_src = DispatchDesc(on_src, params);
      vyre_dispatch_desc inc_dst = DispatchDesc(on_dst, params);
      for (int i = 0; i < kIterations && failures == 0; ++i) {
        const std::vector<uint32_t> data = rng.NonZeroU32(kCount);
        std::vector<uint32_t> got(kCount, kPoisonU32);
        PendingHandle p1, p2, p3;
        vyre_buffer_copy_desc desc = CopyDesc(src.get(), 0, dst.get(), 0, kCount * 4,
                                              i % 3 == 2 ? uint32_t{VYRE_BUFFER_COPY_FLAG_STAGED} : 0u);
        if (vyre_buffer_upload(src.get(), 0, data.data(), kCount * 4) != VYRE_STATUS_OK ||
            vyre_dispatch_async(inc_from.get(), &inc_src, p1.out()) != VYRE_STATUS_OK ||
            vyre_buffer_copy_async(&desc, p2.out()) != VYRE_STATUS_OK ||
            vyre_dispatch_async(inc_to.get(), &inc_dst, p3.out()) != VYRE_STATUS_OK ||
            vyre_pending_wait(p3.get(), VYRE_WAIT_FOREVER) != VYRE_STATUS_OK ||
            vyre_pending_wait(p2.get(), VYRE_WAIT_FOREVER) != VYRE_STATUS_OK ||
            vyre_pending_wait(p1.get(), VYRE_WAIT_FOREVER) != VYRE_STATUS_OK ||
            vyre_buffer_download(dst.get(), 0, got.data(), kCount * 4) != VYRE_STATUS_OK) {
          return fail("thread " + std::to_string(t) + ": " + DescribeLastError());
        }
        for (size_t k = 0; k < kCount; ++k) {
          if (got[k] != data[k] + 2) {
            return fail("thread " + std::to_string(t) + " iteration " + std::to_string(i) +
                        ": element " + std::to_string(k) + " is " + std::to_string(got[k]) +
                        ", expected " + std::to_string(data[k] + 2));
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
}

using CopyGpuTest = GpuTest;

TEST_F(CopyGpuTest, OneContextEverySizeClass) { EverySizeClass(rng(), context(), context()); }

TEST_F(CopyGpuTest, TwoContextsOfOneDeviceEverySizeClass) {
  ContextHandle other;
  vyre_context_desc desc = DescFor(device().ordinal);
  ASSERT_VYRE_OK(vyre_context_create(&desc, other.out()));
  EverySizeClass(rng(), context(), other.get());
  EverySizeClass(rng(), other.get(), context());
}

TEST_F(CopyGpuTest, OrderedAfterAndBeforeDispatches) {
  SpinCopySpin(rng(), context(), context(), 0);
  ContextHandle other;
  vyre_context_desc desc = DescFor(device().ordinal);
  ASSERT_VYRE_OK(vyre_context_create(&desc, other.out()));
  SpinCopySpin(rng(), context(), other.get(), 0);
  SpinCopySpin(rng(), other.get(), context(), 0);
  SpinCopySpin(rng(), context(), other.get(), 0, /*sync_copy=*/true);
}

TEST_F(CopyGpuTest, OverlapAndRangeRefusals) {
  BufferHandle a;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), 4096, a.out()));
  vyre_buffer_copy_desc desc = CopyDesc(a.get(), 0, a.get(), 100, 200);
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_buffer_copy(&desc));
  EXPECT_TRUE(MessageContains(LastErrorMessage(), {"overlap", "Fix:"}));
  desc = CopyDesc(a.get(), 4000, a.get(), 0, 97);
  EXPECT_VYRE_STATUS(VYRE_STATUS_OUT_OF_RANGE, vyre_buffer_copy(&desc));
  EXPECT_TRUE(MessageContains(LastErrorMessage(), {"src range", "Fix:"}));
}

TEST_F(CopyGpuTest, ThreadsCopyAndDispatchAtOnce) {
  ContextHandle other;
  vyre_context_desc desc = DescFor(device().ordinal);
  ASSERT_VYRE_OK(vyre_context_create(&desc, other.out()));
  ConcurrentCopiesAndDispatches(context(), other.get());
}

// --- two GPUs ------------------------------------------------------------------

class CopyTwoGpuTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    VYRE_GPU_NEED_TWO_DEVICES();
    vyre_context_desc desc = DescFor(1);
    ASSERT_VYRE_OK(vyre_context_create(&desc, second_.out()));
    uint32_t can = 0;
    ASSERT_VYRE_OK(vyre_device_can_access_peer(0, 1, &can));
    peers_ = can != 0;
    std::printf("devices 0 and 1 %s peers\n", peers_ ? "are" : "are not");
  }

  vyre_context second() const { return second_.get(); }

  ContextHandle second_;
  bool peers_ = false;
};

TEST_F(CopyTwoGpuTest, DeviceInfoReportsPeers) {
  uint32_t forward = 0, backward = 0;
  ASSERT_VYRE_OK(vyre_device_can_access_peer(0, 1, &forward));
  ASSERT_VYRE_OK(vyre_device_can_access_peer(1, 0, &backward));
  vyre_device_info info1 = VYRE_DEVICE_INFO_INIT;
  ASSERT_VYRE_OK(vyre_context_device_info(second(), &info1));
  EXPECT_EQ((device().peer_access_mask >> 1) & 1u, forward);
  EXPECT_EQ(info1.peer_access_mask & 1u, backward);
  EXPECT_EQ(device().peer_access_mask & 1u, 0u);
}

TEST_F(CopyTwoGpuTest, PeerEverySizeClassBothWays) {
  EverySizeClass(rng(), context(), second());
  EverySizeClass(rng(), second(), context());
}

TEST_F(CopyTwoGpuTest, StagedEverySizeClassBothWays) {
  EverySizeClass(rng(), context(), second(), VYRE_BUFFER_COPY_FLAG_STAGED);
  EverySizeClass(rng(), second(), context(), VYRE_BUFFER_COPY_FLAG_STAGED);
}

TEST_F(CopyTwoGpuTest, OrderedAfterAndBeforeDispatchesOnBothDevices) {
  for (uint32_t flags : {0u, static_cast<uint32_t>(VYRE_BUFFER_COPY_FLAG_STAGED)}) {
    SpinCopySpin(rng(), context(), second(), flags);
    SpinCopySpin(rng(), second(), context(), flags);
    SpinCopySpin(rng(), context(), second(), flags, /*sync_copy=*/true);
  }
}

TEST_F(CopyTwoGpuTest, ThreadsCopyAndDispatchAcrossDevicesAtOnce) {
  ConcurrentCopiesAndDispatches(context(), second());
}

}  // namespace
}  // namespace vyre_test
