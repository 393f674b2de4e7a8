// Device faults on the fake driver (white-box: linked to vyre_cuda_static for
// fault injection; ctest entry unit.device_fault). The fake's sticky-fault
// model (fake_cuda_inject_fault) makes a kernel launch fault as a real GPU
// does: the device then refuses every call until cuDevicePrimaryCtxReset.
// Checked here:
//   - the call that meets the fault, and every later call on the context and
//     its objects, returns VYRE_STATUS_DEVICE_FAULT with a Fix naming what to
//     do; informational calls still work; releases (free, destroy, pending
//     release) release everything and then return DEVICE_FAULT too, saying
//     what was released (the handle is gone: using it again is STALE_HANDLE),
//     and a context destroy's Fix says what is left to do (destroy the other
//     contexts, create a new one after the reset, or retry a failed reset);
//   - creating a context while a faulted one of the device lives is refused,
//     naming how many are left; destroying the last one resets the device, and
//     a new context computes correct results;
//   - nothing leaks (the fake's live objects back to baseline, no misuse, the
//     reset runs only once no retain is held), also with 8 threads dispatching
//     when the fault hits, and when cuDevicePrimaryCtxReset or
//     cuDevicePrimaryCtxRetain fail.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "driver/cu_error.h"
#include "driver/driver_api.h"
#include "driver/fault_injection.h"
#include "fake_cuda_client.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

using vyre::driver::Entry;
namespace faults = vyre::driver::testing;

constexpr int kIllegalAddress = 700;  // CUDA_ERROR_ILLEGAL_ADDRESS
constexpr uint32_t kElements = 1024;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// DEVICE_FAULT, reported by vyre_last_error too, with a message whose first
// line holds "Fix:" and tells the caller to destroy the device's contexts.
::testing::AssertionResult IsDeviceFault(vyre_status status) {
  ::testing::AssertionResult error = ExpectError(status, VYRE_STATUS_DEVICE_FAULT);
  if (!error) return error;
  const std::string message = LastErrorMessage();
  const std::string first_line = message.substr(0, message.find('\n'));
  if (!Contains(first_line, "Fix:") || !Contains(first_line, "vyre_context_destroy")) {
    return ::testing::AssertionFailure() << "the Fix does not say to destroy the contexts: "
                                         << message;
  }
  return ::testing::AssertionSuccess();
}

#define EXPECT_DEVICE_FAULT(expr) EXPECT_TRUE(IsDeviceFault(expr)) << "  in: " #expr

// A release on a faulted device: it released its object (the message says
// so, with `released`) and reports the fault with the fault's CUresult.
::testing::AssertionResult IsReleasedAfterFault(vyre_status status, const std::string& released,
                                                int code = kIllegalAddress) {
  ::testing::AssertionResult error = ExpectError(status, VYRE_STATUS_DEVICE_FAULT);
  if (!error) return error;
  const LastError e = ReadLastError();
  const std::string first_line = e.message.substr(0, e.message.find('\n'));
  const char* name = vyre::driver::CuResultName(static_cast<CUresult>(code));
  if (!Contains(first_line, released) || !Contains(first_line, name)) {
    return ::testing::AssertionFailure()
           << "the message does not say \"" << released << "\" and name " << name << ": "
           << e.message;
  }
  if (e.cu_result != code) {
    return ::testing::AssertionFailure() << "cu_result " << e.cu_result << ": " << e.message;
  }
  return ::testing::AssertionSuccess();
}

#define EXPECT_RELEASED_AFTER_FAULT(expr, released) \
  EXPECT_TRUE(IsReleasedAfterFault((expr), (released))) << "  in: " #expr

// A fault met earlier: the message says so and carries the fault's CUresult.
::testing::AssertionResult IsEarlierFault(vyre_status status) {
  ::testing::AssertionResult fault = IsDeviceFault(status);
  if (!fault) return fault;
  const LastError e = ReadLastError();
  if (!Contains(e.message, "the device faulted earlier (CUDA_ERROR_ILLEGAL_ADDRESS") ||
      !Contains(e.message, "device 0")) {
    return ::testing::AssertionFailure() << "unexpected message: " << e.message;
  }
  if (e.cu_result != kIllegalAddress) {
    return ::testing::AssertionFailure() << "cu_result " << e.cu_result << ": " << e.message;
  }
  return ::testing::AssertionSuccess();
}

#define EXPECT_EARLIER_FAULT(expr) EXPECT_TRUE(IsEarlierFault(expr)) << "  in: " #expr

// a + b over host memory, checked against the CPU.
struct HostAdd {
  explicit HostAdd(uint32_t seed) { Fresh(seed); }
  void Fresh(uint32_t seed) {
    a = RandomNonZeroU32(kElements, seed);
    b = RandomNonZeroU32(kElements, seed + 7919);
    out.assign(kElements, kPoison);
    spec = DispatchSpec{};
    spec.bindings = {HostIn(a.data(), ByteSize(a)), HostIn(b.data(), ByteSize(b)),
                     HostOut(out.data(), ByteSize(out))};
    spec.param_words = {kElements};
    desc = spec.Desc();
  }
  ::testing::AssertionResult Correct() const { return SameU32(out, CpuAdd(a, b)); }
  std::vector<uint32_t> a, b, out;
  DispatchSpec spec;
  vyre_dispatch_desc desc{};
};

