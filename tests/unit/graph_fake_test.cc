// Graphs and sequences through the public API on the fake driver (which
// captures streams into graphs and runs their nodes on the host):
//   - validation of every graph and sequence entry point: NULL pointers,
//     0 / forged / stale / wrong-type handles, struct_size, counts that
//     disagree, ranges and offsets, shapes a replay may not change, capacity
//     classes, node indices, freed buffers. Every failure is checked for its
//     exact status and for a message whose first line reads
//     "<function>: ... Fix: ...";
//   - results: replays of host and resident graphs against a CPU reference
//     with fresh random data and poisoned outputs, the unchanged-input path,
//     rebinding, capacity classes, node inventories, kernel node updates,
//     sequences run eagerly and as a graph, and releases deferred while
//     replays are in flight.
// After every test the fake's live objects (allocations, streams, events,
// graphs, executable graphs) are back at their baseline and the fake saw no
// driver misuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api_fake_fixture.h"
#include "api_handle_calls.h"
#include "struct_size_util.h"

namespace vyre_test {
namespace {

constexpr uint64_t kMax = UINT64_MAX;

// ---------------------------------------------------------------------------
// Error assertions: status, "Fix:", and the first line "<fn>: ... Fix: ...".
// ---------------------------------------------------------------------------

// ExpectApiError and EXPECT_API_ERROR: tests/support/vyre_test_util.h.
#define ASSERT_API_ERROR(expr, expected, fn) \
  ASSERT_TRUE(::vyre_test::ExpectApiError((expr), (expected), (fn))) << "  in: " #expr

// ---------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------

class GraphTest : public FakeDriverTest {
 protected:
  void TearDown() override {
    FakeDriverTest::TearDown();
    fake_cuda_stats after = FakeCuda::Stats();
    EXPECT_EQ(after.graphs_live, before_.graphs_live) << "CUDA graphs leaked";
    EXPECT_EQ(after.graph_execs_live, before_.graph_execs_live)
        << "executable CUDA graphs leaked";
  }

  // The fixture context's graph and sequence counts.
  void ExpectLive(uint64_t graphs, uint64_t sequences) {
    vyre_telemetry t = Telemetry(context_);
    EXPECT_EQ(t.live_graphs, graphs);
    EXPECT_EQ(t.live_sequences, sequences);
  }
};

using GraphErrorsTest = GraphTest;
using GraphResultsTest = GraphTest;
using SequenceErrorsTest = GraphTest;
using SequenceResultsTest = GraphTest;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

// A replay descriptor that owns its arrays.
struct ReplaySpec {
  std::vector<vyre_dispatch_binding> bindings;
  std::vector<uint32_t> param_words;
  std::vector<uint64_t> scalars;
  uint64_t element_count = 0;
  uint32_t flags = 0;

  vyre_graph_replay_desc Desc() const {
    vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
    desc.flags = flags;
    desc.bindings = bindings.empty() ? nullptr : bindings.data();
    desc.binding_count = bindings.size();
    desc.param_words = param_words.empty() ? nullptr : param_words.data();
    desc.param_word_count = param_words.size();
    desc.scalars = scalars.empty() ? nullptr : scalars.data();
    desc.scalar_count = scalars.size();
    desc.element_count = element_count;
    return desc;
  }
};

// Host vector add over n elements: inputs a and b, output out (poisoned).
struct HostAdd {
  explicit HostAdd(size_t count, uint32_t seed = 1) : n(count) { Fresh(seed); }
  // In place: descriptors built earlier keep pointing at the same storage.
  void Fresh(uint32_t seed) {
    a.resize(n);
    b.resize(n);
    const std::vector<uint32_t> na = RandomNonZeroU32(n, seed);
    const std::vector<uint32_t> nb = RandomNonZeroU32(n, seed + 7777);
    std::copy(na.begin(), na.end(), a.begin());
    std::copy(nb.begin(), nb.end(), b.begin());
    Poison();
  }
  void Poison() { out.assign(n, kPoison); }
  std::vector<uint32_t> Expected() const { return CpuAdd(a, b); }
  DispatchSpec Dispatch() const {
    DispatchSpec spec;
    spec.bindings = {HostIn(a.data(), n * 4), HostIn(b.data(), n * 4),
                     HostOut(const_cast<uint32_t*>(out.data()), n * 4)};
    spec.param_words = {static_cast<uint32_t>(n)};
    return spec;
  }
  ReplaySpec Replay() {
    ReplaySpec spec;
    spec.bindings = {HostIn(a.data(), n * 4), HostIn(b.data(), n * 4),
                     HostOut(out.data(), n * 4)};
    return spec;
  }
  size_t n;
  std::vector<uint32_t> a, b, out;
};

vyre_graph Record(vyre_program program, const DispatchSpec& spec) {
  vyre_dispatch_desc desc = spec.Desc();
  vyre_graph graph{0};
  vyre_status status = vyre_graph_record(program, &desc, &graph);
  EXPECT_TRUE(IsOk(status)) << "vyre_graph_record";
  return graph;
}

vyre_status Replay(vyre_graph graph, const ReplaySpec& spec, vyre_timing* timing = nullptr) {
  vyre_graph_replay_desc desc = spec.Desc();
  return vyre_graph_replay(graph, &desc, timing);
}

vyre_status ReplayAsync(vyre_graph graph, const ReplaySpec& spec, vyre_pending* pending) {
  vyre_graph_replay_desc desc = spec.Desc();
  return vyre_graph_replay_async(graph, &desc, pending);
}

vyre_graph_info Info(vyre_graph graph) {
  vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
  EXPECT_VYRE_OK(vyre_graph_info_get(graph, &info));
  return info;
}

std::vector<vyre_graph_node_kind> NodeKinds(vyre_graph graph) {
  std::vector<vyre_graph_node_kind> kinds;
  const uint64_t count = Info(graph).node_count;
  for (uint64_t i = 0; i < count; ++i) {
    vyre_graph_node_kind kind = VYRE_GRAPH_NODE_KIND_FORCE32;
    EXPECT_VYRE_OK(vyre_graph_node_kind_get(graph, i, &kind));
    kinds.push_back(kind);
  }
  return kinds;
}

vyre_buffer UploadNew(vyre_context context, const std::vector<uint32_t>& data) {
  vyre_buffer buffer = MakeBuffer(context, ByteSize(data));
  EXPECT_VYRE_OK(vyre_buffer_upload(buffer, 0, data.data(), ByteSize(data)));
  return buffer;
}

std::vector<uint32_t> DownloadU32(vyre_buffer buffer, size_t count, uint64_t offset = 0) {
  std::vector<uint32_t> data(count, kPoison);
  EXPECT_VYRE_OK(vyre_buffer_download(buffer, offset, data.data(), count * 4));
  return data;
}

// A program whose blocks have one thread: a derived grid then runs exactly
// element_count threads, so the test kernels touch exactly that many
// elements when their parameter word n is larger.
ProgramSpec OneThread(ProgramSpec spec) {
  spec.workgroup[0] = 1;
  return spec;
}

// A resident vector add: buffers a, b (random) and out (poisoned).
struct ResidentAdd {
  ResidentAdd(vyre_context context, size_t count, uint32_t seed) : n(count) {
    a = RandomNonZeroU32(n, seed);
    b = RandomNonZeroU32(n, seed + 31);
    buf_a = UploadNew(context, a);
    buf_b = UploadNew(context, b);
    buf_out = UploadNew(context, std::vector<uint32_t>(n, kPoison));
  }
  void Free() {
    for (vyre_buffer buffer : {buf_a, buf_b, buf_out}) EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  }
  DispatchSpec Dispatch(uint32_t n_word) const {
    DispatchSpec spec;
    spec.bindings = {Resident(buf_a), Resident(buf_b), Resident(buf_out)};
    spec.param_words = {n_word};
    return spec;
  }
  ReplaySpec Rebind() const {
    ReplaySpec spec;
    spec.bindings = {Resident(buf_a), Resident(buf_b), Resident(buf_out)};
    return spec;
  }
  std::vector<uint32_t> Expected() const { return CpuAdd(a, b); }
  size_t n;
  std::vector<uint32_t> a, b;
  vyre_buffer buf_a{0}, buf_b{0}, buf_out{0};
};

// A sequence descriptor that owns its steps and dispatch descriptors.
struct SequenceSpec {
  std::vector<vyre_sequence_step> steps;
  std::vector<std::shared_ptr<DispatchSpec>> dispatch_specs;  // shared by copies
  std::vector<std::shared_ptr<vyre_dispatch_desc>> dispatch_descs;
  uint32_t repeat_count = 0;
  size_t repeat_first = 0;
  size_t repeat_step_count = 0;

  void Fill(vyre_buffer buffer, uint64_t offset, uint64_t bytes, uint32_t value) {
    vyre_sequence_step s = VYRE_SEQUENCE_STEP_INIT;
    s.kind = VYRE_STEP_FILL;
    s.buffer = buffer;
    s.offset = offset;
    s.bytes = bytes;
    s.fill_byte = value;
    steps.push_back(s);
  }
  void Copy(vyre_buffer dst, uint64_t dst_offset, vyre_buffer src, uint64_t src_offset,
            uint64_t bytes) {
    vyre_sequence_step s = VYRE_SEQUENCE_STEP_INIT;
    s.kind = VYRE_STEP_COPY;
    s.buffer = dst;
    s.offset = dst_offset;
    s.src_buffer = src;
    s.src_offset = src_offset;
    s.bytes = bytes;
    steps.push_back(s);
  }
  void Upload(vyre_buffer dst, uint64_t offset, const void* src, uint64_t bytes) {
    vyre_sequence_step s = VYRE_SEQUENCE_STEP_INIT;
    s.kind = VYRE_STEP_UPLOAD;
    s.buffer = dst;
    s.offset = offset;
    s.host_src = src;
    s.bytes = bytes;
    steps.push_back(s);
  }
  void Download(vyre_buffer src, uint64_t offset, void* dst, uint64_t bytes) {
    vyre_sequence_step s = VYRE_SEQUENCE_STEP_INIT;
    s.kind = VYRE_STEP_DOWNLOAD;
    s.buffer = src;
    s.offset = offset;
    s.host_dst = dst;
    s.bytes = bytes;
    steps.push_back(s);
  }
  void Dispatch(vyre_program program, DispatchSpec spec) {
    dispatch_specs.push_back(std::make_shared<DispatchSpec>(std::move(spec)));
    dispatch_descs.push_back(std::make_shared<vyre_dispatch_desc>(dispatch_specs.back()->Desc()));
    vyre_sequence_step s = VYRE_SEQUENCE_STEP_INIT;
    s.kind = VYRE_STEP_DISPATCH;
    s.program = program;
    s.dispatch = dispatch_descs.back().get();
    steps.push_back(s);
  }
  vyre_sequence_desc Desc() const {
    vyre_sequence_desc desc = VYRE_SEQUENCE_DESC_INIT;
    desc.steps = steps.empty() ? nullptr : steps.data();
    desc.step_count = steps.size();
    desc.repeat_count = repeat_count;
    desc.repeat_first = repeat_first;
    desc.repeat_step_count = repeat_step_count;
    return desc;
  }
};

vyre_status CreateSequence(vyre_context context, const SequenceSpec& spec, vyre_sequence* out) {
  vyre_sequence_desc desc = spec.Desc();
  return vyre_sequence_create(context, &desc, out);
}

uint32_t FloatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

// ===========================================================================
// Handles
// ===========================================================================

TEST_F(GraphErrorsTest, HandleTablesRejectZeroForgedWrongTypeAndStaleHandles) {
  // Live objects of every type.
  vyre_program add = MakeProgram(context_, AddSpec());
  vyre_program inc = MakeProgram(context_, IncSpec());
  vyre_buffer buffer = MakeBuffer(context_, 64);
  HostAdd host(16);
  vyre_graph graph = Record(add, host.Dispatch());
  ResidentAdd resident(context_, 4, 3);
  vyre_graph resident_graph = Record(add, resident.Dispatch(4));
  SequenceSpec fill;
  fill.Fill(buffer, 0, 16, 1);
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(CreateSequence(context_, fill, &sequence));
  vyre_pending pending{0};
  ASSERT_VYRE_OK(ReplayAsync(resident_graph, ReplaySpec{}, &pending));
  const std::map<HandleKind, uint64_t> live = {
      {HandleKind::kContext, context_.bits}, {HandleKind::kBuffer, buffer.bits},
      {HandleKind::kProgram, add.bits},      {HandleKind::kPending, pending.bits},
      {HandleKind::kGraph, graph.bits},      {HandleKind::kSequence, sequence.bits}};

  // Destroyed objects of every type.
  vyre_context dead_context = MakeContext();
  ASSERT_VYRE_OK(vyre_context_destroy(dead_context));
  vyre_buffer dead_buffer = MakeBuffer(context_, 64);
  ASSERT_VYRE_OK(vyre_buffer_free(dead_buffer));
  vyre_program dead_program = MakeProgram(context_, AddSpec());
  ASSERT_VYRE_OK(vyre_program_destroy(dead_program));
  vyre_pending dead_pending{0};
  ASSERT_VYRE_OK(ReplayAsync(resident_graph, ReplaySpec{}, &dead_pending));
  ASSERT_VYRE_OK(vyre_pending_release(dead_pending));
  vyre_graph dead_graph = Record(add, host.Dispatch());
  ASSERT_VYRE_OK(vyre_graph_destroy(dead_graph));
  vyre_sequence dead_sequence{0};
  ASSERT_VYRE_OK(CreateSequence(context_, fill, &dead_sequence));
  ASSERT_VYRE_OK(vyre_sequence_destroy(dead_sequence));
  const std::map<HandleKind, uint64_t> stale = {
      {HandleKind::kContext, dead_context.bits}, {HandleKind::kBuffer, dead_buffer.bits},
      {HandleKind::kProgram, dead_program.bits}, {HandleKind::kPending, dead_pending.bits},
      {HandleKind::kGraph, dead_graph.bits},     {HandleKind::kSequence, dead_sequence.bits}};

  std::vector<HandleCall> calls = GraphHandleCalls();
  calls.push_back(ResidentReplayCall(resident_graph));
  calls.push_back(SequenceStepBufferCall(context_));
  calls.push_back(SequenceStepProgramCall(context_, buffer));
  ASSERT_GE(calls.size(), 14u);
  for (const HandleCall& call : calls) {
    SCOPED_TRACE(call.function);
    // The function name as messages spell it ("vyre_x (detail)" -> "vyre_x").
    const std::string fn = call.function.substr(0, call.function.find(' '));
    EXPECT_API_ERROR(call.call(0), VYRE_STATUS_INVALID_HANDLE, fn.c_str()) << "handle 0";
    for (uint64_t bits : ForgedHandleBits()) {
      EXPECT_API_ERROR(call.call(bits), VYRE_STATUS_INVALID_HANDLE, fn.c_str())
          << "forged 0x" << std::hex << bits;
    }
    for (const auto& [kind, bits] : live) {
      if (kind == call.kind) continue;
      EXPECT_API_ERROR(call.call(bits), VYRE_STATUS_INVALID_HANDLE, fn.c_str())
          << "a live " << HandleKindName(kind) << " handle passed as a "
          << HandleKindName(call.kind);
    }
    EXPECT_API_ERROR(call.call(stale.at(call.kind)), VYRE_STATUS_STALE_HANDLE, fn.c_str())
        << "a destroyed " << HandleKindName(call.kind);
  }

  // None of that disturbed the live objects.
  EXPECT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_TRUE(SameU32(DownloadU32(resident.buf_out, 4), resident.Expected()));
  host.Fresh(5);
  ASSERT_VYRE_OK(Replay(graph, host.Replay()));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_VYRE_OK(vyre_sequence_run(sequence, nullptr));
  ExpectLive(2, 1);
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_graph_destroy(resident_graph));
  ExpectLive(0, 0);
  resident.Free();
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
}

TEST_F(GraphErrorsTest, DestroyingAContextMakesItsGraphsAndSequencesStale) {
  vyre_context other = MakeContext();
  vyre_program add = MakeProgram(other, AddSpec());
  vyre_buffer buffer = MakeBuffer(other, 64);
  HostAdd host(16);
  vyre_graph graph = Record(add, host.Dispatch());
  SequenceSpec fill;
  fill.Fill(buffer, 0, 64, 3);
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(CreateSequence(other, fill, &sequence));
  vyre_graph sequence_graph{0};
  ASSERT_VYRE_OK(vyre_sequence_record(sequence, &sequence_graph));
  ASSERT_VYRE_OK(vyre_context_destroy(other));

  for (const HandleCall& call : GraphHandleCalls()) {
    uint64_t bits = 0;
    switch (call.kind) {
      case HandleKind::kGraph: bits = graph.bits; break;
      case HandleKind::kSequence: bits = sequence.bits; break;
      case HandleKind::kProgram: bits = add.bits; break;
      case HandleKind::kContext: bits = other.bits; break;
      default: FAIL() << call.function;
    }
    EXPECT_API_ERROR(call.call(bits), VYRE_STATUS_STALE_HANDLE, call.function.c_str());
  }
  EXPECT_API_ERROR(vyre_graph_replay(sequence_graph, nullptr, nullptr),
                   VYRE_STATUS_STALE_HANDLE, "vyre_graph_replay");
  EXPECT_API_ERROR(vyre_graph_destroy(sequence_graph), VYRE_STATUS_STALE_HANDLE,
                   "vyre_graph_destroy");
}

TEST_F(GraphErrorsTest, DoubleDestroyIsStale) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(8);
  vyre_graph graph = Record(add, host.Dispatch());
  ASSERT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_API_ERROR(vyre_graph_destroy(graph), VYRE_STATUS_STALE_HANDLE, "vyre_graph_destroy");
  EXPECT_API_ERROR(Replay(graph, host.Replay()), VYRE_STATUS_STALE_HANDLE, "vyre_graph_replay");

