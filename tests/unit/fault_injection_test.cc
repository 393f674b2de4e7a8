// Fault injection (white-box, linked to vyre_cuda_static, run on the fake
// driver): for every driver entry point an operation calls, make each of its
// calls fail in turn with each CUresult of InjectedResults()
// (injected_results.h: a representative of every status class, a sticky
// device fault among them) and check that
//   - the operation reports the status that CUresult must give, written out
//     in the test (not taken from the library's table), with a message of
//     the "<what>: <why>. Fix: <what to do>." layout that starts with the
//     function and carries the CUresult (or, for clean-up and best-effort
//     calls, succeeds with correct results);
//   - nothing leaks: after vyre_context_trim the context's live device and
//     pinned bytes, pendings, buffers and programs are back where they were,
//     and the fake driver holds no extra objects;
//   - the context stays usable: the same operation then succeeds with correct
//     results. After a sticky result the context may be recorded faulted:
//     the scenario's objects and the context are then released (their
//     releases report DEVICE_FAULT, nothing else), the library resets the
//     device, and the operation succeeds on a fresh context.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "driver/driver_api.h"
#include "base/last_error.h"
#include "base/status.h"
#include "driver/fault_injection.h"
#include "fake_cuda_client.h"
#include "injected_results.h"
#include "raw_driver.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

using vyre::driver::Entry;
namespace faults = vyre::driver::testing;

constexpr int kEntryCount = static_cast<int>(Entry::kCount);

Entry EntryAt(int index) { return static_cast<Entry>(index); }
std::string NameOf(Entry entry) { return vyre::driver::EntryName(entry); }

// Allocation entries failing with OUT_OF_MEMORY may succeed: the engine trims
// its pools and retries.
bool IsAllocation(Entry entry) {
  return entry == Entry::k_cuMemAlloc || entry == Entry::k_cuMemHostAlloc;
}

// Failures the engine may absorb: releasing resources, reading error names,
// and saving/restoring the caller's current context around a call. (Failing
// to make the library's context current and carrying on is caught anyway:
// the fake driver counts the context-less calls that follow as misuse.)
bool MayBeAbsorbed(Entry entry) {
  switch (entry) {
    case Entry::k_cuMemFree:
    case Entry::k_cuMemFreeHost:
    case Entry::k_cuMemHostUnregister:
    case Entry::k_cuModuleUnload:
    case Entry::k_cuStreamDestroy:
    case Entry::k_cuEventDestroy:
    case Entry::k_cuDevicePrimaryCtxRelease:
    case Entry::k_cuGetErrorName:
    case Entry::k_cuGetErrorString:
    case Entry::k_cuCtxGetCurrent:
    case Entry::k_cuCtxSetCurrent:
    // Device timing is informational: a dispatch whose results are right may
    // report device_ns 0 rather than fail.
    case Entry::k_cuEventElapsedTime:
      return true;
    default:
      return false;
  }
}

// A failed release leaves the object in the driver; the fake's counts then
// legitimately differ.
bool LeavesDriverObjectBehind(Entry entry) {
  switch (entry) {
    case Entry::k_cuMemFree:
    case Entry::k_cuMemFreeHost:
    case Entry::k_cuMemHostUnregister:
    case Entry::k_cuModuleUnload:
    case Entry::k_cuStreamDestroy:
    case Entry::k_cuEventDestroy:
    case Entry::k_cuDevicePrimaryCtxRelease:
      return true;
    default:
      return false;
  }
}

using CallCounts = std::array<uint64_t, kEntryCount>;

CallCounts ReadCallCounts() {
  CallCounts counts{};
  for (int i = 0; i < kEntryCount; ++i) counts[i] = faults::CallCount(EntryAt(i));
  return counts;
}

// An operation under test.
struct Scenario {
  std::string name;
  std::function<void()> reset;                         // fresh inputs, poisoned outputs
  std::function<vyre_status()> run;                    // the operation
  std::function<::testing::AssertionResult()> verify;  // its results after success
  // Entries whose failure this operation may absorb besides MayBeAbsorbed's.
  std::set<Entry> also_absorbable = {};
  // The objects the operation uses, made on context_ before the sweep and
  // again on each fresh context after a device fault; `release` frees them
  // (its statuses go through FaultInjectionTest::Released).
  std::function<void()> setup = [] {};
  std::function<void()> release = [] {};
};

struct Levels {
  vyre_telemetry telemetry;
  fake_cuda_stats driver;
};

class FaultInjectionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    uint32_t count = 0;
    ASSERT_EQ(vyre_device_count(&count), VYRE_STATUS_OK) << LastErrorMessage();
    ASSERT_EQ(count, 1u);
    faults::InstallFaultInjection();
  }

  void SetUp() override {
    ASSERT_TRUE(FakeCuda::Available()) << "run through ctest (fake driver)";
    faults::ClearFaults();
    driver_before_ = FakeCuda::Stats();
    context_ = MakeContext();
    ASSERT_NE(context_.bits, 0u);
  }

  void TearDown() override {
    faults::ClearFaults();
    if (context_.bits != 0) {
      EXPECT_VYRE_OK(vyre_context_destroy(context_));
    }
    fake_cuda_stats after = FakeCuda::Stats();
    EXPECT_EQ(after.misuse_errors, driver_before_.misuse_errors)
        << "the engine misused the driver (see 'fake cuda: MISUSE' above)";
    if (!absorbed_release_failure_) {
      EXPECT_EQ(after.device_allocations_live, driver_before_.device_allocations_live);
      EXPECT_EQ(after.pinned_allocations_live, driver_before_.pinned_allocations_live);
      EXPECT_EQ(after.modules_live, driver_before_.modules_live);
      EXPECT_EQ(after.streams_live, driver_before_.streams_live);
      EXPECT_EQ(after.events_live, driver_before_.events_live);
      EXPECT_EQ(after.primary_context_retains, driver_before_.primary_context_retains);
    }
  }

  // Replaces context_ by one made from `desc` (the sweep's fresh contexts
  // after a device fault are made from it too).
  void UseContext(const vyre_context_desc& desc) {
    ASSERT_VYRE_OK(vyre_context_destroy(context_));
    context_desc_ = desc;
    context_ = vyre_context{0};
    ASSERT_VYRE_OK(vyre_context_create(&context_desc_, &context_));
  }

  // The status of a release in a scenario's `release`: OK, or DEVICE_FAULT
  // while the sweep replaces a context that a sticky result faulted.
  void Released(vyre_status status) {
    if (replacing_faulted_context_ && status == VYRE_STATUS_DEVICE_FAULT) return;
    EXPECT_VYRE_OK(status);
  }

  // A fault that made the library skip restoring this thread's previous
  // (empty) current context would change how many context calls the next run
  // makes; start every run from the caller's usual state, no current context.
  static void ResetCurrentContext() {
    ASSERT_EQ(vyre::driver::Api().cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  }

  Levels TrimAndReadLevels() {
    EXPECT_VYRE_OK(vyre_context_trim(context_));
    return {Telemetry(context_), FakeCuda::Stats()};
  }

  void ExpectSameLevels(const Levels& before, const Levels& after, Entry failed) {
    const vyre_telemetry& b = before.telemetry;
    const vyre_telemetry& a = after.telemetry;
    EXPECT_EQ(a.device_bytes_live, b.device_bytes_live) << "device bytes leaked";
    EXPECT_EQ(a.pinned_bytes_live, b.pinned_bytes_live) << "pinned bytes leaked";
    EXPECT_EQ(a.live_pendings, b.live_pendings) << "a pending dispatch leaked";
    EXPECT_EQ(a.live_buffers, b.live_buffers) << "a buffer leaked";
    EXPECT_EQ(a.live_programs, b.live_programs) << "a program leaked";
    EXPECT_EQ(a.transient_pool_cached_bytes, 0u);
    EXPECT_EQ(a.pinned_pool_cached_bytes, 0u);
    EXPECT_EQ(after.driver.misuse_errors, before.driver.misuse_errors)
        << "the engine misused the driver after the fault (see 'fake cuda: MISUSE' above)";
    if (LeavesDriverObjectBehind(failed)) return;
    EXPECT_EQ(after.driver.device_allocations_live, before.driver.device_allocations_live)
        << "device memory leaked in the driver";
    EXPECT_EQ(after.driver.pinned_allocations_live, before.driver.pinned_allocations_live)
        << "pinned memory leaked in the driver";
    EXPECT_EQ(after.driver.streams_live, before.driver.streams_live) << "a stream leaked";
    EXPECT_EQ(after.driver.events_live, before.driver.events_live) << "an event leaked";
    EXPECT_EQ(after.driver.primary_context_retains, before.driver.primary_context_retains);
  }

  // After a sticky result: release the scenario's objects and the context
  // (their releases return OK, or DEVICE_FAULT when the library recorded the
  // fault), check that the device was reset if it was recorded faulted and
  // that nothing is left, then set the scenario up on a fresh context.
  void ReplaceFaultedContext(const Scenario& s) {
    replacing_faulted_context_ = true;
    const fake_cuda_stats before = FakeCuda::Stats();
    s.release();
    const vyre_status destroyed = vyre_context_destroy(context_);
    context_ = vyre_context{0};
    replacing_faulted_context_ = false;
    if (destroyed != VYRE_STATUS_DEVICE_FAULT) {
      EXPECT_VYRE_OK(destroyed);
    }
    const fake_cuda_stats after = FakeCuda::Stats();
    EXPECT_EQ(after.misuse_errors, driver_before_.misuse_errors)
        << "the engine misused the driver (see 'fake cuda: MISUSE' above)";
    if (destroyed == VYRE_STATUS_DEVICE_FAULT) {
      // The last context of a faulted device: the library reset it, which
      // reclaims every object of the fake device (also those earlier faults
      // left behind on purpose): that is the baseline from here on.
      EXPECT_EQ(after.primary_context_resets, before.primary_context_resets + 1)
          << "the faulted device was not reset";
      EXPECT_EQ(after.primary_context_retains, 0);
      EXPECT_EQ(after.device_allocations_live, 0u);
      EXPECT_EQ(after.pinned_allocations_live, 0u);
      EXPECT_EQ(after.modules_live, 0u);
      EXPECT_EQ(after.streams_live, 0u);
      EXPECT_EQ(after.events_live, 0u);
      driver_before_ = after;
      absorbed_release_failure_ = false;
    } else {
      EXPECT_EQ(after.primary_context_retains, driver_before_.primary_context_retains);
    }
    ASSERT_VYRE_OK(vyre_context_create(&context_desc_, &context_));
    s.setup();
  }

  // Sets the scenario up, runs it once to warm lazily created state, once
  // more to count its driver calls, then fails each call of each entry in
  // turn with each injected CUresult.
  void Sweep(const Scenario& s) {
    SCOPED_TRACE(s.name);
    s.setup();
    s.reset();
    ASSERT_VYRE_OK(s.run()) << "the scenario fails without faults";
    ASSERT_TRUE(s.verify()) << "the scenario is wrong without faults";
    TrimAndReadLevels();
    s.reset();
    ResetCurrentContext();
    CallCounts before = ReadCallCounts();
    ASSERT_VYRE_OK(s.run()) << "the scenario fails without faults";
    CallCounts after = ReadCallCounts();
    ASSERT_TRUE(s.verify()) << "the scenario is wrong without faults";

    std::string covered;
    for (int i = 0; i < kEntryCount; ++i) {
      if (after[i] == before[i]) continue;
      covered += " " + NameOf(EntryAt(i)) + "x" + std::to_string(after[i] - before[i]);
    }
    std::printf("[ faults   ] %s calls:%s\n", s.name.c_str(), covered.c_str());

    size_t injected = 0;
    const uint64_t resets_before = FakeCuda::Stats().primary_context_resets;
    for (int i = 0; i < kEntryCount; ++i) {
      uint64_t calls = after[i] - before[i];
      for (uint64_t n = 1; n <= calls; ++n) {
        for (const InjectedResult& result : InjectedResults()) {
          InjectOne(s, EntryAt(i), n, calls, result);
          ++injected;
          if (HasFatalFailure()) return;
        }
      }
    }
    EXPECT_GT(injected, 0u) << "the scenario made no driver calls";
    const uint64_t resets = FakeCuda::Stats().primary_context_resets - resets_before;
    EXPECT_GT(resets, 0u) << "no injected device fault was recorded and recovered from";
    std::printf("[ faults   ] %s: %zu faults injected, %llu device resets\n", s.name.c_str(),
                injected, static_cast<unsigned long long>(resets));
    s.release();
  }

  void InjectOne(const Scenario& s, Entry entry, uint64_t n, uint64_t calls,
                 const InjectedResult& result) {
    const CUresult code = result.code;
    SCOPED_TRACE(::testing::Message() << NameOf(entry) << " call " << n << " of " << calls
                                      << " fails with " << int(code) << " (must give "
                                      << StatusName(result.expected) << ")");
    Levels levels_before = TrimAndReadLevels();
    s.reset();
    ResetCurrentContext();
    const uint64_t calls_before = faults::CallCount(entry);
    faults::FailNthCall(entry, n, code);
    vyre_status status = s.run();
    faults::ClearFaults();
    const bool fault_fired = faults::CallCount(entry) - calls_before >= n;

    if (!fault_fired) {
      std::printf("[ faults   ] note: %s call %llu was not reached this time\n",
                  NameOf(entry).c_str(), static_cast<unsigned long long>(n));
      EXPECT_VYRE_OK(status);
    } else if (status == VYRE_STATUS_OK) {
      const bool retried = IsAllocation(entry) && code == CUDA_ERROR_OUT_OF_MEMORY;
      EXPECT_TRUE(retried || MayBeAbsorbed(entry) || s.also_absorbable.count(entry))
          << "the failure was swallowed: the operation reported OK";
      EXPECT_TRUE(s.verify()) << "the operation reported OK but its results are wrong";
      if (LeavesDriverObjectBehind(entry)) absorbed_release_failure_ = true;
    } else {
      if (LeavesDriverObjectBehind(entry)) absorbed_release_failure_ = true;
      EXPECT_TRUE(ExpectError(status, result.expected));
      int32_t cu_result = 0;
      vyre_last_error(nullptr, &cu_result, nullptr, 0, nullptr);
      EXPECT_EQ(cu_result, int32_t(code))
          << "the error does not carry the driver's CUresult: " << LastErrorMessage();
      const std::string message = LastErrorMessage();
      EXPECT_EQ(message.rfind("vyre_", 0), 0u)
          << "the message does not start with the function: " << message;
    }
    if (result.sticky) {
      ReplaceFaultedContext(s);
      if (HasFatalFailure()) return;
    } else {
      ExpectSameLevels(levels_before, TrimAndReadLevels(), entry);
    }

    // The context (or its fresh replacement) is usable.
    s.reset();
    EXPECT_VYRE_OK(s.run()) << "the operation fails after the fault was cleared";
    EXPECT_TRUE(s.verify()) << "wrong results after the fault was cleared";
  }

  vyre_context context_{0};
  vyre_context_desc context_desc_ = VYRE_CONTEXT_DESC_INIT;
  fake_cuda_stats driver_before_{};
  bool absorbed_release_failure_ = false;
  bool replacing_faulted_context_ = false;
};

