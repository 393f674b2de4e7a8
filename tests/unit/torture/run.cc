// Seeded randomized "torture" test of the public API against the fake driver.
//
// Runs thousands of random operations over a small population of live and
// dead objects (contexts, buffers, programs, pending dispatches and replays,
// graphs, sequences) with valid,
// stale, forged, wrong-type and 0 handles, malformed descriptors, out-of-range
// and overflowing offsets, bad enum values, odd launch shapes and pending
// handles used in any order. Every call is checked against the rules that
// hold for every function (status in range, vyre_last_error agrees, "Fix:" in
// every failure message), well-formed calls must succeed, and the test
// kernels' results (vyre_test_add_u32, vyre_test_inc_u32) are compared with a
// CPU model that also shadows the contents of every resident buffer. Graphs
// (host and resident vector adds and increments) are recorded, replayed with
// fresh or unchanged inputs, other element counts, parameter words and
// rebound ranges, synchronously and asynchronously, and destroyed under their
// replays; sequences of random fill, copy, upload, download and dispatch steps
// (with a repeated block) run eagerly and as graphs against the same model;
// buffers are freed under both (a replay or run then says STALE_HANDLE). At the
// end every object is destroyed and the fake driver's live counts (graphs and
// executable graphs included) and misuse counter must be back where they
// started.
//
// Every pointer passed points at real memory of at least the length claimed.
//
// Environment:
//   VYRE_TORTURE_SEED=<n>  reproduce a run (the seed is printed at start;
//                          fixed by default, "random" for a fresh one)
//   VYRE_TORTURE_OPS=<n>   operations to run (default 20000)
#include <gtest/gtest.h>

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "fake_cuda_client.h"
#include "torture.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace torture {

// Relative frequencies of the operations.
const Torture::OpEntry Torture::kOps[] = {
    {"context_create", 2, &Torture::ContextCreate},
    {"context_destroy", 1, &Torture::ContextDestroy},
    {"context_query", 3, &Torture::ContextQuery},
    {"buffer_alloc", 8, &Torture::BufferAlloc},
    {"buffer_free", 5, &Torture::BufferFree},
    {"buffer_info", 3, &Torture::BufferInfo},
    {"upload", 10, &Torture::Upload},
    {"download", 10, &Torture::Download},
    {"upload_ranges", 5, &Torture::UploadRanges},
    {"download_ranges", 5, &Torture::DownloadRanges},
    {"program_create", 5, &Torture::ProgramCreate},
    {"program_destroy", 2, &Torture::ProgramDestroy},
    {"dispatch", 12, &Torture::Dispatch},
    {"dispatch_async", 10, &Torture::DispatchAsync},
    {"pending_poll", 5, &Torture::PendingPoll},
    {"pending_wait", 8, &Torture::PendingWait},
    {"pending_timing", 4, &Torture::PendingTiming},
    {"pending_release", 6, &Torture::PendingRelease},
    {"last_error_probe", 2, &Torture::LastErrorProbe},
    {"graph_record", 4, &Torture::GraphRecord},
    {"graph_replay", 8, &Torture::GraphReplaySync},
    {"graph_replay_async", 5, &Torture::GraphReplayAsync},
    {"graph_destroy", 2, &Torture::GraphDestroy},
    {"graph_query", 3, &Torture::GraphQuery},
    {"sequence_create", 3, &Torture::SequenceCreate},
    {"sequence_run", 4, &Torture::SequenceRun},
    {"sequence_record", 2, &Torture::SequenceRecord},
    {"sequence_destroy", 2, &Torture::SequenceDestroy},
    {"buffer_copy", 6, &Torture::BufferCopy},
};
const char* Torture::OpName(Op op) {
  static_assert(sizeof(kOps) / sizeof(kOps[0]) == size_t(Op::kCount), "one row per operation");
  return kOps[size_t(op)].name;
}

