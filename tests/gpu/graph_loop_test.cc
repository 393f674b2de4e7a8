// Loop graphs on a real GPU (vyre_graph_loop_create: a conditional WHILE
// node and the library's device-linked control kernel). The body is a
// countdown (vyre_test_countdown_u32: every positive element drops by one;
// the condition word is set while one stays positive), recorded as a
// dispatch graph or a sequence. Each launch must stop exactly when the data
// reaches zero, or at the bound with the condition still set, and leave the
// number of iterations in the count word. Fresh random data every launch,
// words poisoned before, every element compared with the CPU.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "gpu_test_env.h"

namespace vyre_test {
namespace {

constexpr uint32_t kBlock = 256;

using GraphLoopGpuTest = GpuTest;

std::vector<uint32_t> Countdowns(RandomSource& rng, size_t n, uint32_t top) {
  std::vector<uint32_t> v = rng.NonZeroU32(n);
  for (uint32_t& x : v) x = 1 + x % top;
  return v;
}

struct LoopFixture {
  ProgramHandle program;
  BufferHandle data, words;
  uint32_t n = 0;

  ::testing::AssertionResult Make(vyre_context context, uint32_t count) {
    n = count;
    if (auto r = CreateTestProgram(context, "vyre_test_countdown_u32",
                                   {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data"),
                                    Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "flag")},
                                   kBlock, &program);
        !r) {
      return r;
    }
    if (auto r = CreateBufferWith(context, std::vector<uint32_t>(n, kPoisonU32), &data); !r) {
      return r;
    }
    return CreateBufferWith(context, std::vector<uint32_t>(4, kPoisonU32), &words);
  }
  std::vector<vyre_dispatch_binding> Bindings() const {
    return {Resident(data.get(), 0, uint64_t{n} * 4), Resident(words.get(), 0, 4)};
  }
  vyre_graph_loop_desc Loop(uint32_t max) const {
    vyre_graph_loop_desc desc = VYRE_GRAPH_LOOP_DESC_INIT;
    desc.max_iterations = max;
    desc.condition_buffer = words.get();
    desc.count_buffer = words.get();
    desc.count_offset = 4;
    return desc;
  }
  // Fresh countdowns in [1, top], words poisoned, one launch, all checked.
  ::testing::AssertionResult LaunchAndCheck(RandomSource& rng, vyre_graph loop, uint32_t max,
                                            uint32_t top) {
    const std::vector<uint32_t> input = Countdowns(rng, n, top);
    if (vyre_buffer_upload(data.get(), 0, input.data(), uint64_t{n} * 4) != VYRE_STATUS_OK ||
        vyre_buffer_upload(words.get(), 0, std::vector<uint32_t>(4, kPoisonU32).data(), 16) !=
            VYRE_STATUS_OK) {
      return ::testing::AssertionFailure() << "upload: " << LastErrorMessage();
    }
    if (vyre_graph_replay(loop, nullptr, nullptr) != VYRE_STATUS_OK) {
      return ::testing::AssertionFailure() << "replay: " << LastErrorMessage();
    }
    const uint32_t top_value = *std::max_element(input.begin(), input.end());
    const uint32_t rounds = std::min(top_value, max);
    std::vector<uint32_t> out, w;
    if (auto r = DownloadU32(data.get(), n, &out); !r) return r;
    if (auto r = DownloadU32(words.get(), 4, &w); !r) return r;
    if (auto r = AllElementsEqual(
            out, [&](size_t i) { return input[i] > rounds ? input[i] - rounds : 0u; }, "data");
        !r) {
      return r;
    }
    if (w[1] != rounds) {
      return ::testing::AssertionFailure() << "count word " << w[1] << ", expected " << rounds;
    }
    if ((w[0] != 0) != (top_value > max)) {
      return ::testing::AssertionFailure() << "condition word " << w[0] << " with top "
                                           << top_value << " and bound " << max;
    }
    if (w[2] != kPoisonU32 || w[3] != kPoisonU32) {
      return ::testing::AssertionFailure() << "words 2 and 3 were written";
    }
    return ::testing::AssertionSuccess();
  }
};

TEST_F(GraphLoopGpuTest, ADispatchLoopStopsAtTheFixpointOrTheBound) {
  LoopFixture f;
  ASSERT_TRUE(f.Make(context(), 300 * kBlock + 17));
  const std::vector<vyre_dispatch_binding> bindings = f.Bindings();
  const std::vector<uint32_t> words = {f.n};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, words);
  GraphHandle body;
  ASSERT_VYRE_OK(vyre_graph_record(f.program.get(), &desc, body.out()));
  GraphHandle loop, bounded;
  vyre_graph_loop_desc loop_desc = f.Loop(1000);
  ASSERT_VYRE_OK(vyre_graph_loop_create(body.get(), &loop_desc, loop.out()));
  loop_desc = f.Loop(37);
  ASSERT_VYRE_OK(vyre_graph_loop_create(body.get(), &loop_desc, bounded.out()));
  for (uint32_t top : {1u, 2u, 100u, 999u}) {
    EXPECT_TRUE(f.LaunchAndCheck(rng(), loop.get(), 1000, top)) << "top " << top;
  }
  for (uint32_t top : {36u, 37u, 38u, 500u}) {
    EXPECT_TRUE(f.LaunchAndCheck(rng(), bounded.get(), 37, top)) << "top " << top;
  }
}

TEST_F(GraphLoopGpuTest, ASequenceLoopAndAnAsyncLaunch) {
  LoopFixture f;
  ASSERT_TRUE(f.Make(context(), 40 * kBlock + 3));
  const std::vector<vyre_dispatch_binding> bindings = f.Bindings();
  const std::vector<uint32_t> words = {f.n};
  const vyre_dispatch_desc dispatch = DispatchDesc(bindings, words);
  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.kind = VYRE_STEP_DISPATCH;
  step.program = f.program.get();
  step.dispatch = &dispatch;
  vyre_sequence_desc seq_desc = VYRE_SEQUENCE_DESC_INIT;
  seq_desc.steps = &step;
  seq_desc.step_count = 1;
  SequenceHandle sequence;
  ASSERT_VYRE_OK(vyre_sequence_create(context(), &seq_desc, sequence.out()));
  GraphHandle body, loop;
  ASSERT_VYRE_OK(vyre_sequence_record(sequence.get(), body.out()));
  const vyre_graph_loop_desc loop_desc = f.Loop(64);
  ASSERT_VYRE_OK(vyre_graph_loop_create(body.get(), &loop_desc, loop.out()));
  EXPECT_TRUE(f.LaunchAndCheck(rng(), loop.get(), 64, 63));
  EXPECT_TRUE(f.LaunchAndCheck(rng(), loop.get(), 64, 300));
  // Asynchronously: the pending's wait covers every iteration.
  const std::vector<uint32_t> input = Countdowns(rng(), f.n, 50);
  ASSERT_VYRE_OK(vyre_buffer_upload(f.data.get(), 0, input.data(), uint64_t{f.n} * 4));
  vyre_pending pending{0};
  ASSERT_VYRE_OK(vyre_graph_replay_async(loop.get(), nullptr, &pending));
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  ASSERT_VYRE_OK(vyre_pending_release(pending));
  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(f.data.get(), f.n, &out));
  EXPECT_TRUE(AllElementsEqual(out, [](size_t) { return 0u; }, "data"));
}

}  // namespace
}  // namespace vyre_test
