// Fault injection into graphs and sequences (white-box, linked to
// vyre_cuda_static, run on the fake driver). For every driver entry point the
// record, replay, node-update and sequence paths call (stream capture, graph
// instantiation, upload, node inventory, node parameter updates, graph
// launch, the copies, memsets and launches made during capture, the graph's
// memory, events and synchronisation), each of its calls fails in turn with
// each CUresult of InjectedResults() (injected_results.h: a representative of
// every status class, a sticky device fault among them), and
//   - the operation reports the status that CUresult must give (written out
//     in the test, not taken from the library's table), with a message of the
//     "<what>: <why>. Fix: <what to do>." layout starting with the function
//     and the CUresult attached (or, for clean-up and best-effort calls,
//     succeeds with correct results);
//   - nothing leaks: after destroying what succeeded and trimming, the
//     context's live bytes, buffers, programs, pendings, graphs and sequences
//     and the fake driver's allocations, streams, events, graphs and
//     executable graphs are back where they were, and the driver saw no
//     misuse;
//   - the context stays usable: the capture stream is not left capturing
//     (the operation, which records again where it recorded, succeeds), and
//     replays of graphs made before the fault are correct. After a sticky
//     result the scenario's objects and the context are released (reporting
//     DEVICE_FAULT when the fault was recorded), the device is reset, and the
//     operation succeeds on a fresh context with its objects made again.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "base/last_error.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/driver_api.h"
#include "driver/fault_injection.h"
#include "fake_cuda_client.h"
#include "injected_results.h"
#include "runtime/context/context.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

using vyre::driver::Entry;
namespace faults = vyre::driver::testing;

constexpr int kEntryCount = static_cast<int>(Entry::kCount);

Entry EntryAt(int index) { return static_cast<Entry>(index); }
std::string NameOf(Entry entry) { return vyre::driver::EntryName(entry); }

bool IsAllocation(Entry entry) {
  return entry == Entry::k_cuMemAlloc || entry == Entry::k_cuMemHostAlloc;
}

// Releases, error-name lookups and the save/restore of the caller's current
// context may fail without failing the operation; so may device timing.
bool MayBeAbsorbed(Entry entry) {
  switch (entry) {
    case Entry::k_cuMemFree:
    case Entry::k_cuMemFreeHost:
    case Entry::k_cuModuleUnload:
    case Entry::k_cuStreamDestroy:
    case Entry::k_cuEventDestroy:
    case Entry::k_cuGraphDestroy:
    case Entry::k_cuGraphExecDestroy:
    case Entry::k_cuDevicePrimaryCtxRelease:
    case Entry::k_cuGetErrorName:
    case Entry::k_cuGetErrorString:
    case Entry::k_cuCtxGetCurrent:
    case Entry::k_cuCtxSetCurrent:
    case Entry::k_cuEventElapsedTime:
      return true;
    default:
      return false;
  }
}