// Host vector add, 1000 elements, with device timing (events).
TEST_F(FaultInjectionTest, HostDispatchWithDeviceTiming) {
  vyre_program add{0};
  const size_t n = 1000;
  std::vector<uint32_t> a = RandomNonZeroU32(n, 1), b = RandomNonZeroU32(n, 2), out;
  const std::vector<uint32_t> expected = CpuAdd(a, b);
  Scenario s{"host dispatch with device timing",
             [&] { out.assign(n, kPoison); },
             [&] {
               DispatchSpec spec;
               spec.bindings = {HostIn(a.data(), n * 4), HostIn(b.data(), n * 4),
                                HostOut(out.data(), n * 4)};
               spec.param_words = {uint32_t(n)};
               spec.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
               vyre_dispatch_desc desc = spec.Desc();
               vyre_timing timing = VYRE_TIMING_INIT;
               return vyre_dispatch(add, &desc, &timing);
             },
             [&] { return SameU32(out, expected); }};
  s.setup = [&] { add = MakeProgram(context_, AddSpec()); };
  s.release = [&] { Released(vyre_program_destroy(add)); };
  Sweep(s);
}

// Resident INPUT_OUTPUT buffer, kernel run 3 times.
TEST_F(FaultInjectionTest, ResidentFixpointDispatch) {
  vyre_program inc{0};
  vyre_buffer buffer{0};
  const size_t n = 4096;
  const std::vector<uint32_t> data = RandomNonZeroU32(n, 3);
  std::vector<uint32_t> expected = data;
  for (uint32_t& v : expected) v += 3;
  Scenario s{"resident fixpoint dispatch",
             [&] { ASSERT_VYRE_OK(vyre_buffer_upload(buffer, 0, data.data(), n * 4)); },
             [&] {
               DispatchSpec spec;
               spec.bindings = {Resident(buffer)};
               spec.param_words = {uint32_t(n)};
               spec.fixpoint_iterations = 3;
               vyre_dispatch_desc desc = spec.Desc();
               return vyre_dispatch(inc, &desc, nullptr);
             },
             [&] {
               std::vector<uint32_t> back(n, kPoison);
               EXPECT_VYRE_OK(vyre_buffer_download(buffer, 0, back.data(), n * 4));
               return SameU32(back, expected);
             }};
  s.setup = [&] {
    inc = MakeProgram(context_, IncSpec());
    buffer = MakeBuffer(context_, n * 4);
  };
  s.release = [&] {
    Released(vyre_buffer_free(buffer));
    Released(vyre_program_destroy(inc));
  };
  Sweep(s);
}