void Torture::Run(int operations) {
  int total_weight = 0;
  for (const OpEntry& entry : kOps) total_weight += entry.weight;
  for (op_index_ = 0; op_index_ < operations && failures_ < 20; ++op_index_) {
    if (pop_.contexts.empty() && !EnsureContext()) return;
    int r = int(rng_.Below(uint64_t(total_weight)));
    size_t op = 0;
    while (r >= kOps[op].weight) r -= kOps[op++].weight;
    current_op_ = Op(op);
    // Through a reference: GCC 12's -fsanitize=bounds checks the index of
    // `(this->*kOps[op].run)()` against a wild value (a false report).
    const OpEntry& entry = kOps[op];
    (this->*entry.run)();
  }
}

bool Torture::EnsureContext() {
  current_op_ = Op::kContextCreate;
  vyre_context c{0};
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_status s = Check(vyre_context_create(&desc, &c), "vyre_context_create");
  ExpectStatus(s, VYRE_STATUS_OK, "vyre_context_create");
  if (s != VYRE_STATUS_OK) return false;
  pop_.contexts.push_back(c.bits);
  return true;
}

void Torture::DestroyEverything() {
  // Destroy some graphs and sequences explicitly, leave the rest to context
  // destroy.
  for (size_t i = pop_.graphs.size(); i-- > 0;) {
    if (rng_.Chance(0.5)) {
      ExpectStatus(Check(vyre_graph_destroy(pop_.graphs[i].handle), "vyre_graph_destroy"),
                   VYRE_STATUS_OK, "vyre_graph_destroy (teardown)");
      ForgetGraph(i);
    }
  }
  for (size_t i = pop_.sequences.size(); i-- > 0;) {
    if (rng_.Chance(0.5)) {
      ExpectStatus(Check(vyre_sequence_destroy(pop_.sequences[i].handle), "vyre_sequence_destroy"),
                   VYRE_STATUS_OK, "vyre_sequence_destroy (teardown)");
      ForgetSequence(i);
    }
  }
  // Release some pendings explicitly, leave the rest to context destroy.
  for (size_t i = pop_.pendings.size(); i-- > 0;) {
    if (rng_.Chance(0.5)) {
      ExpectStatus(Check(vyre_pending_release(pop_.pendings[i].handle), "vyre_pending_release"),
                   VYRE_STATUS_OK, "vyre_pending_release (teardown)");
      if (!pop_.pendings[i].waited) {
        CheckHostOutputs(pop_.pendings[i], false, "vyre_pending_release (teardown)");
      }
      ForgetPending(i);
    }
  }
  while (!pop_.contexts.empty()) {
    uint64_t context = pop_.contexts.back();
    ExpectStatus(Check(vyre_context_destroy(vyre_context{context}), "vyre_context_destroy"),
                 VYRE_STATUS_OK, "vyre_context_destroy (teardown)");
    ForgetContext(context);
  }
  // Every handle ever made is dead now.
  for (uint64_t bits : pop_.dead_buffers) {
    ExpectStatus(Check(vyre_buffer_free(vyre_buffer{bits}), "vyre_buffer_free"),
                 VYRE_STATUS_STALE_HANDLE, "vyre_buffer_free (dead)");
  }
  for (uint64_t bits : pop_.dead_pendings) {
    ExpectStatus(Check(vyre_pending_release(vyre_pending{bits}), "vyre_pending_release"),
                 VYRE_STATUS_STALE_HANDLE, "vyre_pending_release (dead)");
  }
  for (uint64_t bits : pop_.dead_graphs) {
    ExpectStatus(Check(vyre_graph_destroy(vyre_graph{bits}), "vyre_graph_destroy"),
                 VYRE_STATUS_STALE_HANDLE, "vyre_graph_destroy (dead)");
  }
  for (uint64_t bits : pop_.dead_sequences) {
    ExpectStatus(Check(vyre_sequence_run(vyre_sequence{bits}, nullptr), "vyre_sequence_run"),
                 VYRE_STATUS_STALE_HANDLE, "vyre_sequence_run (dead)");
  }
}

