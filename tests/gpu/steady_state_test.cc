// Steady-state dispatches and graph replays allocate nothing: after warm-up,
// repeated synchronous (resident and host) and asynchronous dispatches,
// replays and sequence runs make no C++ heap allocation. This binary replaces the global operator new, which the
// library's calls resolve to, and counts while a test window is open. (The
// CUDA driver allocates with malloc, which this does not count; the check is
// about vyre-cuda's own code.) Results are still checked every time.
#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "gpu_test_env.h"

namespace {

std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};

}  // namespace

void* operator new(std::size_t size) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace vyre_test {
namespace {

constexpr int kWarmup = 8;
constexpr int kMeasured = 64;

// Counts the heap allocations `body` makes across kMeasured calls.
template <typename Body>
uint64_t AllocationsDuring(Body&& body) {
  for (int i = 0; i < kWarmup; ++i) body();
  g_allocations.store(0);
  g_counting.store(true);
  for (int i = 0; i < kMeasured; ++i) body();
  g_counting.store(false);
  return g_allocations.load();
}

class SteadyStateTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    a_ = rng().NonZeroU32(kCount);
    b_ = rng().NonZeroU32(kCount);
    expected_.resize(kCount);
    for (size_t i = 0; i < kCount; ++i) expected_[i] = a_[i] + b_[i];
    ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32",
                                  {Decl(VYRE_ROLE_INPUT), Decl(VYRE_ROLE_INPUT),
                                   Decl(VYRE_ROLE_OUTPUT)},
                                  256, &program_));
  }

  // Checks out against a + b and poisons it for the next dispatch.
  void CheckAndPoison(std::vector<uint32_t>& out, int* mismatches) {
    for (size_t i = 0; i < kCount; ++i) {
      if (out[i] != expected_[i]) ++*mismatches;
      out[i] = kPoisonU32;
    }
  }

  static constexpr size_t kCount = 4096;
  const std::vector<uint32_t> params_ = {static_cast<uint32_t>(kCount)};  // outlives each desc
  std::vector<uint32_t> a_, b_, expected_;
  ProgramHandle program_;
};

TEST_F(SteadyStateTest, SynchronousHostDispatchAllocatesNothing) {
  std::vector<uint32_t> out(kCount, kPoisonU32);
  const std::vector<vyre_dispatch_binding> bindings = {
      HostIn(a_.data(), ByteSize(a_)), HostIn(b_.data(), ByteSize(b_)),
      HostOut(out.data(), ByteSize(out))};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params_);
  int mismatches = 0;
  int failures = 0;
  const uint64_t allocations = AllocationsDuring([&] {
    if (vyre_dispatch(program_.get(), &desc, nullptr) != VYRE_STATUS_OK) ++failures;
    CheckAndPoison(out, &mismatches);
  });
  EXPECT_EQ(failures, 0) << DescribeLastError();
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(allocations, 0u) << "heap allocations in " << kMeasured << " host dispatches";
}

TEST_F(SteadyStateTest, SynchronousResidentDispatchAllocatesNothing) {
  BufferHandle buffers[3];
  const std::vector<uint32_t>* inputs[2] = {&a_, &b_};
  for (int k = 0; k < 3; ++k) {
    ASSERT_VYRE_OK(vyre_buffer_alloc(context(), kCount * 4, buffers[k].out()));
    if (k < 2) {
      ASSERT_VYRE_OK(vyre_buffer_upload(buffers[k].get(), 0, inputs[k]->data(), kCount * 4));
    }
  }
  const std::vector<vyre_dispatch_binding> bindings = {
      Resident(buffers[0].get(), 0, 0), Resident(buffers[1].get(), 0, 0),
      Resident(buffers[2].get(), 0, 0)};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params_);
  int failures = 0;
  const uint64_t allocations = AllocationsDuring([&] {
    if (vyre_dispatch(program_.get(), &desc, nullptr) != VYRE_STATUS_OK) ++failures;
  });
  EXPECT_EQ(failures, 0) << DescribeLastError();
  EXPECT_EQ(allocations, 0u) << "heap allocations in " << kMeasured << " resident dispatches";
  std::vector<uint32_t> out(kCount, kPoisonU32);
  ASSERT_VYRE_OK(vyre_buffer_download(buffers[2].get(), 0, out.data(), kCount * 4));
  int mismatches = 0;
  CheckAndPoison(out, &mismatches);
  EXPECT_EQ(mismatches, 0);
}

TEST_F(SteadyStateTest, AsynchronousDispatchReusesPendingsAndAllocatesNothing) {
  std::vector<uint32_t> out(kCount, kPoisonU32);
  const std::vector<vyre_dispatch_binding> bindings = {
      HostIn(a_.data(), ByteSize(a_)), HostIn(b_.data(), ByteSize(b_)),
      HostOut(out.data(), ByteSize(out))};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params_);
  int mismatches = 0;
  int failures = 0;
  const uint64_t allocations = AllocationsDuring([&] {
    vyre_pending pending{0};
    if (vyre_dispatch_async(program_.get(), &desc, &pending) != VYRE_STATUS_OK ||
        vyre_pending_wait(pending, VYRE_WAIT_FOREVER) != VYRE_STATUS_OK ||
        vyre_pending_release(pending) != VYRE_STATUS_OK) {
      ++failures;
    }
    CheckAndPoison(out, &mismatches);
  });
  EXPECT_EQ(failures, 0) << DescribeLastError();
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(allocations, 0u) << "heap allocations in " << kMeasured << " async dispatches";
  vyre_telemetry telemetry = VYRE_TELEMETRY_INIT;
  ASSERT_VYRE_OK(vyre_context_telemetry(context(), &telemetry));
  EXPECT_EQ(telemetry.live_pendings, 0u);
}