  vyre_buffer buffer = MakeBuffer(context_, 16);
  SequenceSpec fill;
  fill.Fill(buffer, 0, 16, 0);
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(CreateSequence(context_, fill, &sequence));
  ASSERT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_API_ERROR(vyre_sequence_destroy(sequence), VYRE_STATUS_STALE_HANDLE,
                   "vyre_sequence_destroy");
  EXPECT_API_ERROR(vyre_sequence_run(sequence, nullptr), VYRE_STATUS_STALE_HANDLE,
                   "vyre_sequence_run");
  ExpectLive(0, 0);
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// ===========================================================================
// NULL pointers and struct_size
// ===========================================================================

TEST_F(GraphErrorsTest, NullOutPointersAndDescriptors) {
  vyre_program add = MakeProgram(context_, AddSpec());
  vyre_buffer buffer = MakeBuffer(context_, 64);
  HostAdd host(16);
  vyre_graph graph = Record(add, host.Dispatch());
  SequenceSpec fill;
  fill.Fill(buffer, 0, 64, 1);
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(CreateSequence(context_, fill, &sequence));
  constexpr auto kInvalid = VYRE_STATUS_INVALID_ARGUMENT;
  const uint64_t graphs_before = FakeCuda::Stats().graphs_live;

  const DispatchSpec dispatch_spec = host.Dispatch();
  vyre_dispatch_desc dispatch = dispatch_spec.Desc();
  vyre_graph graph_out{0xBAD};
  EXPECT_API_ERROR(vyre_graph_record(add, &dispatch, nullptr), kInvalid, "vyre_graph_record");
  EXPECT_API_ERROR(vyre_graph_record(add, nullptr, &graph_out), kInvalid, "vyre_graph_record");
  EXPECT_EQ(graph_out.bits, 0u) << "a failed record left a handle in *out";

  const ReplaySpec replay_spec = host.Replay();
  vyre_graph_replay_desc replay = replay_spec.Desc();
  EXPECT_API_ERROR(vyre_graph_replay_async(graph, &replay, nullptr), kInvalid,
                   "vyre_graph_replay_async");
  // A graph with HOST bindings needs them on every replay.
  EXPECT_API_ERROR(vyre_graph_replay(graph, nullptr, nullptr), kInvalid, "vyre_graph_replay");
  vyre_pending pending{0xBAD};
  EXPECT_API_ERROR(vyre_graph_replay_async(graph, nullptr, &pending), kInvalid,
                   "vyre_graph_replay_async");
  EXPECT_EQ(pending.bits, 0u);

  EXPECT_API_ERROR(vyre_graph_info_get(graph, nullptr), kInvalid, "vyre_graph_info_get");
  EXPECT_API_ERROR(vyre_graph_node_kind_get(graph, 0, nullptr), kInvalid,
                   "vyre_graph_node_kind_get");
  EXPECT_API_ERROR(vyre_graph_kernel_node_update(graph, 3, nullptr), kInvalid,
                   "vyre_graph_kernel_node_update");

  vyre_sequence_desc seq_desc = fill.Desc();
  vyre_sequence sequence_out{0xBAD};
  EXPECT_API_ERROR(vyre_sequence_create(context_, &seq_desc, nullptr), kInvalid,
                   "vyre_sequence_create");
  EXPECT_API_ERROR(vyre_sequence_create(context_, nullptr, &sequence_out), kInvalid,
                   "vyre_sequence_create");
  EXPECT_EQ(sequence_out.bits, 0u);
  EXPECT_API_ERROR(vyre_sequence_record(sequence, nullptr), kInvalid, "vyre_sequence_record");

  // Nothing was made, and the objects still work.
  EXPECT_EQ(FakeCuda::Stats().graphs_live, graphs_before);
  ExpectLive(1, 1);
  host.Fresh(2);
  ASSERT_VYRE_OK(Replay(graph, host.Replay()));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_VYRE_OK(vyre_sequence_run(sequence, nullptr));
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphErrorsTest, RecordChecksTheDispatchDescStructSize) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(32);
  const DispatchSpec dispatch_spec = host.Dispatch();
  vyre_dispatch_desc desc = dispatch_spec.Desc();
  vyre_graph graph{0};
  for (uint32_t size : TooSmallSizes<vyre_dispatch_desc>()) {
    vyre_dispatch_desc small = WithStructSize(desc, size);
    EXPECT_API_ERROR(vyre_graph_record(add, &small, &graph), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
                     "vyre_graph_record")
        << size;
  }
  LargerStruct<vyre_dispatch_desc> nonzero_tail(desc, 16, 0x7F);
  EXPECT_API_ERROR(vyre_graph_record(add, nonzero_tail.get(), &graph),
                   VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_graph_record");
  for (size_t index : {size_t{0}, size_t{2}}) {
    DispatchSpec spec = host.Dispatch();
    spec.bindings[index].struct_size = 8;
    vyre_dispatch_desc d = spec.Desc();
    EXPECT_API_ERROR(vyre_graph_record(add, &d, &graph), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
                     "vyre_graph_record")
        << "binding " << index;
  }
  ExpectLive(0, 0);
  LargerStruct<vyre_dispatch_desc> zero_tail(desc, 16, 0);
  ASSERT_VYRE_OK(vyre_graph_record(add, zero_tail.get(), &graph));
  ASSERT_VYRE_OK(Replay(graph, host.Replay()));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphErrorsTest, ReplayChecksItsStructSizes) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(32);
  vyre_graph graph = Record(add, host.Dispatch());
  const ReplaySpec replay_spec = host.Replay();
  const vyre_graph_replay_desc desc = replay_spec.Desc();
  vyre_pending pending{0};
  for (uint32_t size : TooSmallSizes<vyre_graph_replay_desc>()) {
    vyre_graph_replay_desc small = WithStructSize(desc, size);
    EXPECT_API_ERROR(vyre_graph_replay(graph, &small, nullptr),
                     VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_graph_replay")
        << size;
    EXPECT_API_ERROR(vyre_graph_replay_async(graph, &small, &pending),
                     VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_graph_replay_async")
        << size;
  }
  LargerStruct<vyre_graph_replay_desc> nonzero_tail(desc, 16, 0x01);
  EXPECT_API_ERROR(vyre_graph_replay(graph, nonzero_tail.get(), nullptr),
                   VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_graph_replay");
  EXPECT_API_ERROR(vyre_graph_replay_async(graph, nonzero_tail.get(), &pending),
                   VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_graph_replay_async");
  // Per-binding struct_size: too small, or differing from binding 0's.
  for (size_t index : {size_t{0}, size_t{1}, size_t{2}}) {
    ReplaySpec spec = host.Replay();
    spec.bindings[index].struct_size = 4;
    EXPECT_API_ERROR(Replay(graph, spec), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
                     "vyre_graph_replay")
        << "binding " << index;
  }
  // The out_timing struct.
  for (uint32_t size : TooSmallSizes<vyre_timing>()) {
    const vyre_timing init = VYRE_TIMING_INIT;
    vyre_timing small = WithStructSize(init, size);
    EXPECT_API_ERROR(vyre_graph_replay(graph, &desc, &small), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
                     "vyre_graph_replay")
        << size;
  }
  EXPECT_TRUE(SameU32(host.out, std::vector<uint32_t>(32, kPoison)))
      << "a refused replay wrote host outputs";
  const vyre_timing timing_init = VYRE_TIMING_INIT;
  LargerStruct<vyre_timing> larger_timing(timing_init, 24, 0);
  larger_timing.FillTail(0xCD);
  LargerStruct<vyre_graph_replay_desc> zero_tail(desc, 16, 0);
  ASSERT_VYRE_OK(vyre_graph_replay(graph, zero_tail.get(), larger_timing.get()));
  EXPECT_TRUE(larger_timing.TailIsAll(0xCD)) << "the library wrote past the timing it knows";
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  ASSERT_VYRE_OK(vyre_graph_replay_async(graph, zero_tail.get(), &pending));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphErrorsTest, InfoGetStructSize) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(32);
  vyre_graph graph = Record(add, host.Dispatch());
  for (uint32_t size : TooSmallSizes<vyre_graph_info>()) {
    const vyre_graph_info init = VYRE_GRAPH_INFO_INIT;
    vyre_graph_info small = WithStructSize(init, size);
    EXPECT_API_ERROR(vyre_graph_info_get(graph, &small), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
                     "vyre_graph_info_get")
        << size;
  }
  // An output struct: a larger one (a newer header's) gets the known fields
  // and its tail, zero or not, is the caller's (as for every output struct).
  const vyre_graph_info info_init = VYRE_GRAPH_INFO_INIT;
  LargerStruct<vyre_graph_info> larger(info_init, 40, 0);
  larger.FillTail(0xCD);
  ASSERT_VYRE_OK(vyre_graph_info_get(graph, larger.get()));
  EXPECT_TRUE(larger.TailIsAll(0xCD)) << "the library wrote past the struct it knows";
  EXPECT_EQ(larger.get()->struct_size, sizeof(vyre_graph_info) + 40);
  EXPECT_EQ(larger.get()->node_count, 5u);
  EXPECT_EQ(larger.get()->context.bits, context_.bits);
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphErrorsTest, KernelNodeUpdateStructSize) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(32);
  vyre_graph graph = Record(add, host.Dispatch());
  vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
  update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
  update.grid[0] = update.grid[1] = update.grid[2] = 1;
  for (uint32_t size : TooSmallSizes<vyre_kernel_node_update>()) {
    vyre_kernel_node_update small = WithStructSize(update, size);
    EXPECT_API_ERROR(vyre_graph_kernel_node_update(graph, 3, &small),
                     VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_graph_kernel_node_update")
        << size;
  }
  LargerStruct<vyre_kernel_node_update> nonzero_tail(update, 8, 0x40);
  EXPECT_API_ERROR(vyre_graph_kernel_node_update(graph, 3, nonzero_tail.get()),
                   VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_graph_kernel_node_update");
  LargerStruct<vyre_kernel_node_update> zero_tail(update, 8, 0);
  EXPECT_VYRE_OK(vyre_graph_kernel_node_update(graph, 3, zero_tail.get()));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// ===========================================================================
// Recording
// ===========================================================================

TEST_F(GraphErrorsTest, RecordRejectsWhatADispatchRejects) {
  vyre_program add = MakeProgram(context_, AddSpec());
  vyre_context other = MakeContext();
  vyre_buffer foreign = MakeBuffer(other, 256);
  ResidentAdd res(context_, 64, 11);
  vyre_buffer freed = MakeBuffer(context_, 256);
  ASSERT_VYRE_OK(vyre_buffer_free(freed));
  HostAdd host(64);
  const fake_cuda_stats driver_before = FakeCuda::Stats();
  const vyre_telemetry telemetry_before = Telemetry(context_);
  constexpr auto kInvalid = VYRE_STATUS_INVALID_ARGUMENT;

  // Each case edits the spec's arrays (spec_edit) or the desc built from them
  // (desc_edit).
  using SpecEdit = std::function<void(DispatchSpec*)>;
  using DescEdit = std::function<void(vyre_dispatch_desc*)>;
  struct Case {
    const char* name;
    SpecEdit spec_edit;
    DescEdit desc_edit;
    vyre_status expected;
  };
  const SpecEdit none_s = [](DispatchSpec*) {};
  const DescEdit none_d = [](vyre_dispatch_desc*) {};
  const std::vector<Case> cases = {
      {"binding_count 2 of 3", none_s, [](vyre_dispatch_desc* d) { d->binding_count = 2; },
       kInvalid},
      {"binding_count 4 of 3", none_s, [](vyre_dispatch_desc* d) { d->binding_count = 4; },
       kInvalid},
      {"bindings NULL, count 3", none_s, [](vyre_dispatch_desc* d) { d->bindings = nullptr; },
       kInvalid},
      {"param_words NULL, count 1", none_s,
       [](vyre_dispatch_desc* d) { d->param_words = nullptr; }, kInvalid},
      {"scalars NULL, count 2", none_s,
       [](vyre_dispatch_desc* d) {
         d->scalars = nullptr;
         d->scalar_count = 2;
       },
       kInvalid},
      {"fixpoint_iterations 0", none_s, [](vyre_dispatch_desc* d) { d->fixpoint_iterations = 0; },
       kInvalid},
      {"unknown flag", none_s, [](vyre_dispatch_desc* d) { d->flags = 1u << 7; }, kInvalid},
      {"cooperative", none_s,
       [](vyre_dispatch_desc* d) { d->flags = VYRE_DISPATCH_FLAG_COOPERATIVE; }, kInvalid},
      {"grid x 0 (y 2)", none_s,
       [](vyre_dispatch_desc* d) {
         d->grid[0] = 0;
         d->grid[1] = 2;
       },
       kInvalid},
      {"block over the device limit", none_s, [](vyre_dispatch_desc* d) { d->block[0] = 2048; },
       VYRE_STATUS_LIMIT_EXCEEDED},
      {"host_bytes 0", [](DispatchSpec* s) { s->bindings[0].host_bytes = 0; }, none_d, kInvalid},
      {"host_bytes not a multiple of 4", [](DispatchSpec* s) { s->bindings[1].host_bytes = 255; },
       none_d, kInvalid},
      {"input NULL", [](DispatchSpec* s) { s->bindings[1].host_input = nullptr; }, none_d,
       kInvalid},
      {"output NULL", [](DispatchSpec* s) { s->bindings[2].host_output = nullptr; }, none_d,
       kInvalid},
      {"bad source",
       [](DispatchSpec* s) {
         uint32_t raw = 9;
         std::memcpy(&s->bindings[0].source, &raw, 4);
       },
       none_d, kInvalid},
      {"resident range past the end",
       [&](DispatchSpec* s) { s->bindings[0] = Resident(res.buf_a, 4, 256); }, none_d,
       VYRE_STATUS_OUT_OF_RANGE},
      {"resident offset past the end",
       [&](DispatchSpec* s) { s->bindings[0] = Resident(res.buf_a, 260, 0); }, none_d,
       VYRE_STATUS_OUT_OF_RANGE},
      {"resident offset UINT64_MAX",
       [&](DispatchSpec* s) { s->bindings[0] = Resident(res.buf_a, kMax, 4); }, none_d,
       VYRE_STATUS_OUT_OF_RANGE},
      {"resident length UINT64_MAX (offset + length overflows)",
       [&](DispatchSpec* s) { s->bindings[2] = Resident(res.buf_out, 8, kMax); }, none_d,
       VYRE_STATUS_OUT_OF_RANGE},
      {"resident offset misaligned",
       [&](DispatchSpec* s) { s->bindings[0] = Resident(res.buf_a, 2, 128); }, none_d, kInvalid},
      {"resident buffer of another context",
       [&](DispatchSpec* s) { s->bindings[0] = Resident(foreign); }, none_d, kInvalid},
      {"resident buffer freed", [&](DispatchSpec* s) { s->bindings[1] = Resident(freed); },
       none_d, VYRE_STATUS_STALE_HANDLE},
      {"resident buffer 0", [&](DispatchSpec* s) { s->bindings[1] = Resident(vyre_buffer{0}); },
       none_d, VYRE_STATUS_INVALID_HANDLE},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    DispatchSpec spec = host.Dispatch();
    c.spec_edit(&spec);
    vyre_dispatch_desc desc = spec.Desc();
    c.desc_edit(&desc);
    vyre_graph graph{0xBAD};
    EXPECT_API_ERROR(vyre_graph_record(add, &desc, &graph), c.expected, "vyre_graph_record");
    EXPECT_EQ(graph.bits, 0u);
    if (graph.bits != 0 && graph.bits != 0xBAD) vyre_graph_destroy(graph);
  }
  // Nothing was made or left behind.
  const fake_cuda_stats driver_after = FakeCuda::Stats();
  EXPECT_EQ(driver_after.graphs_live, driver_before.graphs_live);
  EXPECT_EQ(driver_after.graph_execs_live, driver_before.graph_execs_live);
  EXPECT_EQ(driver_after.device_allocations_live, driver_before.device_allocations_live);
  EXPECT_EQ(driver_after.pinned_allocations_live, driver_before.pinned_allocations_live);
  const vyre_telemetry telemetry_after = Telemetry(context_);
  EXPECT_EQ(telemetry_after.graph_records, telemetry_before.graph_records);
  EXPECT_EQ(telemetry_after.live_graphs, 0u);
  EXPECT_TRUE(SameU32(host.out, std::vector<uint32_t>(64, kPoison)));

  res.Free();
  EXPECT_VYRE_OK(vyre_context_destroy(other));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphErrorsTest, CooperativeDispatchesAreNotRecordable) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(256);
  DispatchSpec spec = host.Dispatch();
  spec.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
  vyre_dispatch_desc desc = spec.Desc();
  // The same dispatch runs fine eagerly.
  ASSERT_VYRE_OK(vyre_dispatch(add, &desc, nullptr));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  vyre_graph graph{0};
  EXPECT_API_ERROR(vyre_graph_record(add, &desc, &graph), VYRE_STATUS_INVALID_ARGUMENT,
                   "vyre_graph_record");
  EXPECT_NE(LastErrorMessage().find("cooperative"), std::string::npos) << LastErrorMessage();
  EXPECT_EQ(graph.bits, 0u);
  ExpectLive(0, 0);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphErrorsTest, RecordingLaunchesNothingAndWritesNoHostOutput) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(500);
  const fake_cuda_stats before = FakeCuda::Stats();
  vyre_graph graph = Record(add, host.Dispatch());
  const fake_cuda_stats after = FakeCuda::Stats();
  EXPECT_EQ(after.kernel_launches, before.kernel_launches);
  EXPECT_EQ(after.graph_launches, before.graph_launches);
  EXPECT_EQ(after.memcpy_dtoh, before.memcpy_dtoh);
  EXPECT_EQ(after.graphs_live, before.graphs_live + 2) << "full and unchanged-input graphs";
  EXPECT_EQ(after.graph_execs_live, before.graph_execs_live + 2);
  EXPECT_TRUE(SameU32(host.out, std::vector<uint32_t>(500, kPoison)));
  vyre_telemetry t = Telemetry(context_);
  EXPECT_EQ(t.graph_records, 1u);
  EXPECT_EQ(t.graph_replays, 0u);
  EXPECT_EQ(t.live_graphs, 1u);
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_EQ(Telemetry(context_).live_graphs, 0u);
  EXPECT_EQ(FakeCuda::Stats().graphs_live, before.graphs_live);
  EXPECT_EQ(FakeCuda::Stats().graph_execs_live, before.graph_execs_live);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// ===========================================================================
// Replay validation
// ===========================================================================

TEST_F(GraphErrorsTest, HostReplayShapeMismatches) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(100);
  vyre_graph graph = Record(add, host.Dispatch());
  std::vector<uint32_t> longer(101, 1);
  ResidentAdd res(context_, 100, 21);
  constexpr auto kShape = VYRE_STATUS_SHAPE_MISMATCH;
  constexpr auto kInvalid = VYRE_STATUS_INVALID_ARGUMENT;

  struct Case {
    const char* name;
    std::function<void(ReplaySpec*)> edit;
    vyre_status expected;
  };
  const std::vector<Case> cases = {
      {"a shorter", [](ReplaySpec* s) { s->bindings[0].host_bytes = 396; }, kShape},
      {"b longer",
       [&](ReplaySpec* s) {
         s->bindings[1].host_input = longer.data();
         s->bindings[1].host_bytes = 404;
       },
       kShape},
      {"out shorter", [](ReplaySpec* s) { s->bindings[2].host_bytes = 4; }, kShape},
      {"2 bindings of 3", [](ReplaySpec* s) { s->bindings.pop_back(); }, kShape},
      {"4 bindings of 3", [](ReplaySpec* s) { s->bindings.push_back(s->bindings[2]); }, kShape},
      {"a as RESIDENT", [&](ReplaySpec* s) { s->bindings[0] = Resident(res.buf_a); }, kShape},
      {"out as RESIDENT", [&](ReplaySpec* s) { s->bindings[2] = Resident(res.buf_out); }, kShape},
      {"bad source",
       [](ReplaySpec* s) {
         uint32_t raw = 77;
         std::memcpy(&s->bindings[1].source, &raw, 4);
       },
       kShape},
      {"element_count 101: a HOST binding recorded with 100 elements never grows",
       [](ReplaySpec* s) { s->element_count = 101; }, kShape},
      {"element_count 128 (the capacity class) on HOST bindings of 100",
       [](ReplaySpec* s) { s->element_count = 128; }, kShape},
      {"element_count above the capacity class (128)",
       [](ReplaySpec* s) { s->element_count = 129; }, VYRE_STATUS_LIMIT_EXCEEDED},
      {"element_count UINT64_MAX", [](ReplaySpec* s) { s->element_count = kMax; },
       VYRE_STATUS_LIMIT_EXCEEDED},
      {"input NULL", [](ReplaySpec* s) { s->bindings[0].host_input = nullptr; }, kInvalid},
      {"output NULL", [](ReplaySpec* s) { s->bindings[2].host_output = nullptr; }, kInvalid},
      {"unknown flag", [](ReplaySpec* s) { s->flags = 1u << 9; }, kInvalid},
      {"cooperative flag", [](ReplaySpec* s) { s->flags = VYRE_DISPATCH_FLAG_COOPERATIVE; },
       kInvalid},
      {"65 parameter words into the 64-word block",
       [](ReplaySpec* s) { s->param_words.assign(65, 100); }, kShape},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    host.Poison();
    ReplaySpec spec = host.Replay();
    c.edit(&spec);
    EXPECT_API_ERROR(Replay(graph, spec), c.expected, "vyre_graph_replay");
    vyre_pending pending{0xBAD};
    EXPECT_API_ERROR(ReplayAsync(graph, spec, &pending), c.expected, "vyre_graph_replay_async");
    EXPECT_EQ(pending.bits, 0u);
    EXPECT_TRUE(SameU32(host.out, std::vector<uint32_t>(100, kPoison)))
        << "a refused replay wrote host outputs";
  }
  // Counts that disagree with the arrays.
  {
    const ReplaySpec replay_spec = host.Replay();
    vyre_graph_replay_desc desc = replay_spec.Desc();
    desc.bindings = nullptr;
    EXPECT_API_ERROR(vyre_graph_replay(graph, &desc, nullptr), kInvalid, "vyre_graph_replay");
    desc = replay_spec.Desc();
    desc.param_words = nullptr;
    desc.param_word_count = 1;
    EXPECT_API_ERROR(vyre_graph_replay(graph, &desc, nullptr), kInvalid, "vyre_graph_replay");
    desc = replay_spec.Desc();
    desc.scalars = nullptr;
    desc.scalar_count = 3;
    EXPECT_API_ERROR(vyre_graph_replay(graph, &desc, nullptr), kInvalid, "vyre_graph_replay");
  }
  vyre_graph_info info = Info(graph);
  EXPECT_EQ(info.replays, 0u) << "a refused replay was counted";
  EXPECT_EQ(info.element_count, 100u);
  EXPECT_EQ(Telemetry(context_).graph_replays, 0u);

  // The graph is unharmed: a correct replay, then 64 parameter words (the
  // most the block holds) whose first word halves n.
  host.Fresh(33);
  ASSERT_VYRE_OK(Replay(graph, host.Replay()));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  // Fewer elements than recorded are fine (the grid follows; n still 100).
  host.Fresh(35);
  ReplaySpec fewer = host.Replay();
  fewer.element_count = 60;
  ASSERT_VYRE_OK(Replay(graph, fewer));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_EQ(Info(graph).element_count, 60u);
  host.Fresh(34);
  ReplaySpec half = host.Replay();
  half.param_words.assign(64, 0);
  half.param_words[0] = 50;
  ASSERT_VYRE_OK(Replay(graph, half));
  std::vector<uint32_t> expected = host.Expected();
  std::fill(expected.begin() + 50, expected.end(), 0u);  // OUTPUT is zeroed
  EXPECT_TRUE(SameU32(host.out, expected));
  res.Free();
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphErrorsTest, ResidentReplayRangesAndRebinding) {
  vyre_program add = MakeProgram(context_, AddSpec());
  vyre_context other = MakeContext();
  vyre_buffer foreign = MakeBuffer(other, 1024);
  ResidentAdd res(context_, 200, 41);
  vyre_buffer freed = MakeBuffer(context_, 1024);
  ASSERT_VYRE_OK(vyre_buffer_free(freed));
  vyre_buffer small = MakeBuffer(context_, 400);
  std::vector<uint32_t> host_data(200, 5);
  vyre_graph graph = Record(add, res.Dispatch(200));
  constexpr auto kInvalid = VYRE_STATUS_INVALID_ARGUMENT;
  constexpr auto kRange = VYRE_STATUS_OUT_OF_RANGE;

  struct Case {
    const char* name;
    std::function<void(ReplaySpec*)> edit;
    vyre_status expected;
  };
  const std::vector<Case> cases = {
      {"range past the end", [&](ReplaySpec* s) { s->bindings[0] = Resident(res.buf_a, 8, 800); },
       kRange},
      {"offset at the end + 4", [&](ReplaySpec* s) { s->bindings[1] = Resident(res.buf_b, 804); },
       kRange},
      {"offset UINT64_MAX", [&](ReplaySpec* s) { s->bindings[0] = Resident(res.buf_a, kMax, 4); },
       kRange},
      {"offset UINT64_MAX - 3, length 0",
       [&](ReplaySpec* s) { s->bindings[0] = Resident(res.buf_a, kMax - 3); }, kRange},
      {"length UINT64_MAX",
       [&](ReplaySpec* s) { s->bindings[2] = Resident(res.buf_out, 4, kMax); }, kRange},
      {"offset at the end (empty)",
       [&](ReplaySpec* s) { s->bindings[2] = Resident(res.buf_out, 800); }, kInvalid},
      {"misaligned offset", [&](ReplaySpec* s) { s->bindings[0] = Resident(res.buf_a, 2, 400); },
       kInvalid},
      {"smaller than the graph needs",
       [&](ReplaySpec* s) { s->bindings[2] = Resident(small); }, kInvalid},
      {"another context's buffer", [&](ReplaySpec* s) { s->bindings[1] = Resident(foreign); },
       kInvalid},
      {"freed buffer", [&](ReplaySpec* s) { s->bindings[0] = Resident(freed); },
       VYRE_STATUS_STALE_HANDLE},
      {"buffer 0", [&](ReplaySpec* s) { s->bindings[0] = Resident(vyre_buffer{0}); },
       VYRE_STATUS_INVALID_HANDLE},
      {"HOST instead of RESIDENT",
       [&](ReplaySpec* s) { s->bindings[0] = HostIn(host_data.data(), 800); },
       VYRE_STATUS_SHAPE_MISMATCH},
      {"2 bindings", [&](ReplaySpec* s) { s->bindings.pop_back(); }, VYRE_STATUS_SHAPE_MISMATCH},
      {"element_count 257 of capacity 256", [](ReplaySpec* s) { s->element_count = 257; },
       VYRE_STATUS_LIMIT_EXCEEDED},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ReplaySpec spec = res.Rebind();
    c.edit(&spec);
    EXPECT_API_ERROR(Replay(graph, spec), c.expected, "vyre_graph_replay");
  }
  {
    vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
    desc.binding_count = 3;  // bindings NULL
    EXPECT_API_ERROR(vyre_graph_replay(graph, &desc, nullptr), kInvalid, "vyre_graph_replay");
  }
  // Still bound as recorded, and correct.
  EXPECT_TRUE(SameU32(DownloadU32(res.buf_out, 200), std::vector<uint32_t>(200, kPoison)));
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(DownloadU32(res.buf_out, 200), res.Expected()));

  // An explicit grid takes no element_count.
  vyre_graph fixed_grid{0};
  {
    DispatchSpec spec = res.Dispatch(200);
    spec.grid[0] = spec.grid[1] = spec.grid[2] = 1;
    fixed_grid = Record(add, spec);
    ReplaySpec count;
    count.element_count = 10;
    EXPECT_API_ERROR(Replay(fixed_grid, count), kInvalid, "vyre_graph_replay");
  }
  res.Free();
  EXPECT_VYRE_OK(vyre_buffer_free(small));
  EXPECT_VYRE_OK(vyre_graph_destroy(fixed_grid));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_context_destroy(other));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphErrorsTest, ScalarReplaysNeedEveryScalarSlot) {
  vyre_program saxpy = MakeProgram(context_, SaxpySpec());
  const size_t n = 64;
  std::vector<float> x = RandomNonZeroF32(n, 1), y = RandomNonZeroF32(n, 2);
  vyre_buffer bx = MakeBuffer(context_, n * 4), by = MakeBuffer(context_, n * 4);
  ASSERT_VYRE_OK(vyre_buffer_upload(bx, 0, x.data(), n * 4));
  ASSERT_VYRE_OK(vyre_buffer_upload(by, 0, y.data(), n * 4));
  DispatchSpec spec;
  spec.bindings = {Resident(bx), Resident(by)};
  spec.scalars = {FloatBits(2.0f), n};
  vyre_graph graph = Record(saxpy, spec);
  ReplaySpec one;
  one.scalars = {FloatBits(3.0f)};
  EXPECT_API_ERROR(Replay(graph, one), VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_replay");
  vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
  update.flags = VYRE_KERNEL_NODE_UPDATE_SCALARS;
  update.scalars = one.scalars.data();
  update.scalar_count = 1;
  EXPECT_API_ERROR(vyre_graph_kernel_node_update(graph, 0, &update),
                   VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_kernel_node_update");
  update.scalars = nullptr;
  update.scalar_count = 2;
  EXPECT_API_ERROR(vyre_graph_kernel_node_update(graph, 0, &update),
                   VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_kernel_node_update");
  // Nothing ran: y is as uploaded.
  std::vector<float> back(n);
  ASSERT_VYRE_OK(vyre_buffer_download(by, 0, back.data(), n * 4));
  EXPECT_SAME_BYTES(back.data(), y.data(), n * 4);
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_buffer_free(bx));
  EXPECT_VYRE_OK(vyre_buffer_free(by));
  EXPECT_VYRE_OK(vyre_program_destroy(saxpy));
}

TEST_F(GraphErrorsTest, AFreedBufferMakesReplaysStaleUntilRebound) {
  vyre_program add = MakeProgram(context_, AddSpec());
  ResidentAdd res(context_, 128, 51);
  vyre_graph graph = Record(add, res.Dispatch(128));
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(DownloadU32(res.buf_out, 128), res.Expected()));

  const uint64_t allocations = FakeCuda::Stats().device_allocations_live;
  ASSERT_VYRE_OK(vyre_buffer_free(res.buf_b));
  EXPECT_EQ(FakeCuda::Stats().device_allocations_live, allocations)
      << "the graph still holds the freed buffer until it is rebound";
  EXPECT_API_ERROR(vyre_graph_replay(graph, nullptr, nullptr), VYRE_STATUS_STALE_HANDLE,
                   "vyre_graph_replay");
  vyre_pending pending{0};
  EXPECT_API_ERROR(vyre_graph_replay_async(graph, nullptr, &pending), VYRE_STATUS_STALE_HANDLE,
                   "vyre_graph_replay_async");
  // Rebinding with the freed handle is refused by the handle itself.
  EXPECT_API_ERROR(Replay(graph, res.Rebind()), VYRE_STATUS_STALE_HANDLE, "vyre_graph_replay");

  // Rebound to a live buffer, it replays, and lets go of the freed memory.
  std::vector<uint32_t> b2 = RandomNonZeroU32(128, 52);
  vyre_buffer buf_b2 = UploadNew(context_, b2);
  ReplaySpec rebind = res.Rebind();
  rebind.bindings[1] = Resident(buf_b2);
  ASSERT_VYRE_OK(Replay(graph, rebind));
  EXPECT_TRUE(SameU32(DownloadU32(res.buf_out, 128), CpuAdd(res.a, b2)));
  EXPECT_EQ(FakeCuda::Stats().device_allocations_live, allocations)
      << "rebinding did not release the freed buffer (one freed, one allocated)";
  // The rebinding stays for replays without bindings.
  ASSERT_VYRE_OK(vyre_buffer_upload(res.buf_out, 0, std::vector<uint32_t>(128, kPoison).data(),
                                    512));
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(DownloadU32(res.buf_out, 128), CpuAdd(res.a, b2)));

  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_buffer_free(res.buf_a));
  EXPECT_VYRE_OK(vyre_buffer_free(res.buf_out));
  EXPECT_VYRE_OK(vyre_buffer_free(buf_b2));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphErrorsTest, OneUnwaitedAsyncReplayPerHostGraph) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(300);
  vyre_graph graph = Record(add, host.Dispatch());
  vyre_pending first{0};
  ASSERT_VYRE_OK(ReplayAsync(graph, host.Replay(), &first));
  HostAdd second(300, 9);
  vyre_pending pending{0};
  EXPECT_API_ERROR(ReplayAsync(graph, second.Replay(), &pending), VYRE_STATUS_INVALID_STATE,
                   "vyre_graph_replay_async");
  EXPECT_API_ERROR(Replay(graph, second.Replay()), VYRE_STATUS_INVALID_STATE,
                   "vyre_graph_replay");
  EXPECT_TRUE(SameU32(second.out, std::vector<uint32_t>(300, kPoison)));
  EXPECT_TRUE(SameU32(host.out, std::vector<uint32_t>(300, kPoison)))
      << "an asynchronous replay's outputs are written by its wait";
  ASSERT_VYRE_OK(vyre_pending_wait(first, VYRE_WAIT_FOREVER));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  // Waited (not yet released): the graph takes another replay.
  ASSERT_VYRE_OK(Replay(graph, second.Replay()));
  EXPECT_TRUE(SameU32(second.out, second.Expected()));
  EXPECT_VYRE_OK(vyre_pending_release(first));
  // Released without a wait: no read-back, and the graph is free again.
  host.Fresh(10);
  ASSERT_VYRE_OK(ReplayAsync(graph, host.Replay(), &first));
  EXPECT_VYRE_OK(vyre_pending_release(first));
  EXPECT_TRUE(SameU32(host.out, std::vector<uint32_t>(300, kPoison)));
  ASSERT_VYRE_OK(ReplayAsync(graph, host.Replay(), &first));
  EXPECT_VYRE_OK(vyre_pending_wait(first, VYRE_WAIT_FOREVER));
  EXPECT_API_ERROR(vyre_pending_wait(first, VYRE_WAIT_FOREVER), VYRE_STATUS_INVALID_STATE,
                   "vyre_pending_wait");
  EXPECT_VYRE_OK(vyre_pending_release(first));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// ===========================================================================
