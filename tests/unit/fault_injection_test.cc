// Fault injection (white-box, linked to vyre_cuda_static, run on the fake
// driver): for every driver entry point an operation calls, make each of its
// calls fail in turn and check that
//   - the operation reports an error with a Fix: sentence and the CUresult,
//     (or, for clean-up and best-effort calls, succeeds with correct results),
//   - nothing leaks: after vyre_context_trim the context's live device and
//     pinned bytes, pendings, buffers and programs are back where they were,
//     and the fake driver holds no extra objects,
//   - the context stays usable: the same operation then succeeds with correct
//     results.
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
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

using vyre::driver::Entry;
namespace faults = vyre::driver::testing;

constexpr int kEntryCount = static_cast<int>(Entry::kCount);

Entry EntryAt(int index) { return static_cast<Entry>(index); }
std::string NameOf(Entry entry) { return vyre::driver::EntryName(entry); }

// Allocation entries fail with OUT_OF_MEMORY (the engine may trim its pools
// and retry, so success is allowed too); every other entry with UNKNOWN.
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

// The first error of a multi-call scenario, kept while clean-up calls run
// (they clear the thread's last error) and then made the last error again.
struct SavedError {
  vyre_status status;
  int32_t cu_result;
  std::string message;
};

SavedError SaveError() {
  LastError e = ReadLastError();
  return {e.status, e.cu_result, e.message};
}

vyre_status Replay(const SavedError& e) {
  return vyre::SetLastError(vyre::MakeError(e.status, e.message, e.cu_result));
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

  // Runs the scenario once to warm lazily created state, once more to count
  // its driver calls, then fails each call of each entry in turn.
  void Sweep(const Scenario& s) {
    SCOPED_TRACE(s.name);
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
    for (int i = 0; i < kEntryCount; ++i) {
      uint64_t calls = after[i] - before[i];
      for (uint64_t n = 1; n <= calls; ++n) {
        InjectOne(s, EntryAt(i), n, calls);
        ++injected;
        if (HasFatalFailure()) return;
      }
    }
    EXPECT_GT(injected, 0u) << "the scenario made no driver calls";
    std::printf("[ faults   ] %s: %zu faults injected\n", s.name.c_str(), injected);
  }

  void InjectOne(const Scenario& s, Entry entry, uint64_t n, uint64_t calls) {
    const CUresult code = IsAllocation(entry) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
    SCOPED_TRACE(::testing::Message() << NameOf(entry) << " call " << n << " of " << calls
                                      << " fails with " << int(code));
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
      EXPECT_TRUE(IsAllocation(entry) || MayBeAbsorbed(entry) || s.also_absorbable.count(entry))
          << "the failure was swallowed: the operation reported OK";
      EXPECT_TRUE(s.verify()) << "the operation reported OK but its results are wrong";
      if (LeavesDriverObjectBehind(entry)) absorbed_release_failure_ = true;
    } else {
      vyre_status expected = IsAllocation(entry) ? VYRE_STATUS_OUT_OF_MEMORY : status;
      EXPECT_TRUE(ExpectError(status, expected));
      EXPECT_NE(status, VYRE_STATUS_INTERNAL) << LastErrorMessage();
      int32_t cu_result = 0;
      vyre_last_error(nullptr, &cu_result, nullptr, 0, nullptr);
      EXPECT_EQ(cu_result, int32_t(code))
          << "the error does not carry the driver's CUresult: " << LastErrorMessage();
    }
    ExpectSameLevels(levels_before, TrimAndReadLevels(), entry);

    // The context is still usable.
    s.reset();
    EXPECT_VYRE_OK(s.run()) << "the operation fails after the fault was cleared";
    EXPECT_TRUE(s.verify()) << "wrong results after the fault was cleared";
  }

  vyre_context context_{0};
  fake_cuda_stats driver_before_{};
  bool absorbed_release_failure_ = false;
};