// A failed release leaves its object in the driver.
bool LeavesDriverObjectBehind(Entry entry) {
  switch (entry) {
    case Entry::k_cuMemFree:
    case Entry::k_cuMemFreeHost:
    case Entry::k_cuModuleUnload:
    case Entry::k_cuStreamDestroy:
    case Entry::k_cuEventDestroy:
    case Entry::k_cuGraphDestroy:
    case Entry::k_cuGraphExecDestroy:
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

struct Scenario {
  std::string name;
  std::function<void()> reset;                         // fresh inputs, poisoned outputs
  std::function<vyre_status()> run;                    // the operation; cleans up after itself
  std::function<::testing::AssertionResult()> verify;  // its results after success
  std::set<Entry> also_absorbable = {};
  // The objects the operation uses, made on context_ before the sweep and
  // again on each fresh context after a device fault; `release` frees them
  // (its statuses go through GraphFaultInjectionTest::Released).
  std::function<void()> setup = [] {};
  std::function<void()> release = [] {};
};

struct Levels {
  vyre_telemetry telemetry;
  fake_cuda_stats driver;
};

class GraphFaultInjectionTest : public ::testing::Test {
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
    EXPECT_EQ(after.hold_timeouts, driver_before_.hold_timeouts);
    if (!absorbed_release_failure_) {
      EXPECT_EQ(after.device_allocations_live, driver_before_.device_allocations_live);
      EXPECT_EQ(after.pinned_allocations_live, driver_before_.pinned_allocations_live);
      EXPECT_EQ(after.modules_live, driver_before_.modules_live);
      EXPECT_EQ(after.streams_live, driver_before_.streams_live);
      EXPECT_EQ(after.events_live, driver_before_.events_live);
      EXPECT_EQ(after.graphs_live, driver_before_.graphs_live);
      EXPECT_EQ(after.graph_execs_live, driver_before_.graph_execs_live);
      EXPECT_EQ(after.primary_context_retains, driver_before_.primary_context_retains);
    }
  }

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
    EXPECT_EQ(a.live_pendings, b.live_pendings) << "a pending replay leaked";
    EXPECT_EQ(a.live_buffers, b.live_buffers) << "a buffer leaked";
    EXPECT_EQ(a.live_programs, b.live_programs) << "a program leaked";
    EXPECT_EQ(a.live_graphs, b.live_graphs) << "a graph leaked";
    EXPECT_EQ(a.live_sequences, b.live_sequences) << "a sequence leaked";
    EXPECT_EQ(a.transient_pool_cached_bytes, 0u);
    EXPECT_EQ(a.pinned_pool_cached_bytes, 0u);
    EXPECT_EQ(after.driver.misuse_errors, before.driver.misuse_errors)
        << "the engine misused the driver after the fault (see 'fake cuda: MISUSE' above)";
    EXPECT_EQ(after.driver.hold_timeouts, before.driver.hold_timeouts);
    if (LeavesDriverObjectBehind(failed)) return;
    EXPECT_EQ(after.driver.device_allocations_live, before.driver.device_allocations_live)
        << "device memory leaked in the driver";
    EXPECT_EQ(after.driver.pinned_allocations_live, before.driver.pinned_allocations_live)
        << "pinned memory leaked in the driver";
    EXPECT_EQ(after.driver.streams_live, before.driver.streams_live) << "a stream leaked";
    EXPECT_EQ(after.driver.events_live, before.driver.events_live) << "an event leaked";
    EXPECT_EQ(after.driver.graphs_live, before.driver.graphs_live) << "a CUDA graph leaked";
    EXPECT_EQ(after.driver.graph_execs_live, before.driver.graph_execs_live)
        << "an executable CUDA graph leaked";
    EXPECT_EQ(after.driver.primary_context_retains, before.driver.primary_context_retains);
  }

  // The status of a release in a scenario's `release`: OK, or DEVICE_FAULT
  // while the sweep replaces a context that a sticky result faulted.
  void Released(vyre_status status) {
    if (replacing_faulted_context_ && status == VYRE_STATUS_DEVICE_FAULT) return;
    EXPECT_VYRE_OK(status);
  }

  // After a sticky result: release the scenario's objects and the context
  // (OK, or DEVICE_FAULT when the library recorded the fault), check that a
  // recorded fault reset the device and left nothing behind, then set the
  // scenario up on a fresh context.
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
    EXPECT_EQ(after.hold_timeouts, driver_before_.hold_timeouts);
    if (destroyed == VYRE_STATUS_DEVICE_FAULT) {
      // The reset reclaimed every object of the fake device, also those
      // earlier faults left behind on purpose: the baseline from here on.
      EXPECT_EQ(after.primary_context_resets, before.primary_context_resets + 1)
          << "the faulted device was not reset";
      EXPECT_EQ(after.primary_context_retains, 0);
      EXPECT_EQ(after.device_allocations_live, 0u);
      EXPECT_EQ(after.pinned_allocations_live, 0u);
      EXPECT_EQ(after.streams_live, 0u);
      EXPECT_EQ(after.events_live, 0u);
      EXPECT_EQ(after.graphs_live, 0u);
      EXPECT_EQ(after.graph_execs_live, 0u);
      driver_before_ = after;
      absorbed_release_failure_ = false;
    } else {
      EXPECT_EQ(after.primary_context_retains, driver_before_.primary_context_retains);
    }
    context_ = MakeContext();
    ASSERT_NE(context_.bits, 0u);
    s.setup();
  }

  // Sets the scenario up, runs it once to warm lazily made state (the
  // capture stream, pools, modules), once more to count its driver calls,
  // then fails each call of each entry in turn with each injected CUresult.
  // Returns the entries the scenario called.
  std::set<Entry> Sweep(const Scenario& s) {
    SCOPED_TRACE(s.name);
    std::set<Entry> called;
    s.setup();
    s.reset();
    EXPECT_VYRE_OK(s.run()) << "the scenario fails without faults";
    EXPECT_TRUE(s.verify()) << "the scenario is wrong without faults";
    if (HasFailure()) return called;
    TrimAndReadLevels();
    s.reset();
    ResetCurrentContext();
    CallCounts before = ReadCallCounts();
    EXPECT_VYRE_OK(s.run()) << "the scenario fails without faults";
    CallCounts after = ReadCallCounts();
    EXPECT_TRUE(s.verify()) << "the scenario is wrong without faults";
    if (HasFailure()) return called;

    std::string covered;
    for (int i = 0; i < kEntryCount; ++i) {
      if (after[i] == before[i]) continue;
      called.insert(EntryAt(i));
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
          if (HasFatalFailure()) return called;
        }
      }
    }
    EXPECT_GT(injected, 0u) << "the scenario made no driver calls";
    const uint64_t resets = FakeCuda::Stats().primary_context_resets - resets_before;
    EXPECT_GT(resets, 0u) << "no injected device fault was recorded and recovered from";
    std::printf("[ faults   ] %s: %zu faults injected, %llu device resets\n", s.name.c_str(),
                injected, static_cast<unsigned long long>(resets));
    s.release();
    return called;
  }

  // Fails call n of `entry` with `result.code` and checks the status it must
  // give, leaks and recovery.
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
      std::string message = LastErrorMessage();
      EXPECT_EQ(message.rfind("vyre_", 0), 0u)
          << "the message does not start with the function: " << message;
    }
    if (result.sticky) {
      ReplaceFaultedContext(s);
      if (HasFatalFailure()) return;
    } else {
      ExpectSameLevels(levels_before, TrimAndReadLevels(), entry);
    }

    // The context (or its fresh replacement) is usable: the same operation
    // (recording again where it records) succeeds with correct results.
    s.reset();
    EXPECT_VYRE_OK(s.run()) << "the operation fails after the fault was cleared";
    EXPECT_TRUE(s.verify()) << "wrong results after the fault was cleared";
  }

  // Every graph-specific entry point, for the coverage checks.
  static void ExpectCovers(const std::set<Entry>& called, std::initializer_list<Entry> entries) {
    for (Entry e : entries) {
      EXPECT_TRUE(called.count(e)) << "the scenarios never call " << NameOf(e);
    }
  }

  vyre_context context_{0};
  fake_cuda_stats driver_before_{};
  bool absorbed_release_failure_ = false;
  bool replacing_faulted_context_ = false;
};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

struct HostAdd {
  explicit HostAdd(size_t count) : n(count) { Fresh(1); }
  // In place: descriptors built earlier keep pointing at the same storage.
  void Fresh(uint32_t seed) {
    a.resize(n);
    b.resize(n);
    const std::vector<uint32_t> na = RandomNonZeroU32(n, seed);
    const std::vector<uint32_t> nb = RandomNonZeroU32(n, seed + 5000);
    std::copy(na.begin(), na.end(), a.begin());
    std::copy(nb.begin(), nb.end(), b.begin());
    out.assign(n, kPoison);
  }
  std::vector<vyre_dispatch_binding> Bindings() {
    return {HostIn(a.data(), n * 4), HostIn(b.data(), n * 4), HostOut(out.data(), n * 4)};
  }
  bool Correct() const { return out == CpuAdd(a, b); }
  size_t n;
  std::vector<uint32_t> a, b, out;
};

