// Asynchronous dispatch on a real GPU: poll, wait with a timeout, timing,
// waiting twice, and freeing a buffer that in-flight work still uses.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "gpu_test_env.h"

namespace vyre_test {
namespace {

constexpr uint32_t kSpinMicroseconds = 300'000;  // long enough to poll, short enough to wait
constexpr uint64_t kSpinNs = uint64_t{kSpinMicroseconds} * 1000;
constexpr uint32_t kSpinThreads = 32;  // one block; each thread increments one element

class PendingTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_spin",
                                  {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, kSpinThreads,
                                  &spin_));
  }

  // One block that spins for kSpinMicroseconds, then data[i] += 1 for i < 32.
  vyre_dispatch_desc SpinDispatch(const std::vector<vyre_dispatch_binding>& bindings) {
    vyre_dispatch_desc desc = DispatchDesc(bindings, spin_params_);
    desc.grid[0] = 1;
    desc.grid[1] = 1;
    desc.grid[2] = 1;
    return desc;
  }

  ProgramHandle spin_;
  const std::vector<uint32_t> spin_params_ = {kSpinMicroseconds, kSpinThreads};
};

TEST_F(PendingTest, PollTimeoutWaitAndTiming) {
  const std::vector<uint32_t> initial = rng().NonZeroU32(kSpinThreads);
  BufferHandle buffer;
  ASSERT_TRUE(CreateBufferWith(context(), initial, &buffer));
  const std::vector<vyre_dispatch_binding> bindings = {Resident(buffer.get())};
  vyre_dispatch_desc desc = SpinDispatch(bindings);
  desc.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;

  const auto started = std::chrono::steady_clock::now();
  PendingHandle pending;
  ASSERT_VYRE_OK(vyre_dispatch_async(spin_.get(), &desc, pending.out()));
  const auto returned = std::chrono::steady_clock::now();
  EXPECT_LT(returned - started, std::chrono::microseconds(kSpinMicroseconds / 2))
      << "vyre_dispatch_async should return without waiting for the kernel";

  EXPECT_VYRE_STATUS(VYRE_STATUS_NOT_READY, vyre_pending_poll(pending.get()));
  vyre_timing timing = VYRE_TIMING_INIT;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE, vyre_pending_timing(pending.get(), &timing))
      << "timing before the wait";
  EXPECT_VYRE_STATUS(VYRE_STATUS_TIMEOUT, vyre_pending_wait(pending.get(), 1'000'000));  // 1 ms
  ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  EXPECT_VYRE_OK(vyre_pending_poll(pending.get())) << "poll after completion";

  ASSERT_VYRE_OK(vyre_pending_timing(pending.get(), &timing));
  EXPECT_GT(timing.wall_ns, 0u);
  EXPECT_GT(timing.enqueue_ns, 0u);
  EXPECT_GT(timing.wait_ns, 0u);
  EXPECT_GT(timing.device_ns, 0u);
  // The kernel spins kSpinNs by %globaltimer; allow for timer granularity.
  EXPECT_GE(timing.device_ns, kSpinNs * 9 / 10);
  EXPECT_GE(timing.wall_ns, kSpinNs * 9 / 10);
  EXPECT_GE(timing.wall_ns, timing.enqueue_ns);

  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE, vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER))
      << "second wait";
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE, vyre_pending_wait(pending.get(), 0))
      << "second wait with zero timeout";

  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(buffer.get(), kSpinThreads, &out));
  EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return initial[i] + 1u; }, "data + 1"));

  const vyre_pending released = pending.release();
  ASSERT_VYRE_OK(vyre_pending_release(released));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_pending_poll(released));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_pending_release(released));
}

// Host inputs are consumed before dispatch_async returns and host outputs are
// written by the wait, not before; small (staged) and large (direct) copies.
class PendingHostTest : public PendingTest, public ::testing::WithParamInterface<size_t> {};

TEST_P(PendingHostTest, InputsCopiedAtDispatchOutputsWrittenByWait) {
  const size_t n = GetParam();
  const std::vector<uint32_t> initial = rng().NonZeroU32(n);
  std::vector<uint32_t> input = initial;
  std::vector<uint32_t> output(n, kPoisonU32);
  vyre_dispatch_binding binding = HostInOut(nullptr, ByteSize(input));
  binding.host_input = input.data();
  binding.host_output = output.data();
  const std::vector<vyre_dispatch_binding> bindings = {binding};
  const vyre_dispatch_desc desc = SpinDispatch(bindings);

  PendingHandle pending;
  ASSERT_VYRE_OK(vyre_dispatch_async(spin_.get(), &desc, pending.out()));
  // Changing the input now must not change the result.
  std::fill(input.begin(), input.end(), 0u);
  EXPECT_TRUE(AllElementsEqual(output, [](size_t) { return kPoisonU32; }, "before the wait"));
  ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  // The spin kernel increments the first kSpinThreads elements only.
  EXPECT_TRUE(AllElementsEqual(
      output, [&](size_t i) { return initial[i] + (i < kSpinThreads ? 1u : 0u); },
      "after the wait"));
}

