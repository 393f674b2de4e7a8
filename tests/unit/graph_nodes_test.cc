// vyre_graph_node_info_set on the fake driver (which runs graph nodes on the
// host): kernel and memset nodes read, edited and set back, checked against
// the program's parameter list or taken raw, with every replay's results
// compared with a CPU reference over fresh random data and poisoned outputs;
// every refusal checked for its status and a first line "<fn>: ... Fix: ...".
// After every test the fake's live objects are back at their baseline and the
// fake saw no driver misuse.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api_fake_fixture.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

constexpr const char* kSet = "vyre_graph_node_info_set";


#define EXPECT_SET_ERROR(expr, expected) \
  EXPECT_TRUE(::vyre_test::ExpectApiError((expr), (expected), kSet)) << "  in: " #expr

class GraphNodesTest : public FakeDriverTest {
 protected:
  void TearDown() override {
    FakeDriverTest::TearDown();
    const fake_cuda_stats after = FakeCuda::Stats();
    EXPECT_EQ(after.graphs_live, before_.graphs_live) << "CUDA graphs leaked";
    EXPECT_EQ(after.graph_execs_live, before_.graph_execs_live) << "executable graphs leaked";
  }
};

vyre_graph Record(vyre_program program, const DispatchSpec& spec) {
  vyre_dispatch_desc desc = spec.Desc();
  vyre_graph graph{0};
  EXPECT_VYRE_OK(vyre_graph_record(program, &desc, &graph));
  return graph;
}

vyre_graph_node_info NodeInfo(vyre_graph graph, uint64_t index) {
  vyre_graph_node_info info = VYRE_GRAPH_NODE_INFO_INIT;
  EXPECT_VYRE_OK(vyre_graph_node_info_get(graph, index, &info));
  return info;
}

vyre_buffer UploadNew(vyre_context context, const std::vector<uint32_t>& data) {
  vyre_buffer buffer = MakeBuffer(context, ByteSize(data));
  EXPECT_VYRE_OK(vyre_buffer_upload(buffer, 0, data.data(), ByteSize(data)));
  return buffer;
}

std::vector<uint32_t> DownloadU32(vyre_buffer buffer, size_t count) {
  std::vector<uint32_t> data(count, kPoison);
  EXPECT_VYRE_OK(vyre_buffer_download(buffer, 0, data.data(), count * 4));
  return data;
}

void Poison(vyre_buffer buffer, size_t count) {
  const std::vector<uint32_t> poison(count, kPoison);
  EXPECT_VYRE_OK(vyre_buffer_upload(buffer, 0, poison.data(), count * 4));
}

uint64_t PointerOf(vyre_buffer buffer) {
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  EXPECT_VYRE_OK(vyre_buffer_info_get(buffer, &info));
  return info.device_pointer;
}

uint32_t FloatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

// The index of the graph's first node of `kind`.
uint64_t FirstNode(vyre_graph graph, vyre_graph_node_kind kind) {
  vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
  EXPECT_VYRE_OK(vyre_graph_info_get(graph, &info));
  for (uint64_t i = 0; i < info.node_count; ++i) {
    if (NodeInfo(graph, i).kind == kind) return i;
  }
  ADD_FAILURE() << "no node of kind " << kind;
  return 0;
}

// Every field of vyre_graph_node_info_get's answer equals what was set.
void ExpectSameInfo(const vyre_graph_node_info& got, const vyre_graph_node_info& set) {
  EXPECT_EQ(got.kind, set.kind);
  EXPECT_EQ(got.cu_function, set.cu_function);
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(got.grid[d], set.grid[d]) << "grid " << d;
    EXPECT_EQ(got.block[d], set.block[d]) << "block " << d;
  }
  EXPECT_EQ(got.shared_memory_bytes, set.shared_memory_bytes);
  EXPECT_EQ(got.argument_count, set.argument_count);
  for (int i = 0; i < VYRE_GRAPH_NODE_MAX_ARGUMENTS; ++i) {
    EXPECT_EQ(got.arguments[i], set.arguments[i]) << "argument " << i;
  }
  EXPECT_EQ(got.memset_dst, set.memset_dst);
  EXPECT_EQ(got.memset_value, set.memset_value);
  EXPECT_EQ(got.memset_element_size, set.memset_element_size);
  EXPECT_EQ(got.memset_width, set.memset_width);
  EXPECT_EQ(got.memset_height, set.memset_height);
}