// Node queries and kernel node updates
// ===========================================================================

TEST_F(GraphErrorsTest, NodeIndexPastTheEndAndNonKernelNodes) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(64);
  vyre_graph graph = Record(add, host.Dispatch());
  ASSERT_EQ(Info(graph).node_count, 5u);
  vyre_graph_node_kind kind = VYRE_GRAPH_NODE_KIND_FORCE32;
  for (uint64_t index : {uint64_t{5}, uint64_t{6}, uint64_t{1} << 32, kMax}) {
    EXPECT_API_ERROR(vyre_graph_node_kind_get(graph, index, &kind), VYRE_STATUS_OUT_OF_RANGE,
                     "vyre_graph_node_kind_get")
        << index;
  }
  EXPECT_EQ(kind, VYRE_GRAPH_NODE_KIND_FORCE32) << "a refused query wrote *out";
  vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
  update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
  update.grid[0] = update.grid[1] = update.grid[2] = 1;
  for (uint64_t index : {uint64_t{5}, kMax}) {
    EXPECT_API_ERROR(vyre_graph_kernel_node_update(graph, index, &update),
                     VYRE_STATUS_OUT_OF_RANGE, "vyre_graph_kernel_node_update")
        << index;
  }
  // Nodes 0, 1 and 4 are copies, node 2 the memset.
  for (uint64_t index : {0, 1, 2, 4}) {
    EXPECT_API_ERROR(vyre_graph_kernel_node_update(graph, index, &update),
                     VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_kernel_node_update")
        << index;
  }
  // The kernel node, with bad updates.
  struct Case {
    const char* name;
    std::function<void(vyre_kernel_node_update*)> edit;
    vyre_status expected;
  };
  const std::vector<Case> cases = {
      {"flags 0", [](vyre_kernel_node_update* u) { u->flags = 0; }, VYRE_STATUS_INVALID_ARGUMENT},
      {"unknown flag", [](vyre_kernel_node_update* u) { u->flags |= 1u << 5; },
       VYRE_STATUS_INVALID_ARGUMENT},
      {"grid x 0", [](vyre_kernel_node_update* u) { u->grid[0] = 0; },
       VYRE_STATUS_INVALID_ARGUMENT},
      {"grid z 0", [](vyre_kernel_node_update* u) { u->grid[2] = 0; },
       VYRE_STATUS_INVALID_ARGUMENT},
      {"grid y over the limit", [](vyre_kernel_node_update* u) { u->grid[1] = 65536; },
       VYRE_STATUS_LIMIT_EXCEEDED},
      {"grid x UINT32_MAX", [](vyre_kernel_node_update* u) { u->grid[0] = UINT32_MAX; },
       VYRE_STATUS_LIMIT_EXCEEDED},
      {"scalars NULL with a count",
       [](vyre_kernel_node_update* u) {
         u->flags = VYRE_KERNEL_NODE_UPDATE_SCALARS;
         u->scalar_count = 1;
       },
       VYRE_STATUS_INVALID_ARGUMENT},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    vyre_kernel_node_update u = update;
    c.edit(&u);
    EXPECT_API_ERROR(vyre_graph_kernel_node_update(graph, 3, &u), c.expected,
                     "vyre_graph_kernel_node_update");
  }
  // None of that changed the graph.
  host.Fresh(65);
  ASSERT_VYRE_OK(Replay(graph, host.Replay()));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// ===========================================================================
// Sequence validation
// ===========================================================================

TEST_F(SequenceErrorsTest, DescriptorCountsAndBlocks) {
  vyre_buffer buffer = MakeBuffer(context_, 256);
  SequenceSpec two;
  two.Fill(buffer, 0, 128, 1);
  two.Fill(buffer, 128, 128, 2);
  constexpr auto kInvalid = VYRE_STATUS_INVALID_ARGUMENT;
  struct Case {
    const char* name;
    std::function<void(vyre_sequence_desc*)> edit;
    vyre_status expected;
  };
  const std::vector<Case> cases = {
      {"0 steps", [](vyre_sequence_desc* d) { d->step_count = 0; }, kInvalid},
      {"0 steps, NULL", [](vyre_sequence_desc* d) {
         d->step_count = 0;
         d->steps = nullptr;
       }, kInvalid},
      {"steps NULL with a count", [](vyre_sequence_desc* d) { d->steps = nullptr; }, kInvalid},
      {"repeat_count 0 with a block",
       [](vyre_sequence_desc* d) {
         d->repeat_first = 0;
         d->repeat_step_count = 2;
         d->repeat_count = 0;
       },
       kInvalid},
      {"repeat_count without a block", [](vyre_sequence_desc* d) { d->repeat_count = 3; },
       kInvalid},
      {"block past the end",
       [](vyre_sequence_desc* d) {
         d->repeat_first = 1;
         d->repeat_step_count = 2;
         d->repeat_count = 2;
       },
       VYRE_STATUS_OUT_OF_RANGE},
      {"block first past the end",
       [](vyre_sequence_desc* d) {
         d->repeat_first = 5;
         d->repeat_step_count = 1;
         d->repeat_count = 1;
       },
       VYRE_STATUS_OUT_OF_RANGE},
      {"block first UINT64_MAX (overflows)",
       [](vyre_sequence_desc* d) {
         d->repeat_first = SIZE_MAX;
         d->repeat_step_count = 2;
         d->repeat_count = 1;
       },
       VYRE_STATUS_OUT_OF_RANGE},
      {"block expands past 2^20 steps",
       [](vyre_sequence_desc* d) {
         d->repeat_first = 0;
         d->repeat_step_count = 2;
         d->repeat_count = UINT32_MAX;
       },
       VYRE_STATUS_LIMIT_EXCEEDED},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    vyre_sequence_desc desc = two.Desc();
    c.edit(&desc);
    vyre_sequence sequence{0xBAD};
    EXPECT_API_ERROR(vyre_sequence_create(context_, &desc, &sequence), c.expected,
                     "vyre_sequence_create");
    EXPECT_EQ(sequence.bits, 0u);
  }
  // struct_size of the desc.
  const vyre_sequence_desc desc = two.Desc();
  vyre_sequence sequence{0};
  for (uint32_t size : TooSmallSizes<vyre_sequence_desc>()) {
    vyre_sequence_desc small = WithStructSize(desc, size);
    EXPECT_API_ERROR(vyre_sequence_create(context_, &small, &sequence),
                     VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_sequence_create")
        << size;
  }
  LargerStruct<vyre_sequence_desc> nonzero_tail(desc, 16, 0x33);
  EXPECT_API_ERROR(vyre_sequence_create(context_, nonzero_tail.get(), &sequence),
                   VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_sequence_create");
  ExpectLive(0, 0);
  LargerStruct<vyre_sequence_desc> zero_tail(desc, 16, 0);
  ASSERT_VYRE_OK(vyre_sequence_create(context_, zero_tail.get(), &sequence));
  ASSERT_VYRE_OK(vyre_sequence_run(sequence, nullptr));
  std::vector<uint8_t> back(256);
  ASSERT_VYRE_OK(vyre_buffer_download(buffer, 0, back.data(), 256));
  std::vector<uint8_t> expected(256, 1);
  std::fill(expected.begin() + 128, expected.end(), 2);
  EXPECT_EQ(back, expected);
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

TEST_F(SequenceErrorsTest, StepStructSizes) {
  vyre_buffer buffer = MakeBuffer(context_, 64);
  SequenceSpec two;
  two.Fill(buffer, 0, 32, 1);
  two.Fill(buffer, 32, 32, 2);
  vyre_sequence sequence{0};
  for (size_t index : {size_t{0}, size_t{1}}) {
    for (uint32_t size : TooSmallSizes<vyre_sequence_step>()) {
      SequenceSpec spec = two;
      spec.steps[index].struct_size = size;
      EXPECT_API_ERROR(CreateSequence(context_, spec, &sequence),
                       VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_sequence_create")
          << "step " << index << " struct_size " << size;
    }
  }
  // Steps of a newer header: a larger stride with zero tails is accepted; a
  // non-zero tail, or a step whose struct_size differs from step 0's, is not.
  const uint32_t stride = sizeof(vyre_sequence_step) + 16;
  std::vector<uint64_t> storage((2 * stride + 7) / 8, 0);
  auto* bytes = reinterpret_cast<unsigned char*>(storage.data());
  for (size_t i = 0; i < 2; ++i) {
    vyre_sequence_step step = two.steps[i];
    step.struct_size = stride;
    std::memcpy(bytes + i * stride, &step, sizeof(step));
  }
  vyre_sequence_desc desc = two.Desc();
  desc.steps = reinterpret_cast<const vyre_sequence_step*>(bytes);
  ASSERT_VYRE_OK(vyre_sequence_create(context_, &desc, &sequence));
  EXPECT_VYRE_OK(vyre_sequence_run(sequence, nullptr));
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  bytes[stride + stride - 1] = 0x09;  // step 1's tail
  EXPECT_API_ERROR(vyre_sequence_create(context_, &desc, &sequence),
                   VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_sequence_create");
  bytes[stride + stride - 1] = 0;
  uint32_t other_size = sizeof(vyre_sequence_step) + 8;
  std::memcpy(bytes + stride, &other_size, 4);
  EXPECT_API_ERROR(vyre_sequence_create(context_, &desc, &sequence),
                   VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_sequence_create");
  // A DISPATCH step's vyre_dispatch_desc is checked too.
  vyre_program inc = MakeProgram(context_, IncSpec());
  SequenceSpec dispatch;
  dispatch.Dispatch(inc, ResidentInc(buffer, 0, 64, 16));
  dispatch.dispatch_descs[0]->struct_size = 8;
  EXPECT_API_ERROR(CreateSequence(context_, dispatch, &sequence),
                   VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_sequence_create");
  ExpectLive(0, 0);
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

TEST_F(SequenceErrorsTest, BadSteps) {
  vyre_buffer buffer = MakeBuffer(context_, 256);
  vyre_buffer second = MakeBuffer(context_, 256);
  vyre_buffer freed = MakeBuffer(context_, 256);
  ASSERT_VYRE_OK(vyre_buffer_free(freed));
  vyre_context other = MakeContext();
  vyre_buffer foreign = MakeBuffer(other, 256);
  vyre_program foreign_inc = MakeProgram(other, IncSpec());
  vyre_program inc = MakeProgram(context_, IncSpec());
  vyre_program add = MakeProgram(context_, AddSpec());
  std::vector<uint8_t> host(256, 3);
  constexpr auto kInvalid = VYRE_STATUS_INVALID_ARGUMENT;
  constexpr auto kRange = VYRE_STATUS_OUT_OF_RANGE;

  struct Case {
    const char* name;
    std::function<void(SequenceSpec*)> build;
    vyre_status expected;
  };
  const std::vector<Case> cases = {
      {"bad kind 0",
       [&](SequenceSpec* s) {
         s->Fill(buffer, 0, 4, 0);
         uint32_t raw = 0;
         std::memcpy(&s->steps.back().kind, &raw, 4);
       },
       kInvalid},
      {"bad kind 6",
       [&](SequenceSpec* s) {
         s->Fill(buffer, 0, 4, 0);
         uint32_t raw = 6;
         std::memcpy(&s->steps.back().kind, &raw, 4);
       },
       kInvalid},
      {"fill 0 bytes", [&](SequenceSpec* s) { s->Fill(buffer, 0, 0, 1); }, kInvalid},
      {"fill byte 256", [&](SequenceSpec* s) { s->Fill(buffer, 0, 4, 256); }, kInvalid},
      {"fill past the end", [&](SequenceSpec* s) { s->Fill(buffer, 200, 57, 1); }, kRange},
      {"fill offset UINT64_MAX", [&](SequenceSpec* s) { s->Fill(buffer, kMax, 1, 1); }, kRange},
      {"fill bytes UINT64_MAX (offset + bytes overflows)",
       [&](SequenceSpec* s) { s->Fill(buffer, 16, kMax, 1); }, kRange},
      {"fill buffer 0", [&](SequenceSpec* s) { s->Fill(vyre_buffer{0}, 0, 4, 1); },
       VYRE_STATUS_INVALID_HANDLE},
      {"fill freed buffer", [&](SequenceSpec* s) { s->Fill(freed, 0, 4, 1); },
       VYRE_STATUS_STALE_HANDLE},
      {"fill another context's buffer", [&](SequenceSpec* s) { s->Fill(foreign, 0, 4, 1); },
       kInvalid},
      {"copy source past the end",
       [&](SequenceSpec* s) { s->Copy(buffer, 0, second, 129, 128); }, kRange},
      {"copy destination past the end",
       [&](SequenceSpec* s) { s->Copy(buffer, 250, second, 0, 8); }, kRange},
      {"copy source offset UINT64_MAX",
       [&](SequenceSpec* s) { s->Copy(buffer, 0, second, kMax, 8); }, kRange},
      {"copy overlapping in one buffer",
       [&](SequenceSpec* s) { s->Copy(buffer, 0, buffer, 64, 128); }, kInvalid},
      {"copy onto itself", [&](SequenceSpec* s) { s->Copy(buffer, 8, buffer, 8, 8); }, kInvalid},
      {"copy from a freed buffer", [&](SequenceSpec* s) { s->Copy(buffer, 0, freed, 0, 8); },
       VYRE_STATUS_STALE_HANDLE},
      {"copy from another context",
       [&](SequenceSpec* s) { s->Copy(buffer, 0, foreign, 0, 8); }, kInvalid},
      {"copy 0 bytes", [&](SequenceSpec* s) { s->Copy(buffer, 0, second, 0, 0); }, kInvalid},
      {"upload NULL", [&](SequenceSpec* s) { s->Upload(buffer, 0, nullptr, 8); }, kInvalid},
      {"upload past the end",
       [&](SequenceSpec* s) { s->Upload(buffer, 8, host.data(), 256); }, kRange},
      {"download NULL", [&](SequenceSpec* s) { s->Download(buffer, 0, nullptr, 8); }, kInvalid},
      {"download offset UINT64_MAX",
       [&](SequenceSpec* s) { s->Download(buffer, kMax - 1, host.data(), 4); }, kRange},
      {"dispatch NULL desc",
       [&](SequenceSpec* s) {
         s->Dispatch(inc, ResidentInc(buffer, 0, 256, 64));
         s->steps.back().dispatch = nullptr;
       },
       kInvalid},
      {"dispatch program 0",
       [&](SequenceSpec* s) { s->Dispatch(vyre_program{0}, ResidentInc(buffer, 0, 256, 64)); },
       VYRE_STATUS_INVALID_HANDLE},
      {"dispatch program of another context",
       [&](SequenceSpec* s) { s->Dispatch(foreign_inc, ResidentInc(buffer, 0, 256, 64)); },
       kInvalid},
      {"dispatch HOST binding",
       [&](SequenceSpec* s) {
         DispatchSpec spec;
         spec.bindings = {HostInOut(host.data(), 256)};
         spec.param_words = {64};
         s->Dispatch(inc, spec);
       },
       kInvalid},
      {"dispatch HOST binding among resident ones",
       [&](SequenceSpec* s) {
         DispatchSpec spec;
         spec.bindings = {Resident(buffer), HostIn(host.data(), 256), Resident(second)};
         spec.param_words = {64};
         s->Dispatch(add, spec);
       },
       kInvalid},
      {"dispatch cooperative",
       [&](SequenceSpec* s) {
         DispatchSpec spec = ResidentInc(buffer, 0, 256, 64);
         spec.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
         s->Dispatch(inc, spec);
       },
       kInvalid},
      {"dispatch binding count 2 of 1",
       [&](SequenceSpec* s) {
         DispatchSpec spec = ResidentInc(buffer, 0, 256, 64);
         spec.bindings.push_back(Resident(second));
         s->Dispatch(inc, spec);
       },
       kInvalid},
      {"dispatch freed buffer",
       [&](SequenceSpec* s) { s->Dispatch(inc, ResidentInc(freed, 0, 256, 64)); },
       VYRE_STATUS_STALE_HANDLE},
      {"dispatch range past the end",
       [&](SequenceSpec* s) { s->Dispatch(inc, ResidentInc(buffer, 4, 256, 64)); }, kRange},
      {"dispatch offset UINT64_MAX",
       [&](SequenceSpec* s) { s->Dispatch(inc, ResidentInc(buffer, kMax - 3, 4, 1)); }, kRange},
      {"dispatch fixpoint 0",
       [&](SequenceSpec* s) { s->Dispatch(inc, ResidentInc(buffer, 0, 256, 64, 0)); }, kInvalid},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // A good step first, so the bad one is step 1.
    SequenceSpec spec;
    spec.Fill(second, 0, 8, 9);
    c.build(&spec);
    vyre_sequence sequence{0xBAD};
    EXPECT_API_ERROR(CreateSequence(context_, spec, &sequence), c.expected,
                     "vyre_sequence_create");
    EXPECT_EQ(sequence.bits, 0u);
    EXPECT_NE(LastErrorMessage().find("step 1"), std::string::npos)
        << "the message does not name the step: " << LastErrorMessage();
  }
  ExpectLive(0, 0);
  EXPECT_VYRE_OK(vyre_context_destroy(other));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_buffer_free(second));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(SequenceErrorsTest, ABufferFreedAfterCreationIsStaleAtRunRecordAndReplay) {
  vyre_program inc = MakeProgram(context_, IncSpec());
  const uint64_t allocations_before = FakeCuda::Stats().device_allocations_live;
  vyre_buffer data = MakeBuffer(context_, 400);
  vyre_buffer scratch = MakeBuffer(context_, 400);
  std::vector<uint32_t> input = RandomNonZeroU32(100, 7), output(100, kPoison);
  SequenceSpec spec;
  spec.Upload(data, 0, input.data(), 400);
  spec.Dispatch(inc, ResidentInc(data, 0, 400, 100));
  spec.Copy(scratch, 0, data, 0, 400);
  spec.Download(scratch, 0, output.data(), 400);
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(CreateSequence(context_, spec, &sequence));
  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_sequence_record(sequence, &graph));
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  std::vector<uint32_t> expected = input;
  for (uint32_t& v : expected) v += 1;
  EXPECT_TRUE(SameU32(output, expected));

  ASSERT_VYRE_OK(vyre_buffer_free(scratch));
  output.assign(100, kPoison);
  EXPECT_API_ERROR(vyre_sequence_run(sequence, nullptr), VYRE_STATUS_STALE_HANDLE,
                   "vyre_sequence_run");
  vyre_graph again{0xBAD};
  EXPECT_API_ERROR(vyre_sequence_record(sequence, &again), VYRE_STATUS_STALE_HANDLE,
                   "vyre_sequence_record");
  EXPECT_EQ(again.bits, 0u);
  EXPECT_API_ERROR(vyre_graph_replay(graph, nullptr, nullptr), VYRE_STATUS_STALE_HANDLE,
                   "vyre_graph_replay");
  vyre_pending pending{0};
  EXPECT_API_ERROR(vyre_graph_replay_async(graph, nullptr, &pending), VYRE_STATUS_STALE_HANDLE,
                   "vyre_graph_replay_async");
  EXPECT_TRUE(SameU32(output, std::vector<uint32_t>(100, kPoison)));
  // Sequence graphs take no bindings, counts or words.
  ReplaySpec bound;
  bound.element_count = 1;
  EXPECT_API_ERROR(Replay(graph, bound), VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_replay");
  ReplaySpec words;
  words.param_words = {1};
  EXPECT_API_ERROR(Replay(graph, words), VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_replay");

  // The freed memory goes with the last holder.
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_buffer_free(data));
  ExpectLive(0, 0);
  EXPECT_VYRE_OK(vyre_context_trim(context_));
  EXPECT_EQ(FakeCuda::Stats().device_allocations_live, allocations_before);
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
}

TEST_F(SequenceErrorsTest, RunTimingStructSize) {
  vyre_buffer buffer = MakeBuffer(context_, 64);
  SequenceSpec spec;
  spec.Fill(buffer, 0, 64, 1);
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(CreateSequence(context_, spec, &sequence));
  for (uint32_t size : TooSmallSizes<vyre_timing>()) {
    const vyre_timing init = VYRE_TIMING_INIT;
    vyre_timing small = WithStructSize(init, size);
    EXPECT_API_ERROR(vyre_sequence_run(sequence, &small), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
                     "vyre_sequence_run")
        << size;
  }
  EXPECT_EQ(Telemetry(context_).sequence_runs, 0u) << "a refused run ran";
  vyre_timing timing = VYRE_TIMING_INIT;
  ASSERT_VYRE_OK(vyre_sequence_run(sequence, &timing));
  EXPECT_EQ(timing.struct_size, sizeof(vyre_timing));
  EXPECT_GE(timing.wall_ns, timing.enqueue_ns);
  EXPECT_EQ(Telemetry(context_).sequence_runs, 1u);
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

// ===========================================================================
// Results: dispatch graphs
// ===========================================================================

TEST_F(GraphResultsTest, HostVectorAddReplaysFreshDataEveryTime) {
  vyre_program add = MakeProgram(context_, AddSpec());
  const size_t n = 3000;
  HostAdd host(n, 100);
  vyre_graph graph = Record(add, host.Dispatch());
  for (uint32_t round = 0; round < 6; ++round) {
    SCOPED_TRACE(round);
    host.Fresh(200 + round);
    vyre_timing timing = VYRE_TIMING_INIT;
    ASSERT_VYRE_OK(Replay(graph, host.Replay(), &timing));
    EXPECT_TRUE(SameU32(host.out, host.Expected()));
    EXPECT_GE(timing.wall_ns, timing.wait_ns);
  }
  // Asynchronous replays of fresh data, with device timing.
  for (uint32_t round = 0; round < 3; ++round) {
    host.Fresh(300 + round);
    ReplaySpec spec = host.Replay();
    spec.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
    vyre_pending pending{0};
    ASSERT_VYRE_OK(ReplayAsync(graph, spec, &pending));
    // Inputs are read before return: changing them now changes nothing.
    std::vector<uint32_t> expected = host.Expected();
    std::fill(host.a.begin(), host.a.end(), 0u);
    ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
    EXPECT_TRUE(SameU32(host.out, expected));
    vyre_timing timing = VYRE_TIMING_INIT;
    EXPECT_VYRE_OK(vyre_pending_timing(pending, &timing));
    EXPECT_VYRE_OK(vyre_pending_release(pending));
  }
  vyre_graph_info info = Info(graph);
  EXPECT_EQ(info.replays, 9u);
  vyre_telemetry t = Telemetry(context_);
  EXPECT_EQ(t.graph_replays, 9u);
  EXPECT_EQ(t.graph_launches, 9u);
  EXPECT_EQ(t.live_pendings, 0u);
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphResultsTest, UnchangedInputsSkipTheUpload) {
  vyre_program add = MakeProgram(context_, AddSpec());
  const size_t n = 2048;
  HostAdd host(n, 7);
  vyre_graph graph = Record(add, host.Dispatch());
  vyre_graph_info info = Info(graph);
  EXPECT_EQ(info.host_input_bytes, 2 * n * 4);
  EXPECT_EQ(info.host_output_bytes, n * 4);

  // The first replay uploads, even of the very data recorded with.
  vyre_telemetry t0 = Telemetry(context_);
  fake_cuda_stats f0 = FakeCuda::Stats();
  ASSERT_VYRE_OK(Replay(graph, host.Replay()));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  vyre_telemetry t1 = Telemetry(context_);
  fake_cuda_stats f1 = FakeCuda::Stats();
  EXPECT_EQ(t1.h2d_bytes - t0.h2d_bytes, 2 * n * 4);
  EXPECT_EQ(f1.memcpy_htod - f0.memcpy_htod, 2u);
  EXPECT_EQ(t1.graph_uploads_skipped, t0.graph_uploads_skipped);

  // The same bytes again, from other memory: no input byte moves.
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    std::vector<uint32_t> a_copy = host.a, b_copy = host.b;
    host.Poison();
    ReplaySpec spec = host.Replay();
    spec.bindings[0].host_input = a_copy.data();
    spec.bindings[1].host_input = b_copy.data();
    vyre_telemetry before = Telemetry(context_);
    fake_cuda_stats fbefore = FakeCuda::Stats();
    ASSERT_VYRE_OK(Replay(graph, spec));
    EXPECT_TRUE(SameU32(host.out, host.Expected()));
    vyre_telemetry after = Telemetry(context_);
    fake_cuda_stats fafter = FakeCuda::Stats();
    EXPECT_EQ(after.graph_uploads_skipped - before.graph_uploads_skipped, 1u);
    EXPECT_EQ(after.h2d_bytes, before.h2d_bytes);
    EXPECT_EQ(after.h2d_operations, before.h2d_operations);
    EXPECT_EQ(fafter.memcpy_htod, fbefore.memcpy_htod);
    EXPECT_EQ(after.d2h_bytes - before.d2h_bytes, n * 4);
    EXPECT_EQ(after.graph_replays - before.graph_replays, 1u);
    EXPECT_EQ(fafter.graph_nodes_run - fbefore.graph_nodes_run, 3u) << "memset, kernel, copy";
  }
  // One changed element uploads again.
  host.b[n / 2] += 1;
  host.Poison();
  vyre_telemetry before = Telemetry(context_);
  ASSERT_VYRE_OK(Replay(graph, host.Replay()));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  vyre_telemetry after = Telemetry(context_);
  EXPECT_EQ(after.graph_uploads_skipped, before.graph_uploads_skipped);
  EXPECT_EQ(after.h2d_bytes - before.h2d_bytes, 2 * n * 4);
  // An unchanged asynchronous replay skips too.
  host.Poison();
  vyre_pending pending{0};
  ASSERT_VYRE_OK(ReplayAsync(graph, host.Replay(), &pending));
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_EQ(Telemetry(context_).graph_uploads_skipped, after.graph_uploads_skipped + 1);
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphResultsTest, InputOutputHostBindingsNeverSkipTheUpload) {
  vyre_program inc = MakeProgram(context_, IncSpec());
  const size_t n = 512;
  std::vector<uint32_t> data = RandomNonZeroU32(n, 8);
  DispatchSpec spec;
  spec.bindings = {HostInOut(data.data(), n * 4)};
  spec.param_words = {uint32_t(n)};
  vyre_graph graph = Record(inc, spec);
  std::vector<uint32_t> expected = data;
  for (int round = 0; round < 3; ++round) {
    for (uint32_t& v : expected) v += 1;
    ReplaySpec replay;
    replay.bindings = {HostInOut(data.data(), n * 4)};
    vyre_telemetry before = Telemetry(context_);
    ASSERT_VYRE_OK(Replay(graph, replay));
    EXPECT_TRUE(SameU32(data, expected)) << round;
    vyre_telemetry after = Telemetry(context_);
    EXPECT_EQ(after.h2d_bytes - before.h2d_bytes, n * 4);
    EXPECT_EQ(after.graph_uploads_skipped, before.graph_uploads_skipped);
  }
  // Replaying the same input again must not skip either (the device copy
  // holds the previous result, not this input).
  std::vector<uint32_t> same = data, output(n, kPoison);
  for (int round = 0; round < 2; ++round) {
    ReplaySpec replay;
    vyre_dispatch_binding b = HostIn(same.data(), n * 4);
    b.host_output = output.data();
    replay.bindings = {b};
    ASSERT_VYRE_OK(Replay(graph, replay));
    std::vector<uint32_t> plus_one = same;
    for (uint32_t& v : plus_one) v += 1;
    EXPECT_TRUE(SameU32(output, plus_one)) << round;
  }
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
}

TEST_F(GraphResultsTest, ResidentGraphRebinding) {
  vyre_program add = MakeProgram(context_, AddSpec());
  const size_t n = 1000;
  ResidentAdd first(context_, n, 1), second(context_, n, 2);
  vyre_graph graph = Record(add, first.Dispatch(n));
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(DownloadU32(first.buf_out, n), first.Expected()));

  // Rebind every binding to the second set.
  ASSERT_VYRE_OK(Replay(graph, second.Rebind()));
  EXPECT_TRUE(SameU32(DownloadU32(second.buf_out, n), second.Expected()));
  // The first output is untouched by that replay.
  ASSERT_VYRE_OK(vyre_buffer_upload(first.buf_out, 0, std::vector<uint32_t>(n, kPoison).data(),
                                    n * 4));
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(DownloadU32(first.buf_out, n), std::vector<uint32_t>(n, kPoison)))
      << "a replay without bindings went back to the recorded ranges";
  // New data in the bound buffers is seen by the next replay.
  second.a = RandomNonZeroU32(n, 3);
  ASSERT_VYRE_OK(vyre_buffer_upload(second.buf_a, 0, second.a.data(), n * 4));
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(DownloadU32(second.buf_out, n), second.Expected()));

  // Mixed: a from the first set, b from the second, out into a sub-range of
  // a larger buffer (the rest of it untouched).
  std::vector<uint32_t> big_init(n + 64, kPoison);
  vyre_buffer big = UploadNew(context_, big_init);
  ReplaySpec mixed;
  mixed.bindings = {Resident(first.buf_a), Resident(second.buf_b), Resident(big, 128, n * 4)};
  ASSERT_VYRE_OK(Replay(graph, mixed));
  std::vector<uint32_t> expected = big_init;
  std::vector<uint32_t> sums = CpuAdd(first.a, second.b);
  std::copy(sums.begin(), sums.end(), expected.begin() + 32);
  EXPECT_TRUE(SameU32(DownloadU32(big, n + 64), expected));
  // Asynchronous replays of a resident graph need no wait in between.
  std::vector<vyre_pending> pendings(4);
  for (vyre_pending& p : pendings) ASSERT_VYRE_OK(ReplayAsync(graph, first.Rebind(), &p));
  for (vyre_pending& p : pendings) {
    EXPECT_VYRE_OK(vyre_pending_wait(p, VYRE_WAIT_FOREVER));
    EXPECT_VYRE_OK(vyre_pending_release(p));
  }
  EXPECT_TRUE(SameU32(DownloadU32(first.buf_out, n), first.Expected()));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_buffer_free(big));
  first.Free();
  second.Free();
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// vyre_graph_launch: a replay joined to a caller's stream, an event each
// way (the fake counts the stream waits and names the last one's streams).
TEST_F(GraphResultsTest, LaunchOnACallersStreamIsOrderedBothWays) {
  vyre_program add = MakeProgram(context_, AddSpec());
  const size_t n = 1000;
  ResidentAdd first(context_, n, 11), second(context_, n, 12);
  vyre_graph graph = Record(add, first.Dispatch(n));
  for (uint64_t stream : {uint64_t{1}, uint64_t{2}}) {
    SCOPED_TRACE(stream == 1 ? "legacy stream" : "per-thread stream");
    ASSERT_VYRE_OK(vyre_buffer_upload(second.buf_out, 0,
                                      std::vector<uint32_t>(n, kPoison).data(), n * 4));
    const fake_cuda_stats before = FakeCuda::Stats();
    vyre_pending pending{0};
    const ReplaySpec spec = second.Rebind();
    vyre_graph_replay_desc desc = spec.Desc();
    ASSERT_VYRE_OK(vyre_graph_launch(graph, &desc, stream, &pending));
    const fake_cuda_stats after = FakeCuda::Stats();
    EXPECT_EQ(after.stream_waits - before.stream_waits, 2u)
        << "the context waits on the caller's stream and the stream on the context";
    EXPECT_EQ(after.last_wait_stream, stream) << "the caller's stream waits last";
    EXPECT_EQ(after.graph_launches - before.graph_launches, 1u);
    ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
    EXPECT_VYRE_OK(vyre_pending_release(pending));
    EXPECT_TRUE(SameU32(DownloadU32(second.buf_out, n), second.Expected()));
  }
  // Refusals: stream 0, out NULL, a destroyed graph; no handle is made.
  vyre_pending pending{7};
  EXPECT_API_ERROR(vyre_graph_launch(graph, nullptr, 0, &pending), VYRE_STATUS_INVALID_ARGUMENT,
                   "vyre_graph_launch");
  EXPECT_NE(LastErrorMessage().find("cu_stream is 0"), std::string::npos);
  EXPECT_API_ERROR(vyre_graph_launch(graph, nullptr, 1, nullptr), VYRE_STATUS_INVALID_ARGUMENT,
                   "vyre_graph_launch");
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_API_ERROR(vyre_graph_launch(graph, nullptr, 1, &pending), VYRE_STATUS_STALE_HANDLE,
                   "vyre_graph_launch");
  EXPECT_EQ(pending.bits, 0u);
  EXPECT_EQ(Telemetry(context_).live_pendings, 0u);
  first.Free();
  second.Free();
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// A graph with HOST bindings launched on a stream: its outputs are written at
// the wait, as for vyre_graph_replay_async.
TEST_F(GraphResultsTest, LaunchOfAHostGraphWritesOutputsAtTheWait) {
  vyre_program add = MakeProgram(context_, AddSpec());
  const size_t n = 777;
  HostAdd host(n, 31);
  vyre_graph graph = Record(add, host.Dispatch());
  for (uint32_t round = 0; round < 3; ++round) {
    host.Fresh(40 + round);
    ReplaySpec spec = host.Replay();
    vyre_graph_replay_desc desc = spec.Desc();
    vyre_pending pending{0};
    ASSERT_VYRE_OK(vyre_graph_launch(graph, &desc, 1, &pending));
    ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
    EXPECT_TRUE(SameU32(host.out, host.Expected()));
    EXPECT_VYRE_OK(vyre_pending_release(pending));
  }
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphResultsTest, ParameterWordsAndScalarsChangeAtReplay) {
  // Parameter words: n of a resident inc graph.
  vyre_program inc = MakeProgram(context_, IncSpec());
  const size_t n = 400;
  std::vector<uint32_t> data = RandomNonZeroU32(n, 12);
  vyre_buffer buffer = UploadNew(context_, data);
  vyre_graph graph = Record(inc, ResidentInc(buffer, 0, n * 4, uint32_t(n)));
  std::vector<uint32_t> expected = data;
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  for (uint32_t& v : expected) v += 1;
  ReplaySpec fewer;
  fewer.param_words = {100};
  ASSERT_VYRE_OK(Replay(graph, fewer));
  for (size_t i = 0; i < 100; ++i) expected[i] += 1;
  // Kept for later replays.
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  for (size_t i = 0; i < 100; ++i) expected[i] += 1;
  EXPECT_TRUE(SameU32(DownloadU32(buffer, n), expected));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));

  // Scalars: saxpy's a and n.
  vyre_program saxpy = MakeProgram(context_, SaxpySpec());
  std::vector<float> x = RandomNonZeroF32(n, 13), y = RandomNonZeroF32(n, 14);
  vyre_buffer bx = MakeBuffer(context_, n * 4), by = MakeBuffer(context_, n * 4);
  ASSERT_VYRE_OK(vyre_buffer_upload(bx, 0, x.data(), n * 4));
  ASSERT_VYRE_OK(vyre_buffer_upload(by, 0, y.data(), n * 4));
  DispatchSpec spec;
  spec.bindings = {Resident(bx), Resident(by)};
  spec.scalars = {FloatBits(2.0f), n};
  vyre_graph sgraph = Record(saxpy, spec);
  ReplaySpec scalars;
  scalars.scalars = {FloatBits(-0.5f), 10};
  ASSERT_VYRE_OK(Replay(sgraph, scalars));
  std::vector<float> yexp = y;
  for (size_t i = 0; i < 10; ++i) yexp[i] = -0.5f * x[i] + yexp[i];
  std::vector<float> back(n);
  ASSERT_VYRE_OK(vyre_buffer_download(by, 0, back.data(), n * 4));
  EXPECT_SAME_BYTES(back.data(), yexp.data(), n * 4);
  EXPECT_VYRE_OK(vyre_graph_destroy(sgraph));
  EXPECT_VYRE_OK(vyre_buffer_free(bx));
  EXPECT_VYRE_OK(vyre_buffer_free(by));
  EXPECT_VYRE_OK(vyre_program_destroy(saxpy));
}

TEST_F(GraphResultsTest, CapacityClassBookkeeping) {
  // Blocks of one thread: the derived grid is exactly element_count threads,
  // and n (the parameter word) is larger, so the kernel writes exactly
  // element_count elements.
  vyre_program add = MakeProgram(context_, OneThread(AddSpec()));
  const size_t recorded = 600, capacity = 1024;
  ResidentAdd small(context_, recorded, 61);
  vyre_graph graph = Record(add, small.Dispatch(UINT32_MAX));
  vyre_graph_info info = Info(graph);
  EXPECT_EQ(info.element_count, recorded);
  EXPECT_EQ(info.capacity_elements, capacity) << "the next power of two of 600";
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(DownloadU32(small.buf_out, recorded), small.Expected()));

  // The recorded buffers are too small for more elements.
  ReplaySpec more;
  more.element_count = 601;
  EXPECT_API_ERROR(Replay(graph, more), VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_replay");
  EXPECT_EQ(Info(graph).element_count, recorded);

  // Buffers of the full class, with 16 guard elements after out's range.
  const std::vector<uint32_t> a = RandomNonZeroU32(capacity, 62);
  const std::vector<uint32_t> b = RandomNonZeroU32(capacity, 63);
  vyre_buffer ba = UploadNew(context_, a), bb = UploadNew(context_, b);
  vyre_buffer bout = UploadNew(context_, std::vector<uint32_t>(capacity + 16, kPoison));
  const std::vector<uint32_t> sums = CpuAdd(a, b);
  for (uint64_t count : {capacity, capacity / 2 + 1, size_t{1}, size_t{777}}) {
    SCOPED_TRACE(count);
    ASSERT_VYRE_OK(vyre_buffer_upload(bout, 0, std::vector<uint32_t>(capacity + 16, kPoison).data(),
                                      (capacity + 16) * 4));
    ReplaySpec spec;
    spec.bindings = {Resident(ba), Resident(bb), Resident(bout, 0, capacity * 4)};
    spec.element_count = count;
    ASSERT_VYRE_OK(Replay(graph, spec));
    EXPECT_EQ(Info(graph).element_count, count);
    EXPECT_EQ(Info(graph).capacity_elements, capacity);
    std::vector<uint32_t> expected(capacity + 16, kPoison);
    std::fill(expected.begin(), expected.begin() + capacity, 0u);  // OUTPUT zeroed
    std::copy(sums.begin(), sums.begin() + count, expected.begin());
    EXPECT_TRUE(SameU32(DownloadU32(bout, capacity + 16), expected));
    EXPECT_EQ(FakeCuda::Stats().last_grid[0], count);
  }
  // element_count 0 keeps the current count (777).
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_EQ(FakeCuda::Stats().last_grid[0], 777u);
  ReplaySpec over;
  over.element_count = capacity + 1;
  EXPECT_API_ERROR(Replay(graph, over), VYRE_STATUS_LIMIT_EXCEEDED, "vyre_graph_replay");
  EXPECT_EQ(Info(graph).element_count, 777u);

  // A power of two is its own class; a count of 1 has class 1.
  ResidentAdd pow2(context_, 256, 64);
  vyre_graph g256 = Record(add, pow2.Dispatch(256));
  EXPECT_EQ(Info(g256).capacity_elements, 256u);
  ResidentAdd one(context_, 1, 65);
  vyre_graph g1 = Record(add, one.Dispatch(1));
  EXPECT_EQ(Info(g1).capacity_elements, 1u);
  ReplaySpec two;
  two.element_count = 2;
  EXPECT_API_ERROR(Replay(g1, two), VYRE_STATUS_LIMIT_EXCEEDED, "vyre_graph_replay");

  for (vyre_graph g : {graph, g256, g1}) EXPECT_VYRE_OK(vyre_graph_destroy(g));
  for (vyre_buffer buf : {ba, bb, bout}) EXPECT_VYRE_OK(vyre_buffer_free(buf));
  small.Free();
  pow2.Free();
  one.Free();
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphResultsTest, NodeInventory) {
  using K = std::vector<vyre_graph_node_kind>;
  constexpr auto kKernel = VYRE_GRAPH_NODE_KERNEL;
  constexpr auto kCopy = VYRE_GRAPH_NODE_MEMCPY;
  constexpr auto kSet = VYRE_GRAPH_NODE_MEMSET;
  vyre_program add = MakeProgram(context_, AddSpec());
  vyre_program inc = MakeProgram(context_, IncSpec());

  // Host add: copy a, copy b, zero out, kernel, copy out back.
  HostAdd host(128);
  vyre_graph g_host = Record(add, host.Dispatch());
  EXPECT_EQ(NodeKinds(g_host), (K{kCopy, kCopy, kSet, kKernel, kCopy}));
  vyre_graph_info info = Info(g_host);
  EXPECT_EQ(info.node_count, 5u);
  EXPECT_EQ(info.kernel_node_count, 1u);
  EXPECT_EQ(info.unchanged_input_node_count, 3u);
  EXPECT_EQ(info.from_sequence, 0u);
  EXPECT_EQ(info.context.bits, context_.bits);

  // Resident add with 3 fixpoint iterations: zero out, kernel x3.
  ResidentAdd res(context_, 64, 2);
  DispatchSpec three = res.Dispatch(64);
  three.fixpoint_iterations = 3;
  vyre_graph g_res = Record(add, three);
  EXPECT_EQ(NodeKinds(g_res), (K{kSet, kKernel, kKernel, kKernel}));
  info = Info(g_res);
  EXPECT_EQ(info.kernel_node_count, 3u);
  EXPECT_EQ(info.unchanged_input_node_count, 0u);
  EXPECT_EQ(info.host_input_bytes, 0u);
  EXPECT_EQ(info.host_output_bytes, 0u);

  // Host inc (INPUT_OUTPUT): copy in, kernel, copy out; never zeroed.
  std::vector<uint32_t> data(32, 1);
  DispatchSpec inc_spec;
  inc_spec.bindings = {HostInOut(data.data(), 128)};
  inc_spec.param_words = {32};
  vyre_graph g_inc = Record(inc, inc_spec);
  EXPECT_EQ(NodeKinds(g_inc), (K{kCopy, kKernel, kCopy}));

  // Host add with a partial read-back range: the copy back is still one node
  // and reads back only output_length bytes.
  ProgramSpec ranged = AddSpec();
  ranged.bindings[2].output_offset = 16;
  ranged.bindings[2].output_length = 64;
  vyre_program add_ranged = MakeProgram(context_, ranged);
  vyre_graph g_ranged = Record(add_ranged, host.Dispatch());
  EXPECT_EQ(NodeKinds(g_ranged), (K{kCopy, kCopy, kSet, kKernel, kCopy}));
  EXPECT_EQ(Info(g_ranged).host_output_bytes, 64u);
  host.Fresh(4);
  ASSERT_VYRE_OK(Replay(g_ranged, host.Replay()));
  std::vector<uint32_t> expected(128, kPoison);
  std::vector<uint32_t> sums = host.Expected();
  std::copy(sums.begin() + 4, sums.begin() + 20, expected.begin() + 4);
  EXPECT_TRUE(SameU32(host.out, expected));

  // Kernel node updates change the grid of the kernel node (index 3).
  vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
  update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
  update.grid[0] = 2;
  update.grid[1] = update.grid[2] = 1;
  ASSERT_VYRE_OK(vyre_graph_kernel_node_update(g_host, 3, &update));
  ASSERT_VYRE_OK(Replay(g_host, host.Replay()));
  EXPECT_EQ(FakeCuda::Stats().last_grid[0], 2u);
  EXPECT_EQ(NodeKinds(g_host), (K{kCopy, kCopy, kSet, kKernel, kCopy}));

  for (vyre_graph g : {g_host, g_res, g_inc, g_ranged}) EXPECT_VYRE_OK(vyre_graph_destroy(g));
  res.Free();
  for (vyre_program p : {add, inc, add_ranged}) EXPECT_VYRE_OK(vyre_program_destroy(p));
}

uint64_t PointerOf(vyre_buffer buffer) {
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  EXPECT_VYRE_OK(vyre_buffer_info_get(buffer, &info));
  return info.device_pointer;
}

// vyre_graph_node_info_get reports what the next replay runs: rebinding moves
// the memset's destination and the kernel's pointer arguments, a kernel node
// update its grid; the raw handles are the executable graph's.
TEST_F(GraphResultsTest, NodeInfoFollowsRebindingAndUpdates) {
  vyre_program add = MakeProgram(context_, AddSpec());
  const size_t n = 64;
  ResidentAdd first(context_, n, 21), second(context_, n, 22);
  vyre_graph graph = Record(add, first.Dispatch(n));
  auto check = [&](const ResidentAdd& bound, uint32_t grid_x, const char* when) {
    SCOPED_TRACE(when);
    vyre_graph_node_info set = VYRE_GRAPH_NODE_INFO_INIT, kernel = VYRE_GRAPH_NODE_INFO_INIT;
    ASSERT_VYRE_OK(vyre_graph_node_info_get(graph, 0, &set));
    ASSERT_VYRE_OK(vyre_graph_node_info_get(graph, 1, &kernel));
    EXPECT_EQ(set.kind, VYRE_GRAPH_NODE_MEMSET);
    EXPECT_EQ(set.memset_dst, PointerOf(bound.buf_out));
    EXPECT_EQ(set.memset_value, 0u);
    EXPECT_EQ(set.memset_element_size, 1u);
    EXPECT_EQ(set.memset_width, n * 4);
    EXPECT_EQ(set.memset_height, 1u);
    EXPECT_EQ(set.cu_function, 0u) << "kernel fields stay zero for a memset";
    EXPECT_EQ(kernel.kind, VYRE_GRAPH_NODE_KERNEL);
    EXPECT_NE(kernel.cu_function, 0u);
    EXPECT_EQ(kernel.argument_count, 4u) << "a, b, out and the parameter words";
    EXPECT_EQ(kernel.arguments[0], PointerOf(bound.buf_a));
    EXPECT_EQ(kernel.arguments[1], PointerOf(bound.buf_b));
    EXPECT_EQ(kernel.arguments[2], PointerOf(bound.buf_out));
    EXPECT_NE(kernel.arguments[3], 0u);
    EXPECT_EQ(kernel.arguments[4], 0u);
    if (grid_x != 0) EXPECT_EQ(kernel.grid[0], grid_x);
    EXPECT_GE(uint64_t{kernel.grid[0]} * kernel.block[0], n);
    EXPECT_EQ(kernel.memset_dst, 0u) << "memset fields stay zero for a kernel";
    EXPECT_NE(set.cu_graph_node, 0u);
    EXPECT_NE(set.cu_graph_node, kernel.cu_graph_node);
    EXPECT_NE(set.cu_graph_exec, 0u);
    EXPECT_EQ(set.cu_graph_exec, kernel.cu_graph_exec);
  };
  check(first, 0, "as recorded");
  const ReplaySpec rebind = second.Rebind();
  ASSERT_VYRE_OK(Replay(graph, rebind));
  EXPECT_TRUE(SameU32(DownloadU32(second.buf_out, n), second.Expected()));
  check(second, 0, "after rebinding");
  vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
  update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
  update.grid[0] = 2;
  update.grid[1] = update.grid[2] = 1;
  ASSERT_VYRE_OK(vyre_graph_kernel_node_update(graph, 1, &update));
  check(second, 2, "after a grid update");

  // Refusals.
  vyre_graph_node_info info = VYRE_GRAPH_NODE_INFO_INIT;
  EXPECT_API_ERROR(vyre_graph_node_info_get(graph, 2, &info), VYRE_STATUS_OUT_OF_RANGE,
                   "vyre_graph_node_info_get");
  EXPECT_API_ERROR(vyre_graph_node_info_get(graph, 0, nullptr), VYRE_STATUS_INVALID_ARGUMENT,
                   "vyre_graph_node_info_get");
  info.struct_size = 8;
  EXPECT_API_ERROR(vyre_graph_node_info_get(graph, 0, &info),
                   VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_graph_node_info_get");
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  info.struct_size = sizeof(info);
  EXPECT_API_ERROR(vyre_graph_node_info_get(graph, 0, &info), VYRE_STATUS_STALE_HANDLE,
                   "vyre_graph_node_info_get");
  first.Free();
  second.Free();
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphResultsTest, KernelNodeUpdatesPersistAcrossReplays) {
  // One-thread blocks: the grid is the number of elements incremented.
  vyre_program inc = MakeProgram(context_, OneThread(IncSpec()));
  const size_t n = 100;
  std::vector<uint32_t> data = RandomNonZeroU32(n, 21);
  vyre_buffer buffer = UploadNew(context_, data);
  DispatchSpec spec = ResidentInc(buffer, 0, n * 4, UINT32_MAX, 2);
  vyre_graph graph = Record(inc, spec);
  ASSERT_EQ(Info(graph).kernel_node_count, 2u);
  std::vector<uint32_t> expected = data;
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  for (uint32_t& v : expected) v += 2;

  // Node 1 (the second iteration) covers 10 elements from now on.
  vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
  update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
  update.grid[0] = 10;
  update.grid[1] = update.grid[2] = 1;
  ASSERT_VYRE_OK(vyre_graph_kernel_node_update(graph, 1, &update));
  for (int round = 0; round < 2; ++round) {
    ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
    for (size_t i = 0; i < n; ++i) expected[i] += i < 10 ? 2 : 1;
  }
  EXPECT_TRUE(SameU32(DownloadU32(buffer, n), expected));
  // A replay that rebinds keeps the updated grid of node 1.
  ReplaySpec rebind;
  rebind.bindings = {Resident(buffer)};
  ASSERT_VYRE_OK(Replay(graph, rebind));
  for (size_t i = 0; i < n; ++i) expected[i] += i < 10 ? 2 : 1;
  EXPECT_TRUE(SameU32(DownloadU32(buffer, n), expected));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));

  // Scalars of saxpy through a node update.
  vyre_program saxpy = MakeProgram(context_, SaxpySpec());
  std::vector<float> x = RandomNonZeroF32(n, 22), y = RandomNonZeroF32(n, 23);
  vyre_buffer bx = MakeBuffer(context_, n * 4), by = MakeBuffer(context_, n * 4);
  ASSERT_VYRE_OK(vyre_buffer_upload(bx, 0, x.data(), n * 4));
  ASSERT_VYRE_OK(vyre_buffer_upload(by, 0, y.data(), n * 4));
  DispatchSpec saxpy_spec;
  saxpy_spec.bindings = {Resident(bx), Resident(by)};
  saxpy_spec.scalars = {FloatBits(1.0f), n};
  vyre_graph sgraph = Record(saxpy, saxpy_spec);
  std::vector<uint64_t> scalars = {FloatBits(4.0f), 7};
  vyre_kernel_node_update su = VYRE_KERNEL_NODE_UPDATE_INIT;
  su.flags = VYRE_KERNEL_NODE_UPDATE_SCALARS;
  su.scalars = scalars.data();
  su.scalar_count = scalars.size();
  ASSERT_VYRE_OK(vyre_graph_kernel_node_update(sgraph, 0, &su));
  scalars.assign(2, 0);  // copied by the update
  ASSERT_VYRE_OK(vyre_graph_replay(sgraph, nullptr, nullptr));
  std::vector<float> yexp = y;
  for (size_t i = 0; i < 7; ++i) yexp[i] = 4.0f * x[i] + yexp[i];
  std::vector<float> back(n);
  ASSERT_VYRE_OK(vyre_buffer_download(by, 0, back.data(), n * 4));
  EXPECT_SAME_BYTES(back.data(), yexp.data(), n * 4);
  EXPECT_VYRE_OK(vyre_graph_destroy(sgraph));
  EXPECT_VYRE_OK(vyre_buffer_free(bx));
  EXPECT_VYRE_OK(vyre_buffer_free(by));
  EXPECT_VYRE_OK(vyre_program_destroy(saxpy));
}

// ===========================================================================
// Results: sequences
// ===========================================================================

// A CPU model of the buffers a sequence touches.
struct SequenceModel {
  std::map<uint64_t, std::vector<uint8_t>> buffers;  // by handle bits
  std::vector<uint8_t>& of(vyre_buffer b) { return buffers.at(b.bits); }
  uint32_t U32(vyre_buffer b, size_t i) {
    uint32_t v;
    std::memcpy(&v, &of(b)[i * 4], 4);
    return v;
  }
  void SetU32(vyre_buffer b, size_t i, uint32_t v) { std::memcpy(&of(b)[i * 4], &v, 4); }
};

TEST_F(SequenceResultsTest, EagerAndGraphRunsAreIdentical) {
  vyre_program add = MakeProgram(context_, AddSpec());
  vyre_program inc = MakeProgram(context_, IncSpec());
  vyre_program saxpy = MakeProgram(context_, SaxpySpec());
  const uint32_t n = 256;
  const uint64_t bytes = n * 4;
  vyre_buffer X = MakeBuffer(context_, bytes), Y = MakeBuffer(context_, bytes),
              Z = MakeBuffer(context_, bytes), W = MakeBuffer(context_, bytes),
              V = MakeBuffer(context_, 2 * bytes), F1 = MakeBuffer(context_, bytes),
              F2 = MakeBuffer(context_, bytes);
  std::vector<uint32_t> hx, hy;
  std::vector<float> hf1, hf2;
  // Refilled in place: the UPLOAD steps point at these vectors' storage.
  auto fresh_inputs = [&](uint32_t seed) {
    auto refill = [](auto* v, auto values) { std::copy(values.begin(), values.end(), v->begin()); };
    hx.resize(n);
    hy.resize(n);
    hf1.resize(n);
    hf2.resize(n);
    refill(&hx, RandomNonZeroU32(n, seed));
    refill(&hy, RandomNonZeroU32(n, seed + 1));
    refill(&hf1, RandomNonZeroF32(n, seed + 2));
    refill(&hf2, RandomNonZeroF32(n, seed + 3));
  };
  fresh_inputs(1);
  std::vector<uint32_t> out_z(n), out_w(n), out_v(2 * n), out_mid(n);
  std::vector<float> out_f2(n);
  auto poison_outputs = [&] {
    std::fill(out_z.begin(), out_z.end(), kPoison);
    std::fill(out_w.begin(), out_w.end(), kPoison);
    std::fill(out_v.begin(), out_v.end(), kPoison);
    std::fill(out_mid.begin(), out_mid.end(), kPoison);
    std::fill(out_f2.begin(), out_f2.end(), 0.0f);
  };

  // Steps and, in parallel, their CPU model.
  SequenceSpec seq;
  std::vector<std::function<void(SequenceModel&)>> model;
  auto add_step = [&](std::function<void(SequenceModel&)> m) { model.push_back(std::move(m)); };
  seq.Upload(X, 0, hx.data(), bytes);
  add_step([&](SequenceModel& s) { std::memcpy(s.of(X).data(), hx.data(), bytes); });
  seq.Upload(Y, 0, hy.data(), bytes);
  add_step([&](SequenceModel& s) { std::memcpy(s.of(Y).data(), hy.data(), bytes); });
  seq.Upload(F1, 0, hf1.data(), bytes);
  add_step([&](SequenceModel& s) { std::memcpy(s.of(F1).data(), hf1.data(), bytes); });
  seq.Upload(F2, 0, hf2.data(), bytes);
  add_step([&](SequenceModel& s) { std::memcpy(s.of(F2).data(), hf2.data(), bytes); });
  seq.Fill(Z, 0, bytes, 0x00);
  add_step([&](SequenceModel& s) { std::fill(s.of(Z).begin(), s.of(Z).end(), 0x00); });
  seq.Fill(W, 0, bytes / 2, 0x01);
  add_step([&](SequenceModel& s) { std::fill_n(s.of(W).begin(), bytes / 2, 0x01); });
  seq.Fill(W, bytes / 2, bytes / 2, 0x02);
  add_step([&](SequenceModel& s) { std::fill_n(s.of(W).begin() + bytes / 2, bytes / 2, 0x02); });
  seq.Fill(V, 0, 2 * bytes, 0x7E);
  add_step([&](SequenceModel& s) { std::fill(s.of(V).begin(), s.of(V).end(), 0x7E); });
  auto model_add = [&](vyre_buffer a, vyre_buffer b, vyre_buffer out) {
    return [=](SequenceModel& s) {
      for (uint32_t i = 0; i < n; ++i) s.SetU32(out, i, s.U32(a, i) + s.U32(b, i));
    };
  };
  auto model_inc = [&](vyre_buffer buf, uint64_t offset, uint32_t count, uint32_t times) {
    return [=](SequenceModel& s) {
      for (uint32_t i = 0; i < count; ++i) {
        uint32_t v;
        std::memcpy(&v, &s.of(buf)[offset + i * 4], 4);
        v += times;
        std::memcpy(&s.of(buf)[offset + i * 4], &v, 4);
      }
    };
  };
  auto model_copy = [&](vyre_buffer dst, uint64_t dst_off, vyre_buffer src, uint64_t src_off,
                        uint64_t count) {
    return [=](SequenceModel& s) {
      std::memcpy(s.of(dst).data() + dst_off, s.of(src).data() + src_off, count);
    };
  };
  DispatchSpec add_xy;
  add_xy.bindings = {Resident(X), Resident(Y), Resident(Z)};
  add_xy.param_words = {n};
  seq.Dispatch(add, add_xy);
  add_step(model_add(X, Y, Z));
  seq.Copy(V, 0, Z, 0, bytes);
  add_step(model_copy(V, 0, Z, 0, bytes));
  seq.Dispatch(inc, ResidentInc(V, 0, bytes, n, 2));
  add_step(model_inc(V, 0, n, 2));
  seq.Copy(W, 0, V, 0, bytes);
  add_step(model_copy(W, 0, V, 0, bytes));
  // The repeated block: steps 12 .. 18.
  seq.repeat_first = seq.steps.size();
  seq.Dispatch(inc, ResidentInc(W, 0, bytes, n));
  add_step(model_inc(W, 0, n, 1));
  DispatchSpec add_wx;
  add_wx.bindings = {Resident(W), Resident(X), Resident(Z)};
  add_wx.param_words = {n};
  seq.Dispatch(add, add_wx);
  add_step(model_add(W, X, Z));
  seq.Copy(W, 0, Z, 0, bytes);
  add_step(model_copy(W, 0, Z, 0, bytes));
  seq.Fill(V, bytes, bytes / 4, 0x33);
  add_step([&](SequenceModel& s) { std::fill_n(s.of(V).begin() + bytes, bytes / 4, 0x33); });
  seq.Copy(V, bytes + bytes / 2, W, 0, bytes / 2);
  add_step(model_copy(V, bytes + bytes / 2, W, 0, bytes / 2));
  seq.Download(W, 0, out_mid.data(), bytes);  // the last repetition's W
  add_step([](SequenceModel&) {});
  seq.Dispatch(inc, ResidentInc(V, bytes, bytes / 2, n / 8));
  add_step(model_inc(V, bytes, n / 8, 1));
  seq.repeat_step_count = seq.steps.size() - seq.repeat_first;
  seq.repeat_count = 5;
  // Floats: saxpy over F1, F2 twice with different a.
  DispatchSpec sx;
  sx.bindings = {Resident(F1), Resident(F2)};
  sx.scalars = {FloatBits(1.5f), n};
  seq.Dispatch(saxpy, sx);
  add_step([&](SequenceModel& s) {
    float* x = reinterpret_cast<float*>(s.of(F1).data());
    float* y = reinterpret_cast<float*>(s.of(F2).data());
    for (uint32_t i = 0; i < n; ++i) y[i] = 1.5f * x[i] + y[i];
  });
  sx.scalars = {FloatBits(-2.0f), n / 2};
  seq.Dispatch(saxpy, sx);
  add_step([&](SequenceModel& s) {
    float* x = reinterpret_cast<float*>(s.of(F1).data());
    float* y = reinterpret_cast<float*>(s.of(F2).data());
    for (uint32_t i = 0; i < n / 2; ++i) y[i] = -2.0f * x[i] + y[i];
  });
  // A few more fills and copies in 64-byte pieces.
  for (uint32_t k = 0; k < 8; ++k) {
    seq.Fill(Z, 64 * k, 32, 0x10 + k);
    add_step([=](SequenceModel& s) { std::fill_n(s.of(Z).begin() + 64 * k, 32, 0x10 + k); });
  }
  seq.Copy(V, 0, Z, 0, 512);
  add_step(model_copy(V, 0, Z, 0, 512));
  seq.Download(Z, 0, out_z.data(), bytes);
  add_step([](SequenceModel&) {});
  seq.Download(W, 0, out_w.data(), bytes);
  add_step([](SequenceModel&) {});
  seq.Download(V, 0, out_v.data(), 2 * bytes);
  add_step([](SequenceModel&) {});
  seq.Download(F2, 0, out_f2.data(), bytes);
  add_step([](SequenceModel&) {});
  ASSERT_GE(seq.steps.size(), 30u);
  ASSERT_EQ(model.size(), seq.steps.size());

  // Run the model in the engine's order.
  auto run_model = [&]() {
    SequenceModel s;
    for (vyre_buffer b : {X, Y, Z, W, F1, F2}) s.buffers[b.bits].assign(bytes, 0);
    s.buffers[V.bits].assign(2 * bytes, 0);
    std::vector<uint32_t> mid;
    auto step = [&](size_t i) {
      model[i](s);
      if (seq.steps[i].host_dst == out_mid.data()) {
        mid.resize(n);
        std::memcpy(mid.data(), s.of(W).data(), bytes);
      }
    };
    for (size_t i = 0; i < seq.repeat_first; ++i) step(i);
    for (uint32_t r = 0; r < seq.repeat_count; ++r) {
      for (size_t i = seq.repeat_first; i < seq.repeat_first + seq.repeat_step_count; ++i) step(i);
    }
    for (size_t i = seq.repeat_first + seq.repeat_step_count; i < seq.steps.size(); ++i) step(i);
    return std::make_pair(std::move(s), std::move(mid));
  };
  struct Outputs {
    std::vector<uint32_t> z, w, v, mid;
    std::vector<float> f2;
  };
  auto take_outputs = [&] { return Outputs{out_z, out_w, out_v, out_mid, out_f2}; };
  auto expect_model = [&](const Outputs& o, const char* what) {
    SCOPED_TRACE(what);
    auto [s, mid] = run_model();
    EXPECT_SAME_BYTES(o.z.data(), s.of(Z).data(), bytes);
    EXPECT_SAME_BYTES(o.w.data(), s.of(W).data(), bytes);
    EXPECT_SAME_BYTES(o.v.data(), s.of(V).data(), 2 * bytes);
    EXPECT_SAME_BYTES(o.f2.data(), s.of(F2).data(), bytes);
    EXPECT_SAME_BYTES(o.mid.data(), mid.data(), bytes);
  };

  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(CreateSequence(context_, seq, &sequence));
  vyre_telemetry t0 = Telemetry(context_);
  poison_outputs();
  ASSERT_VYRE_OK(vyre_sequence_run(sequence, nullptr));
  Outputs eager = take_outputs();
  expect_model(eager, "eager");
  vyre_telemetry t1 = Telemetry(context_);
  EXPECT_EQ(t1.sequence_runs - t0.sequence_runs, 1u);
  EXPECT_EQ(t1.sync_points - t0.sync_points, 1u) << "one synchronisation per run";

  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_sequence_record(sequence, &graph));
  vyre_graph_info info = Info(graph);
  EXPECT_EQ(info.from_sequence, 1u);
  // Nodes: per step as run (the block 5 times); a DISPATCH is its OUTPUT
  // zeroings plus one kernel per iteration.
  uint64_t expected_nodes = 0, expected_kernels = 0;
  auto count_step = [&](size_t i) {
    const vyre_sequence_step& st = seq.steps[i];
    if (st.kind != VYRE_STEP_DISPATCH) {
      ++expected_nodes;
      return;
    }
    const DispatchSpec* d = nullptr;
    for (size_t k = 0; k < seq.dispatch_descs.size(); ++k) {
      if (seq.dispatch_descs[k].get() == st.dispatch) d = seq.dispatch_specs[k].get();
    }
    const bool is_add = st.program.bits == add.bits;
    expected_nodes += (is_add ? 1 : 0) + d->fixpoint_iterations;
    expected_kernels += d->fixpoint_iterations;
  };
  for (size_t i = 0; i < seq.repeat_first; ++i) count_step(i);
  for (uint32_t r = 0; r < seq.repeat_count; ++r) {
    for (size_t i = seq.repeat_first; i < seq.repeat_first + seq.repeat_step_count; ++i) {
      count_step(i);
    }
  }
  for (size_t i = seq.repeat_first + seq.repeat_step_count; i < seq.steps.size(); ++i) {
    count_step(i);
  }
  EXPECT_EQ(info.node_count, expected_nodes);
  EXPECT_EQ(info.kernel_node_count, expected_kernels);
  // The first nodes: 4 uploads, 4 fills, then add (memset + kernel).
  std::vector<vyre_graph_node_kind> kinds = NodeKinds(graph);
  ASSERT_EQ(kinds.size(), expected_nodes);
  using K = std::vector<vyre_graph_node_kind>;
  EXPECT_EQ(K(kinds.begin(), kinds.begin() + 10),
            (K{VYRE_GRAPH_NODE_MEMCPY, VYRE_GRAPH_NODE_MEMCPY, VYRE_GRAPH_NODE_MEMCPY,
               VYRE_GRAPH_NODE_MEMCPY, VYRE_GRAPH_NODE_MEMSET, VYRE_GRAPH_NODE_MEMSET,
               VYRE_GRAPH_NODE_MEMSET, VYRE_GRAPH_NODE_MEMSET, VYRE_GRAPH_NODE_MEMSET,
               VYRE_GRAPH_NODE_KERNEL}));

  poison_outputs();
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  Outputs replayed = take_outputs();
  expect_model(replayed, "graph");
  EXPECT_SAME_BYTES(replayed.z.data(), eager.z.data(), bytes);
  EXPECT_SAME_BYTES(replayed.w.data(), eager.w.data(), bytes);
  EXPECT_SAME_BYTES(replayed.v.data(), eager.v.data(), 2 * bytes);
  EXPECT_SAME_BYTES(replayed.f2.data(), eager.f2.data(), bytes);
  EXPECT_SAME_BYTES(replayed.mid.data(), eager.mid.data(), bytes);

  // UPLOAD steps read their host memory when a run starts: new inputs give
  // new results, the same in both.
  fresh_inputs(50);
  poison_outputs();
  ASSERT_VYRE_OK(vyre_sequence_run(sequence, nullptr));
  eager = take_outputs();
  expect_model(eager, "eager, new inputs");
  poison_outputs();
  vyre_pending pending{0};
  ASSERT_VYRE_OK(vyre_graph_replay_async(graph, nullptr, &pending));
  EXPECT_TRUE(SameU32(out_z, std::vector<uint32_t>(n, kPoison)))
      << "DOWNLOAD steps of an asynchronous replay are written by its wait";
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  replayed = take_outputs();
  expect_model(replayed, "graph, new inputs");
  EXPECT_SAME_BYTES(replayed.v.data(), eager.v.data(), 2 * bytes);

  // The graph outlives the sequence. The sequence object stays alive (and
  // counted in live_sequences, as a freed buffer a dispatch still uses stays
  // counted in live_buffers) until its graph goes.
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_API_ERROR(vyre_sequence_run(sequence, nullptr), VYRE_STATUS_STALE_HANDLE,
                   "vyre_sequence_run");
  ExpectLive(1, 1);
  fresh_inputs(60);
  poison_outputs();
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  expect_model(take_outputs(), "graph after the sequence was destroyed");
  vyre_telemetry t2 = Telemetry(context_);
  EXPECT_EQ(t2.graph_replays, 3u);
  EXPECT_EQ(t2.sequence_runs, 2u);
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  ExpectLive(0, 0);
  for (vyre_buffer b : {X, Y, Z, W, V, F1, F2}) EXPECT_VYRE_OK(vyre_buffer_free(b));
  for (vyre_program p : {add, inc, saxpy}) EXPECT_VYRE_OK(vyre_program_destroy(p));
}

TEST_F(SequenceResultsTest, AStepRepeatedLeavesItsLastResult) {
  vyre_program inc = MakeProgram(context_, IncSpec());
  vyre_buffer buffer = MakeBuffer(context_, 64);
  std::vector<uint32_t> zeros(16, 0), seen(16, kPoison);
  SequenceSpec spec;
  spec.Upload(buffer, 0, zeros.data(), 64);
  spec.Dispatch(inc, ResidentInc(buffer, 0, 64, 16));
  spec.Download(buffer, 0, seen.data(), 64);
  spec.repeat_first = 1;
  spec.repeat_step_count = 2;
  spec.repeat_count = 7;
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(CreateSequence(context_, spec, &sequence));
  ASSERT_VYRE_OK(vyre_sequence_run(sequence, nullptr));
  EXPECT_TRUE(SameU32(seen, std::vector<uint32_t>(16, 7)));
  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_sequence_record(sequence, &graph));
  EXPECT_EQ(Info(graph).node_count, 1u + 7u * 2u);
  seen.assign(16, kPoison);
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(seen, std::vector<uint32_t>(16, 7)));
  // A repeat_count of 1 is a plain run.
  spec.repeat_count = 1;
  vyre_sequence once{0};
  ASSERT_VYRE_OK(CreateSequence(context_, spec, &once));
  ASSERT_VYRE_OK(vyre_sequence_run(once, nullptr));
  EXPECT_TRUE(SameU32(seen, std::vector<uint32_t>(16, 1)));
  EXPECT_VYRE_OK(vyre_sequence_destroy(once));
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
}

TEST_F(SequenceResultsTest, SequencesKeepTheirBuffersAndProgramsAlive) {
  vyre_program inc = MakeProgram(context_, IncSpec());
  vyre_buffer buffer = MakeBuffer(context_, 64);
  std::vector<uint32_t> start(16, 40), seen(16, kPoison);
  SequenceSpec spec;
  spec.Upload(buffer, 0, start.data(), 64);
  spec.Dispatch(inc, ResidentInc(buffer, 0, 64, 16, 2));
  spec.Download(buffer, 0, seen.data(), 64);
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(CreateSequence(context_, spec, &sequence));
  // The program may go: the sequence holds it.
  ASSERT_VYRE_OK(vyre_program_destroy(inc));
  ASSERT_VYRE_OK(vyre_sequence_run(sequence, nullptr));
  EXPECT_TRUE(SameU32(seen, std::vector<uint32_t>(16, 42)));
  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_sequence_record(sequence, &graph));
  ASSERT_VYRE_OK(vyre_sequence_destroy(sequence));
  seen.assign(16, kPoison);
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(seen, std::vector<uint32_t>(16, 42)));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_EQ(Telemetry(context_).live_programs, 0u);
}