vyre_graph_replay_desc ReplayDesc(const std::vector<vyre_dispatch_binding>& bindings) {
  vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
  desc.bindings = bindings.empty() ? nullptr : bindings.data();
  desc.binding_count = bindings.size();
  return desc;
}

::testing::AssertionResult Flag(bool correct, const char* what) {
  if (correct) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what;
}

std::vector<uint32_t> Download(vyre_buffer buffer, size_t count) {
  std::vector<uint32_t> data(count, kPoison);
  EXPECT_VYRE_OK(vyre_buffer_download(buffer, 0, data.data(), count * 4));
  return data;
}

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

// Record a host vector add, replay it with new inputs, with the same inputs
// (the graph without input copies), asynchronously with device timing, then
// destroy it.
TEST_F(GraphFaultInjectionTest, RecordReplayAndDestroyAHostGraph) {
  vyre_program add{0};
  HostAdd host(700);
  uint32_t seed = 10;
  bool correct = true;
  Scenario s{"host graph: record, replay x3, destroy",
             [&] {
               host.Fresh(seed++);
               correct = true;
             },
             [&]() -> vyre_status {
               FirstError e;
               DispatchSpec spec;
               spec.bindings = host.Bindings();
               spec.param_words = {uint32_t(host.n)};
               vyre_dispatch_desc desc = spec.Desc();
               vyre_graph graph{0};
               if (!e.Ok(vyre_graph_record(add, &desc, &graph))) return e.Result();
               std::vector<vyre_dispatch_binding> bindings = host.Bindings();
               vyre_graph_replay_desc replay = ReplayDesc(bindings);
               if (e.Ok(vyre_graph_replay(graph, &replay, nullptr))) {
                 correct = correct && host.Correct();
                 host.out.assign(host.n, kPoison);
               }
               if (!e.failed() && e.Ok(vyre_graph_replay(graph, &replay, nullptr))) {
                 correct = correct && host.Correct();
                 host.out.assign(host.n, kPoison);
               }
               if (!e.failed()) {
                 vyre_graph_replay_desc timed = replay;
                 timed.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
                 vyre_pending pending{0};
                 if (e.Ok(vyre_graph_replay_async(graph, &timed, &pending))) {
                   if (e.Ok(vyre_pending_wait(pending, VYRE_WAIT_FOREVER))) {
                     correct = correct && host.Correct();
                     vyre_timing timing = VYRE_TIMING_INIT;
                     e.Ok(vyre_pending_timing(pending, &timing));
                   }
                   e.Cleanup(vyre_pending_release(pending));
                 }
               }
               e.Cleanup(vyre_graph_destroy(graph));
               return e.Result();
             },
             [&] { return Flag(correct, "a replay's output differs from a + b"); }};
  s.setup = [&] { add = MakeProgram(context_, AddSpec()); };
  s.release = [&] { Released(vyre_program_destroy(add)); };
  std::set<Entry> called = Sweep(s);
  ExpectCovers(called,
               {Entry::k_cuStreamBeginCapture, Entry::k_cuStreamEndCapture,
                Entry::k_cuGraphInstantiateWithFlags, Entry::k_cuGraphUpload,
                Entry::k_cuGraphGetNodes, Entry::k_cuGraphNodeGetType,
                Entry::k_cuGraphMemsetNodeGetParams, Entry::k_cuGraphKernelNodeGetParams,
                Entry::k_cuGraphLaunch, Entry::k_cuGraphDestroy, Entry::k_cuGraphExecDestroy,
                Entry::k_cuMemAlloc,
                Entry::k_cuMemHostAlloc, Entry::k_cuMemcpyHtoDAsync, Entry::k_cuMemcpyDtoHAsync,
                Entry::k_cuMemsetD8Async, Entry::k_cuLaunchKernel, Entry::k_cuEventRecord,
                Entry::k_cuStreamSynchronize});
}

// Replays of one host graph recorded up front: new inputs, the same inputs,
// and new parameter words (a staged upload in stream order).
TEST_F(GraphFaultInjectionTest, ReplayAHostGraphWithNewInputsAndWords) {
  vyre_program add{0};
  HostAdd host(500);
  DispatchSpec spec;
  spec.bindings = host.Bindings();
  spec.param_words = {uint32_t(host.n)};
  vyre_dispatch_desc record_desc = spec.Desc();
  vyre_graph graph{0};
  uint32_t seed = 100;
  bool correct = true;
  Scenario s{"host graph replays",
             [&] {
               host.Fresh(seed++);
               correct = true;
             },
             [&]() -> vyre_status {
               FirstError e;
               std::vector<vyre_dispatch_binding> bindings = host.Bindings();
               vyre_graph_replay_desc replay = ReplayDesc(bindings);
               if (!e.Ok(vyre_graph_replay(graph, &replay, nullptr))) return e.Result();
               correct = correct && host.Correct();
               host.out.assign(host.n, kPoison);
               // Other words (n, then a word the kernel ignores): uploaded.
               std::vector<uint32_t> words = {uint32_t(host.n), seed};
               replay.param_words = words.data();
               replay.param_word_count = words.size();
               if (!e.Ok(vyre_graph_replay(graph, &replay, nullptr))) return e.Result();
               correct = correct && host.Correct();
               host.out.assign(host.n, kPoison);
               vyre_timing timing = VYRE_TIMING_INIT;
               if (!e.Ok(vyre_graph_replay(graph, &replay, &timing))) return e.Result();
               correct = correct && host.Correct();
               return e.Result();
             },
             [&] { return Flag(correct, "a replay's output differs from a + b"); }};
  s.setup = [&] {
    add = MakeProgram(context_, AddSpec());
    ASSERT_VYRE_OK(vyre_graph_record(add, &record_desc, &graph));
  };
  s.release = [&] {
    Released(vyre_graph_destroy(graph));
    Released(vyre_program_destroy(add));
  };
  std::set<Entry> called = Sweep(s);
  ExpectCovers(called, {Entry::k_cuGraphLaunch, Entry::k_cuStreamSynchronize,
                        Entry::k_cuMemcpyHtoDAsync});
}