// ===========================================================================
// Kernel nodes
// ===========================================================================

// saxpy's scalars (a: SCALAR32, n: SCALAR64) and grid set through the node
// info; the next replays compute with them, and info reads them back.
TEST_F(GraphNodesTest, KernelScalarsAndGridSetCheckedRoundTrip) {
  vyre_program saxpy = MakeProgram(context_, SaxpySpec());
  const size_t n = 300;
  const std::vector<float> x = RandomNonZeroF32(n, 41), y = RandomNonZeroF32(n, 42);
  vyre_buffer bx = MakeBuffer(context_, n * 4), by = MakeBuffer(context_, n * 4);
  ASSERT_VYRE_OK(vyre_buffer_upload(bx, 0, x.data(), n * 4));
  ASSERT_VYRE_OK(vyre_buffer_upload(by, 0, y.data(), n * 4));
  DispatchSpec spec;
  spec.bindings = {Resident(bx), Resident(by)};
  spec.scalars = {FloatBits(1.0f), n};
  // An explicit grid: 2 blocks of 256 threads cover n.
  spec.grid[0] = 2;
  spec.grid[1] = spec.grid[2] = 1;
  vyre_graph graph = Record(saxpy, spec);
  const uint64_t k = FirstNode(graph, VYRE_GRAPH_NODE_KERNEL);

  vyre_graph_node_info info = NodeInfo(graph, k);
  ASSERT_EQ(info.argument_count, 4u);
  ASSERT_EQ(info.arguments[1], PointerOf(bx));
  ASSERT_EQ(info.arguments[2], PointerOf(by));
  const float a = 2.5f;
  const uint64_t count = 200;
  info.arguments[0] = FloatBits(a);
  info.arguments[3] = count;
  info.grid[0] = 1;  // 256 threads: still covers `count`
  info.block[0] = 256;
  ASSERT_VYRE_OK(vyre_graph_node_info_set(graph, k, &info, 0));
  ExpectSameInfo(NodeInfo(graph, k), info);

  std::vector<float> expected = y;
  for (int round = 0; round < 2; ++round) {
    ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
    for (size_t i = 0; i < count; ++i) expected[i] = a * x[i] + expected[i];
  }
  std::vector<float> back(n, 0.0f);
  ASSERT_VYRE_OK(vyre_buffer_download(by, 0, back.data(), n * 4));
  EXPECT_SAME_BYTES(back.data(), expected.data(), n * 4);

  // A grid of 1 thread block of 64 threads: only 64 elements from now on
  // (the block may change: the grid is explicit).
  info = NodeInfo(graph, k);
  info.block[0] = 64;
  ASSERT_VYRE_OK(vyre_graph_node_info_set(graph, k, &info, 0));
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  for (size_t i = 0; i < 64; ++i) expected[i] = a * x[i] + expected[i];
  ASSERT_VYRE_OK(vyre_buffer_download(by, 0, back.data(), n * 4));
  EXPECT_SAME_BYTES(back.data(), expected.data(), n * 4);

  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_buffer_free(bx));
  EXPECT_VYRE_OK(vyre_buffer_free(by));
  EXPECT_VYRE_OK(vyre_program_destroy(saxpy));
}

