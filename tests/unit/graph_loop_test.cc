// Loop graphs (vyre_graph_loop_create) on the fake driver, which runs WHILE
// nodes and the library's control kernel on the host: a countdown body
// (vyre_test_countdown_u32: every positive element drops by one, the
// condition word is set while one is still positive) recorded as a dispatch
// graph or a sequence, looped until it clears the condition or hits the
// bound. Fresh random non-zero data per launch, the condition and count words
// poisoned before, every element compared with a CPU model; every refusal
// checked for its status and a first line "<fn>: ... Fix: ...".
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "api_fake_fixture.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

constexpr const char* kFn = "vyre_graph_loop_create";



// Values in [1, top]: each needs that many rounds to reach 0.
std::vector<uint32_t> Countdowns(size_t n, uint32_t top, uint32_t seed) {
  std::vector<uint32_t> v = RandomNonZeroU32(n, seed);
  for (uint32_t& x : v) x = 1 + x % top;
  return v;
}

// What `iterations` rounds of the countdown leave.
std::vector<uint32_t> CpuCountdown(std::vector<uint32_t> v, uint32_t iterations) {
  for (uint32_t& x : v) x = x > iterations ? x - iterations : 0;
  return v;
}

// Rounds a loop bounded by `max` runs over `v`: until nothing stays
// positive (at least one), or the bound.
uint32_t CpuRounds(const std::vector<uint32_t>& v, uint32_t max) {
  const uint32_t top = *std::max_element(v.begin(), v.end());
  return std::min(std::max(top, 1u), max);
}

class GraphLoopTest : public FakeDriverTest {
 protected:
  void SetUp() override {
    FakeDriverTest::SetUp();
    program_ = MakeProgram(context_, CountdownSpec());
    data_ = MakeBuffer(context_, kN * 4);
    words_ = MakeBuffer(context_, 16);  // [0] condition, [1] count, [2..3] spare
  }
  void TearDown() override {
    EXPECT_VYRE_OK(vyre_buffer_free(data_));
    if (words_.bits != 0) {
      EXPECT_VYRE_OK(vyre_buffer_free(words_));
    }
    EXPECT_VYRE_OK(vyre_program_destroy(program_));
    FakeDriverTest::TearDown();
    const fake_cuda_stats after = FakeCuda::Stats();
    EXPECT_EQ(after.graphs_live, before_.graphs_live) << "CUDA graphs leaked";
    EXPECT_EQ(after.graph_execs_live, before_.graph_execs_live) << "executable graphs leaked";
  }

  // The countdown over data_ with words_[0] as its flag, recorded.
  vyre_graph RecordBody() {
    DispatchSpec spec;
    spec.bindings = {Resident(data_, 0, kN * 4), Resident(words_, 0, 4)};
    spec.param_words = {kN};
    const vyre_dispatch_desc desc = spec.Desc();
    vyre_graph graph{0};
    EXPECT_VYRE_OK(vyre_graph_record(program_, &desc, &graph));
    return graph;
  }

  vyre_graph_loop_desc LoopDesc(uint32_t max) const {
    vyre_graph_loop_desc desc = VYRE_GRAPH_LOOP_DESC_INIT;
    desc.max_iterations = max;
    desc.condition_buffer = words_;
    desc.condition_offset = 0;
    desc.count_buffer = words_;
    desc.count_offset = 4;
    return desc;
  }

