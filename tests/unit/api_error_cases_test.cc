// Documented error cases that no other suite asserted (docs/ERROR_CASES.md
// lists every case of every public function and the test that covers it).
// Each test asserts the exact status, and that the last error's message
// begins with the function's name, carries "Fix:" and has a first line that
// ends with a period (EXPECT_VYRE_ERROR_FROM). Fake driver; part of
// api_fake_driver_test (ctest unit.api_fake_driver).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api_fake_fixture.h"
#include "fake_cuda_client.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

class ErrorCasesTest : public FakeDriverTest {};

bool FirstLineContains(const std::string& part) {
  const std::string message = LastErrorMessage();
  return message.substr(0, message.find('\n')).find(part) != std::string::npos;
}

// "replay of a sequence graph with bindings, element count, parameter words
// or scalars: INVALID_ARGUMENT" (docs/ENGINE_CONTRACT.md, graphs and sequences).
TEST_F(ErrorCasesTest, SequenceGraphReplayTakesNoBindingsCountWordsOrScalars) {
  vyre_buffer buffer = MakeBuffer(context_, 64);
  vyre_sequence_step fill = VYRE_SEQUENCE_STEP_INIT;
  fill.kind = VYRE_STEP_FILL;
  fill.buffer = buffer;
  fill.bytes = 64;
  fill.fill_byte = 3;
  vyre_sequence_desc desc = VYRE_SEQUENCE_DESC_INIT;
  desc.steps = &fill;
  desc.step_count = 1;
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(vyre_sequence_create(context_, &desc, &sequence));
  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_sequence_record(sequence, &graph));

  vyre_dispatch_binding binding = Resident(buffer);
  const uint32_t words[1] = {1};
  const uint64_t scalars[1] = {1};
  struct Case {
    const char* name;
    void (*change)(vyre_graph_replay_desc*, const vyre_dispatch_binding*, const uint32_t*,
                   const uint64_t*);
  };
  const Case cases[] = {
      {"bindings",
       [](vyre_graph_replay_desc* d, const vyre_dispatch_binding* b, const uint32_t*,
          const uint64_t*) {
         d->bindings = b;
         d->binding_count = 1;
       }},
      {"element_count",
       [](vyre_graph_replay_desc* d, const vyre_dispatch_binding*, const uint32_t*,
          const uint64_t*) { d->element_count = 4; }},
      {"param_words",
       [](vyre_graph_replay_desc* d, const vyre_dispatch_binding*, const uint32_t* w,
          const uint64_t*) {
         d->param_words = w;
         d->param_word_count = 1;
       }},
      {"scalars",
       [](vyre_graph_replay_desc* d, const vyre_dispatch_binding*, const uint32_t*,
          const uint64_t* s) {
         d->scalars = s;
         d->scalar_count = 1;
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
    c.change(&replay, &binding, words, scalars);
    EXPECT_VYRE_ERROR_FROM(vyre_graph_replay(graph, &replay, nullptr),
                           VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_replay");
    vyre_pending pending{0};
    EXPECT_VYRE_ERROR_FROM(vyre_graph_replay_async(graph, &replay, &pending),
                           VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_replay_async");
    EXPECT_EQ(pending.bits, 0u);
  }
  // The graph still replays as recorded.
  EXPECT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

// "wait/signal: the driver refuses cu_stream (INVALID_HANDLE, ...): the
// CUresult's status, Fix: pass a live CUstream of the device's primary
// context" (docs/ENGINE_CONTRACT.md, interop). CUDA_ERROR_INVALID_HANDLE is
// DRIVER_ERROR (src/driver/cu_error.cc).
TEST_F(ErrorCasesTest, AStreamTheDriverRefusesGivesItsCuResultAndAFix) {
  const uint64_t misuse_before = FakeCuda::Stats().misuse_errors;
  const uint64_t forged_stream = 0x5eed0000beef0000ull;
  EXPECT_VYRE_ERROR_FROM(vyre_context_wait_stream(context_, forged_stream),
                         VYRE_STATUS_DRIVER_ERROR, "vyre_context_wait_stream");
  EXPECT_EQ(ReadLastError().cu_result, 400) << "CUDA_ERROR_INVALID_HANDLE";
  EXPECT_TRUE(FirstLineContains("Fix: pass a live CUstream")) << LastErrorMessage();
  EXPECT_VYRE_ERROR_FROM(vyre_context_signal_stream(context_, forged_stream),
                         VYRE_STATUS_DRIVER_ERROR, "vyre_context_signal_stream");
  EXPECT_EQ(ReadLastError().cu_result, 400) << "CUDA_ERROR_INVALID_HANDLE";
  EXPECT_TRUE(FirstLineContains("Fix: pass a live CUstream")) << LastErrorMessage();
  // The fake counts each refused stream as misuse; those two are the test's.
  const uint64_t misuse_after = FakeCuda::Stats().misuse_errors;
  EXPECT_EQ(misuse_after - misuse_before, 2u);
  before_.misuse_errors += misuse_after - misuse_before;
  // The context goes on.
  EXPECT_VYRE_OK(vyre_context_wait_stream(context_, 1));
  EXPECT_VYRE_OK(vyre_context_signal_stream(context_, 2));
}

}  // namespace
}  // namespace vyre_test