// RAW: a pointer argument moved to another buffer; the checked set refuses
// the same change; a rebinding replay takes the slot back.
TEST_F(GraphNodesTest, KernelPointerArgumentsSetRawAndRebindingTakesThemBack) {
  vyre_program add = MakeProgram(context_, AddSpec());
  const size_t n = 128;
  const std::vector<uint32_t> a = RandomNonZeroU32(n, 51), b = RandomNonZeroU32(n, 52);
  vyre_buffer ba = UploadNew(context_, a), bb = UploadNew(context_, b);
  vyre_buffer out = UploadNew(context_, std::vector<uint32_t>(n, kPoison));
  vyre_buffer other = UploadNew(context_, std::vector<uint32_t>(n, kPoison));
  DispatchSpec spec;
  spec.bindings = {Resident(ba), Resident(bb), Resident(out)};
  spec.param_words = {static_cast<uint32_t>(n)};
  vyre_graph graph = Record(add, spec);
  const uint64_t k = FirstNode(graph, VYRE_GRAPH_NODE_KERNEL);

  vyre_graph_node_info info = NodeInfo(graph, k);
  info.arguments[2] = PointerOf(other);
  EXPECT_SET_ERROR(vyre_graph_node_info_set(graph, k, &info, 0), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(LastErrorMessage().find("binding's pointer"), std::string::npos) << LastErrorMessage();
  EXPECT_EQ(NodeInfo(graph, k).arguments[2], PointerOf(out)) << "a refused set changes nothing";
  ASSERT_VYRE_OK(vyre_graph_node_info_set(graph, k, &info, VYRE_GRAPH_NODE_SET_RAW));
  EXPECT_EQ(NodeInfo(graph, k).arguments[2], PointerOf(other));

  // The memset still zeroes `out`; the kernel writes `other`.
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(DownloadU32(other, n), CpuAdd(a, b)));
  EXPECT_TRUE(SameU32(DownloadU32(out, n), std::vector<uint32_t>(n, 0)));

  // Rebinding rewrites the binding slots from the bindings.
  Poison(out, n);
  Poison(other, n);
  vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
  const std::vector<vyre_dispatch_binding> bindings = {Resident(bb), Resident(ba),
                                                       Resident(out)};
  desc.bindings = bindings.data();
  desc.binding_count = bindings.size();
  ASSERT_VYRE_OK(vyre_graph_replay(graph, &desc, nullptr));
  EXPECT_EQ(NodeInfo(graph, k).arguments[2], PointerOf(out));
  EXPECT_TRUE(SameU32(DownloadU32(out, n), CpuAdd(b, a)));
  EXPECT_TRUE(SameU32(DownloadU32(other, n), std::vector<uint32_t>(n, kPoison)));

  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  for (vyre_buffer buffer : {ba, bb, out, other}) EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// A HOST graph has a twin without the input copies: a set reaches both, so
// replays with changed and with unchanged inputs run the new grid.
TEST_F(GraphNodesTest, KernelSetReachesTheGraphWithoutInputCopies) {
  ProgramSpec one_thread = AddSpec();
  one_thread.workgroup[0] = 1;
  vyre_program add = MakeProgram(context_, one_thread);
  const size_t n = 64, covered = 10;
  std::vector<uint32_t> a = RandomNonZeroU32(n, 61), b = RandomNonZeroU32(n, 62);
  std::vector<uint32_t> out(n, kPoison);
  DispatchSpec spec;
  spec.bindings = {HostIn(a.data(), n * 4), HostIn(b.data(), n * 4), HostOut(out.data(), n * 4)};
  spec.param_words = {static_cast<uint32_t>(n)};
  vyre_graph graph = Record(add, spec);
  vyre_graph_info ginfo = VYRE_GRAPH_INFO_INIT;
  ASSERT_VYRE_OK(vyre_graph_info_get(graph, &ginfo));
  ASSERT_GT(ginfo.unchanged_input_node_count, 0u) << "the graph has a twin";
  const uint64_t k = FirstNode(graph, VYRE_GRAPH_NODE_KERNEL);
  vyre_graph_node_info info = NodeInfo(graph, k);
  info.grid[0] = covered;  // one-thread blocks: `covered` elements
  ASSERT_VYRE_OK(vyre_graph_node_info_set(graph, k, &info, 0));

  vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
  desc.bindings = spec.bindings.data();
  desc.binding_count = spec.bindings.size();
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "inputs changed" : "inputs unchanged");
    out.assign(n, kPoison);
    vyre_telemetry before = Telemetry(context_);
    ASSERT_VYRE_OK(vyre_graph_replay(graph, &desc, nullptr));
    vyre_telemetry after = Telemetry(context_);
    EXPECT_EQ(after.graph_uploads_skipped - before.graph_uploads_skipped,
              round == 0 ? 0u : 1u);
    std::vector<uint32_t> expected = CpuAdd(a, b);
    for (size_t i = covered; i < n; ++i) expected[i] = 0;  // zeroed, not computed
    EXPECT_TRUE(SameU32(out, expected));
  }
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphNodesTest, KernelSetRefusals) {
  vyre_program saxpy = MakeProgram(context_, SaxpySpec());
  ProgramSpec shared_spec = AddSpec();
  shared_spec.shared_memory_bytes = 64;
  vyre_program add = MakeProgram(context_, shared_spec);
  const size_t n = 64;
  vyre_buffer bx = UploadNew(context_, RandomNonZeroU32(n, 71));
  vyre_buffer by = UploadNew(context_, RandomNonZeroU32(n, 72));
  vyre_buffer bo = UploadNew(context_, std::vector<uint32_t>(n, kPoison));
  DispatchSpec sspec;
  sspec.bindings = {Resident(bx), Resident(by)};
  sspec.scalars = {FloatBits(1.0f), n};
  vyre_graph derived = Record(saxpy, sspec);  // derived grid
  DispatchSpec aspec;
  aspec.bindings = {Resident(bx), Resident(by), Resident(bo)};
  aspec.param_words = {static_cast<uint32_t>(n)};
  vyre_graph added = Record(add, aspec);
  const uint64_t k = FirstNode(derived, VYRE_GRAPH_NODE_KERNEL);
  const uint64_t m = FirstNode(added, VYRE_GRAPH_NODE_MEMSET);
  const uint64_t ak = FirstNode(added, VYRE_GRAPH_NODE_KERNEL);
  const vyre_graph_node_info good = NodeInfo(derived, k);
  vyre_device_info device = VYRE_DEVICE_INFO_INIT;
  ASSERT_VYRE_OK(vyre_context_device_info(context_, &device));

  auto refused = [&](vyre_graph graph, uint64_t index, vyre_graph_node_info info,
                     uint32_t flags, vyre_status status, const char* why) {
    SCOPED_TRACE(why);
    EXPECT_SET_ERROR(vyre_graph_node_info_set(graph, index, &info, flags), status);
  };
  vyre_graph_node_info info = good;
  info.kind = VYRE_GRAPH_NODE_MEMSET;
  refused(derived, k, info, 0, VYRE_STATUS_INVALID_ARGUMENT, "kind of another node");
  info = NodeInfo(added, ak);
  refused(derived, k, info, 0, VYRE_STATUS_INVALID_ARGUMENT, "another graph's node");
  info = good;
  info.cu_graph_node = 0;
  info.cu_graph_exec = 0;
  EXPECT_VYRE_OK(vyre_graph_node_info_set(derived, k, &info, 0)) << "0 handles are accepted";
  info = good;
  info.cu_function += 8;
  refused(derived, k, info, VYRE_GRAPH_NODE_SET_RAW, VYRE_STATUS_INVALID_ARGUMENT,
          "another function");
  info = good;
  info.argument_count = 3;
  refused(derived, k, info, VYRE_GRAPH_NODE_SET_RAW, VYRE_STATUS_INVALID_ARGUMENT,
          "another argument count");
  info = good;
  info.grid[1] = 0;
  refused(derived, k, info, 0, VYRE_STATUS_INVALID_ARGUMENT, "grid y 0");
  info = good;
  info.grid[0] = device.max_grid_dim[0] + 1u;
  if (info.grid[0] != 0) {
    refused(derived, k, info, 0, VYRE_STATUS_LIMIT_EXCEEDED, "grid x past the device");
  }
  info = good;
  info.block[2] = 0;
  refused(derived, k, info, VYRE_GRAPH_NODE_SET_RAW, VYRE_STATUS_INVALID_ARGUMENT, "block z 0");
  info = good;
  info.block[0] = device.max_threads_per_block + 1;
  refused(derived, k, info, VYRE_GRAPH_NODE_SET_RAW, VYRE_STATUS_LIMIT_EXCEEDED,
          "block past the thread limit");
  info = good;
  info.block[0] = good.block[0] / 2;
  refused(derived, k, info, 0, VYRE_STATUS_INVALID_ARGUMENT, "block of a derived grid");
  info.grid[0] = good.grid[0] * 2;
  EXPECT_VYRE_OK(vyre_graph_node_info_set(derived, k, &info, VYRE_GRAPH_NODE_SET_RAW))
      << "RAW: the caller matches grid and block";
  info = NodeInfo(derived, k);
  info.arguments[0] = uint64_t{1} << 32 | FloatBits(2.0f);
  refused(derived, k, info, 0, VYRE_STATUS_INVALID_ARGUMENT, "SCALAR32 high half");
  info = NodeInfo(derived, k);
  info.shared_memory_bytes = device.max_shared_memory_per_block + 1;
  refused(derived, k, info, VYRE_GRAPH_NODE_SET_RAW, VYRE_STATUS_LIMIT_EXCEEDED,
          "shared memory past the device");
  info = NodeInfo(added, ak);
  ASSERT_EQ(info.shared_memory_bytes, 64u);
  info.shared_memory_bytes = 32;
  refused(added, ak, info, 0, VYRE_STATUS_INVALID_ARGUMENT, "less than the program declares");
  info.arguments[3] += 4;
  refused(added, ak, info, 0, VYRE_STATUS_INVALID_ARGUMENT, "the parameter block's pointer");
  info.arguments[3] -= 4;
  EXPECT_VYRE_OK(vyre_graph_node_info_set(added, ak, &info, VYRE_GRAPH_NODE_SET_RAW))
      << "RAW: less shared memory than declared";
  EXPECT_EQ(NodeInfo(added, ak).shared_memory_bytes, 32u);
  info = good;
  refused(derived, k, info, 2, VYRE_STATUS_INVALID_ARGUMENT, "unknown flags");
  refused(derived, ~uint64_t{0}, info, 0, VYRE_STATUS_OUT_OF_RANGE, "index past the end");
  info = NodeInfo(added, m);
  refused(added, m + 0, good, 0, VYRE_STATUS_INVALID_ARGUMENT, "kernel info on a memset");
  EXPECT_SET_ERROR(vyre_graph_node_info_set(derived, k, nullptr, 0),
                   VYRE_STATUS_INVALID_ARGUMENT);
  info = good;
  info.struct_size = 4;
  EXPECT_SET_ERROR(vyre_graph_node_info_set(derived, k, &info, 0),
                   VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);

  EXPECT_VYRE_OK(vyre_graph_destroy(derived));
  EXPECT_SET_ERROR(vyre_graph_node_info_set(derived, k, &good, 0), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_OK(vyre_graph_destroy(added));
  for (vyre_buffer buffer : {bx, by, bo}) EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(saxpy));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// ===========================================================================
// Memset nodes
// ===========================================================================

// A graph of a one-step sequence: FILL over `bytes` of `buffer`.
vyre_graph FillGraph(vyre_context context, vyre_buffer buffer, uint64_t bytes, uint32_t value,
                     vyre_sequence* sequence) {
  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.kind = VYRE_STEP_FILL;
  step.buffer = buffer;
  step.bytes = bytes;
  step.fill_byte = value;
  vyre_sequence_desc desc = VYRE_SEQUENCE_DESC_INIT;
  desc.steps = &step;
  desc.step_count = 1;
  EXPECT_VYRE_OK(vyre_sequence_create(context, &desc, sequence));
  vyre_graph graph{0};
  EXPECT_VYRE_OK(vyre_sequence_record(*sequence, &graph));
  return graph;
}

// A sequence's FILL node set to 4-byte and 2-byte elements over part of the
// buffer: the replay writes exactly that, and info reads it back.
TEST_F(GraphNodesTest, MemsetElementsValueAndRangeRoundTrip) {
  const size_t n = 96;
  vyre_buffer buffer = MakeBuffer(context_, n * 4);
  vyre_sequence sequence{0};
  vyre_graph graph = FillGraph(context_, buffer, n * 4, 0x11, &sequence);
  const uint64_t m = FirstNode(graph, VYRE_GRAPH_NODE_MEMSET);
  vyre_graph_node_info info = NodeInfo(graph, m);
  EXPECT_EQ(info.memset_dst, PointerOf(buffer));
  EXPECT_EQ(info.memset_value, 0x11u);
  EXPECT_EQ(info.memset_element_size, 1u);
  EXPECT_EQ(info.memset_width, n * 4);
  EXPECT_EQ(info.memset_height, 1u);

  struct Case {
    uint32_t element_size;
    uint32_t value;
    uint32_t word;  // what each covered u32 reads
    size_t first, words;
  };
  const uint32_t v32 = RandomNonZeroU32(1, 81)[0];
  const uint32_t v16 = (RandomNonZeroU32(1, 82)[0] & 0xFFFFu) | 1u;
  const Case cases[] = {{4, v32, v32, 3, n / 2}, {2, v16, v16 | v16 << 16, 10, 7},
                        {1, 0xC3, 0xC3C3C3C3u, 0, n}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.element_size);
    info = NodeInfo(graph, m);
    info.memset_dst = PointerOf(buffer) + c.first * 4;
    info.memset_element_size = c.element_size;
    info.memset_value = c.value;
    info.memset_width = c.words * 4 / c.element_size;
    ASSERT_VYRE_OK(vyre_graph_node_info_set(graph, m, &info, 0));
    ExpectSameInfo(NodeInfo(graph, m), info);
    Poison(buffer, n);
    ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
    std::vector<uint32_t> expected(n, kPoison);
    for (size_t i = c.first; i < c.first + c.words; ++i) expected[i] = c.word;
    EXPECT_TRUE(SameU32(DownloadU32(buffer, n), expected));
  }
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

// An OUTPUT binding's zeroing node set to another value (checked, then RAW
// to another buffer); a replay that rebinds the binding makes it zero the
// new range again.
TEST_F(GraphNodesTest, OutputMemsetSetThenRebindingZeroesTheNewRange) {
  vyre_program noop = MakeProgram(context_, NoopOutSpec());
  const size_t n = 64;
  vyre_buffer out = UploadNew(context_, std::vector<uint32_t>(n, kPoison));
  vyre_buffer other = UploadNew(context_, std::vector<uint32_t>(n, kPoison));
  DispatchSpec spec;
  spec.bindings = {Resident(out)};
  vyre_graph graph = Record(noop, spec);
  const uint64_t m = FirstNode(graph, VYRE_GRAPH_NODE_MEMSET);
  const uint32_t value = RandomNonZeroU32(1, 91)[0];

  vyre_graph_node_info info = NodeInfo(graph, m);
  info.memset_element_size = 4;
  info.memset_value = value;
  info.memset_width = n;
  ASSERT_VYRE_OK(vyre_graph_node_info_set(graph, m, &info, 0));
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(DownloadU32(out, n), std::vector<uint32_t>(n, value)));

  info.memset_dst = PointerOf(other) + 8;
  info.memset_width = n - 2;
  ASSERT_VYRE_OK(vyre_graph_node_info_set(graph, m, &info, VYRE_GRAPH_NODE_SET_RAW));
  Poison(out, n);
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  std::vector<uint32_t> expected(n, value);
  expected[0] = expected[1] = kPoison;
  EXPECT_TRUE(SameU32(DownloadU32(other, n), expected));
  EXPECT_TRUE(SameU32(DownloadU32(out, n), std::vector<uint32_t>(n, kPoison)));

  // Rebound to `other`: zeroed whole again, by bytes.
  Poison(out, n);
  Poison(other, n);
  vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
  const vyre_dispatch_binding rebind = Resident(other);
  desc.bindings = &rebind;
  desc.binding_count = 1;
  ASSERT_VYRE_OK(vyre_graph_replay(graph, &desc, nullptr));
  EXPECT_TRUE(SameU32(DownloadU32(other, n), std::vector<uint32_t>(n, 0)));
  EXPECT_TRUE(SameU32(DownloadU32(out, n), std::vector<uint32_t>(n, kPoison)));
  info = NodeInfo(graph, m);
  EXPECT_EQ(info.memset_dst, PointerOf(other));
  EXPECT_EQ(info.memset_value, 0u);
  EXPECT_EQ(info.memset_element_size, 1u);
  EXPECT_EQ(info.memset_width, n * 4);

  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_buffer_free(out));
  EXPECT_VYRE_OK(vyre_buffer_free(other));
  EXPECT_VYRE_OK(vyre_program_destroy(noop));
}