// Host vector add, 1000 elements, with device timing (events).
TEST_F(FaultInjectionTest, HostDispatchWithDeviceTiming) {
  vyre_program add = MakeProgram(context_, AddSpec());
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
  Sweep(s);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// Resident INPUT_OUTPUT buffer, kernel run 3 times.
TEST_F(FaultInjectionTest, ResidentFixpointDispatch) {
  vyre_program inc = MakeProgram(context_, IncSpec());
  const size_t n = 4096;
  const std::vector<uint32_t> data = RandomNonZeroU32(n, 3);
  std::vector<uint32_t> expected = data;
  for (uint32_t& v : expected) v += 3;
  vyre_buffer buffer = MakeBuffer(context_, n * 4);
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
  Sweep(s);
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
}

// dispatch_async + poll + wait + timing + poll + release, with an OUTPUT range.
TEST_F(FaultInjectionTest, AsyncDispatchWaitAndRelease) {
  ProgramSpec spec = AddSpec();
  spec.bindings[2].output_offset = 40;
  spec.bindings[2].output_length = 400;
  vyre_program add = MakeProgram(context_, spec);
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
               vyre_status status = vyre_dispatch_async(add, &desc, &pending);
               if (status != VYRE_STATUS_OK) return status;
               status = vyre_pending_poll(pending);  // the fake completes work at once
               if (status == VYRE_STATUS_OK) status = vyre_pending_wait(pending, VYRE_WAIT_FOREVER);
               if (status == VYRE_STATUS_OK) {
                 vyre_timing timing = VYRE_TIMING_INIT;
                 status = vyre_pending_timing(pending, &timing);
               }
               if (status == VYRE_STATUS_OK) status = vyre_pending_poll(pending);
               // Release regardless; report the first error.
               SavedError first = SaveError();
               vyre_status released = vyre_pending_release(pending);
               if (status != VYRE_STATUS_OK) {
                 EXPECT_VYRE_OK(released) << "releasing a pending whose wait failed";
                 return Replay(first);
               }
               return released;
             },
             [&] { return SameU32(out, expected); }};
  Sweep(s);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
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
               vyre_buffer buffer{0};
               vyre_status status = vyre_buffer_alloc(context_, bytes, &buffer);
               if (status != VYRE_STATUS_OK) return status;
               std::vector<vyre_upload_range> ups = {{500, 100, patch.data()},
                                                     {2900, 100, patch.data()}};
               std::vector<vyre_download_range> downs = {{0, 100, head.data()},
                                                         {2900, 100, tail.data()}};
               vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
               if (status == VYRE_STATUS_OK)
                 status = vyre_buffer_upload(buffer, 0, data.data(), bytes);
               if (status == VYRE_STATUS_OK)
                 status = vyre_buffer_upload_ranges(buffer, ups.data(), ups.size());
               if (status == VYRE_STATUS_OK)
                 status = vyre_buffer_download(buffer, 0, back.data(), bytes);
               if (status == VYRE_STATUS_OK)
                 status = vyre_buffer_download_ranges(buffer, downs.data(), downs.size());
               if (status == VYRE_STATUS_OK) status = vyre_buffer_info_get(buffer, &info);
               SavedError first = SaveError();
               vyre_status freed = vyre_buffer_free(buffer);
               if (status != VYRE_STATUS_OK) {
                 EXPECT_VYRE_OK(freed) << "freeing a buffer after a failed copy";
                 return Replay(first);
               }
               return freed;
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
               vyre_status status = vyre_program_create(context_, &desc, &program);
               if (status != VYRE_STATUS_OK) return status;
               return vyre_program_destroy(program);
             },
             [] { return ::testing::AssertionSuccess(); }};
  Sweep(s);
}