// ===========================================================================
// Lifetimes with replays in flight
// ===========================================================================

TEST_F(GraphResultsTest, FreeingBuffersAndDestroyingGraphsWithReplaysInFlight) {
  vyre_program add = MakeProgram(context_, AddSpec());
  const size_t n = 2000;
  const fake_cuda_stats baseline = FakeCuda::Stats();
  ResidentAdd res(context_, n, 81);
  vyre_graph graph = Record(add, res.Dispatch(n));
  vyre_pending pending{0};
  fake_cuda_stats in_flight{};
  {
    ScopedHold hold;  // the fake's device work does not complete
    ASSERT_VYRE_OK(vyre_graph_replay_async(graph, nullptr, &pending));
    EXPECT_API_ERROR(vyre_pending_poll(pending), VYRE_STATUS_NOT_READY, "vyre_pending_poll");
    in_flight = FakeCuda::Stats();
    // Free every buffer the replay uses and destroy the graph itself.
    res.Free();
    ASSERT_VYRE_OK(vyre_graph_destroy(graph));
    EXPECT_API_ERROR(vyre_graph_destroy(graph), VYRE_STATUS_STALE_HANDLE, "vyre_graph_destroy");
    uint32_t word = 0;
    EXPECT_API_ERROR(vyre_buffer_download(res.buf_out, 0, &word, 4), VYRE_STATUS_STALE_HANDLE,
                     "vyre_buffer_download");
    const fake_cuda_stats now = FakeCuda::Stats();
    EXPECT_EQ(now.device_allocations_live, in_flight.device_allocations_live)
        << "memory of a replay in flight was freed";
    EXPECT_EQ(now.graph_execs_live, in_flight.graph_execs_live)
        << "the executable graph of a replay in flight was destroyed";
    EXPECT_EQ(now.graphs_live, in_flight.graphs_live);
    EXPECT_EQ(Telemetry(context_).live_graphs, 1u) << "the graph lives until its replay completes";
  }
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  ASSERT_VYRE_OK(vyre_pending_release(pending));
  ASSERT_VYRE_OK(vyre_context_trim(context_));
  const fake_cuda_stats after = FakeCuda::Stats();
  EXPECT_EQ(after.device_allocations_live, baseline.device_allocations_live);
  EXPECT_EQ(after.pinned_allocations_live, baseline.pinned_allocations_live);
  EXPECT_EQ(after.graphs_live, baseline.graphs_live);
  EXPECT_EQ(after.graph_execs_live, baseline.graph_execs_live);
  ExpectLive(0, 0);
  EXPECT_EQ(Telemetry(context_).live_buffers, 0u);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphResultsTest, DestroyingAHostGraphWithAnUnwaitedReplayStillReadsBack) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(1500, 90);
  vyre_graph graph = Record(add, host.Dispatch());
  vyre_pending pending{0};
  {
    ScopedHold hold;
    ASSERT_VYRE_OK(ReplayAsync(graph, host.Replay(), &pending));
    ASSERT_VYRE_OK(vyre_graph_destroy(graph));
    EXPECT_EQ(Telemetry(context_).live_graphs, 1u);
  }
  // The replay's pinned buffers survived the destroy: the wait reads back.
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_EQ(Telemetry(context_).live_graphs, 1u) << "the pending still holds the graph";
  ASSERT_VYRE_OK(vyre_pending_release(pending));
  ExpectLive(0, 0);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphResultsTest, DestroyingAContextWithReplaysInFlight) {
  const fake_cuda_stats baseline = FakeCuda::Stats();
  vyre_context other = MakeContext();
  vyre_program add = MakeProgram(other, AddSpec());
  vyre_program inc = MakeProgram(other, IncSpec());
  ResidentAdd res(other, 700, 91);
  vyre_graph resident_graph = Record(add, res.Dispatch(700));
  HostAdd host(700, 92);
  vyre_graph host_graph = Record(add, host.Dispatch());
  vyre_buffer data = MakeBuffer(other, 256);
  SequenceSpec spec;
  spec.Fill(data, 0, 256, 0);
  spec.Dispatch(inc, ResidentInc(data, 0, 256, 64));
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(CreateSequence(other, spec, &sequence));
  vyre_graph sequence_graph{0};
  ASSERT_VYRE_OK(vyre_sequence_record(sequence, &sequence_graph));
  vyre_pending p1{0}, p2{0}, p3{0};
  {
    ScopedHold hold;
    ASSERT_VYRE_OK(vyre_graph_replay_async(resident_graph, nullptr, &p1));
    ASSERT_VYRE_OK(ReplayAsync(host_graph, host.Replay(), &p2));
    ASSERT_VYRE_OK(vyre_graph_replay_async(sequence_graph, nullptr, &p3));
    res.Free();
    // Destroy waits for the context's work: the device finishes meanwhile.
    std::thread device_finishes([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      FakeCuda::SetHold(false);
    });
    EXPECT_VYRE_OK(vyre_context_destroy(other));
    device_finishes.join();
  }
  // Without a wait, host outputs were never written.
  EXPECT_TRUE(SameU32(host.out, std::vector<uint32_t>(700, kPoison)));
  for (vyre_pending p : {p1, p2, p3}) {
    EXPECT_API_ERROR(vyre_pending_wait(p, 0), VYRE_STATUS_STALE_HANDLE, "vyre_pending_wait");
  }
  EXPECT_API_ERROR(vyre_graph_replay(resident_graph, nullptr, nullptr), VYRE_STATUS_STALE_HANDLE,
                   "vyre_graph_replay");
  EXPECT_API_ERROR(vyre_sequence_run(sequence, nullptr), VYRE_STATUS_STALE_HANDLE,
                   "vyre_sequence_run");
  const fake_cuda_stats after = FakeCuda::Stats();
  EXPECT_EQ(after.device_allocations_live, baseline.device_allocations_live);
  EXPECT_EQ(after.pinned_allocations_live, baseline.pinned_allocations_live);
  EXPECT_EQ(after.graphs_live, baseline.graphs_live);
  EXPECT_EQ(after.graph_execs_live, baseline.graph_execs_live);
  EXPECT_EQ(after.streams_live, baseline.streams_live);
  EXPECT_EQ(after.events_live, baseline.events_live);
  EXPECT_EQ(after.modules_live, baseline.modules_live);
}