  // Uploads fresh countdowns, poisons the words, launches the loop, and
  // checks every element, the count and the condition against the CPU.
  void LaunchAndCheck(vyre_graph loop, uint32_t max, uint32_t top, uint32_t seed,
                      bool has_count = true) {
    const std::vector<uint32_t> input = Countdowns(kN, top, seed);
    ASSERT_VYRE_OK(vyre_buffer_upload(data_, 0, input.data(), kN * 4));
    const std::vector<uint32_t> poison(4, kPoison);
    ASSERT_VYRE_OK(vyre_buffer_upload(words_, 0, poison.data(), 16));
    ASSERT_VYRE_OK(vyre_graph_replay(loop, nullptr, nullptr));
    const uint32_t rounds = CpuRounds(input, max);
    std::vector<uint32_t> out(kN, kPoison);
    ASSERT_VYRE_OK(vyre_buffer_download(data_, 0, out.data(), kN * 4));
    EXPECT_TRUE(SameU32(out, CpuCountdown(input, rounds)));
    std::vector<uint32_t> words(4, 0);
    ASSERT_VYRE_OK(vyre_buffer_download(words_, 0, words.data(), 16));
    const bool stopped_by_bound = *std::max_element(input.begin(), input.end()) > max;
    EXPECT_EQ(words[0] != 0, stopped_by_bound) << "condition word " << words[0];
    if (has_count) {
      EXPECT_EQ(words[1], rounds);
    }
    EXPECT_EQ(words[2], kPoison);  // untouched
    EXPECT_EQ(words[3], kPoison);
  }

  static constexpr uint32_t kN = 1000;
  vyre_program program_{0};
  vyre_buffer data_{0};
  vyre_buffer words_{0};
};

TEST_F(GraphLoopTest, RunsUntilTheBodyClearsTheCondition) {
  vyre_graph body = RecordBody();
  const vyre_graph_loop_desc desc = LoopDesc(100);
  vyre_graph loop{0};
  ASSERT_VYRE_OK(vyre_graph_loop_create(body, &desc, &loop));
  // The loop keeps its body alive.
  EXPECT_VYRE_OK(vyre_graph_destroy(body));
  for (uint32_t round = 0; round < 3; ++round) {
    LaunchAndCheck(loop, 100, 40 + round * 7, 100 + round);
  }
  vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
  ASSERT_VYRE_OK(vyre_graph_info_get(loop, &info));
  EXPECT_EQ(info.node_count, 2u);
  EXPECT_EQ(info.replays, 3u);
  vyre_graph_node_kind kind{};
  ASSERT_VYRE_OK(vyre_graph_node_kind_get(loop, 0, &kind));
  EXPECT_EQ(kind, VYRE_GRAPH_NODE_KERNEL);
  ASSERT_VYRE_OK(vyre_graph_node_kind_get(loop, 1, &kind));
  EXPECT_EQ(kind, VYRE_GRAPH_NODE_CONDITIONAL);
  EXPECT_VYRE_OK(vyre_graph_destroy(loop));
}

TEST_F(GraphLoopTest, StopsAtTheBoundWithTheConditionStillSet) {
  vyre_graph body = RecordBody();
  const vyre_graph_loop_desc desc = LoopDesc(5);
  vyre_graph loop{0};
  ASSERT_VYRE_OK(vyre_graph_loop_create(body, &desc, &loop));
  LaunchAndCheck(loop, 5, 60, 7);
  // A bound of one runs the body once.
  const vyre_graph_loop_desc once = LoopDesc(1);
  vyre_graph single{0};
  ASSERT_VYRE_OK(vyre_graph_loop_create(body, &once, &single));
  LaunchAndCheck(single, 1, 60, 8);
  EXPECT_VYRE_OK(vyre_graph_destroy(single));
  EXPECT_VYRE_OK(vyre_graph_destroy(loop));
  EXPECT_VYRE_OK(vyre_graph_destroy(body));
}

TEST_F(GraphLoopTest, WithoutACountWordAndOverAReplayAsyncOrALaunch) {
  vyre_graph body = RecordBody();
  vyre_graph_loop_desc desc = LoopDesc(1000);
  desc.count_buffer = vyre_buffer{0};
  vyre_graph loop{0};
  ASSERT_VYRE_OK(vyre_graph_loop_create(body, &desc, &loop));
  LaunchAndCheck(loop, 1000, 90, 21, /*has_count=*/false);
  const std::vector<uint32_t> input = Countdowns(kN, 30, 22);
  ASSERT_VYRE_OK(vyre_buffer_upload(data_, 0, input.data(), kN * 4));
  vyre_pending pending{0};
  ASSERT_VYRE_OK(vyre_graph_replay_async(loop, nullptr, &pending));
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  ASSERT_VYRE_OK(vyre_pending_release(pending));
  std::vector<uint32_t> out(kN, kPoison);
  ASSERT_VYRE_OK(vyre_buffer_download(data_, 0, out.data(), kN * 4));
  EXPECT_TRUE(SameU32(out, std::vector<uint32_t>(kN, 0)));
  EXPECT_VYRE_OK(vyre_graph_destroy(loop));
  EXPECT_VYRE_OK(vyre_graph_destroy(body));
}