// Cooperative launch (occupancy query + cuLaunchCooperativeKernel).
TEST_F(FaultInjectionTest, CooperativeDispatch) {
  vyre_program add = MakeProgram(context_, AddSpec());
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
  Sweep(s);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// Creating and destroying a whole context (the fake's counters are the leak check).
TEST_F(FaultInjectionTest, ContextCreateAndDestroy) {
  Scenario s{"context create + destroy",
             [] {},
             [&]() -> vyre_status {
               vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
               vyre_context context{0};
               vyre_status status = vyre_context_create(&desc, &context);
               if (status != VYRE_STATUS_OK) return status;
               return vyre_context_destroy(context);
             },
             [] { return ::testing::AssertionSuccess(); },
             // Destroy waits for the context's work; if that wait fails the
             // context is still destroyed.
             {Entry::k_cuStreamSynchronize, Entry::k_cuCtxSynchronize}};
  Sweep(s);
}

// Host bindings over the staging limit, through a ring of two 64 KiB chunks
// (so every binding wraps it), sync and async; pinned chunks and events are
// allocated on first use after each trim.
TEST_F(FaultInjectionTest, LargeHostDispatchThroughTheStagingRing) {
  ASSERT_VYRE_OK(vyre_context_destroy(context_));
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.staging_chunk_bytes = 64 * 1024;
  desc.staging_chunk_count = 2;
  desc.staging_threads = 2;
  context_ = vyre_context{0};
  ASSERT_VYRE_OK(vyre_context_create(&desc, &context_));
  vyre_program add = MakeProgram(context_, AddSpec());
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
               vyre_status status = vyre_dispatch(add, &dd, nullptr);
               if (status != VYRE_STATUS_OK) return status;
               d.bindings[2] = HostOut(out2.data(), n * 4);
               dd = d.Desc();
               vyre_pending pending{0};
               status = vyre_dispatch_async(add, &dd, &pending);
               if (status != VYRE_STATUS_OK) return status;
               status = vyre_pending_wait(pending, VYRE_WAIT_FOREVER);
               SavedError first = SaveError();
               vyre_status released = vyre_pending_release(pending);
               if (status != VYRE_STATUS_OK) {
                 EXPECT_VYRE_OK(released) << "releasing a pending whose wait failed";
                 return Replay(first);
               }
               return released;
             },
             [&]() -> ::testing::AssertionResult {
               ::testing::AssertionResult sync = SameU32(out, expected);
               if (!sync) return sync;
               return SameU32(out2, expected);
             }};
  Sweep(s);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// Large uploads and downloads through the ring, and the same bytes from and
// into pinned and registered host memory, copied in place.
TEST_F(FaultInjectionTest, LargeCopiesAndPinnedHostMemory) {
  ASSERT_VYRE_OK(vyre_context_destroy(context_));
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.staging_chunk_bytes = 64 * 1024;
  desc.staging_chunk_count = 3;
  desc.staging_threads = 1;
  context_ = vyre_context{0};
  ASSERT_VYRE_OK(vyre_context_create(&desc, &context_));
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
               vyre_buffer buffer{0};
               void* pinned = nullptr;
               bool registered = false;
               vyre_status status = vyre_buffer_alloc(context_, bytes, &buffer);
               if (status == VYRE_STATUS_OK)
                 status = vyre_buffer_upload(buffer, 0, data.data(), bytes);
               if (status == VYRE_STATUS_OK)
                 status = vyre_buffer_download(buffer, 0, back.data(), bytes);
               if (status == VYRE_STATUS_OK) status = vyre_host_alloc(context_, bytes, &pinned);
               if (status == VYRE_STATUS_OK) {
                 std::memset(pinned, 0, bytes);
                 status = vyre_buffer_download(buffer, 0, pinned, bytes);
               }
               if (status == VYRE_STATUS_OK) {
                 std::memcpy(pinned_back.data(), pinned, bytes);
                 status = vyre_host_register(context_, caller_memory, bytes);
                 registered = status == VYRE_STATUS_OK;
               }
               if (status == VYRE_STATUS_OK) {
                 std::memcpy(caller_memory, pinned, bytes);
                 status = vyre_buffer_upload(buffer, 0, caller_memory, bytes);
               }
               if (status == VYRE_STATUS_OK)
                 status = vyre_buffer_download(buffer, 0, registered_back.data(), bytes);
               SavedError first = SaveError();
               if (registered) EXPECT_VYRE_OK(vyre_host_unregister(caller_memory));
               if (pinned != nullptr) EXPECT_VYRE_OK(vyre_host_free(pinned));
               if (buffer.bits != 0) EXPECT_VYRE_OK(vyre_buffer_free(buffer));
               if (status != VYRE_STATUS_OK) return Replay(first);
               return VYRE_STATUS_OK;
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

}  // namespace
}  // namespace vyre_test