void Torture::PrintSummary() const {
  std::printf("[torture] %d operations, %" PRIu64 " dispatches checked against the CPU model, %" PRIu64
              " host output elements compared\n",
              op_index_, checked_dispatches_, checked_elements_);
  std::printf("[torture] %" PRIu64 " graph replays and %" PRIu64
              " sequence runs/replays checked against the CPU model\n",
              checked_graph_replays_, checked_sequence_runs_);
  for (const auto& [call, statuses] : histogram_) {
    std::printf("[torture]   %-30s", call.c_str());
    for (const auto& [name, count] : statuses) {
      std::printf(" %s=%d", name.c_str() + std::strlen("VYRE_STATUS_"), count);
    }
    std::printf("\n");
  }
}

namespace {

// A fixed seed by default, so CI is reproducible; VYRE_TORTURE_SEED=<n>
// replays a run and VYRE_TORTURE_SEED=random explores new ones.
uint64_t SeedFromEnvironment() {
  constexpr uint64_t kDefaultSeed = 0x5EED2026112300ull;
  const char* text = std::getenv("VYRE_TORTURE_SEED");
  if (text == nullptr || *text == '\0') return kDefaultSeed;
  if (std::strcmp(text, "random") == 0) {
    std::random_device device;
    return (uint64_t{device()} << 32) | device();
  }
  return std::strtoull(text, nullptr, 0);
}

int OperationsFromEnvironment() {
  const char* text = std::getenv("VYRE_TORTURE_OPS");
  return text != nullptr && *text != '\0' ? std::atoi(text) : 20000;
}

TEST(ApiTortureTest, RandomOperationsKeepEveryInvariant) {
  ASSERT_TRUE(FakeCuda::Available())
      << "VYRE_CUDA_DRIVER_LIBRARY must name the fake driver (run through ctest)";
  uint64_t seed = SeedFromEnvironment();
  int operations = OperationsFromEnvironment();
  std::printf("[torture] seed %" PRIu64 " (rerun with VYRE_TORTURE_SEED=%" PRIu64 "), %d operations\n",
              seed, seed, operations);
  std::fflush(stdout);
  RecordProperty("seed", std::to_string(seed));
  SCOPED_TRACE("VYRE_TORTURE_SEED=" + std::to_string(seed));

  fake_cuda_stats before = FakeCuda::Stats();
  auto start = std::chrono::steady_clock::now();
  Torture torture(seed);
  torture.Run(operations);
  torture.DestroyEverything();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  torture.PrintSummary();
  std::printf("[torture] %.2f s\n", seconds);

  fake_cuda_stats after = FakeCuda::Stats();
  EXPECT_EQ(after.misuse_errors, before.misuse_errors)
      << "the engine made driver calls a real driver rejects (see 'fake cuda: MISUSE' above)";
  EXPECT_EQ(after.hold_timeouts, before.hold_timeouts);
  EXPECT_EQ(after.device_allocations_live, before.device_allocations_live);
  EXPECT_EQ(after.device_bytes_live, before.device_bytes_live);
  EXPECT_EQ(after.pinned_allocations_live, before.pinned_allocations_live);
  EXPECT_EQ(after.pinned_bytes_live, before.pinned_bytes_live);
  EXPECT_EQ(after.modules_live, before.modules_live);
  EXPECT_EQ(after.streams_live, before.streams_live);
  EXPECT_EQ(after.events_live, before.events_live);
  EXPECT_EQ(after.primary_context_retains, before.primary_context_retains);
  EXPECT_EQ(after.graphs_live, before.graphs_live);
  EXPECT_EQ(after.graph_execs_live, before.graph_execs_live);
}

}  // namespace
}  // namespace torture
}  // namespace vyre_test