TEST_F(GraphLoopTest, ASequenceBodyLoopsToo) {
  DispatchSpec spec;
  spec.bindings = {Resident(data_, 0, kN * 4), Resident(words_, 0, 4)};
  spec.param_words = {kN};
  const vyre_dispatch_desc dispatch = spec.Desc();
  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.kind = VYRE_STEP_DISPATCH;
  step.program = program_;
  step.dispatch = &dispatch;
  vyre_sequence_desc seq_desc = VYRE_SEQUENCE_DESC_INIT;
  seq_desc.steps = &step;
  seq_desc.step_count = 1;
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(vyre_sequence_create(context_, &seq_desc, &sequence));
  vyre_graph body{0};
  ASSERT_VYRE_OK(vyre_sequence_record(sequence, &body));
  const vyre_graph_loop_desc desc = LoopDesc(64);
  vyre_graph loop{0};
  ASSERT_VYRE_OK(vyre_graph_loop_create(body, &desc, &loop));
  LaunchAndCheck(loop, 64, 50, 31);
  LaunchAndCheck(loop, 64, 99, 32);
  EXPECT_VYRE_OK(vyre_graph_destroy(loop));
  EXPECT_VYRE_OK(vyre_graph_destroy(body));
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
}

// The loop takes the body as it stands when made: a rebinding made before
// is in it, one made after is not.
TEST_F(GraphLoopTest, TakesTheBodyAsItStandsWhenMade) {
  vyre_graph body = RecordBody();
  vyre_buffer other = MakeBuffer(context_, kN * 4);
  // Rebind the body's data to `other` by a replay over fresh values.
  const std::vector<uint32_t> seed_values = Countdowns(kN, 9, 41);
  ASSERT_VYRE_OK(vyre_buffer_upload(other, 0, seed_values.data(), kN * 4));
  vyre_dispatch_binding rebound[2] = {Resident(other, 0, kN * 4), Resident(words_, 0, 4)};
  vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
  replay.bindings = rebound;
  replay.binding_count = 2;
  ASSERT_VYRE_OK(vyre_graph_replay(body, &replay, nullptr));
  const vyre_graph_loop_desc desc = LoopDesc(100);
  vyre_graph loop{0};
  ASSERT_VYRE_OK(vyre_graph_loop_create(body, &desc, &loop));
  // Back to data_ afterwards: the loop keeps running over `other`.
  rebound[0] = Resident(data_, 0, kN * 4);
  ASSERT_VYRE_OK(vyre_graph_replay(body, &replay, nullptr));
  const std::vector<uint32_t> input = Countdowns(kN, 30, 42);
  const std::vector<uint32_t> untouched = RandomNonZeroU32(kN, 43);
  ASSERT_VYRE_OK(vyre_buffer_upload(other, 0, input.data(), kN * 4));
  ASSERT_VYRE_OK(vyre_buffer_upload(data_, 0, untouched.data(), kN * 4));
  ASSERT_VYRE_OK(vyre_graph_replay(loop, nullptr, nullptr));
  std::vector<uint32_t> out(kN, kPoison);
  ASSERT_VYRE_OK(vyre_buffer_download(other, 0, out.data(), kN * 4));
  EXPECT_TRUE(SameU32(out, std::vector<uint32_t>(kN, 0)));
  ASSERT_VYRE_OK(vyre_buffer_download(data_, 0, out.data(), kN * 4));
  EXPECT_TRUE(SameU32(out, untouched));
  // Freeing `other` stales the loop, which holds it.
  EXPECT_VYRE_OK(vyre_buffer_free(other));
  EXPECT_API_ERROR(vyre_graph_replay(loop, nullptr, nullptr), VYRE_STATUS_STALE_HANDLE,
                   "vyre_graph_replay");
  EXPECT_VYRE_OK(vyre_graph_destroy(loop));
  EXPECT_VYRE_OK(vyre_graph_destroy(body));
}