// dispatch_async + poll + wait + timing + poll + release, with an OUTPUT range.
TEST_F(FaultInjectionTest, AsyncDispatchWaitAndRelease) {
  ProgramSpec spec = AddSpec();
  spec.bindings[2].output_offset = 40;
  spec.bindings[2].output_length = 400;
  vyre_program add{0};
  const size_t n = 300;
  std::vector<uint32_t> a = RandomNonZeroU32(n, 4), b = RandomNonZeroU32(n, 5), out;
  std::vector<uint32_t> expected(n, kPoison);
  const std::vector<uint32_t> sums = CpuAdd(a, b);
  std::copy(sums.begin() + 10, sums.begin() + 110, expected.begin() + 10);
  Scenario s{"async dispatch, wait, release",
             [&] { out.assign(n, kPoison); },
             [&]() -> vyre_status {
               DispatchSpec d;
               d.bindings = {HostIn(a.data(), n * 4), HostIn(b.data(), n * 4),
                             HostOut(out.data(), n * 4)};
               d.param_words = {uint32_t(n)};
               vyre_dispatch_desc desc = d.Desc();
               vyre_pending pending{0};
               FirstError e;
               if (!e.Ok(vyre_dispatch_async(add, &desc, &pending))) return e.Result();
               // The fake completes work at once.
               if (e.Ok(vyre_pending_poll(pending)) &&
                   e.Ok(vyre_pending_wait(pending, VYRE_WAIT_FOREVER))) {
                 vyre_timing timing = VYRE_TIMING_INIT;
                 if (e.Ok(vyre_pending_timing(pending, &timing))) e.Ok(vyre_pending_poll(pending));
               }
               // Released regardless: the first error is reported.
               e.Cleanup(vyre_pending_release(pending));
               return e.Result();
             },
             [&] { return SameU32(out, expected); }};
  s.setup = [&] { add = MakeProgram(context_, spec); };
  s.release = [&] { Released(vyre_program_destroy(add)); };
  Sweep(s);
}

// Buffer alloc, upload, download, ranges both ways, info, free.
TEST_F(FaultInjectionTest, BufferLifecycleAndCopies) {
  const size_t bytes = 3000;
  const std::vector<uint8_t> data = RandomNonZeroBytes(bytes, 6);
  const std::vector<uint8_t> patch = RandomNonZeroBytes(100, 7);
  std::vector<uint8_t> expected = data;
  std::copy(patch.begin(), patch.end(), expected.begin() + 500);
  std::copy(patch.begin(), patch.end(), expected.begin() + 2900);
  std::vector<uint8_t> back, head, tail;
  Scenario s{"buffer lifecycle",
             [&] {
               back.assign(bytes, 0);
               head.assign(100, 0);
               tail.assign(100, 0);
             },
             [&]() -> vyre_status {
               FirstError e;
               vyre_buffer buffer{0};
               if (!e.Ok(vyre_buffer_alloc(context_, bytes, &buffer))) return e.Result();
               std::vector<vyre_upload_range> ups = {{500, 100, patch.data()},
                                                     {2900, 100, patch.data()}};
               std::vector<vyre_download_range> downs = {{0, 100, head.data()},
                                                         {2900, 100, tail.data()}};
               vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
               e.Ok(vyre_buffer_upload(buffer, 0, data.data(), bytes)) &&
                   e.Ok(vyre_buffer_upload_ranges(buffer, ups.data(), ups.size())) &&
                   e.Ok(vyre_buffer_download(buffer, 0, back.data(), bytes)) &&
                   e.Ok(vyre_buffer_download_ranges(buffer, downs.data(), downs.size())) &&
                   e.Ok(vyre_buffer_info_get(buffer, &info));
               e.Cleanup(vyre_buffer_free(buffer));
               return e.Result();
             },
             [&]() -> ::testing::AssertionResult {
               if (FirstMismatch(back.data(), expected.data(), bytes) != -1)
                 return ::testing::AssertionFailure() << "whole download differs";
               if (FirstMismatch(head.data(), expected.data(), 100) != -1)
                 return ::testing::AssertionFailure() << "head range differs";
               if (FirstMismatch(tail.data(), expected.data() + 2900, 100) != -1)
                 return ::testing::AssertionFailure() << "tail range differs";
               return ::testing::AssertionSuccess();
             }};
  Sweep(s);
}