TEST_F(SteadyStateTest, GraphReplaysAllocateNothing) {
  std::vector<uint32_t> out(kCount, kPoisonU32);
  // Two input sets alternate, so every other replay uploads and the others
  // take the graph without input copies.
  std::vector<uint32_t> a2 = rng().NonZeroU32(kCount), b2 = rng().NonZeroU32(kCount);
  std::vector<uint32_t> expected2(kCount);
  for (size_t i = 0; i < kCount; ++i) expected2[i] = a2[i] + b2[i];
  std::vector<vyre_dispatch_binding> bindings = {
      HostIn(a_.data(), ByteSize(a_)), HostIn(b_.data(), ByteSize(b_)),
      HostOut(out.data(), ByteSize(out))};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params_);
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program_.get(), &desc, graph.out()));
  std::vector<vyre_dispatch_binding> second = {
      HostIn(a2.data(), ByteSize(a2)), HostIn(b2.data(), ByteSize(b2)),
      HostOut(out.data(), ByteSize(out))};
  vyre_graph_replay_desc replays[2] = {VYRE_GRAPH_REPLAY_DESC_INIT, VYRE_GRAPH_REPLAY_DESC_INIT};
  replays[0].bindings = bindings.data();
  replays[0].binding_count = bindings.size();
  replays[1].bindings = second.data();
  replays[1].binding_count = second.size();
  int mismatches = 0, failures = 0, turn = 0;
  auto check = [&](const std::vector<uint32_t>& want) {
    for (size_t i = 0; i < kCount; ++i) {
      if (out[i] != want[i]) ++mismatches;
      out[i] = kPoisonU32;
    }
  };
  const uint64_t sync_allocations = AllocationsDuring([&] {
    const int which = (turn++ / 2) % 2;  // two replays of each set in a row
    if (vyre_graph_replay(graph.get(), &replays[which], nullptr) != VYRE_STATUS_OK) ++failures;
    check(which == 0 ? expected_ : expected2);
  });
  const uint64_t async_allocations = AllocationsDuring([&] {
    const int which = (turn++ / 2) % 2;
    vyre_pending pending{0};
    if (vyre_graph_replay_async(graph.get(), &replays[which], &pending) != VYRE_STATUS_OK ||
        vyre_pending_wait(pending, VYRE_WAIT_FOREVER) != VYRE_STATUS_OK ||
        vyre_pending_release(pending) != VYRE_STATUS_OK) {
      ++failures;
    }
    check(which == 0 ? expected_ : expected2);
  });
  EXPECT_EQ(failures, 0) << DescribeLastError();
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(sync_allocations, 0u) << "heap allocations in " << kMeasured << " host replays";
  EXPECT_EQ(async_allocations, 0u) << "heap allocations in " << kMeasured << " async replays";
  vyre_telemetry telemetry = VYRE_TELEMETRY_INIT;
  ASSERT_VYRE_OK(vyre_context_telemetry(context(), &telemetry));
  EXPECT_EQ(telemetry.live_pendings, 0u);
  EXPECT_GT(telemetry.graph_uploads_skipped, 0u);
}

TEST_F(SteadyStateTest, ResidentReplaysAndSequenceRunsAllocateNothing) {
  BufferHandle buffers[3];
  const std::vector<uint32_t>* inputs[2] = {&a_, &b_};
  for (int k = 0; k < 3; ++k) {
    ASSERT_VYRE_OK(vyre_buffer_alloc(context(), kCount * 4, buffers[k].out()));
    if (k < 2) {
      ASSERT_VYRE_OK(vyre_buffer_upload(buffers[k].get(), 0, inputs[k]->data(), kCount * 4));
    }
  }
  const std::vector<vyre_dispatch_binding> bindings = {
      Resident(buffers[0].get(), 0, 0), Resident(buffers[1].get(), 0, 0),
      Resident(buffers[2].get(), 0, 0)};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params_);
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program_.get(), &desc, graph.out()));
  std::vector<uint32_t> out(kCount, kPoisonU32);
  vyre_sequence_step steps[2] = {VYRE_SEQUENCE_STEP_INIT, VYRE_SEQUENCE_STEP_INIT};
  steps[0].kind = VYRE_STEP_DISPATCH;
  steps[0].program = program_.get();
  steps[0].dispatch = &desc;
  steps[1].kind = VYRE_STEP_DOWNLOAD;
  steps[1].buffer = buffers[2].get();
  steps[1].bytes = kCount * 4;
  steps[1].host_dst = out.data();
  vyre_sequence_desc sequence_desc = VYRE_SEQUENCE_DESC_INIT;
  sequence_desc.steps = steps;
  sequence_desc.step_count = 2;
  SequenceHandle sequence;
  ASSERT_VYRE_OK(vyre_sequence_create(context(), &sequence_desc, sequence.out()));
  GraphHandle sequence_graph;
  ASSERT_VYRE_OK(vyre_sequence_record(sequence.get(), sequence_graph.out()));
  int failures = 0, mismatches = 0;
  const uint64_t allocations = AllocationsDuring([&] {
    if (vyre_graph_replay(graph.get(), nullptr, nullptr) != VYRE_STATUS_OK) ++failures;
    if (vyre_sequence_run(sequence.get(), nullptr) != VYRE_STATUS_OK) ++failures;
    CheckAndPoison(out, &mismatches);
    if (vyre_graph_replay(sequence_graph.get(), nullptr, nullptr) != VYRE_STATUS_OK) ++failures;
    CheckAndPoison(out, &mismatches);
  });
  EXPECT_EQ(failures, 0) << DescribeLastError();
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(allocations, 0u) << "heap allocations in " << kMeasured
                             << " x (resident replay, sequence run, sequence-graph replay)";
}

}  // namespace
}  // namespace vyre_test