INSTANTIATE_TEST_SUITE_P(StagedAndDirect, PendingHostTest,
                         ::testing::Values(size_t{kSpinThreads}, size_t{1} << 20),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return std::to_string(info.param * sizeof(uint32_t)) + "_bytes";
                         });

// Releasing a pending dispatch that was never waited on waits for the device
// work but leaves host outputs alone.
TEST_F(PendingTest, ReleaseWithoutWaitSkipsReadBack) {
  std::vector<uint32_t> initial = rng().NonZeroU32(kSpinThreads);
  std::vector<uint32_t> output(kSpinThreads, kPoisonU32);
  vyre_dispatch_binding binding = HostInOut(nullptr, ByteSize(initial));
  binding.host_input = initial.data();
  binding.host_output = output.data();
  const std::vector<vyre_dispatch_binding> bindings = {binding};
  vyre_dispatch_desc desc = SpinDispatch(bindings);
  std::vector<uint32_t> short_spin = {1000, kSpinThreads};  // 1 ms
  desc.param_words = short_spin.data();

  PendingHandle pending;
  ASSERT_VYRE_OK(vyre_dispatch_async(spin_.get(), &desc, pending.out()));
  ASSERT_VYRE_OK(vyre_pending_release(pending.release()));
  EXPECT_TRUE(AllElementsEqual(output, [](size_t) { return kPoisonU32; }, "after release"));
}

TEST_F(PendingTest, FreeBufferWhileInFlight) {
  const uint64_t kBufferBytes = uint64_t{64} << 20;
  BufferHandle buffer;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), kBufferBytes, buffer.out()));
  const std::vector<uint32_t> initial = rng().NonZeroU32(kSpinThreads);
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), 0, initial.data(), ByteSize(initial)));

  const std::vector<vyre_dispatch_binding> bindings = {Resident(buffer.get())};
  const vyre_dispatch_desc desc = SpinDispatch(bindings);
  PendingHandle pending;
  ASSERT_VYRE_OK(vyre_dispatch_async(spin_.get(), &desc, pending.out()));
  const vyre_telemetry in_flight = Telemetry(context());

  const vyre_buffer freed = buffer.release();
  ASSERT_VYRE_OK(vyre_buffer_free(freed));
  // The handle is stale at once, while the kernel still runs.
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_buffer_info_get(freed, &info));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE,
                     vyre_buffer_upload(freed, 0, initial.data(), ByteSize(initial)));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_buffer_free(freed));
  vyre_dispatch_desc again = desc;
  const std::vector<vyre_dispatch_binding> stale_bindings = {Resident(freed)};
  again.bindings = stale_bindings.data();
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_dispatch(spin_.get(), &again, nullptr));

  EXPECT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  ASSERT_VYRE_OK(vyre_pending_release(pending.release()));

  const vyre_telemetry after = Telemetry(context());
  EXPECT_LE(after.device_bytes_live + kBufferBytes, in_flight.device_bytes_live)
      << "the freed buffer's memory should be released once the dispatch completed (live "
      << in_flight.device_bytes_live << " -> " << after.device_bytes_live << ")";
  EXPECT_EQ(after.live_pendings, 0u);

  // The context keeps working.
  BufferHandle fresh;
  ASSERT_TRUE(CreateBufferWith(context(), initial, &fresh));
  const std::vector<vyre_dispatch_binding> fresh_bindings = {Resident(fresh.get())};
  vyre_dispatch_desc quick = SpinDispatch(fresh_bindings);
  const std::vector<uint32_t> short_spin = {10, kSpinThreads};
  quick.param_words = short_spin.data();
  ASSERT_VYRE_OK(vyre_dispatch(spin_.get(), &quick, nullptr));
  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(fresh.get(), kSpinThreads, &out));
  EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return initial[i] + 1u; }, "data + 1"));
}

// Destroying the context with work in flight waits for it and makes every
// handle it owned stale.
TEST_F(PendingTest, ContextDestroyWithWorkInFlight) {
  vyre_context_desc context_desc = VYRE_CONTEXT_DESC_INIT;
  ContextHandle second_context;
  ASSERT_VYRE_OK(vyre_context_create(&context_desc, second_context.out()));
  const vyre_context second = second_context.get();
  ProgramHandle spin;
  ASSERT_TRUE(CreateTestProgram(second, "vyre_test_spin",
                                {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, kSpinThreads,
                                &spin));
  BufferHandle buffer;
  ASSERT_TRUE(CreateBufferWith(second, rng().NonZeroU32(kSpinThreads), &buffer));
  const std::vector<vyre_dispatch_binding> bindings = {Resident(buffer.get())};
  const vyre_dispatch_desc desc = SpinDispatch(bindings);
  PendingHandle pending;
  ASSERT_VYRE_OK(vyre_dispatch_async(spin.get(), &desc, pending.out()));

  ASSERT_VYRE_OK(vyre_context_destroy(second_context.release()));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_pending_poll(pending.release()));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_buffer_free(buffer.release()));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_program_destroy(spin.release()));
  vyre_telemetry telemetry = VYRE_TELEMETRY_INIT;
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_context_telemetry(second, &telemetry));

  // The fixture's context is unaffected.
  EXPECT_VYRE_OK(vyre_context_telemetry(context(), &telemetry));
}

}  // namespace
}  // namespace vyre_test
