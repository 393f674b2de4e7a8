// White-box tests of CopyWorkers (runtime/copy_workers.h): the threads that
// split a large memcpy. Every copy is checked byte for byte against the
// source; the sizes cross the part boundaries, and copies come back to back
// (helpers still watching), after the watch has run out (helpers asleep),
// and from several callers in turn, and started copies that the caller
// finishes after other work.
#include "runtime/transfer/copy_workers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace vyre {
namespace {

constexpr uint64_t kPart = CopyWorkers::kMinPartBytes;

std::vector<unsigned char> RandomBytes(uint64_t n, std::mt19937_64& rng) {
  std::vector<unsigned char> v(n);
  for (uint64_t i = 0; i < n; i += 8) {
    const uint64_t word = rng() | 0x0101010101010101ull;  // no 0 byte: unwritten shows
    std::memcpy(v.data() + i, &word, std::min<uint64_t>(8, n - i));
  }
  return v;
}

// Copies src into a zeroed destination with guard bytes around it, and
// checks every byte and both guards.
::testing::AssertionResult CopyAndCheck(CopyWorkers& workers, const std::vector<unsigned char>& src,
                                        uint64_t dst_shift, bool for_device = false) {
  constexpr unsigned char kGuard = 0xA5;
  std::vector<unsigned char> dst(src.size() + dst_shift + 64, kGuard);
  std::memset(dst.data() + dst_shift, 0, src.size());
  if (for_device) {
    workers.CopyForDevice(dst.data() + dst_shift, src.data(), src.size());
  } else {
    workers.Copy(dst.data() + dst_shift, src.data(), src.size());
  }
  for (uint64_t i = 0; i < dst_shift; ++i) {
    if (dst[i] != kGuard) return ::testing::AssertionFailure() << "wrote before dst at " << i;
  }
  if (src.empty() || std::memcmp(dst.data() + dst_shift, src.data(), src.size()) == 0) {
    // Fast path; the loop below names the first wrong byte.
  } else {
    for (uint64_t i = 0; i < src.size(); ++i) {
      if (dst[dst_shift + i] == src[i]) continue;
      return ::testing::AssertionFailure() << "byte " << i << " of " << src.size() << " is "
                                           << int{dst[dst_shift + i]} << ", not " << int{src[i]};
    }
  }
  for (uint64_t i = dst_shift + src.size(); i < dst.size(); ++i) {
    if (dst[i] != kGuard) return ::testing::AssertionFailure() << "wrote past dst at " << i;
  }
  return ::testing::AssertionSuccess();
}

TEST(CopyWorkersTest, SizesAroundPartBoundariesMatchTheSource) {
  std::mt19937_64 rng(7);
  for (uint32_t threads : {1u, 2u, 3u, 8u}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    CopyWorkers workers(threads);
    for (uint64_t size : {uint64_t{1}, uint64_t{4095}, kPart - 1, kPart, kPart + 1, 2 * kPart - 1,
                          2 * kPart, 2 * kPart + 1, 8 * kPart + 4097, 16 * kPart + 13,
                          uint64_t{3} << 20}) {
      SCOPED_TRACE("size " + std::to_string(size));
      const std::vector<unsigned char> src = RandomBytes(size, rng);
      EXPECT_TRUE(CopyAndCheck(workers, src, rng() % 64));
      EXPECT_TRUE(CopyAndCheck(workers, src, rng() % 64, /*for_device=*/true));
    }
  }
}

TEST(CopyWorkersTest, StreamingCopiesOfEveryAlignmentMatchTheSource) {
  // CopyForDevice's streaming stores start at a 16-byte boundary of the
  // destination and go 64 bytes at a time: every head and tail length.
  std::mt19937_64 rng(5);
  CopyWorkers workers(1);
  for (uint64_t size = 0; size < 200; ++size) {
    const std::vector<unsigned char> src = RandomBytes(size, rng);
    for (uint64_t shift = 0; shift < 20; ++shift) {
      ASSERT_TRUE(CopyAndCheck(workers, src, shift, /*for_device=*/true))
          << "size " << size << ", destination shift " << shift;
    }
  }
}

TEST(CopyWorkersTest, BackToBackCopiesWhileHelpersWatch) {
  std::mt19937_64 rng(11);
  CopyWorkers workers(8);
  for (int i = 0; i < 200; ++i) {
    const uint64_t size = 2 * kPart + rng() % (20 * kPart);
    const std::vector<unsigned char> src = RandomBytes(size, rng);
    ASSERT_TRUE(CopyAndCheck(workers, src, rng() % 64, /*for_device=*/i % 2 == 0)) << "copy " << i;
  }
}

TEST(CopyWorkersTest, CopiesAfterTheHelpersFellAsleep) {
  std::mt19937_64 rng(13);
  CopyWorkers workers(4);
  for (int i = 0; i < 4; ++i) {
    const std::vector<unsigned char> src = RandomBytes(6 * kPart + 123, rng);
    ASSERT_TRUE(CopyAndCheck(workers, src, 0)) << "copy " << i;
    // Past the watch: the helpers sleep and the next copy wakes them.
    std::this_thread::sleep_for(std::chrono::nanoseconds(3 * CopyWorkers::kWatchNs));
  }
}

TEST(CopyWorkersTest, CallersTakeTurns) {
  // One copy at a time (the staging ring's lock): callers on several threads.
  CopyWorkers workers(4);
  std::mutex turn;
  std::vector<std::thread> callers;
  std::vector<int> failures(4, 0);
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      std::mt19937_64 rng(100 + c);
      for (int i = 0; i < 50; ++i) {
        const std::vector<unsigned char> src = RandomBytes(kPart * (2 + rng() % 6) + rng() % 999, rng);
        std::lock_guard lock(turn);
        if (!CopyAndCheck(workers, src, rng() % 64)) ++failures[c];
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < 4; ++c) EXPECT_EQ(failures[c], 0) << "caller " << c;
}

TEST(CopyWorkersTest, StartedCopiesFinishAfterOtherWork) {
  // The staging ring enqueues a DMA between StartCopy and FinishCopy: the
  // helpers copy meanwhile, the caller takes what is left, and every byte
  // is there once FinishCopy returns, whether the helpers were watching,
  // asleep, or the copy was too small to hand out.
  std::mt19937_64 rng(19);
  CopyWorkers workers(6);
  for (int i = 0; i < 60; ++i) {
    const uint64_t size = i % 5 == 0 ? rng() % kPart : kPart + rng() % (16 * kPart);
    const std::vector<unsigned char> src = RandomBytes(size, rng);
    std::vector<unsigned char> dst(size + 64, 0);
    const uint64_t shift = rng() % 64;
    const bool streaming = i % 2 == 1;
    workers.StartCopy(dst.data() + shift, src.data(), size, streaming);
    if (i % 3 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(20 + rng() % 50));
    }
    if (i % 7 == 0) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(3 * CopyWorkers::kWatchNs));
    }
    workers.FinishCopy();
    ASSERT_EQ(std::memcmp(dst.data() + shift, src.data(), size), 0)
        << "copy " << i << ", " << size << " bytes";
    for (uint64_t b = 0; b < shift; ++b) ASSERT_EQ(dst[b], 0) << "wrote before dst, copy " << i;
    for (uint64_t b = shift + size; b < dst.size(); ++b) {
      ASSERT_EQ(dst[b], 0) << "wrote past dst, copy " << i;
    }
  }
  workers.FinishCopy();  // with nothing started: returns at once
}

TEST(CopyWorkersTest, DestroyedWhileHelpersWatchOrSleep) {
  std::mt19937_64 rng(17);
  const std::vector<unsigned char> src = RandomBytes(8 * kPart, rng);
  {
    CopyWorkers watching(8);
    EXPECT_TRUE(CopyAndCheck(watching, src, 0));
  }  // helpers still watching
  {
    CopyWorkers sleeping(8);
    EXPECT_TRUE(CopyAndCheck(sleeping, src, 0));
    std::this_thread::sleep_for(std::chrono::nanoseconds(3 * CopyWorkers::kWatchNs));
  }  // helpers asleep
  { CopyWorkers never_started(8); }
}

}  // namespace
}  // namespace vyre
