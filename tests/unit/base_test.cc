// White-box tests of src/base: checked arithmetic, the handle registry, the
// struct_size rule and status payloads.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/checked_math.h"
#include "base/handle_registry.h"
#include "base/last_error.h"
#include "base/status.h"
#include "base/struct_size.h"
#include "struct_size_util.h"
#include "vyre_cuda.h"

namespace vyre {
namespace {

constexpr uint64_t kMax = UINT64_MAX;

bool HasFix(const absl::Status& status) {
  return std::string(status.message()).find("Fix:") != std::string::npos;
}

::testing::AssertionResult IsStatus(const absl::Status& status, vyre_status code) {
  if (PublicCode(status) != code) {
    return ::testing::AssertionFailure() << "public code " << int(PublicCode(status))
                                         << ", expected " << int(code) << ": "
                                         << status.message();
  }
  if (!HasFix(status)) return ::testing::AssertionFailure() << "no Fix: in " << status.message();
  return ::testing::AssertionSuccess();
}

#define EXPECT_STATUS(expr, code) EXPECT_TRUE(IsStatus((expr), (code)))

// ---------------------------------------------------------------------------
// checked_math.h
// ---------------------------------------------------------------------------

TEST(CheckedMathTest, Add) {
  EXPECT_EQ(CheckedAdd(2, 3), 5u);
  EXPECT_EQ(CheckedAdd(kMax - 1, 1), kMax);
  EXPECT_EQ(CheckedAdd(kMax, 0), kMax);
  EXPECT_FALSE(CheckedAdd(kMax, 1).has_value());
  EXPECT_FALSE(CheckedAdd(kMax / 2 + 1, kMax / 2 + 1).has_value());
}

TEST(CheckedMathTest, Mul) {
  EXPECT_EQ(CheckedMul(6, 7), 42u);
  EXPECT_EQ(CheckedMul(kMax, 1), kMax);
  EXPECT_EQ(CheckedMul(kMax, 0), 0u);
  EXPECT_EQ(CheckedMul(uint64_t{1} << 32, (uint64_t{1} << 32) - 1),
            kMax - ((uint64_t{1} << 32) - 1))
      << "2^64 - 2^32, the largest product of these factors that fits";
  EXPECT_FALSE(CheckedMul(uint64_t{1} << 32, uint64_t{1} << 32).has_value());
  EXPECT_FALSE(CheckedMul(kMax, 2).has_value());
}

TEST(CheckedMathTest, AlignUp) {
  EXPECT_EQ(CheckedAlignUp(0, 256), 0u);
  EXPECT_EQ(CheckedAlignUp(1, 256), 256u);
  EXPECT_EQ(CheckedAlignUp(256, 256), 256u);
  EXPECT_EQ(CheckedAlignUp(257, 256), 512u);
  EXPECT_EQ(CheckedAlignUp(13, 1), 13u);
  EXPECT_EQ(CheckedAlignUp(kMax - 255, 256), kMax - 255) << "already aligned at the top";
  EXPECT_FALSE(CheckedAlignUp(kMax - 254, 256).has_value()) << "rounding up overflows";
  EXPECT_FALSE(CheckedAlignUp(kMax, 2).has_value());
  EXPECT_FALSE(CheckedAlignUp(10, 0).has_value()) << "alignment 0";
  EXPECT_FALSE(CheckedAlignUp(10, 3).has_value()) << "not a power of two";
  EXPECT_FALSE(CheckedAlignUp(10, 96).has_value()) << "not a power of two";
}

TEST(CheckedMathTest, RangeInside) {
  EXPECT_TRUE(RangeInside(0, 64, 64));
  EXPECT_TRUE(RangeInside(60, 4, 64));
  EXPECT_TRUE(RangeInside(64, 0, 64)) << "empty range at the end";
  EXPECT_TRUE(RangeInside(0, 0, 0));
  EXPECT_FALSE(RangeInside(61, 4, 64));
  EXPECT_FALSE(RangeInside(65, 0, 64));
  EXPECT_FALSE(RangeInside(0, 1, 0));
  EXPECT_FALSE(RangeInside(kMax, 2, kMax)) << "offset + length wraps";
  EXPECT_FALSE(RangeInside(2, kMax, kMax)) << "offset + length wraps";
  EXPECT_TRUE(RangeInside(kMax - 1, 1, kMax));
}

TEST(CheckedMathTest, NextPowerOfTwo) {
  EXPECT_EQ(NextPowerOfTwo(0), 1u);
  EXPECT_EQ(NextPowerOfTwo(1), 1u);
  EXPECT_EQ(NextPowerOfTwo(2), 2u);
  EXPECT_EQ(NextPowerOfTwo(3), 4u);
  EXPECT_EQ(NextPowerOfTwo(1000), 1024u);
  EXPECT_EQ(NextPowerOfTwo(1024), 1024u);
  EXPECT_EQ(NextPowerOfTwo(1025), 2048u);
  EXPECT_EQ(NextPowerOfTwo((uint64_t{1} << 40) + 1), uint64_t{1} << 41);
  EXPECT_EQ(NextPowerOfTwo(uint64_t{1} << 63), uint64_t{1} << 63);
  EXPECT_FALSE(NextPowerOfTwo((uint64_t{1} << 63) + 1).has_value());
  EXPECT_FALSE(NextPowerOfTwo(kMax).has_value());
}

// ---------------------------------------------------------------------------
// handle_registry.h
// ---------------------------------------------------------------------------

struct Thing {
  explicit Thing(int v) : value(v) {}
  int value;
};

TEST(HandleBitsTest, PackAndUnpack) {
  // [63:56] tag | [55:24] generation | [23:0] slot.
  EXPECT_EQ(handle_bits::Pack(HandleType::kBuffer, 0x11223344, 0x556677),
            uint64_t{0x0211223344556677});
  uint64_t bits = handle_bits::Pack(HandleType::kProgram, 0x89ABCDEF, 0x123456);
  EXPECT_EQ(handle_bits::TypeOf(bits), static_cast<uint8_t>(HandleType::kProgram));
  EXPECT_EQ(handle_bits::GenerationOf(bits), 0x89ABCDEFu);
  EXPECT_EQ(handle_bits::SlotOf(bits), 0x123456u);
  // The slot is 24 bits wide; wider values are cut, never spill into the generation.
  uint64_t wide = handle_bits::Pack(HandleType::kContext, 0xFFFFFFFF, 0xFF123456);
  EXPECT_EQ(handle_bits::TypeOf(wide), static_cast<uint8_t>(HandleType::kContext));
  EXPECT_EQ(handle_bits::GenerationOf(wide), 0xFFFFFFFFu);
  EXPECT_EQ(handle_bits::SlotOf(wide), 0x123456u);
  // The shipped registry uses every bit of both fields.
  EXPECT_EQ(HandleRegistry<int>::kMaxGeneration, 0xFFFFFFFFu);
  EXPECT_EQ(HandleRegistry<int>::kMaxSlots, 1u << 24);
}

TEST(HandleRegistryTest, InsertAndLookup) {
  HandleRegistry<Thing> registry(HandleType::kBuffer);
  auto first = registry.Insert(std::make_shared<Thing>(1));
  auto second = registry.Insert(std::make_shared<Thing>(2));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(*first, 0u) << "0 means none";
  EXPECT_NE(*first, *second);
  EXPECT_EQ(handle_bits::TypeOf(*first), static_cast<uint8_t>(HandleType::kBuffer));
  EXPECT_EQ(registry.live(), 2u);
  auto a = registry.Lookup(*first, "test");
  auto b = registry.Lookup(*second, "test");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->value, 1);
  EXPECT_EQ((*b)->value, 2);
}

TEST(HandleRegistryTest, ZeroHandleIsInvalid) {
  HandleRegistry<Thing> registry(HandleType::kContext);
  ASSERT_TRUE(registry.Insert(std::make_shared<Thing>(1)).ok());
  EXPECT_STATUS(registry.Lookup(0, "test").status(), VYRE_STATUS_INVALID_HANDLE);
  EXPECT_STATUS(registry.Remove(0, "test").status(), VYRE_STATUS_INVALID_HANDLE);
}

TEST(HandleRegistryTest, WrongTypeIsInvalidNotStale) {
  HandleRegistry<Thing> buffers(HandleType::kBuffer);
  HandleRegistry<Thing> programs(HandleType::kProgram);
  auto buffer = buffers.Insert(std::make_shared<Thing>(1));
  auto program = programs.Insert(std::make_shared<Thing>(2));
  ASSERT_TRUE(buffer.ok() && program.ok());
  EXPECT_STATUS(programs.Lookup(*buffer, "test").status(), VYRE_STATUS_INVALID_HANDLE);
  EXPECT_STATUS(buffers.Lookup(*program, "test").status(), VYRE_STATUS_INVALID_HANDLE);
  // Even a destroyed buffer's handle is "wrong type" to the program registry.
  ASSERT_TRUE(buffers.Remove(*buffer, "test").ok());
  EXPECT_STATUS(programs.Lookup(*buffer, "test").status(), VYRE_STATUS_INVALID_HANDLE);
  absl::Status wrong = programs.Lookup(*buffer, "test").status();
  EXPECT_NE(std::string(wrong.message()).find("buffer"), std::string::npos)
      << "the message should name the type the handle has: " << wrong.message();
}

TEST(HandleRegistryTest, ForgedHandlesAreInvalid) {
  HandleRegistry<Thing> registry(HandleType::kPending);
  auto live = registry.Insert(std::make_shared<Thing>(1));
  ASSERT_TRUE(live.ok());
  const uint8_t tag = static_cast<uint8_t>(HandleType::kPending);
  const uint32_t generation = handle_bits::GenerationOf(*live);
  const std::vector<uint64_t> forged = {
      handle_bits::Pack(HandleType::kPending, generation, 999),        // slot never issued
      handle_bits::Pack(HandleType::kPending, generation + 1, 0),      // future generation
      handle_bits::Pack(HandleType::kPending, 0, 0),                   // generation 0
      (uint64_t{0xEE} << 56) | (*live & ((uint64_t{1} << 56) - 1)),  // unknown tag
      (uint64_t{tag} << 56) | 0xFFFFFFFFu,
      ~uint64_t{0},
  };
  for (uint64_t bits : forged) {
    EXPECT_STATUS(registry.Lookup(bits, "test").status(), VYRE_STATUS_INVALID_HANDLE)
        << std::hex << bits;
    EXPECT_STATUS(registry.Remove(bits, "test").status(), VYRE_STATUS_INVALID_HANDLE)
        << std::hex << bits;
  }
  EXPECT_TRUE(registry.Lookup(*live, "test").ok()) << "forged lookups disturbed a live handle";
  EXPECT_EQ(registry.live(), 1u);
}

TEST(HandleRegistryTest, RemovedHandlesAreStaleForever) {
  HandleRegistry<Thing> registry(HandleType::kBuffer);
  auto handle = registry.Insert(std::make_shared<Thing>(1));
  ASSERT_TRUE(handle.ok());
  auto removed = registry.Remove(*handle, "test");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ((*removed)->value, 1) << "Remove hands back the object";
  EXPECT_EQ(registry.live(), 0u);
  EXPECT_STATUS(registry.Lookup(*handle, "test").status(), VYRE_STATUS_STALE_HANDLE);
  EXPECT_STATUS(registry.Remove(*handle, "test").status(), VYRE_STATUS_STALE_HANDLE);

  // The slot is reused with a new generation; the old handle stays stale.
  std::vector<uint64_t> past = {*handle};
  for (int i = 0; i < 50; ++i) {
    auto next = registry.Insert(std::make_shared<Thing>(100 + i));
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(handle_bits::SlotOf(*next), handle_bits::SlotOf(*handle)) << "slot reused";
    for (uint64_t old : past) {
      EXPECT_NE(old, *next);
      EXPECT_STATUS(registry.Lookup(old, "test").status(), VYRE_STATUS_STALE_HANDLE);
    }
    auto found = registry.Lookup(*next, "test");
    ASSERT_TRUE(found.ok());
    EXPECT_EQ((*found)->value, 100 + i);
    ASSERT_TRUE(registry.Remove(*next, "test").ok());
    past.push_back(*next);
  }
}

TEST(HandleRegistryTest, ALookedUpObjectOutlivesItsRemoval) {
  HandleRegistry<Thing> registry(HandleType::kProgram);
  auto object = std::make_shared<Thing>(7);
  std::weak_ptr<Thing> watch = object;
  auto handle = registry.Insert(std::move(object));
  ASSERT_TRUE(handle.ok());
  auto in_use = registry.Lookup(*handle, "test");
  ASSERT_TRUE(in_use.ok());
  ASSERT_TRUE(registry.Remove(*handle, "test").ok());
  EXPECT_FALSE(watch.expired()) << "the caller's reference keeps the object alive";
  EXPECT_EQ((*in_use)->value, 7);
  in_use = absl::StatusOr<std::shared_ptr<Thing>>(absl::CancelledError());
  EXPECT_TRUE(watch.expired()) << "the object is destroyed with its last reference";
}

TEST(HandleRegistryTest, ManyLiveHandlesAreDistinct) {
  HandleRegistry<Thing> registry(HandleType::kContext);
  std::set<uint64_t> handles;
  for (int i = 0; i < 1000; ++i) {
    auto h = registry.Insert(std::make_shared<Thing>(i));
    ASSERT_TRUE(h.ok());
    EXPECT_TRUE(handles.insert(*h).second);
  }
  EXPECT_EQ(registry.live(), 1000u);
  for (uint64_t h : handles) EXPECT_TRUE(registry.Lookup(h, "test").ok());
}

TEST(HandleRegistryTest, ConcurrentInsertLookupRemove) {
  HandleRegistry<Thing> registry(HandleType::kBuffer);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        auto h = registry.Insert(std::make_shared<Thing>(t * 10000 + i));
        if (!h.ok()) { ++failures; continue; }
        auto found = registry.Lookup(*h, "test");
        if (!found.ok() || (*found)->value != t * 10000 + i) ++failures;
        if (!registry.Remove(*h, "test").ok()) ++failures;
        if (PublicCode(registry.Lookup(*h, "test").status()) != VYRE_STATUS_STALE_HANDLE) {
          ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(registry.live(), 0u);
}

// A registry with 3 generations per slot (2 bits) and 4 slots: 12 handles in all.
using TinyRegistry = HandleRegistry<Thing, 2, 4>;

TEST(HandleRegistryTest, TinyGenerationNeverRepeatsAHandleUntilExhausted) {
  static_assert(TinyRegistry::kMaxGeneration == 3, "2-bit generation");
  TinyRegistry registry(HandleType::kBuffer);
  std::set<uint64_t> issued;
  std::vector<uint64_t> order;
  absl::Status last;
  for (int i = 0; i < 1000; ++i) {
    auto h = registry.Insert(std::make_shared<Thing>(i));
    if (!h.ok()) {
      last = h.status();
      break;
    }
    ASSERT_TRUE(issued.insert(*h).second) << "handle 0x" << std::hex << *h << " issued twice";
    ASSERT_TRUE(registry.Lookup(*h, "test").ok());
    ASSERT_TRUE(registry.Remove(*h, "test").ok());
    order.push_back(*h);
    // Every handle issued so far, of every earlier generation, is stale.
    for (uint64_t old : order) {
      absl::Status lookup = registry.Lookup(old, "test").status();
      ASSERT_TRUE(IsStatus(lookup, VYRE_STATUS_STALE_HANDLE)) << std::hex << old;
      EXPECT_TRUE(HasFix(lookup)) << lookup.message();
      EXPECT_STATUS(registry.Remove(old, "test").status(), VYRE_STATUS_STALE_HANDLE);
    }
  }
  EXPECT_EQ(issued.size(), 4u * 3u) << "every slot issues each of its generations once";
  EXPECT_EQ(registry.retired(), 4u);
  EXPECT_EQ(registry.live(), 0u);
  EXPECT_STATUS(last, VYRE_STATUS_LIMIT_EXCEEDED);
  EXPECT_TRUE(HasFix(last)) << last.message();
  EXPECT_NE(std::string(last.message()).find("handle space is exhausted"), std::string::npos)
      << last.message();
  EXPECT_NE(std::string(last.message()).find("retired"), std::string::npos) << last.message();
  // Exhaustion is permanent and stays an error, never a reused handle.
  for (int i = 0; i < 10; ++i) {
    EXPECT_STATUS(registry.Insert(std::make_shared<Thing>(i)).status(),
                  VYRE_STATUS_LIMIT_EXCEEDED);
  }
  for (uint64_t old : order) {
    EXPECT_STATUS(registry.Lookup(old, "test").status(), VYRE_STATUS_STALE_HANDLE);
  }
  // A lone object's slot issued generations 1, 2, 3, retired, and a fresh slot followed.
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(handle_bits::SlotOf(order[i]), i / 3) << i;
    EXPECT_EQ(handle_bits::GenerationOf(order[i]), 1 + i % 3) << i;
  }
}

TEST(HandleRegistryTest, ARetiredSlotIsNeverReused) {
  HandleRegistry<Thing, 2, 16> registry(HandleType::kPending);
  // One object made and destroyed over and over: its slot issues 3 generations,
  // retires, and the next object gets a fresh slot.
  std::set<uint64_t> issued;
  std::set<uint32_t> retired_slots;
  for (int i = 0; i < 16 * 3; ++i) {
    auto h = registry.Insert(std::make_shared<Thing>(i));
    ASSERT_TRUE(h.ok()) << i << ": " << h.status().message();
    const uint32_t slot = handle_bits::SlotOf(*h);
    EXPECT_EQ(retired_slots.count(slot), 0u) << "retired slot " << slot << " came back";
    EXPECT_EQ(slot, static_cast<uint32_t>(i / 3));
    EXPECT_TRUE(issued.insert(*h).second);
    ASSERT_TRUE(registry.Remove(*h, "test").ok());
    if (handle_bits::GenerationOf(*h) == decltype(registry)::kMaxGeneration) {
      retired_slots.insert(slot);
    }
    EXPECT_EQ(registry.retired(), retired_slots.size());
  }
  EXPECT_EQ(retired_slots.size(), 16u);
  EXPECT_STATUS(registry.Insert(std::make_shared<Thing>(0)).status(),
                VYRE_STATUS_LIMIT_EXCEEDED);
}

TEST(HandleRegistryTest, FreedSlotsAreReusedOldestFirst) {
  HandleRegistry<Thing> registry(HandleType::kProgram);
  std::vector<uint64_t> handles;
  for (int i = 0; i < 6; ++i) {
    auto h = registry.Insert(std::make_shared<Thing>(i));
    ASSERT_TRUE(h.ok());
    handles.push_back(*h);
  }
  // Freed in the order 3, 0, 5, 1: they come back in that order.
  const std::vector<int> freed = {3, 0, 5, 1};
  for (int i : freed) ASSERT_TRUE(registry.Remove(handles[i], "test").ok());
  for (int i : freed) {
    auto h = registry.Insert(std::make_shared<Thing>(100 + i));
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(handle_bits::SlotOf(*h), handle_bits::SlotOf(handles[i]));
    EXPECT_EQ(handle_bits::GenerationOf(*h), handle_bits::GenerationOf(handles[i]) + 1);
  }
  // With no slot free, a new one is made; a just-freed slot is the last to come back.
  auto fresh = registry.Insert(std::make_shared<Thing>(7));
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(handle_bits::SlotOf(*fresh), 6u);
  ASSERT_TRUE(registry.Remove(handles[2], "test").ok());  // slot 2, freed first
  ASSERT_TRUE(registry.Remove(*fresh, "test").ok());      // slot 6, freed last
  auto next = registry.Insert(std::make_shared<Thing>(8));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(handle_bits::SlotOf(*next), 2u);
  auto after = registry.Insert(std::make_shared<Thing>(9));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(handle_bits::SlotOf(*after), 6u);
}

TEST(HandleRegistryTest, AllSlotsLiveIsLimitExceededUntilOneIsFreed) {
  HandleRegistry<Thing, 3, 4> registry(HandleType::kContext);
  std::vector<uint64_t> live;
  for (int i = 0; i < 4; ++i) {
    auto h = registry.Insert(std::make_shared<Thing>(i));
    ASSERT_TRUE(h.ok());
    live.push_back(*h);
  }
  absl::Status full = registry.Insert(std::make_shared<Thing>(4)).status();
  EXPECT_STATUS(full, VYRE_STATUS_LIMIT_EXCEEDED);
  EXPECT_TRUE(HasFix(full)) << full.message();
  EXPECT_NE(std::string(full.message()).find("exhausted"), std::string::npos)
      << full.message();
  EXPECT_EQ(registry.live(), 4u) << "a refused insert changes nothing";
  for (size_t i = 0; i < live.size(); ++i) {
    auto found = registry.Lookup(live[i], "test");
    ASSERT_TRUE(found.ok());
    EXPECT_EQ((*found)->value, static_cast<int>(i));
  }
  ASSERT_TRUE(registry.Remove(live[1], "test").ok());
  auto again = registry.Insert(std::make_shared<Thing>(5));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(handle_bits::SlotOf(*again), 1u);
  EXPECT_NE(*again, live[1]);
}

TEST(HandleRegistryTest, ForgedGenerationsBeyondTheWidthAreInvalid) {
  TinyRegistry registry(HandleType::kGraph);
  auto h = registry.Insert(std::make_shared<Thing>(1));
  ASSERT_TRUE(h.ok());
  const uint32_t slot = handle_bits::SlotOf(*h);
  for (uint32_t generation : {TinyRegistry::kMaxGeneration + 1, 0x80000000u, 0xFFFFFFFFu}) {
    const uint64_t forged = handle_bits::Pack(HandleType::kGraph, generation, slot);
    EXPECT_STATUS(registry.Lookup(forged, "test").status(), VYRE_STATUS_INVALID_HANDLE);
    EXPECT_STATUS(registry.Remove(forged, "test").status(), VYRE_STATUS_INVALID_HANDLE);
  }
  // Slot 0 is the only free slot, so it issues its generations 2 and 3 and retires:
  // its past generations are stale, a forged future one is invalid.
  ASSERT_TRUE(registry.Remove(*h, "test").ok());
  for (int i = 0; i < 2; ++i) {
    auto next = registry.Insert(std::make_shared<Thing>(2));
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(handle_bits::SlotOf(*next), slot);
    ASSERT_TRUE(registry.Remove(*next, "test").ok());
  }
  ASSERT_EQ(registry.retired(), 1u);
  for (uint32_t generation = 1; generation <= TinyRegistry::kMaxGeneration; ++generation) {
    EXPECT_STATUS(registry.Lookup(handle_bits::Pack(HandleType::kGraph, generation, slot),
                                  "test").status(),
                  VYRE_STATUS_STALE_HANDLE);
  }
  EXPECT_STATUS(registry.Lookup(handle_bits::Pack(HandleType::kGraph,
                                                  TinyRegistry::kMaxGeneration + 1, slot),
                                "test").status(),
                VYRE_STATUS_INVALID_HANDLE);
}

TEST(HandleRegistryTest, ConcurrentUseToExhaustionNeverRepeatsAHandle) {
  constexpr uint32_t kSlots = 64;
  HandleRegistry<Thing, 3, kSlots> registry(HandleType::kBuffer);  // 7 generations a slot
  constexpr int kThreads = 8;
  std::vector<std::vector<uint64_t>> issued(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (true) {
        auto h = registry.Insert(std::make_shared<Thing>(t));
        if (!h.ok()) {
          if (PublicCode(h.status()) != VYRE_STATUS_LIMIT_EXCEEDED) ++failures;
          // Another thread may still hold the last free slots; stop once all are retired.
          if (registry.retired() == kSlots) return;
          std::this_thread::yield();
          continue;
        }
        issued[t].push_back(*h);
        auto found = registry.Lookup(*h, "test");
        if (!found.ok() || (*found)->value != t) ++failures;
        if (!registry.Remove(*h, "test").ok()) ++failures;
        if (PublicCode(registry.Lookup(*h, "test").status()) != VYRE_STATUS_STALE_HANDLE) {
          ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  std::set<uint64_t> all;
  size_t total = 0;
  for (const auto& list : issued) {
    total += list.size();
    all.insert(list.begin(), list.end());
  }
  EXPECT_EQ(total, size_t{kSlots} * 7);
  EXPECT_EQ(all.size(), total) << "a handle was issued twice";
  EXPECT_EQ(registry.live(), 0u);
}

TEST(HandleRegistryTest, ShippedWidthNeverRepeatsAHandleOver100kCycles) {
  HandleRegistry<Thing> registry(HandleType::kPending);
  std::unordered_set<uint64_t> issued;
  issued.reserve(200000);
  // A few long-lived objects beside one made and destroyed over and over, and
  // a small rotating window, so both a lone slot and the FIFO are exercised.
  std::vector<uint64_t> keep;
  for (int i = 0; i < 3; ++i) {
    auto h = registry.Insert(std::make_shared<Thing>(-1));
    ASSERT_TRUE(h.ok());
    ASSERT_TRUE(issued.insert(*h).second);
    keep.push_back(*h);
  }
  std::deque<uint64_t> window;
  for (int i = 0; i < 100000; ++i) {
    auto h = registry.Insert(std::make_shared<Thing>(i));
    ASSERT_TRUE(h.ok()) << h.status().message();
    ASSERT_TRUE(issued.insert(*h).second) << "cycle " << i << ": handle 0x" << std::hex << *h
                                          << " issued twice";
    window.push_back(*h);
    if (window.size() > static_cast<size_t>(i % 5)) {
      ASSERT_TRUE(registry.Remove(window.front(), "test").ok());
      window.pop_front();
    }
  }
  for (uint64_t h : keep) EXPECT_TRUE(registry.Lookup(h, "test").ok());
  EXPECT_EQ(registry.retired(), 0u);
}

TEST(HandleRegistryTest, ErrorMessagesNameTheMaker) {
  for (HandleType type : {HandleType::kContext, HandleType::kBuffer, HandleType::kProgram,
                          HandleType::kPending}) {
    for (bool stale : {false, true}) {
      absl::Status status = HandleError("doing it", type, handle_bits::Pack(type, 1, 0), stale);
      EXPECT_EQ(PublicCode(status),
                stale ? VYRE_STATUS_STALE_HANDLE : VYRE_STATUS_INVALID_HANDLE);
      EXPECT_TRUE(HasFix(status)) << status.message();
      EXPECT_NE(std::string(status.message()).find(HandleTypeMaker(type)), std::string::npos)
          << status.message();
      EXPECT_NE(std::string(status.message()).find("doing it"), std::string::npos);
    }
  }
}

// ---------------------------------------------------------------------------
// struct_size.h
// ---------------------------------------------------------------------------

struct DescV2 {
  uint32_t struct_size;
  uint32_t a;
  uint64_t b;
  uint64_t added_in_v2;
};
constexpr size_t kV1Size = offsetof(DescV2, added_in_v2);  // 16

TEST(StructSizeTest, CheckStructSize) {
  DescV2 d{sizeof(DescV2), 1, 2, 3};
  EXPECT_TRUE(CheckStructSize("t", "DescV2", &d, sizeof(DescV2), kV1Size, sizeof(DescV2)).ok());
  EXPECT_TRUE(CheckStructSize("t", "DescV2", &d, kV1Size, kV1Size, sizeof(DescV2)).ok())
      << "a v1 struct is accepted";
  for (uint32_t size : {0u, 4u, uint32_t(kV1Size - 1)}) {
    EXPECT_STATUS(CheckStructSize("t", "DescV2", &d, size, kV1Size, sizeof(DescV2)),
                  VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);
  }
}

TEST(StructSizeTest, LargerStructNeedsAZeroTail) {
  DescV2 value{0, 1, 2, 3};
  vyre_test::LargerStruct<DescV2> zero_tail(value, 16, 0);
  EXPECT_TRUE(CheckStructSize("t", "DescV2", zero_tail.get(), sizeof(DescV2) + 16, kV1Size,
                              sizeof(DescV2))
                  .ok());
  for (size_t position = 0; position < 16; ++position) {
    vyre_test::LargerStruct<DescV2> nonzero(value, 16, 0);
    nonzero.bytes()[sizeof(DescV2) + position] = 1;
    EXPECT_STATUS(CheckStructSize("t", "DescV2", nonzero.get(), sizeof(DescV2) + 16, kV1Size,
                                  sizeof(DescV2)),
                  VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);
  }
}

TEST(StructSizeTest, ReadDescriptorFillsMissingFieldsWithZero) {
  DescV2 v1_caller{uint32_t(kV1Size), 11, 22, 0xBADBADBAD};  // added_in_v2 beyond its size
  DescV2 out{99, 99, 99, 99};
  ASSERT_TRUE(ReadDescriptor("t", "DescV2", &v1_caller, &out, kV1Size).ok());
  EXPECT_EQ(out.struct_size, kV1Size);
  EXPECT_EQ(out.a, 11u);
  EXPECT_EQ(out.b, 22u);
  EXPECT_EQ(out.added_in_v2, 0u) << "bytes past the caller's struct_size must not be read";

  DescV2 full{sizeof(DescV2), 1, 2, 3};
  ASSERT_TRUE(ReadDescriptor("t", "DescV2", &full, &out).ok());
  EXPECT_EQ(out.added_in_v2, 3u);
}

TEST(StructSizeTest, ReadDescriptorRejects) {
  DescV2 out{};
  EXPECT_STATUS(ReadDescriptor<DescV2>("t", "DescV2", nullptr, &out),
                VYRE_STATUS_INVALID_ARGUMENT);
  DescV2 small{8, 1, 2, 3};
  EXPECT_STATUS(ReadDescriptor("t", "DescV2", &small, &out), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);
  vyre_test::LargerStruct<DescV2> nonzero(DescV2{0, 1, 2, 3}, 8, 0x42);
  EXPECT_STATUS(ReadDescriptor("t", "DescV2", nonzero.get(), &out),
                VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);
}

TEST(StructSizeTest, WriteOutStructWritesOnlyTheCallersSize) {
  const DescV2 value{0, 5, 6, 7};
  // A v1 caller: the v2 field's bytes belong to someone else.
  DescV2 v1_out{uint32_t(kV1Size), 0, 0, 0xC0FFEE};
  ASSERT_TRUE(WriteOutStruct("t", "DescV2", &v1_out, value, kV1Size).ok());
  EXPECT_EQ(v1_out.struct_size, kV1Size) << "struct_size is kept";
  EXPECT_EQ(v1_out.a, 5u);
  EXPECT_EQ(v1_out.b, 6u);
  EXPECT_EQ(v1_out.added_in_v2, 0xC0FFEEu) << "wrote past the caller's struct";

  // A newer caller: the unknown tail is left alone.
  vyre_test::LargerStruct<DescV2> larger(DescV2{0, 0, 0, 0}, 24, 0);
  larger.FillTail(0xAB);
  ASSERT_TRUE(WriteOutStruct("t", "DescV2", larger.get(), value).ok());
  EXPECT_EQ(larger.get()->struct_size, sizeof(DescV2) + 24);
  EXPECT_EQ(larger.get()->added_in_v2, 7u);
  EXPECT_TRUE(larger.TailIsAll(0xAB));

  DescV2 too_small{4, 0, 0, 0};
  EXPECT_STATUS(WriteOutStruct("t", "DescV2", &too_small, value, kV1Size),
                VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);
  EXPECT_EQ(too_small.a, 0u) << "a refused output struct was written";
  EXPECT_STATUS(WriteOutStruct<DescV2>("t", "DescV2", nullptr, value),
                VYRE_STATUS_INVALID_ARGUMENT);
}

// ---------------------------------------------------------------------------
// status.h and last_error.h
// ---------------------------------------------------------------------------

TEST(StatusTest, MakeErrorCarriesCodeAndCuResult) {
  absl::Status status =
      MakeError(VYRE_STATUS_LAUNCH_FAILED, "launching: it broke. Fix: do better.", 719);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(PublicCode(status), VYRE_STATUS_LAUNCH_FAILED);
  EXPECT_EQ(CuResultOf(status), 719);
  EXPECT_EQ(status.message(), "launching: it broke. Fix: do better.");

  absl::Status no_driver_result = MakeError(VYRE_STATUS_OUT_OF_RANGE, "x: y. Fix: z.");
  EXPECT_EQ(PublicCode(no_driver_result), VYRE_STATUS_OUT_OF_RANGE);
  EXPECT_EQ(CuResultOf(no_driver_result), 0);
}

TEST(StatusTest, EveryPublicCodeSurvivesTheRoundTrip) {
  for (int code = VYRE_STATUS_INVALID_ARGUMENT; code <= VYRE_STATUS_DEVICE_FAULT; ++code) {
    absl::Status status = MakeError(static_cast<vyre_status>(code), "a: b. Fix: c.");
    EXPECT_FALSE(status.ok()) << code;
    EXPECT_EQ(PublicCode(status), static_cast<vyre_status>(code));
  }
}

TEST(StatusTest, AddingContextKeepsThePayloads) {
  absl::Status status = MakeError(VYRE_STATUS_OUT_OF_MEMORY, "alloc: none left. Fix: free.", 2);
  absl::Status rewrapped(status.code(), std::string("outer: ") + std::string(status.message()));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    rewrapped.SetPayload(url, payload);
  });
  EXPECT_EQ(PublicCode(rewrapped), VYRE_STATUS_OUT_OF_MEMORY);
  EXPECT_EQ(CuResultOf(rewrapped), 2);
}

TEST(StatusTest, ForeignStatusesAreInternal) {
  EXPECT_EQ(PublicCode(absl::OkStatus()), VYRE_STATUS_OK);
  EXPECT_EQ(PublicCode(absl::InvalidArgumentError("plain absl")), VYRE_STATUS_INTERNAL);
  EXPECT_EQ(CuResultOf(absl::InternalError("plain absl")), 0);
}

TEST(StatusTest, ErrorfFormats) {
  absl::Status status = Errorf(VYRE_STATUS_INVALID_ARGUMENT, "%s: %d is bad. Fix: pass %u.",
                               "thing", -3, 4u);
  EXPECT_EQ(PublicCode(status), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(status.message(), "thing: -3 is bad. Fix: pass 4.");
}

TEST(LastErrorTest, SetReadAndClear) {
  ClearLastError();
  EXPECT_EQ(ReadLastError(nullptr, nullptr, nullptr, 0, nullptr), VYRE_STATUS_OK);
  vyre_status code = SetLastError(MakeError(VYRE_STATUS_TIMEOUT, "waiting: slow. Fix: wait.", 6));
  EXPECT_EQ(code, VYRE_STATUS_TIMEOUT);
  vyre_status status = VYRE_STATUS_OK;
  int32_t cu_result = 0;
  char message[64];
  size_t length = 0;
  EXPECT_EQ(ReadLastError(&status, &cu_result, message, sizeof(message), &length),
            VYRE_STATUS_TIMEOUT);
  EXPECT_EQ(status, VYRE_STATUS_TIMEOUT);
  EXPECT_EQ(cu_result, 6);
  EXPECT_STREQ(message, "waiting: slow. Fix: wait.");
  EXPECT_EQ(length, std::strlen("waiting: slow. Fix: wait."));
  ClearLastError();
  EXPECT_EQ(ReadLastError(&status, &cu_result, message, sizeof(message), &length),
            VYRE_STATUS_OK);
  EXPECT_EQ(cu_result, 0);
  EXPECT_EQ(length, 0u);
  EXPECT_STREQ(message, "");
}

}  // namespace
}  // namespace vyre