TEST_F(GraphLoopTest, RefusesWhatCannotLoop) {
  vyre_graph body = RecordBody();
  vyre_graph loop{0};
  vyre_graph_loop_desc desc = LoopDesc(0);
  EXPECT_API_ERROR(vyre_graph_loop_create(body, &desc, &loop), VYRE_STATUS_INVALID_ARGUMENT, kFn);
  EXPECT_EQ(loop.bits, 0u);
  desc = LoopDesc(10);
  desc.condition_offset = 2;
  EXPECT_API_ERROR(vyre_graph_loop_create(body, &desc, &loop), VYRE_STATUS_INVALID_ARGUMENT, kFn);
  desc.condition_offset = 16;
  EXPECT_API_ERROR(vyre_graph_loop_create(body, &desc, &loop), VYRE_STATUS_OUT_OF_RANGE, kFn);
  desc.condition_offset = 4;  // the count word's
  EXPECT_API_ERROR(vyre_graph_loop_create(body, &desc, &loop), VYRE_STATUS_INVALID_ARGUMENT, kFn);
  desc = LoopDesc(10);
  desc.count_offset = 13;
  EXPECT_API_ERROR(vyre_graph_loop_create(body, &desc, &loop), VYRE_STATUS_INVALID_ARGUMENT, kFn);
  desc = LoopDesc(10);
  desc.condition_buffer = vyre_buffer{0};
  EXPECT_VYRE_ERROR(vyre_graph_loop_create(body, &desc, &loop), VYRE_STATUS_INVALID_HANDLE);
  EXPECT_VYRE_ERROR(vyre_graph_loop_create(body, nullptr, &loop), VYRE_STATUS_INVALID_ARGUMENT);
  desc = LoopDesc(10);
  EXPECT_VYRE_ERROR(vyre_graph_loop_create(body, &desc, nullptr), VYRE_STATUS_INVALID_ARGUMENT);

  // A buffer of another context.
  vyre_context other = MakeContext();
  vyre_buffer foreign = MakeBuffer(other, 16);
  desc.condition_buffer = foreign;
  EXPECT_API_ERROR(vyre_graph_loop_create(body, &desc, &loop), VYRE_STATUS_INVALID_ARGUMENT, kFn);
  EXPECT_VYRE_OK(vyre_buffer_free(foreign));
  EXPECT_VYRE_OK(vyre_context_destroy(other));

  // A body with HOST bindings.
  std::vector<uint32_t> host(kN, 3);
  uint32_t flag = 0;
  DispatchSpec spec;
  spec.bindings = {HostInOut(host.data(), kN * 4), HostInOut(&flag, 4)};
  spec.param_words = {kN};
  const vyre_dispatch_desc host_desc = spec.Desc();
  vyre_graph host_body{0};
  ASSERT_VYRE_OK(vyre_graph_record(program_, &host_desc, &host_body));
  desc = LoopDesc(10);
  EXPECT_API_ERROR(vyre_graph_loop_create(host_body, &desc, &loop), VYRE_STATUS_INVALID_ARGUMENT,
                   kFn);
  EXPECT_VYRE_OK(vyre_graph_destroy(host_body));

  // A replay of the loop takes no bindings; a freed condition buffer stales it.
  ASSERT_VYRE_OK(vyre_graph_loop_create(body, &desc, &loop));
  vyre_dispatch_binding binding = Resident(data_, 0, kN * 4);
  vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
  replay.bindings = &binding;
  replay.binding_count = 1;
  EXPECT_API_ERROR(vyre_graph_replay(loop, &replay, nullptr), VYRE_STATUS_INVALID_ARGUMENT,
                   "vyre_graph_replay");
  EXPECT_VYRE_OK(vyre_buffer_free(words_));
  words_ = vyre_buffer{0};
  EXPECT_API_ERROR(vyre_graph_replay(loop, nullptr, nullptr), VYRE_STATUS_STALE_HANDLE,
                   "vyre_graph_replay");
  EXPECT_VYRE_OK(vyre_graph_destroy(loop));
  // A destroyed body is a stale handle.
  EXPECT_VYRE_OK(vyre_graph_destroy(body));
  desc.condition_buffer = data_;
  desc.count_buffer = vyre_buffer{0};
  EXPECT_VYRE_ERROR(vyre_graph_loop_create(body, &desc, &loop), VYRE_STATUS_STALE_HANDLE);
}