// A resident graph rebound to another set of buffers at another element
// count (memset and kernel node updates), and back.
TEST_F(GraphFaultInjectionTest, RebindAResidentGraph) {
  ProgramSpec one_thread = AddSpec();
  one_thread.workgroup[0] = 1;  // the grid is the element count
  vyre_program add{0};
  const size_t small = 300, large = 512;
  std::vector<uint32_t> sa = RandomNonZeroU32(small, 1), sb = RandomNonZeroU32(small, 2);
  std::vector<uint32_t> la = RandomNonZeroU32(large, 3), lb = RandomNonZeroU32(large, 4);
  vyre_buffer bsa{0}, bsb{0}, bso{0}, bla{0}, blb{0}, blo{0};
  vyre_graph graph{0};
  const std::vector<uint32_t> poison_large(large, kPoison), poison_small(small, kPoison);
  Scenario s{"resident graph rebinding",
             [&] {
               ASSERT_VYRE_OK(vyre_buffer_upload(bso, 0, poison_small.data(), small * 4));
               ASSERT_VYRE_OK(vyre_buffer_upload(blo, 0, poison_large.data(), large * 4));
             },
             [&]() -> vyre_status {
               FirstError e;
               std::vector<vyre_dispatch_binding> to_large = {Resident(bla), Resident(blb),
                                                              Resident(blo)};
               vyre_graph_replay_desc replay = ReplayDesc(to_large);
               replay.element_count = large;
               if (!e.Ok(vyre_graph_replay(graph, &replay, nullptr))) return e.Result();
               std::vector<vyre_dispatch_binding> to_small = {Resident(bsa), Resident(bsb),
                                                              Resident(bso)};
               replay = ReplayDesc(to_small);
               replay.element_count = small;
               if (!e.Ok(vyre_graph_replay(graph, &replay, nullptr))) return e.Result();
               vyre_pending pending{0};
               if (!e.Ok(vyre_graph_replay_async(graph, nullptr, &pending))) return e.Result();
               e.Ok(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
               e.Cleanup(vyre_pending_release(pending));
               return e.Result();
             },
             [&]() -> ::testing::AssertionResult {
               if (Download(blo, large) != CpuAdd(la, lb)) {
                 return ::testing::AssertionFailure() << "the large set's sum is wrong";
               }
               if (Download(bso, small) != CpuAdd(sa, sb)) {
                 return ::testing::AssertionFailure() << "the small set's sum is wrong";
               }
               return ::testing::AssertionSuccess();
             }};
  s.setup = [&] {
    add = MakeProgram(context_, one_thread);
    for (vyre_buffer* b : {&bsa, &bsb, &bso}) *b = MakeBuffer(context_, small * 4);
    for (vyre_buffer* b : {&bla, &blb, &blo}) *b = MakeBuffer(context_, large * 4);
    ASSERT_VYRE_OK(vyre_buffer_upload(bsa, 0, sa.data(), small * 4));
    ASSERT_VYRE_OK(vyre_buffer_upload(bsb, 0, sb.data(), small * 4));
    ASSERT_VYRE_OK(vyre_buffer_upload(bla, 0, la.data(), large * 4));
    ASSERT_VYRE_OK(vyre_buffer_upload(blb, 0, lb.data(), large * 4));
    DispatchSpec spec;
    spec.bindings = {Resident(bsa), Resident(bsb), Resident(bso)};
    spec.param_words = {UINT32_MAX};
    vyre_dispatch_desc record_desc = spec.Desc();
    ASSERT_VYRE_OK(vyre_graph_record(add, &record_desc, &graph));
  };
  s.release = [&] {
    Released(vyre_graph_destroy(graph));
    for (vyre_buffer b : {bsa, bsb, bso, bla, blb, blo}) Released(vyre_buffer_free(b));
    Released(vyre_program_destroy(add));
  };
  std::set<Entry> called = Sweep(s);
  ExpectCovers(called, {Entry::k_cuGraphExecKernelNodeSetParams,
                        Entry::k_cuGraphExecMemsetNodeSetParams, Entry::k_cuGraphLaunch});
}

// A kernel node update of a host graph (the full graph and its twin without
// input copies), then replays.
TEST_F(GraphFaultInjectionTest, UpdateAKernelNodeThenReplay) {
  ProgramSpec one_thread = AddSpec();
  one_thread.workgroup[0] = 1;
  vyre_program add{0};
  HostAdd host(256);
  DispatchSpec spec;
  spec.bindings = host.Bindings();
  spec.param_words = {UINT32_MAX};
  vyre_dispatch_desc record_desc = spec.Desc();
  vyre_graph graph{0};
  uint32_t seed = 300;
  uint32_t grid = 0;  // the grid of the last successful update
  bool correct = true;
  auto expected = [&] {
    std::vector<uint32_t> sums = CpuAdd(host.a, host.b);
    std::fill(sums.begin() + grid, sums.end(), 0u);  // OUTPUT zeroed, only `grid` written
    return sums;
  };
  Scenario s{"kernel node update",
             [&] {
               host.Fresh(seed++);
               correct = true;
             },
             [&]() -> vyre_status {
               FirstError e;
               vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
               update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
               update.grid[0] = grid == 100 ? 200 : 100;
               update.grid[1] = update.grid[2] = 1;
               if (!e.Ok(vyre_graph_kernel_node_update(graph, 3, &update))) return e.Result();
               grid = update.grid[0];
               std::vector<vyre_dispatch_binding> bindings = host.Bindings();
               vyre_graph_replay_desc replay = ReplayDesc(bindings);
               // Twice: the second runs the graph without input copies.
               for (int i = 0; i < 2 && !e.failed(); ++i) {
                 host.out.assign(host.n, kPoison);
                 if (e.Ok(vyre_graph_replay(graph, &replay, nullptr))) {
                   correct = correct && host.out == expected();
                 }
               }
               return e.Result();
             },
             [&] { return Flag(correct, "a replay did not follow the updated grid"); }};
  s.setup = [&] {
    add = MakeProgram(context_, one_thread);
    ASSERT_VYRE_OK(vyre_graph_record(add, &record_desc, &graph));
  };
  s.release = [&] {
    Released(vyre_graph_destroy(graph));
    Released(vyre_program_destroy(add));
  };
  std::set<Entry> called = Sweep(s);
  ExpectCovers(called, {Entry::k_cuGraphExecKernelNodeSetParams, Entry::k_cuGraphLaunch});
}

// A sequence of every step kind with a repeated block: create, run eagerly,
// record, replay, replay asynchronously, destroy.
struct MixedSequence {
  static constexpr uint32_t n = 128;
  static constexpr uint64_t bytes = n * 4;
  MixedSequence() { Fresh(1); }
  // Makes the programs and buffers on `context` (again after a fault).
  void Make(vyre_context context) {
    add = MakeProgram(context, AddSpec());
    inc = MakeProgram(context, IncSpec());
    for (vyre_buffer* b : {&x, &y, &z, &w}) *b = MakeBuffer(context, bytes);
  }
  // Frees them; `released` judges each status.
  template <typename Released>
  void Release(Released released) {
    for (vyre_buffer b : {x, y, z, w}) released(vyre_buffer_free(b));
    released(vyre_program_destroy(add));
    released(vyre_program_destroy(inc));
  }
  void Fresh(uint32_t seed) {
    hx = RandomNonZeroU32(n, seed);
    hy = RandomNonZeroU32(n, seed + 1);
    Poison();
  }
  void Poison() {
    out_z.assign(n, kPoison);
    out_w.assign(n, kPoison);
  }
  // z = x + y; w = z; then 3 x (w += 1 twice; z = w + x; w[0..n/2) = 0x01
  // bytes); z and w downloaded.
  vyre_sequence_desc Desc() {
    add_xy.bindings = {Resident(x), Resident(y), Resident(z)};
    add_xy.param_words = {n};
    add_wx.bindings = {Resident(w), Resident(x), Resident(z)};
    add_wx.param_words = {n};
    inc_w.bindings = {Resident(w)};
    inc_w.param_words = {n};
    inc_w.fixpoint_iterations = 2;
    d_add_xy = add_xy.Desc();
    d_add_wx = add_wx.Desc();
    d_inc_w = inc_w.Desc();
    steps.clear();
    auto step = [&](vyre_step_kind kind) -> vyre_sequence_step& {
      vyre_sequence_step st = VYRE_SEQUENCE_STEP_INIT;
      st.kind = kind;
      steps.push_back(st);
      return steps.back();
    };
    // Each reference is used before the next step is added.
    vyre_sequence_step& up_x = step(VYRE_STEP_UPLOAD);
    up_x.buffer = x;
    up_x.bytes = bytes;
    up_x.host_src = hx.data();
    vyre_sequence_step& up_y = step(VYRE_STEP_UPLOAD);
    up_y.buffer = y;
    up_y.bytes = bytes;
    up_y.host_src = hy.data();
    vyre_sequence_step& fill = step(VYRE_STEP_FILL);
    fill.buffer = z;
    fill.bytes = bytes;
    fill.fill_byte = 0xEE;
    vyre_sequence_step& d1 = step(VYRE_STEP_DISPATCH);
    d1.program = add;
    d1.dispatch = &d_add_xy;
    vyre_sequence_step& copy = step(VYRE_STEP_COPY);
    copy.buffer = w;
    copy.src_buffer = z;
    copy.bytes = bytes;
    vyre_sequence_step& d2 = step(VYRE_STEP_DISPATCH);  // block start (5)
    d2.program = inc;
    d2.dispatch = &d_inc_w;
    vyre_sequence_step& d3 = step(VYRE_STEP_DISPATCH);
    d3.program = add;
    d3.dispatch = &d_add_wx;
    vyre_sequence_step& fill_w = step(VYRE_STEP_FILL);
    fill_w.buffer = w;
    fill_w.bytes = bytes / 2;
    fill_w.fill_byte = 0x01;
    vyre_sequence_step& down_z = step(VYRE_STEP_DOWNLOAD);
    down_z.buffer = z;
    down_z.bytes = bytes;
    down_z.host_dst = out_z.data();
    vyre_sequence_step& down_w = step(VYRE_STEP_DOWNLOAD);
    down_w.buffer = w;
    down_w.bytes = bytes;
    down_w.host_dst = out_w.data();
    vyre_sequence_desc desc = VYRE_SEQUENCE_DESC_INIT;
    desc.steps = steps.data();
    desc.step_count = steps.size();
    desc.repeat_first = 5;
    desc.repeat_step_count = 3;
    desc.repeat_count = 3;
    return desc;
  }
  bool Correct() const {
    std::vector<uint32_t> zz = CpuAdd(hx, hy), ww = zz;
    for (int r = 0; r < 3; ++r) {
      for (uint32_t& v : ww) v += 2;
      zz = CpuAdd(ww, hx);
      std::fill(ww.begin(), ww.begin() + n / 2, 0x01010101u);
    }
    return out_z == zz && out_w == ww;
  }
  vyre_program add{0}, inc{0};
  vyre_buffer x{0}, y{0}, z{0}, w{0};
  std::vector<uint32_t> hx, hy, out_z, out_w;
  DispatchSpec add_xy, add_wx, inc_w;
  vyre_dispatch_desc d_add_xy{}, d_add_wx{}, d_inc_w{};
  std::vector<vyre_sequence_step> steps;
};

TEST_F(GraphFaultInjectionTest, SequenceCreateRunRecordReplayDestroy) {
  MixedSequence seq;
  uint32_t seed = 500;
  bool correct = true;
  Scenario s{"sequence: create, run, record, replay x2, destroy",
             [&] {
               seq.Fresh(seed++);
               correct = true;
             },
             [&]() -> vyre_status {
               FirstError e;
               vyre_sequence_desc desc = seq.Desc();
               vyre_sequence sequence{0};
               if (!e.Ok(vyre_sequence_create(context_, &desc, &sequence))) return e.Result();
               if (e.Ok(vyre_sequence_run(sequence, nullptr))) {
                 correct = correct && seq.Correct();
                 seq.Poison();
               }
               vyre_graph graph{0};
               if (!e.failed() && e.Ok(vyre_sequence_record(sequence, &graph))) {
                 if (e.Ok(vyre_graph_replay(graph, nullptr, nullptr))) {
                   correct = correct && seq.Correct();
                   seq.Poison();
                 }
                 vyre_pending pending{0};
                 if (!e.failed() && e.Ok(vyre_graph_replay_async(graph, nullptr, &pending))) {
                   if (e.Ok(vyre_pending_wait(pending, VYRE_WAIT_FOREVER))) {
                     correct = correct && seq.Correct();
                   }
                   e.Cleanup(vyre_pending_release(pending));
                 }
                 e.Cleanup(vyre_graph_destroy(graph));
               }
               e.Cleanup(vyre_sequence_destroy(sequence));
               return e.Result();
             },
             [&] { return Flag(correct, "a run's downloads differ from the CPU model"); }};
  s.setup = [&] { seq.Make(context_); };
  s.release = [&] { seq.Release([&](vyre_status status) { Released(status); }); };
  std::set<Entry> called = Sweep(s);
  ExpectCovers(called,
               {Entry::k_cuMemcpyDtoDAsync, Entry::k_cuMemsetD8Async, Entry::k_cuMemcpyHtoDAsync,
                Entry::k_cuMemcpyDtoHAsync, Entry::k_cuLaunchKernel, Entry::k_cuStreamBeginCapture,
                Entry::k_cuStreamEndCapture, Entry::k_cuGraphInstantiateWithFlags,
                Entry::k_cuGraphUpload, Entry::k_cuGraphGetNodes, Entry::k_cuGraphNodeGetType,
                Entry::k_cuGraphMemsetNodeGetParams, Entry::k_cuGraphKernelNodeGetParams,
                Entry::k_cuGraphLaunch, Entry::k_cuMemHostAlloc, Entry::k_cuMemAlloc,
                Entry::k_cuEventRecord,
                Entry::k_cuStreamSynchronize});
}

// Replays of a sequence graph recorded up front.
TEST_F(GraphFaultInjectionTest, ReplayASequenceGraph) {
  MixedSequence seq;
  vyre_sequence sequence{0};
  vyre_graph graph{0};
  uint32_t seed = 900;
  bool correct = true;
  Scenario s{"sequence graph replays",
             [&] {
               // The steps point at hx, hy, out_z, out_w: refill them in place.
               std::vector<uint32_t> x = RandomNonZeroU32(MixedSequence::n, seed++);
               std::vector<uint32_t> y = RandomNonZeroU32(MixedSequence::n, seed++);
               std::copy(x.begin(), x.end(), seq.hx.begin());
               std::copy(y.begin(), y.end(), seq.hy.begin());
               std::fill(seq.out_z.begin(), seq.out_z.end(), kPoison);
               std::fill(seq.out_w.begin(), seq.out_w.end(), kPoison);
               correct = true;
             },
             [&]() -> vyre_status {
               FirstError e;
               vyre_timing timing = VYRE_TIMING_INIT;
               if (!e.Ok(vyre_graph_replay(graph, nullptr, &timing))) return e.Result();
               correct = correct && seq.Correct();
               std::fill(seq.out_z.begin(), seq.out_z.end(), kPoison);
               vyre_graph_replay_desc timed = VYRE_GRAPH_REPLAY_DESC_INIT;
               timed.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
               vyre_pending pending{0};
               if (!e.Ok(vyre_graph_replay_async(graph, &timed, &pending))) return e.Result();
               if (e.Ok(vyre_pending_poll(pending)) &&
                   e.Ok(vyre_pending_wait(pending, VYRE_WAIT_FOREVER))) {
                 correct = correct && seq.Correct();
               }
               e.Cleanup(vyre_pending_release(pending));
               if (e.failed()) return e.Result();
               // Eager runs share nothing with the graph.
               if (e.Ok(vyre_sequence_run(sequence, nullptr))) correct = correct && seq.Correct();
               return e.Result();
             },
             [&] { return Flag(correct, "a replay's downloads differ from the CPU model"); }};
  s.setup = [&] {
    seq.Make(context_);
    vyre_sequence_desc desc = seq.Desc();
    ASSERT_VYRE_OK(vyre_sequence_create(context_, &desc, &sequence));
    ASSERT_VYRE_OK(vyre_sequence_record(sequence, &graph));
  };
  s.release = [&] {
    Released(vyre_graph_destroy(graph));
    Released(vyre_sequence_destroy(sequence));
    seq.Release([&](vyre_status status) { Released(status); });
  };
  std::set<Entry> called = Sweep(s);
  ExpectCovers(called, {Entry::k_cuGraphLaunch, Entry::k_cuEventRecord, Entry::k_cuEventQuery,
                        Entry::k_cuStreamSynchronize});
}

// CUresults map to their own statuses at the graph calls too, each written
// out here: a limit, memory, the environment (stub library, driver/kernel
// module mismatch, an unavailable device, a call needing a newer driver), a
// capture conflict with code outside the library. (Sticky ones, which fault
// the context, are StickyDriverErrorsFaultTheContext and the sweeps.)
TEST_F(GraphFaultInjectionTest, DriverErrorsMapToTheirStatuses) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(64);
  DispatchSpec spec;
  spec.bindings = host.Bindings();
  spec.param_words = {64};
  vyre_dispatch_desc desc = spec.Desc();
  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_graph_record(add, &desc, &graph));
  std::vector<vyre_dispatch_binding> bindings = host.Bindings();
  vyre_graph_replay_desc replay = ReplayDesc(bindings);
  struct Case {
    Entry entry;
    CUresult code;
    vyre_status expected;
    bool record;  // the fault hits a record, else a replay
  };
  const std::vector<Case> cases = {
      {Entry::k_cuGraphLaunch, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, VYRE_STATUS_LIMIT_EXCEEDED,
       false},
      {Entry::k_cuGraphInstantiateWithFlags, CUDA_ERROR_OUT_OF_MEMORY, VYRE_STATUS_OUT_OF_MEMORY,
       true},
      {Entry::k_cuStreamBeginCapture, CUDA_ERROR_INVALID_VALUE, VYRE_STATUS_DRIVER_ERROR, true},
      {Entry::k_cuGraphUpload, CUDA_ERROR_OUT_OF_MEMORY, VYRE_STATUS_OUT_OF_MEMORY, true},
      {Entry::k_cuGraphLaunch, CUDA_ERROR_STUB_LIBRARY, VYRE_STATUS_NO_DRIVER, false},
      {Entry::k_cuGraphLaunch, CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, VYRE_STATUS_NO_DRIVER, false},
      {Entry::k_cuGraphLaunch, CUDA_ERROR_DEVICE_UNAVAILABLE, VYRE_STATUS_NO_DEVICE, false},
      {Entry::k_cuGraphInstantiateWithFlags, CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER,
       VYRE_STATUS_DRIVER_TOO_OLD, true},
      {Entry::k_cuStreamEndCapture, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
       VYRE_STATUS_DRIVER_ERROR, true},
      {Entry::k_cuGraphLaunch, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
       VYRE_STATUS_LIMIT_EXCEEDED, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << NameOf(c.entry) << " -> " << int(c.code));
    const fake_cuda_stats before = FakeCuda::Stats();
    faults::FailNthCall(c.entry, 1, c.code);
    vyre_status status;
    vyre_graph recorded{0};
    if (c.record) {
      status = vyre_graph_record(add, &desc, &recorded);
    } else {
      host.Fresh(7);
      status = vyre_graph_replay(graph, &replay, nullptr);
    }
    faults::ClearFaults();
    EXPECT_TRUE(ExpectError(status, c.expected));
    EXPECT_EQ(recorded.bits, 0u);
    int32_t cu_result = 0;
    vyre_last_error(nullptr, &cu_result, nullptr, 0, nullptr);
    EXPECT_EQ(cu_result, int32_t(c.code));
    const fake_cuda_stats after = FakeCuda::Stats();
    EXPECT_EQ(after.graphs_live, before.graphs_live);
    EXPECT_EQ(after.graph_execs_live, before.graph_execs_live);
    // Still usable: record and replay.
    vyre_graph again{0};
    ASSERT_VYRE_OK(vyre_graph_record(add, &desc, &again));
    host.Fresh(8);
    ASSERT_VYRE_OK(vyre_graph_replay(again, &replay, nullptr));
    EXPECT_TRUE(host.Correct());
    EXPECT_VYRE_OK(vyre_graph_destroy(again));
    host.Fresh(9);
    ASSERT_VYRE_OK(vyre_graph_replay(graph, &replay, nullptr));
    EXPECT_TRUE(host.Correct());
  }
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// A sticky CUresult from a replay (the graph's kernel faulted) is a device
// fault: the replay and every later replay on the context answer
// DEVICE_FAULT with a Fix, releases release and report the fault, and after
// the context is destroyed (the library then resets the device) a new
// context records and replays correctly. (The injected error is not sticky in the fake, so this
// checks the engine's own bookkeeping; tests/unit/device_fault_test.cc runs
// the fake's sticky model.)
TEST_F(GraphFaultInjectionTest, StickyDriverErrorsFaultTheContext) {
  struct Case {
    Entry entry;
    CUresult code;
  };
  const std::vector<Case> cases = {
      {Entry::k_cuGraphLaunch, CUDA_ERROR_ILLEGAL_ADDRESS},
      {Entry::k_cuStreamSynchronize, CUDA_ERROR_LAUNCH_FAILED},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << NameOf(c.entry) << " -> " << int(c.code));
    vyre_program add = MakeProgram(context_, AddSpec());
    HostAdd host(64);
    DispatchSpec spec;
    spec.bindings = host.Bindings();
    spec.param_words = {64};
    vyre_dispatch_desc desc = spec.Desc();
    vyre_graph graph{0};
    ASSERT_VYRE_OK(vyre_graph_record(add, &desc, &graph));
    std::vector<vyre_dispatch_binding> bindings = host.Bindings();
    vyre_graph_replay_desc replay = ReplayDesc(bindings);
    const fake_cuda_stats stats_before = FakeCuda::Stats();

    faults::FailNthCall(c.entry, 1, c.code);
    host.Fresh(7);
    vyre_status status = vyre_graph_replay(graph, &replay, nullptr);
    faults::ClearFaults();
    EXPECT_TRUE(ExpectError(status, VYRE_STATUS_DEVICE_FAULT));
    int32_t cu_result = 0;
    vyre_last_error(nullptr, &cu_result, nullptr, 0, nullptr);
    EXPECT_EQ(cu_result, int32_t(c.code));
    EXPECT_NE(LastErrorMessage().find("destroy every vyre context on device 0"),
              std::string::npos)
        << LastErrorMessage();

    // Later work on the context is refused before it reaches the driver.
    const uint64_t launches = faults::CallCount(Entry::k_cuGraphLaunch);
    host.Fresh(8);
    EXPECT_TRUE(ExpectError(vyre_graph_replay(graph, &replay, nullptr),
                            VYRE_STATUS_DEVICE_FAULT));
    EXPECT_NE(LastErrorMessage().find("the device faulted earlier"), std::string::npos)
        << LastErrorMessage();
    EXPECT_EQ(faults::CallCount(Entry::k_cuGraphLaunch), launches);
    vyre_graph other{0};
    EXPECT_TRUE(ExpectError(vyre_graph_record(add, &desc, &other), VYRE_STATUS_DEVICE_FAULT));
    EXPECT_EQ(other.bits, 0u);

    // Releases release, then report the fault; the last context's
    // destruction resets the device, and says so in its Fix.
    EXPECT_TRUE(ExpectError(vyre_graph_destroy(graph), VYRE_STATUS_DEVICE_FAULT));
    EXPECT_NE(LastErrorMessage().find("vyre_graph_destroy: the graph is destroyed, but device 0 "
                                      "faulted"),
              std::string::npos)
        << LastErrorMessage();
    EXPECT_TRUE(ExpectError(vyre_program_destroy(add), VYRE_STATUS_DEVICE_FAULT));
    EXPECT_TRUE(ExpectError(vyre_graph_destroy(graph), VYRE_STATUS_STALE_HANDLE));
    EXPECT_TRUE(ExpectError(vyre_context_destroy(context_), VYRE_STATUS_DEVICE_FAULT));
    EXPECT_NE(LastErrorMessage().find("this was the last vyre context on device 0, so the "
                                      "library reset it"),
              std::string::npos)
        << LastErrorMessage();
    vyre_last_error(nullptr, &cu_result, nullptr, 0, nullptr);
    EXPECT_EQ(cu_result, int32_t(c.code));
    context_ = vyre_context{0};
    // The reset destroyed every object of the fake device, including those
    // earlier tests left behind on purpose (absorbed release failures): the
    // device is empty, and that is the baseline from here on.
    const fake_cuda_stats reset = FakeCuda::Stats();
    EXPECT_EQ(reset.primary_context_resets, stats_before.primary_context_resets + 1);
    EXPECT_EQ(reset.misuse_errors, stats_before.misuse_errors);
    EXPECT_EQ(reset.primary_context_retains, 0);
    EXPECT_EQ(reset.device_allocations_live, 0u);
    EXPECT_EQ(reset.pinned_allocations_live, 0u);
    EXPECT_EQ(reset.modules_live, 0u);
    EXPECT_EQ(reset.streams_live, 0u);
    EXPECT_EQ(reset.events_live, 0u);
    EXPECT_EQ(reset.graphs_live, 0u);
    EXPECT_EQ(reset.graph_execs_live, 0u);
    driver_before_ = reset;
    context_ = MakeContext();
    ASSERT_NE(context_.bits, 0u);

    add = MakeProgram(context_, AddSpec());
    vyre_graph again{0};
    ASSERT_VYRE_OK(vyre_graph_record(add, &desc, &again));
    host.Fresh(9);
    ASSERT_VYRE_OK(vyre_graph_replay(again, &replay, nullptr));
    EXPECT_TRUE(host.Correct());
    EXPECT_VYRE_OK(vyre_graph_destroy(again));
    EXPECT_VYRE_OK(vyre_program_destroy(add));
  }
}