TEST_F(GraphResultsTest, ContextDestroyReleasesUndestroyedGraphsAndSequences) {
  const fake_cuda_stats baseline = FakeCuda::Stats();
  vyre_context other = MakeContext();
  vyre_program add = MakeProgram(other, AddSpec());
  HostAdd host(64);
  for (int i = 0; i < 3; ++i) Record(add, host.Dispatch());
  vyre_buffer buffer = MakeBuffer(other, 64);
  SequenceSpec spec;
  spec.Fill(buffer, 0, 64, 1);
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(CreateSequence(other, spec, &sequence));
  vyre_graph from_sequence{0};
  ASSERT_VYRE_OK(vyre_sequence_record(sequence, &from_sequence));
  vyre_telemetry t = Telemetry(other);
  EXPECT_EQ(t.live_graphs, 4u);
  EXPECT_EQ(t.live_sequences, 1u);
  EXPECT_EQ(t.graph_records, 4u);
  ASSERT_VYRE_OK(vyre_context_destroy(other));
  const fake_cuda_stats after = FakeCuda::Stats();
  EXPECT_EQ(after.graphs_live, baseline.graphs_live);
  EXPECT_EQ(after.graph_execs_live, baseline.graph_execs_live);
  EXPECT_EQ(after.device_allocations_live, baseline.device_allocations_live);
  EXPECT_EQ(after.pinned_allocations_live, baseline.pinned_allocations_live);
  EXPECT_EQ(after.streams_live, baseline.streams_live);
}