// The smallest e-graph image on `context`'s GPU: one row of class 0, op 0,
// no children. Every column is the one word `*zero` (0), which must outlive
// the create.
vyre_egraph_image_desc OneRowImage(vyre_context context, const uint32_t* zero) {
  vyre_egraph_image_desc desc = VYRE_EGRAPH_IMAGE_DESC_INIT;
  desc.context = context;
  desc.row_count = 1;
  desc.class_count = 1;
  desc.row_classes = zero;
  desc.row_ops = zero;
  desc.child_offsets = zero;
  desc.child_lengths = zero;
  return desc;
}

// Log lines, for the checks of what a failed reset says.
struct LogSink {
  static void Callback(void* user, vyre_log_level, const char* message) {
    auto* sink = static_cast<LogSink*>(user);
    std::lock_guard lock(sink->mu);
    sink->lines.emplace_back(message);
  }
  bool Saw(const std::string& part) {
    std::lock_guard lock(mu);
    for (const std::string& line : lines) {
      if (Contains(line, part)) return true;
    }
    return false;
  }
  std::mutex mu;
  std::vector<std::string> lines;
};

class DeviceFaultTest : public ::testing::Test {
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
    baseline_ = FakeCuda::Stats();
    // Each test starts on an empty, working device.
    ASSERT_EQ(baseline_.primary_context_retains, 0);
    ASSERT_EQ(baseline_.device_allocations_live, 0u);
  }

  void TearDown() override {
    FakeCuda::InjectFault(0);
    faults::ClearFaults();
    vyre_set_log_callback(nullptr, nullptr, VYRE_LOG_WARNING);
    for (vyre_context& c : contexts_) {
      if (c.bits != 0) {
        // A test that stopped early may leave a faulted context behind.
        const vyre_status status = vyre_context_destroy(c);
        if (status != VYRE_STATUS_DEVICE_FAULT) {
          EXPECT_VYRE_OK(status);
        }
      }
      c = vyre_context{0};
    }
    ExpectNothingLeft();
  }

  // The device holds nothing of ours and the driver saw no misuse.
  void ExpectNothingLeft() {
    const fake_cuda_stats now = FakeCuda::Stats();
    EXPECT_EQ(now.misuse_errors, baseline_.misuse_errors)
        << "the engine misused the driver (see 'fake cuda: MISUSE' above)";
    EXPECT_EQ(now.hold_timeouts, baseline_.hold_timeouts);
    EXPECT_EQ(now.primary_context_retains, baseline_.primary_context_retains);
    EXPECT_EQ(now.device_allocations_live, baseline_.device_allocations_live);
    EXPECT_EQ(now.device_bytes_live, baseline_.device_bytes_live);
    EXPECT_EQ(now.pinned_allocations_live, baseline_.pinned_allocations_live);
    EXPECT_EQ(now.modules_live, baseline_.modules_live);
    EXPECT_EQ(now.streams_live, baseline_.streams_live);
    EXPECT_EQ(now.events_live, baseline_.events_live);
    EXPECT_EQ(now.graphs_live, baseline_.graphs_live);
    EXPECT_EQ(now.graph_execs_live, baseline_.graph_execs_live);
  }

  // A context the fixture destroys if the test does not.
  vyre_context& NewContext() {
    contexts_.push_back(MakeContext());
    return contexts_.back();
  }

  void Destroy(vyre_context& context) {
    EXPECT_VYRE_OK(vyre_context_destroy(context));
    context = vyre_context{0};
  }

  // Destroys a context of a faulted device: everything is released, then
  // DEVICE_FAULT whose Fix holds `fix` (what is left to do).
  void DestroyFaulted(vyre_context& context, const std::string& fix) {
    const vyre_context handle = context;
    EXPECT_RELEASED_AFTER_FAULT(vyre_context_destroy(context),
                                "the context and everything it owned are released");
    const std::string message = LastErrorMessage();
    EXPECT_TRUE(Contains(message, "Fix: " + fix)) << message;
    context = vyre_context{0};
    // Gone, whatever the status said.
    vyre_telemetry telemetry = VYRE_TELEMETRY_INIT;
    EXPECT_VYRE_ERROR(vyre_context_telemetry(handle, &telemetry), VYRE_STATUS_STALE_HANDLE);
  }

  // Faults the device through a sync dispatch of `add` on `context`.
  void FaultThroughDispatch(vyre_program add) {
    ASSERT_TRUE(FakeCuda::InjectFault(kIllegalAddress));
    HostAdd host(11);
    const vyre_status status = vyre_dispatch(add, &host.desc, nullptr);
    ASSERT_TRUE(IsDeviceFault(status));
    const LastError e = ReadLastError();
    EXPECT_EQ(e.cu_result, kIllegalAddress);
    EXPECT_TRUE(Contains(e.message, "vyre_dispatch")) << e.message;
    EXPECT_TRUE(Contains(e.message, "returned CUDA_ERROR_ILLEGAL_ADDRESS")) << e.message;
    EXPECT_TRUE(Contains(e.message, "destroy every vyre context on device 0")) << e.message;
    EXPECT_EQ(FakeCuda::Stats().faults, baseline_.faults + 1);
  }

  // A fresh context on the recovered device adds correctly.
  void ExpectWorkingContext(uint32_t seed) {
    vyre_context& context = NewContext();
    ASSERT_NE(context.bits, 0u);
    vyre_program add = MakeProgram(context, AddSpec());
    HostAdd host(seed);
    ASSERT_VYRE_OK(vyre_dispatch(add, &host.desc, nullptr));
    EXPECT_TRUE(host.Correct());
    EXPECT_VYRE_OK(vyre_program_destroy(add));
    Destroy(context);
  }

  fake_cuda_stats baseline_{};
  std::deque<vyre_context> contexts_;  // a deque: references stay valid
};