// A failed cuStreamEndCapture may leave the capture open, which in
// thread-local mode would forbid this thread's later frees and allocations:
// the engine ends it again, so the failed record frees what it made and the
// next record works (the sweeps above inject every EndCapture call too).
TEST_F(GraphFaultInjectionTest, EndCaptureFailureStillEndsTheCapture) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(64);
  DispatchSpec spec;
  spec.bindings = host.Bindings();
  spec.param_words = {64};
  vyre_dispatch_desc desc = spec.Desc();
  // Warm: the capture stream exists.
  vyre_graph warm{0};
  ASSERT_VYRE_OK(vyre_graph_record(add, &desc, &warm));
  ASSERT_VYRE_OK(vyre_graph_destroy(warm));
  const fake_cuda_stats before = FakeCuda::Stats();

  faults::FailNthCall(Entry::k_cuStreamEndCapture, 1, CUDA_ERROR_UNKNOWN);
  vyre_graph graph{0};
  vyre_status status = vyre_graph_record(add, &desc, &graph);
  faults::ClearFaults();
  EXPECT_TRUE(ExpectError(status, VYRE_STATUS_DRIVER_ERROR));
  EXPECT_EQ(graph.bits, 0u);

  vyre_graph again{0};
  ASSERT_VYRE_OK(vyre_graph_record(add, &desc, &again));
  EXPECT_EQ(FakeCuda::Stats().misuse_errors, before.misuse_errors)
      << "calls made while a capture was left open are driver misuse";
  std::vector<vyre_dispatch_binding> bindings = host.Bindings();
  vyre_graph_replay_desc replay = ReplayDesc(bindings);
  host.Fresh(3);
  EXPECT_VYRE_OK(vyre_graph_replay(again, &replay, nullptr));
  EXPECT_TRUE(host.Correct());
  EXPECT_VYRE_OK(vyre_graph_destroy(again));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

}  // namespace
}  // namespace vyre_test