// Program creation from code the module cache has not seen (JIT + entry).
TEST_F(FaultInjectionTest, ProgramCreateOnACacheMiss) {
  int generation = 0;
  std::string code;
  Scenario s{"program create (cache miss)",
             [&] {
               code = std::string(vyre_test_kernels_ptx) + "\n// variant " +
                      std::to_string(generation++) + "\n";
             },
             [&]() -> vyre_status {
               ProgramSpec spec = AddSpec();
               spec.code = code;
               vyre_program_desc desc = spec.Desc();
               vyre_program program{0};
               FirstError e;
               if (!e.Ok(vyre_program_create(context_, &desc, &program))) return e.Result();
               e.Cleanup(vyre_program_destroy(program));
               return e.Result();
             },
             [] { return ::testing::AssertionSuccess(); }};
  Sweep(s);
}

// Cooperative launch (occupancy query + cuLaunchCooperativeKernel).
TEST_F(FaultInjectionTest, CooperativeDispatch) {
  vyre_program add{0};
  const size_t n = 1024;
  std::vector<uint32_t> a = RandomNonZeroU32(n, 8), b = RandomNonZeroU32(n, 9), out;
  const std::vector<uint32_t> expected = CpuAdd(a, b);
  Scenario s{"cooperative dispatch",
             [&] { out.assign(n, kPoison); },
             [&] {
               DispatchSpec spec;
               spec.bindings = {HostIn(a.data(), n * 4), HostIn(b.data(), n * 4),
                                HostOut(out.data(), n * 4)};
               spec.param_words = {uint32_t(n)};
               spec.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
               vyre_dispatch_desc desc = spec.Desc();
               return vyre_dispatch(add, &desc, nullptr);
             },
             [&] { return SameU32(out, expected); }};
  s.setup = [&] { add = MakeProgram(context_, AddSpec()); };
  s.release = [&] { Released(vyre_program_destroy(add)); };
  Sweep(s);
}

// Creating and destroying a whole context (the fake's counters are the leak
// check). Destroy waits for the context's work and releases everything; a
// failure on the way is its result (release_report.h), not swallowed.
TEST_F(FaultInjectionTest, ContextCreateAndDestroy) {
  Scenario s{"context create + destroy",
             [] {},
             [&]() -> vyre_status {
               vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
               vyre_context context{0};
               FirstError e;
               if (!e.Ok(vyre_context_create(&desc, &context))) return e.Result();
               e.Cleanup(vyre_context_destroy(context));
               return e.Result();
             },
             [] { return ::testing::AssertionSuccess(); }};
  Sweep(s);
}

// Host bindings over the staging limit, through a ring of two 64 KiB chunks
// (so every binding wraps it), sync and async; pinned chunks and events are
// allocated on first use after each trim.
TEST_F(FaultInjectionTest, LargeHostDispatchThroughTheStagingRing) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.staging_chunk_bytes = 64 * 1024;
  desc.staging_chunk_count = 2;
  desc.staging_threads = 2;
  UseContext(desc);
  vyre_program add{0};
  const size_t n = 70000;  // 280,000 bytes per binding: 5 pieces
  std::vector<uint32_t> a = RandomNonZeroU32(n, 11), b = RandomNonZeroU32(n, 12), out, out2;
  const std::vector<uint32_t> expected = CpuAdd(a, b);
  Scenario s{"large host dispatch through the staging ring",
             [&] {
               out.assign(n, kPoison);
               out2.assign(n, kPoison);
             },
             [&]() -> vyre_status {
               DispatchSpec d;
               d.bindings = {HostIn(a.data(), n * 4), HostIn(b.data(), n * 4),
                             HostOut(out.data(), n * 4)};
               d.param_words = {uint32_t(n)};
               vyre_dispatch_desc dd = d.Desc();
               FirstError e;
               if (!e.Ok(vyre_dispatch(add, &dd, nullptr))) return e.Result();
               d.bindings[2] = HostOut(out2.data(), n * 4);
               dd = d.Desc();
               vyre_pending pending{0};
               if (!e.Ok(vyre_dispatch_async(add, &dd, &pending))) return e.Result();
               e.Ok(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
               e.Cleanup(vyre_pending_release(pending));
               return e.Result();
             },
             [&]() -> ::testing::AssertionResult {
               ::testing::AssertionResult sync = SameU32(out, expected);
               if (!sync) return sync;
               return SameU32(out2, expected);
             }};
  s.setup = [&] { add = MakeProgram(context_, AddSpec()); };
  s.release = [&] { Released(vyre_program_destroy(add)); };
  Sweep(s);
}