// The whole state machine on one context with one of each object.
TEST_F(DeviceFaultTest, AFaultCostsTheContextNotTheProcess) {
  vyre_context& context = NewContext();
  ASSERT_NE(context.bits, 0u);
  vyre_program add = MakeProgram(context, AddSpec());
  vyre_program inc = MakeProgram(context, IncSpec());
  std::vector<uint32_t> words = RandomNonZeroU32(kElements, 3);
  vyre_buffer buffer = MakeBuffer(context, ByteSize(words));
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer, 0, words.data(), ByteSize(words)));
  HostAdd host(5);
  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_graph_record(add, &host.desc, &graph));
  // A one-step sequence: fill the buffer.
  vyre_sequence_step fill = VYRE_SEQUENCE_STEP_INIT;
  fill.kind = VYRE_STEP_FILL;
  fill.buffer = buffer;
  fill.bytes = ByteSize(words);
  fill.fill_byte = 1;
  vyre_sequence_desc sequence_desc = VYRE_SEQUENCE_DESC_INIT;
  sequence_desc.steps = &fill;
  sequence_desc.step_count = 1;
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(vyre_sequence_create(context, &sequence_desc, &sequence));
  // A dispatch enqueued (and, the fake being synchronous, complete) before
  // the fault, waited on after it.
  DispatchSpec inc_spec;
  inc_spec.bindings = {Resident(buffer)};
  inc_spec.param_words = {kElements};
  vyre_dispatch_desc inc_desc = inc_spec.Desc();
  vyre_pending before_fault{0};
  ASSERT_VYRE_OK(vyre_dispatch_async(inc, &inc_desc, &before_fault));

  FaultThroughDispatch(add);

  // Every later call on the context and its objects.
  std::vector<uint32_t> back(kElements, kPoison);
  EXPECT_EARLIER_FAULT(vyre_buffer_upload(buffer, 0, words.data(), ByteSize(words)));
  EXPECT_TRUE(Contains(LastErrorMessage(), "vyre_buffer_upload: ")) << LastErrorMessage();
  EXPECT_EARLIER_FAULT(vyre_buffer_download(buffer, 0, back.data(), ByteSize(back)));
  EXPECT_TRUE(Contains(LastErrorMessage(), "vyre_buffer_download: ")) << LastErrorMessage();
  vyre_buffer another{0};
  EXPECT_EARLIER_FAULT(vyre_buffer_alloc(context, 4096, &another));
  EXPECT_EQ(another.bits, 0u);
  host.Fresh(6);
  EXPECT_EARLIER_FAULT(vyre_dispatch(add, &host.desc, nullptr));
  EXPECT_TRUE(Contains(LastErrorMessage(), "vyre_dispatch: ")) << LastErrorMessage();
  vyre_pending after_fault{0};
  EXPECT_EARLIER_FAULT(vyre_dispatch_async(add, &host.desc, &after_fault));
  EXPECT_EQ(after_fault.bits, 0u);
  EXPECT_EARLIER_FAULT(vyre_pending_wait(before_fault, VYRE_WAIT_FOREVER));
  EXPECT_TRUE(Contains(LastErrorMessage(), "vyre_pending_wait: ")) << LastErrorMessage();
  vyre_program again{0};
  ProgramSpec spec = AddSpec();
  vyre_program_desc program_desc = spec.Desc();
  EXPECT_EARLIER_FAULT(vyre_program_create(context, &program_desc, &again));
  EXPECT_EQ(again.bits, 0u);
  EXPECT_EARLIER_FAULT(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(Contains(LastErrorMessage(), "vyre_graph_replay: ")) << LastErrorMessage();
  vyre_graph graph2{0};
  EXPECT_EARLIER_FAULT(vyre_graph_record(add, &host.desc, &graph2));
  EXPECT_EQ(graph2.bits, 0u);
  EXPECT_EARLIER_FAULT(vyre_sequence_run(sequence, nullptr));
  EXPECT_TRUE(Contains(LastErrorMessage(), "vyre_sequence_run: ")) << LastErrorMessage();
  vyre_sequence sequence2{0};
  EXPECT_EARLIER_FAULT(vyre_sequence_create(context, &sequence_desc, &sequence2));
  EXPECT_EARLIER_FAULT(vyre_context_selftest(context));
  // An e-graph image on the GPU of the faulted context.
  const uint32_t zero = 0;
  const vyre_egraph_image_desc egraph = OneRowImage(context, &zero);
  vyre_egraph_image image{0};
  EXPECT_EARLIER_FAULT(vyre_egraph_image_create(&egraph, &image));
  EXPECT_EQ(image.bits, 0u);

  // Informational calls still answer.
  vyre_telemetry telemetry = VYRE_TELEMETRY_INIT;
  EXPECT_VYRE_OK(vyre_context_telemetry(context, &telemetry));
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  EXPECT_VYRE_OK(vyre_context_device_info(context, &info));
  vyre_buffer_info buffer_info = VYRE_BUFFER_INFO_INIT;
  EXPECT_VYRE_OK(vyre_buffer_info_get(buffer, &buffer_info));
  EXPECT_VYRE_OK(vyre_device_info_get(0, &info));

  // A second context of the faulted device is refused while this one lives,
  // and the refusal leaves nothing behind.
  const fake_cuda_stats before_create = FakeCuda::Stats();
  vyre_context_desc context_desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context refused{0};
  EXPECT_DEVICE_FAULT(vyre_context_create(&context_desc, &refused));
  EXPECT_EQ(refused.bits, 0u);
  EXPECT_TRUE(Contains(LastErrorMessage(), "1 vyre context(s) on it are still alive"))
      << LastErrorMessage();
  EXPECT_EQ(FakeCuda::Stats().primary_context_retains, before_create.primary_context_retains);

  // Releases release (the fake's frees fail with the sticky error; the reset
  // reclaims what they could not free), then report the fault. The pending,
  // never waited on successfully, reports what its own work met.
  EXPECT_RELEASED_AFTER_FAULT(vyre_pending_release(before_fault), "released without a wait");
  EXPECT_TRUE(Contains(LastErrorMessage(), "vyre_pending_release: the dispatch of "
                                           "'vyre_test_inc_u32' (released without a wait)"))
      << LastErrorMessage();
  EXPECT_RELEASED_AFTER_FAULT(vyre_graph_destroy(graph), "the graph is destroyed");
  EXPECT_RELEASED_AFTER_FAULT(vyre_sequence_destroy(sequence), "the sequence is destroyed");
  EXPECT_RELEASED_AFTER_FAULT(vyre_program_destroy(inc), "the program is destroyed");
  EXPECT_RELEASED_AFTER_FAULT(vyre_buffer_free(buffer), "the buffer is freed");
  EXPECT_RELEASED_AFTER_FAULT(vyre_program_destroy(add), "the program is destroyed");
  // Every handle is gone.
  EXPECT_VYRE_ERROR(vyre_pending_release(before_fault), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_ERROR(vyre_graph_destroy(graph), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_ERROR(vyre_sequence_destroy(sequence), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_ERROR(vyre_buffer_free(buffer), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_ERROR(vyre_program_destroy(add), VYRE_STATUS_STALE_HANDLE);
  EXPECT_EQ(FakeCuda::Stats().primary_context_resets, baseline_.primary_context_resets);
  DestroyFaulted(context, "create a new context to go on (vyre_context_create): this was the "
                          "last vyre context on device 0, so the library reset it");

  const fake_cuda_stats reset = FakeCuda::Stats();
  EXPECT_EQ(reset.primary_context_resets, baseline_.primary_context_resets + 1);
  EXPECT_GT(reset.objects_reclaimed_by_reset, baseline_.objects_reclaimed_by_reset)
      << "the fake refused the frees after the fault: the reset should have reclaimed them";
  ExpectNothingLeft();
  ExpectWorkingContext(21);
  ExpectNothingLeft();
}

// The releases of pinned host memory, registered memory and a GPU e-graph
// image follow the release rule too (docs/ERROR_CASES.md): after a fault they
// release, then return DEVICE_FAULT saying what was released, and the memory
// or handle is gone.
TEST_F(DeviceFaultTest, HostMemoryAndImageReleasesReportTheFault) {
  vyre_context& context = NewContext();
  ASSERT_NE(context.bits, 0u);
  vyre_program add = MakeProgram(context, AddSpec());
  void* pinned = nullptr;
  ASSERT_VYRE_OK(vyre_host_alloc(context, 4096, &pinned));
  std::vector<uint8_t> storage(3 * 4096);
  void* caller = reinterpret_cast<void*>(
      (reinterpret_cast<uintptr_t>(storage.data()) + 4095) & ~uintptr_t{4095});
  ASSERT_VYRE_OK(vyre_host_register(context, caller, 8192));
  const uint32_t zero = 0;
  const vyre_egraph_image_desc egraph = OneRowImage(context, &zero);
  vyre_egraph_image image{0};
  ASSERT_VYRE_OK(vyre_egraph_image_create(&egraph, &image));

  FaultThroughDispatch(add);

  EXPECT_RELEASED_AFTER_FAULT(vyre_host_free(pinned), "vyre_host_free: the pinned memory is freed");
  EXPECT_RELEASED_AFTER_FAULT(vyre_host_unregister(caller),
                              "vyre_host_unregister: the memory is unregistered");
  EXPECT_RELEASED_AFTER_FAULT(vyre_egraph_image_destroy(image),
                              "vyre_egraph_image_destroy: the e-graph image is destroyed");
  // Gone, whatever the status said.
  EXPECT_VYRE_ERROR_FROM(vyre_host_free(pinned), VYRE_STATUS_INVALID_ARGUMENT, "vyre_host_free");
  EXPECT_VYRE_ERROR_FROM(vyre_host_unregister(caller), VYRE_STATUS_INVALID_ARGUMENT,
                         "vyre_host_unregister");
  EXPECT_VYRE_ERROR_FROM(vyre_egraph_image_destroy(image), VYRE_STATUS_STALE_HANDLE,
                         "vyre_egraph_image_destroy");
  EXPECT_RELEASED_AFTER_FAULT(vyre_program_destroy(add), "the program is destroyed");
  DestroyFaulted(context, "create a new context to go on (vyre_context_create): this was the "
                          "last vyre context on device 0, so the library reset it");
  ExpectNothingLeft();
}

// A fault that shows only at the next synchronisation (as on a real GPU): the
// async dispatch is enqueued fine and its wait reports the fault.
TEST_F(DeviceFaultTest, TheWaitThatSeesALatentFaultReportsIt) {
  vyre_context& context = NewContext();
  vyre_program add = MakeProgram(context, AddSpec());
  // Warm: the dispatch's events and pooled memory exist, so the faulting one
  // only enqueues work after its launch.
  HostAdd host(30);
  vyre_pending pending{0};
  ASSERT_VYRE_OK(vyre_dispatch_async(add, &host.desc, &pending));
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  ASSERT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_TRUE(host.Correct());
  ASSERT_TRUE(FakeCuda::InjectFault(kIllegalAddress, /*latent=*/true));
  host.Fresh(31);
  ASSERT_VYRE_OK(vyre_dispatch_async(add, &host.desc, &pending));
  EXPECT_DEVICE_FAULT(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  LastError e = ReadLastError();
  EXPECT_EQ(e.cu_result, kIllegalAddress);
  EXPECT_TRUE(Contains(e.message, "vyre_pending_wait: ")) << e.message;
  EXPECT_TRUE(Contains(e.message, "returned CUDA_ERROR_ILLEGAL_ADDRESS")) << e.message;
  // The wait reported the fault; the release still says the device faulted.
  EXPECT_RELEASED_AFTER_FAULT(vyre_pending_release(pending), "the pending handle is released");
  host.Fresh(32);
  EXPECT_EARLIER_FAULT(vyre_dispatch(add, &host.desc, nullptr));
  EXPECT_RELEASED_AFTER_FAULT(vyre_program_destroy(add), "the program is destroyed");
  DestroyFaulted(context, "create a new context to go on");
  ExpectNothingLeft();
  ExpectWorkingContext(33);
}

// Several contexts share the device's primary context: a fault in one is a
// fault in all, and the reset waits for the last of them.
TEST_F(DeviceFaultTest, EveryContextOfTheDeviceMustGoBeforeTheReset) {
  vyre_context& first = NewContext();
  vyre_context& second = NewContext();
  vyre_context& third = NewContext();
  vyre_program add = MakeProgram(first, AddSpec());
  vyre_program other = MakeProgram(second, AddSpec());
  FaultThroughDispatch(add);
  HostAdd host(41);
  EXPECT_EARLIER_FAULT(vyre_dispatch(other, &host.desc, nullptr));
  vyre_buffer buffer{0};
  EXPECT_EARLIER_FAULT(vyre_buffer_alloc(third, 256, &buffer));

  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context refused{0};
  EXPECT_DEVICE_FAULT(vyre_context_create(&desc, &refused));
  EXPECT_TRUE(Contains(LastErrorMessage(), "3 vyre context(s) on it are still alive"))
      << LastErrorMessage();
  // Objects left alive are released by their context's destruction, which
  // names the contexts still to destroy.
  DestroyFaulted(first, "destroy the other 2 vyre context(s) on device 0 as well");
  EXPECT_DEVICE_FAULT(vyre_context_create(&desc, &refused));
  EXPECT_TRUE(Contains(LastErrorMessage(), "destroy the 2 remaining vyre context(s) on device 0"))
      << LastErrorMessage();
  DestroyFaulted(third, "destroy the other 1 vyre context(s) on device 0 as well");
  EXPECT_EQ(FakeCuda::Stats().primary_context_resets, baseline_.primary_context_resets);
  DestroyFaulted(second, "create a new context to go on");
  EXPECT_EQ(FakeCuda::Stats().primary_context_resets, baseline_.primary_context_resets + 1);
  ExpectNothingLeft();
  ExpectWorkingContext(42);
}

// Eight threads dispatch on one context when the device faults: none crashes,
// every call returns OK (with correct results) or DEVICE_FAULT, and the
// process recovers.
void RunThreadsIntoAFault(DeviceFaultTest* test, bool latent, vyre_context context) {
  vyre_program add = MakeProgram(context, AddSpec());
  constexpr int kThreads = 8;
  std::atomic<int> started{0};
  std::atomic<int> faults_seen{0};
  std::atomic<int> wrong{0};
  std::atomic<int> unexpected{0};
  std::mutex first_unexpected_mu;
  std::string first_unexpected;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      bool counted = false;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      for (uint32_t i = 0; std::chrono::steady_clock::now() < deadline; ++i) {
        HostAdd host(1000 * t + i + 1);
        vyre_status status;
        LastError e;
        if (i % 2 == 0) {
          status = vyre_dispatch(add, &host.desc, nullptr);
          e = ReadLastError();
        } else {
          vyre_pending pending{0};
          status = vyre_dispatch_async(add, &host.desc, &pending);
          e = ReadLastError();
          if (status == VYRE_STATUS_OK) {
            status = vyre_pending_wait(pending, VYRE_WAIT_FOREVER);
            e = ReadLastError();
            // The release reports the fault once the device faulted (also
            // after a wait that completed just before it did).
            const vyre_status released = vyre_pending_release(pending);
            if (released != VYRE_STATUS_OK && released != VYRE_STATUS_DEVICE_FAULT) {
              unexpected.fetch_add(1);
            }
          }
        }
        if (!counted) {
          counted = true;
          started.fetch_add(1);
        }
        if (status == VYRE_STATUS_OK) {
          if (!host.Correct()) wrong.fetch_add(1);
          continue;
        }
        if (status == VYRE_STATUS_DEVICE_FAULT && e.status == status &&
            Contains(e.message, "Fix: ") && Contains(e.message, "vyre_context_destroy")) {
          faults_seen.fetch_add(1);
          break;
        }
        unexpected.fetch_add(1);
        std::lock_guard lock(first_unexpected_mu);
        if (first_unexpected.empty()) {
          first_unexpected = std::string(vyre_status_name(status)) + ": " + e.message;
        }
        break;
      }
    });
  }
  while (started.load() < kThreads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(FakeCuda::InjectFault(kIllegalAddress, latent));
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(unexpected.load(), 0) << first_unexpected;
  EXPECT_EQ(wrong.load(), 0) << "a dispatch reported OK with wrong results";
  EXPECT_EQ(faults_seen.load(), kThreads) << "every thread should have met the fault";
  HostAdd host(77);
  EXPECT_EARLIER_FAULT(vyre_dispatch(add, &host.desc, nullptr));
  EXPECT_RELEASED_AFTER_FAULT(vyre_program_destroy(add), "the program is destroyed");
  (void)test;
}

TEST_F(DeviceFaultTest, EightThreadsDispatchingWhenTheDeviceFaults) {
  for (bool latent : {false, true}) {
    SCOPED_TRACE(latent ? "latent fault" : "immediate fault");
    vyre_context& context = NewContext();
    ASSERT_NE(context.bits, 0u);
    RunThreadsIntoAFault(this, latent, context);
    DestroyFaulted(context, "create a new context to go on");
    ExpectNothingLeft();
    ExpectWorkingContext(latent ? 91 : 92);
    ExpectNothingLeft();
  }
}

// Eight threads create, use and destroy contexts of their own while one of
// them faults the device: every call returns OK or DEVICE_FAULT, and once
// every thread has let go of its context the device works again.
TEST_F(DeviceFaultTest, ContextsComingAndGoingWhenTheDeviceFaults) {
  constexpr int kThreads = 8;
  std::atomic<int> unexpected{0};
  std::mutex mu;
  std::string first_unexpected;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int round = 0; round < 20; ++round) {
        auto check = [&](vyre_status status) {
          if (status == VYRE_STATUS_OK) return true;
          const LastError e = ReadLastError();
          if (status == VYRE_STATUS_DEVICE_FAULT && Contains(e.message, "Fix: ")) return false;
          unexpected.fetch_add(1);
          std::lock_guard lock(mu);
          if (first_unexpected.empty()) {
            first_unexpected = std::string(vyre_status_name(status)) + ": " + e.message;
          }
          return false;
        };
        vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
        vyre_context context{0};
        if (!check(vyre_context_create(&desc, &context))) continue;
        ProgramSpec spec = AddSpec();
        vyre_program_desc program_desc = spec.Desc();
        vyre_program add{0};
        if (check(vyre_program_create(context, &program_desc, &add))) {
          if (t == 0 && round == 5) FakeCuda::InjectFault(kIllegalAddress);
          HostAdd host(500 * t + round);
          if (check(vyre_dispatch(add, &host.desc, nullptr)) && !host.Correct()) {
            unexpected.fetch_add(1);
          }
          check(vyre_program_destroy(add));
        }
        check(vyre_context_destroy(context));
      }
    });
  }
  go.store(true);
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(unexpected.load(), 0) << first_unexpected;
  EXPECT_EQ(FakeCuda::Stats().faults, baseline_.faults + 1);
  ExpectNothingLeft();
  ExpectWorkingContext(123);
}