// Run alone with FAKE_CUDA_NO_CONDITIONAL=1 (tests/unit/CMakeLists.txt): a
// driver without CUDA 12.4's conditional nodes.
TEST_F(GraphLoopTest, DriverWithoutConditionalNodesIsTooOld) {
  const char* mode = std::getenv("FAKE_CUDA_NO_CONDITIONAL");
  if (mode == nullptr || std::string(mode) != "1") {
    GTEST_SKIP() << "runs as unit.graph_loop.old_driver (FAKE_CUDA_NO_CONDITIONAL=1)";
  }
  vyre_graph body = RecordBody();
  const vyre_graph_loop_desc desc = LoopDesc(10);
  vyre_graph loop{0};
  EXPECT_API_ERROR(vyre_graph_loop_create(body, &desc, &loop), VYRE_STATUS_DRIVER_TOO_OLD, kFn);
  EXPECT_EQ(loop.bits, 0u);
  // An e-graph rebuild with its rounds on the device: refused before it
  // starts, and the image stays usable.
  const uint32_t row_classes[2] = {0, 1}, row_ops[2] = {7, 7}, offsets[2] = {0, 0},
                 lengths[2] = {0, 0};
  vyre_egraph_image_desc idesc = VYRE_EGRAPH_IMAGE_DESC_INIT;
  idesc.device = VYRE_EGRAPH_DEVICE_GPU;
  idesc.context = context_;
  idesc.row_count = 2;
  idesc.class_count = 2;
  idesc.row_classes = row_classes;
  idesc.row_ops = row_ops;
  idesc.child_offsets = offsets;
  idesc.child_lengths = lengths;
  vyre_egraph_image image{0};
  ASSERT_VYRE_OK(vyre_egraph_image_create(&idesc, &image));
  vyre_egraph_rebuild_desc rdesc = VYRE_EGRAPH_REBUILD_DESC_INIT;
  rdesc.flags = VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS;
  EXPECT_API_ERROR(vyre_egraph_rebuild(image, &rdesc, nullptr), VYRE_STATUS_DRIVER_TOO_OLD,
                   "vyre_egraph_rebuild");
  vyre_egraph_image_info info = VYRE_EGRAPH_IMAGE_INFO_INIT;
  EXPECT_VYRE_OK(vyre_egraph_image_info_get(image, &info));
  EXPECT_VYRE_OK(vyre_egraph_image_destroy(image));
  // Everything else still works.
  const std::vector<uint32_t> input = Countdowns(kN, 5, 51);
  ASSERT_VYRE_OK(vyre_buffer_upload(data_, 0, input.data(), kN * 4));
  ASSERT_VYRE_OK(vyre_graph_replay(body, nullptr, nullptr));
  std::vector<uint32_t> out(kN, kPoison);
  ASSERT_VYRE_OK(vyre_buffer_download(data_, 0, out.data(), kN * 4));
  EXPECT_TRUE(SameU32(out, CpuCountdown(input, 1)));
  EXPECT_VYRE_OK(vyre_graph_destroy(body));
}

}  // namespace
}  // namespace vyre_test