// Large uploads and downloads through the ring, and the same bytes from and
// into pinned and registered host memory, copied in place.
TEST_F(FaultInjectionTest, LargeCopiesAndPinnedHostMemory) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.staging_chunk_bytes = 64 * 1024;
  desc.staging_chunk_count = 3;
  desc.staging_threads = 1;
  UseContext(desc);
  const size_t bytes = 300 * 1024 + 5;
  const std::vector<uint8_t> data = RandomNonZeroBytes(bytes, 21);
  std::vector<uint8_t> back, registered_back;
  std::vector<uint8_t> pinned_back;
  void* caller_memory = std::aligned_alloc(4096, 76 * 4096);
  ASSERT_NE(caller_memory, nullptr);
  Scenario s{"large copies and pinned host memory",
             [&] {
               back.assign(bytes, 0);
               pinned_back.assign(bytes, 0);
               registered_back.assign(bytes, 0);
             },
             [&]() -> vyre_status {
               FirstError e;
               vyre_buffer buffer{0};
               void* pinned = nullptr;
               bool registered = false;
               if (e.Ok(vyre_buffer_alloc(context_, bytes, &buffer)) &&
                   e.Ok(vyre_buffer_upload(buffer, 0, data.data(), bytes)) &&
                   e.Ok(vyre_buffer_download(buffer, 0, back.data(), bytes)) &&
                   e.Ok(vyre_host_alloc(context_, bytes, &pinned))) {
                 std::memset(pinned, 0, bytes);
                 if (e.Ok(vyre_buffer_download(buffer, 0, pinned, bytes))) {
                   std::memcpy(pinned_back.data(), pinned, bytes);
                   registered = e.Ok(vyre_host_register(context_, caller_memory, bytes));
                 }
                 if (registered) {
                   std::memcpy(caller_memory, pinned, bytes);
                   e.Ok(vyre_buffer_upload(buffer, 0, caller_memory, bytes)) &&
                       e.Ok(vyre_buffer_download(buffer, 0, registered_back.data(), bytes));
                 }
               }
               if (registered) e.Cleanup(vyre_host_unregister(caller_memory));
               if (pinned != nullptr) e.Cleanup(vyre_host_free(pinned));
               if (buffer.bits != 0) e.Cleanup(vyre_buffer_free(buffer));
               return e.Result();
             },
             [&]() -> ::testing::AssertionResult {
               if (FirstMismatch(back.data(), data.data(), bytes) != -1)
                 return ::testing::AssertionFailure() << "pageable round trip differs";
               if (FirstMismatch(pinned_back.data(), data.data(), bytes) != -1)
                 return ::testing::AssertionFailure() << "download into pinned memory differs";
               if (FirstMismatch(registered_back.data(), data.data(), bytes) != -1)
                 return ::testing::AssertionFailure() << "upload from registered memory differs";
               return ::testing::AssertionSuccess();
             }};
  Sweep(s);
  std::free(caller_memory);
}