// cuDevicePrimaryCtxReset failing when the last context goes: the destroy
// still releases everything (its handle is gone), logs why, and returns
// DEVICE_FAULT whose Fix says the next create retries the reset; the next
// create does, and reports a second failure with a Fix; nothing leaks.
TEST_F(DeviceFaultTest, AFailedResetIsRetriedByTheNextCreate) {
  LogSink sink;
  ASSERT_VYRE_OK(vyre_set_log_callback(&LogSink::Callback, &sink, VYRE_LOG_INFO));
  vyre_context& context = NewContext();
  vyre_program add = MakeProgram(context, AddSpec());
  FaultThroughDispatch(add);
  EXPECT_RELEASED_AFTER_FAULT(vyre_program_destroy(add), "the program is destroyed");

  const uint64_t reset_calls = faults::CallCount(Entry::k_cuDevicePrimaryCtxReset);
  faults::FailNthCall(Entry::k_cuDevicePrimaryCtxReset, 1, CUDA_ERROR_UNKNOWN);
  DestroyFaulted(context, "call vyre_context_create, which retries the reset of device 0 that "
                          "failed");
  EXPECT_EQ(faults::CallCount(Entry::k_cuDevicePrimaryCtxReset), reset_calls + 1);
  EXPECT_TRUE(sink.Saw("the next vyre_context_create retries"));
  EXPECT_EQ(FakeCuda::Stats().primary_context_retains, 0);

  // The retry fails too: DEVICE_FAULT with the reset's CUresult and a Fix.
  faults::FailNthCall(Entry::k_cuDevicePrimaryCtxReset, 1, CUDA_ERROR_UNKNOWN);
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context refused{0};
  const vyre_status status = vyre_context_create(&desc, &refused);
  EXPECT_TRUE(ExpectError(status, VYRE_STATUS_DEVICE_FAULT));
  const LastError e = ReadLastError();
  EXPECT_EQ(e.cu_result, int32_t(CUDA_ERROR_UNKNOWN));
  EXPECT_TRUE(Contains(e.message, "vyre_context_create: device 0 faulted earlier")) << e.message;
  EXPECT_TRUE(Contains(e.message, "cuDevicePrimaryCtxReset returned CUDA_ERROR_UNKNOWN"))
      << e.message;
  EXPECT_TRUE(Contains(e.message, "Fix: call vyre_context_create again")) << e.message;
  EXPECT_EQ(refused.bits, 0u);
  EXPECT_EQ(FakeCuda::Stats().primary_context_retains, 0);
  EXPECT_EQ(FakeCuda::Stats().primary_context_resets, baseline_.primary_context_resets);
  faults::ClearFaults();

  // The third try resets and works.
  ExpectWorkingContext(51);
  EXPECT_EQ(FakeCuda::Stats().primary_context_resets, baseline_.primary_context_resets + 1);
  EXPECT_EQ(faults::CallCount(Entry::k_cuDevicePrimaryCtxReset), reset_calls + 3);
  EXPECT_TRUE(sink.Saw("reset the primary context after the fault"));
  ExpectNothingLeft();
}