TEST_F(GraphNodesTest, MemsetSetRefusals) {
  const size_t n = 32;
  vyre_buffer buffer = MakeBuffer(context_, n * 4);
  vyre_sequence sequence{0};
  vyre_graph graph = FillGraph(context_, buffer, n * 4, 0x22, &sequence);
  const uint64_t m = FirstNode(graph, VYRE_GRAPH_NODE_MEMSET);
  const vyre_graph_node_info good = NodeInfo(graph, m);
  auto refused = [&](vyre_graph_node_info info, uint32_t flags, vyre_status status,
                     const char* why) {
    SCOPED_TRACE(why);
    EXPECT_SET_ERROR(vyre_graph_node_info_set(graph, m, &info, flags), status);
  };
  vyre_graph_node_info info = good;
  info.memset_element_size = 3;
  refused(info, VYRE_GRAPH_NODE_SET_RAW, VYRE_STATUS_INVALID_ARGUMENT, "element size 3");
  info = good;
  info.memset_value = 0x100;
  refused(info, VYRE_GRAPH_NODE_SET_RAW, VYRE_STATUS_INVALID_ARGUMENT, "value past a byte");
  info.memset_element_size = 2;
  info.memset_width = 2;
  info.memset_value = 0x10000;
  refused(info, 0, VYRE_STATUS_INVALID_ARGUMENT, "value past 2 bytes");
  info = good;
  info.memset_width = 0;
  refused(info, 0, VYRE_STATUS_INVALID_ARGUMENT, "width 0");
  info = good;
  info.memset_height = 2;
  info.memset_pitch = n * 2;
  info.memset_width = n * 2;
  refused(info, 0, VYRE_STATUS_INVALID_ARGUMENT, "two rows");
  info = good;
  info.memset_element_size = 4;
  info.memset_width = 1;
  info.memset_dst += 2;
  refused(info, VYRE_GRAPH_NODE_SET_RAW, VYRE_STATUS_INVALID_ARGUMENT, "misaligned");
  info.memset_dst = 0;
  refused(info, VYRE_GRAPH_NODE_SET_RAW, VYRE_STATUS_INVALID_ARGUMENT, "dst 0");
  info = good;
  info.memset_dst += 4;
  refused(info, 0, VYRE_STATUS_INVALID_ARGUMENT, "past the allocation's end");
  EXPECT_NE(LastErrorMessage().find("past the end"), std::string::npos) << LastErrorMessage();
  info = good;
  info.memset_dst = 0x1000;
  refused(info, 0, VYRE_STATUS_INVALID_ARGUMENT, "an address the driver does not know");
  info = good;
  info.kind = VYRE_GRAPH_NODE_KERNEL;
  refused(info, 0, VYRE_STATUS_INVALID_ARGUMENT, "kernel info on a memset");
  ExpectSameInfo(NodeInfo(graph, m), good);

  // Nothing refused changed the node: the replay still fills 0x22.
  Poison(buffer, n);
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(DownloadU32(buffer, n), std::vector<uint32_t>(n, 0x22222222u)));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

}  // namespace
}  // namespace vyre_test