// Interop: a wrap of memory "other CUDA code" allocated (cuPointerGetAttributes),
// an upload into it, the context waiting for a stream of that code, a dispatch
// on the wrapped buffer, the stream waiting for the context (the context's
// stream-ordering event is made on first use after each trim), a download
// and the free. The raw memory and stream come from the driver directly
// (raw_driver.h, not the library's table, so no fault is injected there);
// after a device fault the reset reclaims them and setup makes new ones.
TEST_F(FaultInjectionTest, WrappedBufferAndStreamOrdering) {
  vyre_program inc{0};
  CUdeviceptr raw_memory = 0;
  CUstream raw_stream = nullptr;
  const size_t n = 2048;
  const std::vector<uint32_t> data = RandomNonZeroU32(n, 51);
  std::vector<uint32_t> expected = data;
  for (uint32_t& v : expected) v += 1;
  std::vector<uint32_t> back;
  Scenario s{"wrapped buffer and stream ordering",
             [&] { back.assign(n, kPoison); },
             [&]() -> vyre_status {
               FirstError e;
               vyre_buffer_wrap_desc desc = VYRE_BUFFER_WRAP_DESC_INIT;
               desc.device_pointer = static_cast<uint64_t>(raw_memory);
               desc.bytes = n * 4;
               vyre_buffer wrapped{0};
               if (!e.Ok(vyre_buffer_wrap(context_, &desc, &wrapped))) return e.Result();
               const DispatchSpec spec = ResidentInc(wrapped, 0, 0, uint32_t(n));
               vyre_dispatch_desc d = spec.Desc();
               const uint64_t stream = reinterpret_cast<uint64_t>(raw_stream);
               e.Ok(vyre_buffer_upload(wrapped, 0, data.data(), n * 4)) &&
                   e.Ok(vyre_context_wait_stream(context_, stream)) &&
                   e.Ok(vyre_dispatch(inc, &d, nullptr)) &&
                   e.Ok(vyre_context_signal_stream(context_, stream)) &&
                   e.Ok(vyre_buffer_download(wrapped, 0, back.data(), n * 4));
               e.Cleanup(vyre_buffer_free(wrapped));
               return e.Result();
             },
             [&] { return SameU32(back, expected); }};
  s.setup = [&] {
    inc = MakeProgram(context_, IncSpec());
    RawPrimaryContext raw;
    ASSERT_TRUE(raw.ok()) << raw.error();
    ASSERT_EQ(raw.api().cuMemAlloc(&raw_memory, n * 4), CUDA_SUCCESS);
    ASSERT_EQ(raw.api().cuStreamCreate(&raw_stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  };
  s.release = [&] {
    Released(vyre_program_destroy(inc));
    RawPrimaryContext raw;
    ASSERT_TRUE(raw.ok()) << raw.error();
    // After a device fault these are refused; the device reset reclaims them.
    raw.api().cuStreamDestroy(raw_stream);
    raw.api().cuMemFree(raw_memory);
    raw_stream = nullptr;
    raw_memory = 0;
  };
  Sweep(s);
}

// Copies between buffers of two contexts of the device (vyre_buffer_copy):
// a synchronous copy from the fixture's context to the other one, ordered by
// events both ways, and an asynchronous copy back, waited on and released.
// A failure anywhere in the ordering must leave no event, pinned block or
// pending behind, and the fake driver sees no event waited before it was
// recorded.
TEST_F(FaultInjectionTest, CopiesBetweenTwoContexts) {
  vyre_context other{0};
  const size_t n = 3000;
  const std::vector<uint32_t> data = RandomNonZeroU32(n, 61);
  std::vector<uint32_t> back;
  Scenario s{"copies between two contexts",
             [&] { back.assign(n, kPoison); },
             [&]() -> vyre_status {
               FirstError e;
               vyre_buffer a{0}, b{0}, c{0};
               if (e.Ok(vyre_buffer_alloc(context_, n * 4, &a)) &&
                   e.Ok(vyre_buffer_alloc(other, n * 4, &b)) &&
                   e.Ok(vyre_buffer_alloc(context_, n * 4, &c)) &&
                   e.Ok(vyre_buffer_upload(a, 0, data.data(), n * 4))) {
                 vyre_buffer_copy_desc there = VYRE_BUFFER_COPY_DESC_INIT;
                 there.src = a;
                 there.dst = b;
                 there.bytes = n * 4;
                 vyre_buffer_copy_desc back_desc = there;
                 back_desc.src = b;
                 back_desc.dst = c;
                 vyre_pending pending{0};
                 if (e.Ok(vyre_buffer_copy(&there)) &&
                     e.Ok(vyre_buffer_copy_async(&back_desc, &pending))) {
                   e.Ok(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
                   e.Cleanup(vyre_pending_release(pending));
                   e.Ok(vyre_buffer_download(c, 0, back.data(), n * 4));
                 }
               }
               for (vyre_buffer x : {a, b, c}) {
                 if (x.bits != 0) e.Cleanup(vyre_buffer_free(x));
               }
               return e.Result();
             },
             [&] { return SameU32(back, data); }};
  s.setup = [&] { ASSERT_VYRE_OK(vyre_context_create(&context_desc_, &other)); };
  s.release = [&] {
    Released(vyre_context_destroy(other));
    other = vyre_context{0};
  };
  Sweep(s);
}

// A pending released without a wait: its work is waited for by the release,
// and what that work met is the release's result (nobody else could see it);
// the handle is gone either way. One that was waited on releases quietly.
TEST_F(FaultInjectionTest, APendingReleasedWithoutAWaitReturnsItsError) {
  vyre_program add = MakeProgram(context_, AddSpec());
  const size_t n = 256;
  std::vector<uint32_t> a = RandomNonZeroU32(n, 41), b = RandomNonZeroU32(n, 42), out(n);
  DispatchSpec spec;
  spec.bindings = {HostIn(a.data(), n * 4), HostIn(b.data(), n * 4), HostOut(out.data(), n * 4)};
  spec.param_words = {uint32_t(n)};
  vyre_dispatch_desc desc = spec.Desc();

  vyre_pending pending{0};
  ASSERT_VYRE_OK(vyre_dispatch_async(add, &desc, &pending));
  faults::FailNthCall(Entry::k_cuEventSynchronize, 1, CUDA_ERROR_UNKNOWN);
  EXPECT_VYRE_ERROR(vyre_pending_release(pending), VYRE_STATUS_DRIVER_ERROR);
  faults::ClearFaults();
  LastError e = ReadLastError();
  EXPECT_EQ(e.cu_result, int32_t(CUDA_ERROR_UNKNOWN));
  EXPECT_EQ(e.message.rfind("vyre_pending_release: the dispatch of 'vyre_test_add_u32' "
                            "(released without a wait): cuEventSynchronize returned "
                            "CUDA_ERROR_UNKNOWN",
                            0),
            0u)
      << e.message;
  EXPECT_VYRE_ERROR(vyre_pending_release(pending), VYRE_STATUS_STALE_HANDLE);

  // Waited on: the release does not wait again, and reports nothing.
  ASSERT_VYRE_OK(vyre_dispatch_async(add, &desc, &pending));
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  const uint64_t syncs = faults::CallCount(Entry::k_cuEventSynchronize);
  faults::FailNthCall(Entry::k_cuEventSynchronize, 1, CUDA_ERROR_UNKNOWN);
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  faults::ClearFaults();
  EXPECT_EQ(faults::CallCount(Entry::k_cuEventSynchronize), syncs);

  // The same for a graph replay.
  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_graph_record(add, &desc, &graph));
  vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
  replay.bindings = spec.bindings.data();
  replay.binding_count = spec.bindings.size();
  ASSERT_VYRE_OK(vyre_graph_replay_async(graph, &replay, &pending));
  faults::FailNthCall(Entry::k_cuEventSynchronize, 1, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  EXPECT_VYRE_ERROR(vyre_pending_release(pending), VYRE_STATUS_LIMIT_EXCEEDED);
  faults::ClearFaults();
  EXPECT_EQ(LastErrorMessage().rfind("vyre_pending_release: the graph replay (released without a "
                                     "wait): cuEventSynchronize returned "
                                     "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
                                     0),
            0u)
      << LastErrorMessage();
  EXPECT_VYRE_ERROR(vyre_pending_release(pending), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_EQ(Telemetry(context_).live_pendings, 0u);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// Destroy and free release everything they own, then return the first
// failure they met: the handle is stale afterwards, the primary context is
// released, and only what the failed call could not free stays behind.
TEST_F(FaultInjectionTest, ReleasesReportTheFirstFailureAfterReleasingEverything) {
  const fake_cuda_stats before = FakeCuda::Stats();
  vyre_context other = MakeContext();
  vyre_program add = MakeProgram(other, AddSpec());
  vyre_buffer kept = MakeBuffer(other, 4096);
  vyre_buffer freed = MakeBuffer(other, 4096);

  faults::FailNthCall(Entry::k_cuMemFree, 1, CUDA_ERROR_UNKNOWN);
  EXPECT_VYRE_ERROR(vyre_buffer_free(freed), VYRE_STATUS_DRIVER_ERROR);
  faults::ClearFaults();
  EXPECT_EQ(LastErrorMessage().rfind("vyre_buffer_free: the buffer is freed, but cuMemFree "
                                     "returned CUDA_ERROR_UNKNOWN",
                                     0),
            0u)
      << LastErrorMessage();
  EXPECT_EQ(ReadLastError().cu_result, int32_t(CUDA_ERROR_UNKNOWN));
  EXPECT_VYRE_ERROR(vyre_buffer_free(freed), VYRE_STATUS_STALE_HANDLE);

  // The context's stream refuses to go: everything else still does.
  faults::FailNthCall(Entry::k_cuStreamDestroy, 1, CUDA_ERROR_INVALID_VALUE);
  EXPECT_VYRE_ERROR(vyre_context_destroy(other), VYRE_STATUS_DRIVER_ERROR);
  faults::ClearFaults();
  EXPECT_EQ(LastErrorMessage().rfind("vyre_context_destroy: the context and everything it owned "
                                     "are released, but cuStreamDestroy returned "
                                     "CUDA_ERROR_INVALID_VALUE",
                                     0),
            0u)
      << LastErrorMessage();
  EXPECT_VYRE_ERROR(vyre_buffer_free(kept), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_ERROR(vyre_program_destroy(add), VYRE_STATUS_STALE_HANDLE);
  vyre_telemetry telemetry = VYRE_TELEMETRY_INIT;
  EXPECT_VYRE_ERROR(vyre_context_telemetry(other, &telemetry), VYRE_STATUS_STALE_HANDLE);
  const fake_cuda_stats after = FakeCuda::Stats();
  EXPECT_EQ(after.primary_context_retains, before.primary_context_retains);
  EXPECT_EQ(after.modules_live, before.modules_live);
  EXPECT_EQ(after.streams_live, before.streams_live + 1) << "only the refused stream stays";
  EXPECT_EQ(after.device_allocations_live, before.device_allocations_live + 1)
      << "only the refused free stays";
  EXPECT_EQ(after.misuse_errors, before.misuse_errors);
  absorbed_release_failure_ = true;  // the two objects the fake kept
}

// The guard that makes the library's context current restores the caller's
// afterwards; when that fails (twice: it retries once) it logs a warning
// naming both contexts, and the call's result stands.
TEST_F(FaultInjectionTest, AFailedRestoreOfTheCallersContextIsLogged) {
  struct Sink {
    static void Callback(void* user, vyre_log_level level, const char* message) {
      if (level <= VYRE_LOG_WARNING) static_cast<std::vector<std::string>*>(user)->push_back(message);
    }
  };
  std::vector<std::string> lines;
  ASSERT_VYRE_OK(vyre_set_log_callback(&Sink::Callback, &lines, VYRE_LOG_WARNING));
  vyre_buffer buffer = MakeBuffer(context_, 256);
  const std::vector<uint8_t> data = RandomNonZeroBytes(256, 31);
  ResetCurrentContext();
  // The upload binds its context (set 1), then restores none (set 2, retried as 3).
  faults::FailNthCall(Entry::k_cuCtxSetCurrent, 2, CUDA_ERROR_UNKNOWN, 2);
  EXPECT_VYRE_OK(vyre_buffer_upload(buffer, 0, data.data(), data.size()));
  faults::ClearFaults();
  ASSERT_VYRE_OK(vyre_set_log_callback(nullptr, nullptr, VYRE_LOG_WARNING));
  bool logged = false;
  for (const std::string& line : lines) {
    logged = logged || line.find("while restoring the caller's current CUDA context") !=
                           std::string::npos;
  }
  EXPECT_TRUE(logged) << "no warning about the failed restore";
  ResetCurrentContext();
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

}  // namespace
}  // namespace vyre_test