// cuDevicePrimaryCtxRetain returning a sticky error with no vyre context on
// the device (a fault we never saw, e.g. another library's): the create
// resets the device and retries once.
TEST_F(DeviceFaultTest, ACreateRecoversFromAFaultNoContextSaw) {
  faults::FailNthCall(Entry::k_cuDevicePrimaryCtxRetain, 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  ExpectWorkingContext(61);
  faults::ClearFaults();
  EXPECT_EQ(FakeCuda::Stats().primary_context_resets, baseline_.primary_context_resets + 1);
  ExpectNothingLeft();
}

// Driver 580 keeps a kernel fault for the life of the process: after the
// reset, cuDevicePrimaryCtxRetain (and cuCtxCreate) still answer the sticky
// error. The create says so, with the driver's CUresult and a Fix that says
// to restart the process, and leaks no retain; once the driver lets go, the
// next create works.
TEST_F(DeviceFaultTest, AFaultTheDriverKeepsForTheProcessSaysRestart) {
  const uint64_t reset_calls = faults::CallCount(Entry::k_cuDevicePrimaryCtxReset);
  faults::FailNthCall(Entry::k_cuDevicePrimaryCtxRetain, 1, CUDA_ERROR_ILLEGAL_ADDRESS, 2);
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context refused{0};
  const vyre_status status = vyre_context_create(&desc, &refused);
  EXPECT_TRUE(ExpectError(status, VYRE_STATUS_DEVICE_FAULT));
  const LastError e = ReadLastError();
  EXPECT_EQ(e.cu_result, int32_t(CUDA_ERROR_ILLEGAL_ADDRESS));
  const std::string first_line = e.message.substr(0, e.message.find('\n'));
  EXPECT_TRUE(Contains(first_line, "cuDevicePrimaryCtxRetain still returned "
                                   "CUDA_ERROR_ILLEGAL_ADDRESS"))
      << e.message;
  EXPECT_TRUE(Contains(first_line, "for the life of the process")) << e.message;
  EXPECT_TRUE(Contains(first_line, "Fix: restart the process")) << e.message;
  EXPECT_EQ(refused.bits, 0u);
  EXPECT_EQ(faults::CallCount(Entry::k_cuDevicePrimaryCtxReset), reset_calls + 1);
  EXPECT_EQ(FakeCuda::Stats().primary_context_retains, 0);
  faults::ClearFaults();
  ExpectWorkingContext(71);
  ExpectNothingLeft();
}

// The retain of a new context meets a sticky error while a context of ours
// lives: the fault is recorded for the device (the live context now answers
// DEVICE_FAULT), nothing is retained, and destroying the live context resets.
TEST_F(DeviceFaultTest, ARetainThatMeetsAFaultMarksTheLiveContexts) {
  vyre_context& live = NewContext();
  vyre_program add = MakeProgram(live, AddSpec());
  faults::FailNthCall(Entry::k_cuDevicePrimaryCtxRetain, 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context refused{0};
  EXPECT_DEVICE_FAULT(vyre_context_create(&desc, &refused));
  faults::ClearFaults();
  EXPECT_TRUE(Contains(LastErrorMessage(), "1 vyre context(s) on it are still alive"))
      << LastErrorMessage();
  EXPECT_EQ(FakeCuda::Stats().primary_context_retains, 1);
  HostAdd host(71);
  EXPECT_EARLIER_FAULT(vyre_dispatch(add, &host.desc, nullptr));
  EXPECT_RELEASED_AFTER_FAULT(vyre_program_destroy(add), "the program is destroyed");
  DestroyFaulted(live, "create a new context to go on");
  EXPECT_EQ(FakeCuda::Stats().primary_context_resets, baseline_.primary_context_resets + 1);
  ExpectNothingLeft();
  ExpectWorkingContext(72);
}

// A release call of the destroy itself meets a sticky result (here injected
// into cuStreamDestroy, as a fault that shows only then would): the destroy
// still releases everything, records the fault, resets the device (it held
// its last context) and returns DEVICE_FAULT; the next context works.
TEST_F(DeviceFaultTest, AFaultMetWhileDestroyingIsReturnedByTheDestroy) {
  vyre_context& context = NewContext();
  vyre_program add = MakeProgram(context, AddSpec());
  EXPECT_VYRE_OK(vyre_program_destroy(add));
  faults::FailNthCall(Entry::k_cuStreamDestroy, 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  DestroyFaulted(context, "create a new context to go on");
  faults::ClearFaults();
  EXPECT_EQ(FakeCuda::Stats().primary_context_resets, baseline_.primary_context_resets + 1);
  ExpectNothingLeft();
  ExpectWorkingContext(75);
}

// Every sticky CUresult is a device fault; the others are not.
TEST_F(DeviceFaultTest, StickyResultsAreDeviceFaults) {
  const std::vector<int> sticky = {700, 702, 710, 714, 715, 716, 717, 718, 719, 214,
                                   226, 721, 911};
  for (int code : sticky) {
    SCOPED_TRACE(code);
    vyre_context& context = NewContext();
    vyre_program add = MakeProgram(context, AddSpec());
    ASSERT_TRUE(FakeCuda::InjectFault(code));
    HostAdd host(code);
    EXPECT_DEVICE_FAULT(vyre_dispatch(add, &host.desc, nullptr));
    EXPECT_EQ(ReadLastError().cu_result, code);
    EXPECT_DEVICE_FAULT(vyre_dispatch(add, &host.desc, nullptr));
    EXPECT_TRUE(Contains(LastErrorMessage(), "the device faulted earlier")) << LastErrorMessage();
    EXPECT_TRUE(IsReleasedAfterFault(vyre_program_destroy(add), "the program is destroyed", code));
    EXPECT_TRUE(IsReleasedAfterFault(vyre_context_destroy(context),
                                     "the context and everything it owned are released", code));
    context = vyre_context{0};
    ExpectNothingLeft();
  }
  ExpectWorkingContext(81);
  // Not sticky: out of resources is a limit, and the context stays usable.
  vyre_context& context = NewContext();
  vyre_program add = MakeProgram(context, AddSpec());
  faults::FailNthCall(Entry::k_cuLaunchKernel, 1, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  HostAdd host(82);
  EXPECT_VYRE_ERROR(vyre_dispatch(add, &host.desc, nullptr), VYRE_STATUS_LIMIT_EXCEEDED);
  faults::ClearFaults();
  host.Fresh(83);
  EXPECT_VYRE_OK(vyre_dispatch(add, &host.desc, nullptr));
  EXPECT_TRUE(host.Correct());
  EXPECT_VYRE_OK(vyre_program_destroy(add));
  EXPECT_EQ(FakeCuda::Stats().primary_context_resets,
            baseline_.primary_context_resets + sticky.size());
}

}  // namespace
}  // namespace vyre_test