// Recording on one thread while others dispatch and replay on the same
// context: the capture is thread-local and never takes the work stream.
TEST_F(GraphResultsTest, RecordingWhileOtherThreadsDispatchAndReplay) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd shared_host(256, 3);
  vyre_graph replayed = Record(add, shared_host.Dispatch());
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread dispatcher([&] {
    HostAdd mine(512, 4);
    while (!stop.load()) {
      mine.Poison();
      DispatchSpec spec = mine.Dispatch();
      vyre_dispatch_desc desc = spec.Desc();
      if (vyre_dispatch(add, &desc, nullptr) != VYRE_STATUS_OK ||
          !SameU32(mine.out, mine.Expected())) {
        failures++;
      }
    }
  });
  std::thread replayer([&] {
    HostAdd mine(256, 5);
    for (int i = 0; i < 50; ++i) {
      mine.Fresh(500 + i);
      if (Replay(replayed, mine.Replay()) != VYRE_STATUS_OK ||
          !SameU32(mine.out, mine.Expected())) {
        failures++;
      }
    }
  });
  for (int i = 0; i < 20; ++i) {
    HostAdd host(100 + i, 700 + i);
    vyre_graph graph = Record(add, host.Dispatch());
    ASSERT_VYRE_OK(Replay(graph, host.Replay()));
    EXPECT_TRUE(SameU32(host.out, host.Expected()));
    EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  }
  replayer.join();
  stop = true;
  dispatcher.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_VYRE_OK(vyre_graph_destroy(replayed));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

}  // namespace
}  // namespace vyre_test
