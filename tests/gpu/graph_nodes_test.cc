// Graph nodes and caller streams on a real GPU (include/vyre_cuda.h,
// vyre_graph_launch and vyre_graph_node_info_set):
//   - a graph launched on a stream the test creates with the raw driver,
//     behind a vyre_test_spin kernel launched there (~50 ms, then a[i] += 1)
//     and ahead of a read-back on that stream: a graph not ordered after the
//     spin reads the old a, a read-back not ordered after the graph reads
//     the poison;
//   - kernel node scalars, grid and (RAW) pointer arguments set, and memset
//     nodes set to 4-, 2- and 1-byte elements over part of a buffer, each
//     read back through vyre_graph_node_info_get and replayed.
// Every run starts from fresh random non-zero data with its outputs
// poisoned, and every element is compared with a CPU reference.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_env.h"
#include "raw_driver.h"

namespace vyre_test {
namespace {

constexpr uint32_t kBlock = 256;

class GraphNodesGpuTest : public GpuTest {
 protected:
  // vyre_test_add_u32 over RESIDENT a, b, out of n elements (derived grid).
  void RecordAdd(vyre_buffer a, vyre_buffer b, vyre_buffer out, uint32_t n, GraphHandle* graph) {
    ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32",
                                  {Decl(VYRE_ROLE_INPUT, 4, "a"), Decl(VYRE_ROLE_INPUT, 4, "b"),
                                   Decl(VYRE_ROLE_OUTPUT, 4, "out")},
                                  kBlock, &add_));
    const std::vector<vyre_dispatch_binding> bindings = {Resident(a), Resident(b),
                                                         Resident(out)};
    const std::vector<uint32_t> params = {n};
    const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
    ASSERT_VYRE_OK(vyre_graph_record(add_.get(), &desc, graph->out()));
  }

  ProgramHandle add_;
};

uint64_t PointerOf(vyre_buffer buffer) {
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  EXPECT_VYRE_OK(vyre_buffer_info_get(buffer, &info));
  return info.device_pointer;
}

vyre_graph_node_info NodeInfo(vyre_graph graph, uint64_t index) {
  vyre_graph_node_info info = VYRE_GRAPH_NODE_INFO_INIT;
  EXPECT_VYRE_OK(vyre_graph_node_info_get(graph, index, &info));
  return info;
}

uint64_t FirstNode(vyre_graph graph, vyre_graph_node_kind kind) {
  vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
  EXPECT_VYRE_OK(vyre_graph_info_get(graph, &info));
  for (uint64_t i = 0; i < info.node_count; ++i) {
    if (NodeInfo(graph, i).kind == kind) return i;
  }
  ADD_FAILURE() << "no node of kind " << kind;
  return 0;
}

void Poison(vyre_buffer buffer, size_t count) {
  const std::vector<uint32_t> poison(count, kPoisonU32);
  EXPECT_VYRE_OK(vyre_buffer_upload(buffer, 0, poison.data(), count * 4));
}

// The spin kernel of the test PTX, loaded by the raw driver as other CUDA
// code in the process would.
class RawSpin {
 public:
  explicit RawSpin(const RawDriver& cu) : cu_(cu) {}
  ~RawSpin() {
    if (params_ != 0) cu_.cuMemFree(params_);
    if (module_ != nullptr) cu_.cuModuleUnload(module_);
  }
  ::testing::AssertionResult Load(uint32_t microseconds, uint32_t elements) {
    if (cu_.cuModuleLoadDataEx(&module_, vyre_gpu_test_kernels_ptx, 0, nullptr, nullptr) !=
            CUDA_SUCCESS ||
        cu_.cuModuleGetFunction(&function_, module_, "vyre_test_spin") != CUDA_SUCCESS) {
      return ::testing::AssertionFailure() << "loading vyre_test_spin through the raw driver";
    }
    const uint32_t words[2] = {microseconds, elements};
    if (cu_.cuMemAlloc(&params_, sizeof(words)) != CUDA_SUCCESS ||
        cu_.cuMemcpyHtoDAsync(params_, words, sizeof(words), nullptr) != CUDA_SUCCESS ||
        cu_.cuStreamSynchronize(nullptr) != CUDA_SUCCESS) {
      return ::testing::AssertionFailure() << "uploading the spin's parameters";
    }
    elements_ = elements;
    return ::testing::AssertionSuccess();
  }
  // data[i] += 1 for i < elements, after the spin, on `stream`.
  CUresult Launch(CUdeviceptr data, CUstream stream) {
    void* args[] = {&data, &params_};
    const unsigned blocks = (elements_ + kBlock - 1) / kBlock;
    return cu_.cuLaunchKernel(function_, blocks, 1, 1, kBlock, 1, 1, 0, stream, args, nullptr);
  }

 private:
  const RawDriver& cu_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  CUdeviceptr params_ = 0;
  uint32_t elements_ = 0;
};

// ---------------------------------------------------------------------------
// vyre_graph_launch on a caller's stream
// ---------------------------------------------------------------------------

TEST_F(GraphNodesGpuTest, LaunchOnARawStreamRunsAfterItsSpinAndBeforeItsReadBack) {
  RawPrimaryContext raw(static_cast<int>(device().ordinal));
  ASSERT_TRUE(raw.ok()) << raw.error();
  const RawDriver& cu = raw.api();
  const uint32_t n = 64 * kBlock;
  RawSpin spin(cu);
  ASSERT_TRUE(spin.Load(/*microseconds=*/50000, n));
  CUstream stream = nullptr;
  ASSERT_EQ(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  BufferHandle a, b, out;
  std::vector<uint32_t> va = rng().NonZeroU32(n), vb = rng().NonZeroU32(n);
  ASSERT_TRUE(CreateBufferWith(context(), va, &a));
  ASSERT_TRUE(CreateBufferWith(context(), vb, &b));
  ASSERT_TRUE(CreateBufferWith(context(), std::vector<uint32_t>(n, kPoisonU32), &out));
  GraphHandle graph;
  ASSERT_NO_FATAL_FAILURE(RecordAdd(a.get(), b.get(), out.get(), n, &graph));
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    va = rng().NonZeroU32(n);
    ASSERT_VYRE_OK(vyre_buffer_upload(a.get(), 0, va.data(), n * 4));
    Poison(out.get(), n);
    ASSERT_EQ(spin.Launch(PointerOf(a.get()), stream), CUDA_SUCCESS);
    vyre_pending pending{0};
    ASSERT_VYRE_OK(vyre_graph_launch(graph.get(), nullptr, reinterpret_cast<uint64_t>(stream),
                                     &pending));
    std::vector<uint32_t> got(n, 0);
    ASSERT_EQ(cu.cuMemcpyDtoHAsync(got.data(), PointerOf(out.get()), n * 4, stream),
              CUDA_SUCCESS);
    ASSERT_EQ(cu.cuStreamSynchronize(stream), CUDA_SUCCESS);
    EXPECT_TRUE(AllElementsEqual(got, [&](size_t i) { return va[i] + 1 + vb[i]; },
                                 "out: (a + 1 by the spin) + b, read back on the stream"));
    ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
    ASSERT_VYRE_OK(vyre_pending_release(pending));
  }
  // The legacy default stream (1) orders the same way.
  va = rng().NonZeroU32(n);
  ASSERT_VYRE_OK(vyre_buffer_upload(a.get(), 0, va.data(), n * 4));
  Poison(out.get(), n);
  ASSERT_EQ(spin.Launch(PointerOf(a.get()), CU_STREAM_LEGACY), CUDA_SUCCESS);
  vyre_pending pending{0};
  ASSERT_VYRE_OK(vyre_graph_launch(graph.get(), nullptr, 1, &pending));
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  ASSERT_VYRE_OK(vyre_pending_release(pending));
  std::vector<uint32_t> got;
  ASSERT_TRUE(DownloadU32(out.get(), n, &got));
  EXPECT_TRUE(AllElementsEqual(got, [&](size_t i) { return va[i] + 1 + vb[i]; },
                               "out after a launch on the legacy stream"));
  EXPECT_EQ(cu.cuStreamDestroy(stream), CUDA_SUCCESS);
}

// ---------------------------------------------------------------------------
// vyre_graph_node_info_set
// ---------------------------------------------------------------------------

// Integer axpy (y = a * x + y for i < n, wrapping) with its scalars and grid
// set on the node, then its y pointer moved (RAW) to another buffer.
TEST_F(GraphNodesGpuTest, KernelScalarsGridAndRawPointersSet) {
  ProgramHandle axpy;
  {
    const std::vector<vyre_binding_decl> decls = {Decl(VYRE_ROLE_INPUT, 4, "x"),
                                                  Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "y")};
    const vyre_kernel_param params[6] = {{VYRE_PARAM_SCALAR32, 0},     {VYRE_PARAM_BINDING, 0},
                                         {VYRE_PARAM_BINDING, 1},      {VYRE_PARAM_SCALAR64, 1},
                                         {VYRE_PARAM_NULL_POINTER, 0}, {VYRE_PARAM_NULL_POINTER, 0}};
    vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
    desc.code = vyre_gpu_test_kernels_ptx;
    desc.entry = "vyre_test_axpy_scratch_u32";
    desc.bindings = decls.data();
    desc.binding_count = decls.size();
    desc.workgroup_size[0] = kBlock;
    desc.params = params;
    desc.param_count = 6;
    ASSERT_VYRE_OK(vyre_program_create(context(), &desc, axpy.out()));
  }
  const size_t n = 40 * kBlock + 17;
  const std::vector<uint32_t> x = rng().NonZeroU32(n);
  std::vector<uint32_t> y = rng().NonZeroU32(n);
  BufferHandle bx, by, other;
  ASSERT_TRUE(CreateBufferWith(context(), x, &bx));
  ASSERT_TRUE(CreateBufferWith(context(), y, &by));
  const std::vector<uint32_t> z = rng().NonZeroU32(n);
  ASSERT_TRUE(CreateBufferWith(context(), z, &other));
  const std::vector<vyre_dispatch_binding> bindings = {Resident(bx.get()), Resident(by.get())};
  vyre_dispatch_desc record = DispatchDesc(bindings, {});
  const std::vector<uint64_t> scalars = {1, n};
  record.scalars = scalars.data();
  record.scalar_count = scalars.size();
  record.grid[0] = static_cast<uint32_t>((n + kBlock - 1) / kBlock);
  record.grid[1] = record.grid[2] = 1;
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(axpy.get(), &record, graph.out()));
  const uint64_t k = FirstNode(graph.get(), VYRE_GRAPH_NODE_KERNEL);

  // a and n through the node, and a grid of 10 blocks (2560 threads >= n').
  const uint32_t a = rng().NonZeroU32(1)[0];
  const uint64_t count = 10 * kBlock - 3;
  vyre_graph_node_info info = NodeInfo(graph.get(), k);
  ASSERT_EQ(info.argument_count, 6u);
  info.arguments[0] = a;
  info.arguments[3] = count;
  info.grid[0] = 10;
  ASSERT_VYRE_OK(vyre_graph_node_info_set(graph.get(), k, &info, 0));
  const vyre_graph_node_info back = NodeInfo(graph.get(), k);
  EXPECT_EQ(back.arguments[0], a);
  EXPECT_EQ(back.arguments[3], count);
  EXPECT_EQ(back.grid[0], 10u);
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
  std::vector<uint32_t> got;
  ASSERT_TRUE(DownloadU32(by.get(), n, &got));
  EXPECT_TRUE(AllElementsEqual(
      got, [&](size_t i) { return i < count ? a * x[i] + y[i] : y[i]; }, "y after the set"));
  for (size_t i = 0; i < count; ++i) y[i] = a * x[i] + y[i];

  // y's slot moved to `other` (RAW: the graph does not manage that memory).
  info = NodeInfo(graph.get(), k);
  info.arguments[2] = PointerOf(other.get());
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                     vyre_graph_node_info_set(graph.get(), k, &info, 0));
  EXPECT_NE(LastErrorMessage().find("Fix:"), std::string::npos);
  ASSERT_VYRE_OK(vyre_graph_node_info_set(graph.get(), k, &info, VYRE_GRAPH_NODE_SET_RAW));
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
  ASSERT_TRUE(DownloadU32(other.get(), n, &got));
  EXPECT_TRUE(AllElementsEqual(
      got, [&](size_t i) { return i < count ? a * x[i] + z[i] : z[i]; }, "other after RAW"));
  ASSERT_TRUE(DownloadU32(by.get(), n, &got));
  EXPECT_TRUE(AllElementsEqual(got, [&](size_t i) { return y[i]; }, "y untouched after RAW"));
}

// A sequence's FILL node set to 4-, 2- and 1-byte elements over part of the
// buffer; each replay writes exactly that.
TEST_F(GraphNodesGpuTest, MemsetElementSizesValuesAndRanges) {
  const size_t n = 100003;
  BufferHandle buffer;
  ASSERT_TRUE(CreateBufferWith(context(), std::vector<uint32_t>(n, kPoisonU32), &buffer));
  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.kind = VYRE_STEP_FILL;
  step.buffer = buffer.get();
  step.bytes = n * 4;
  step.fill_byte = 0x5A;
  vyre_sequence_desc sdesc = VYRE_SEQUENCE_DESC_INIT;
  sdesc.steps = &step;
  sdesc.step_count = 1;
  SequenceHandle sequence;
  ASSERT_VYRE_OK(vyre_sequence_create(context(), &sdesc, sequence.out()));
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_sequence_record(sequence.get(), graph.out()));
  const uint64_t m = FirstNode(graph.get(), VYRE_GRAPH_NODE_MEMSET);
  const vyre_graph_node_info recorded = NodeInfo(graph.get(), m);
  EXPECT_EQ(recorded.memset_dst, PointerOf(buffer.get()));
  EXPECT_EQ(recorded.memset_value, 0x5Au);
  EXPECT_EQ(recorded.memset_element_size, 1u);
  EXPECT_EQ(recorded.memset_width, n * 4);

  const uint32_t v32 = rng().NonZeroU32(1)[0];
  const uint32_t v16 = (rng().NonZeroU32(1)[0] & 0xFFFFu) | 1u;
  const uint32_t v8 = (rng().NonZeroU32(1)[0] & 0xFFu) | 1u;
  struct Case {
    uint32_t element_size, value, word;
    size_t first, words;
  } cases[] = {{4, v32, v32, 5, n / 2},
               {2, v16, v16 | v16 << 16, 1001, 4097},
               {1, v8, v8 * 0x01010101u, 0, n}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.element_size);
    vyre_graph_node_info info = NodeInfo(graph.get(), m);
    info.memset_dst = PointerOf(buffer.get()) + c.first * 4;
    info.memset_element_size = c.element_size;
    info.memset_value = c.value;
    info.memset_width = c.words * 4 / c.element_size;
    ASSERT_VYRE_OK(vyre_graph_node_info_set(graph.get(), m, &info, 0));
    const vyre_graph_node_info back = NodeInfo(graph.get(), m);
    EXPECT_EQ(back.memset_dst, info.memset_dst);
    EXPECT_EQ(back.memset_value, c.value);
    EXPECT_EQ(back.memset_element_size, c.element_size);
    EXPECT_EQ(back.memset_width, info.memset_width);
    Poison(buffer.get(), n);
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
    std::vector<uint32_t> got;
    ASSERT_TRUE(DownloadU32(buffer.get(), n, &got));
    EXPECT_TRUE(AllElementsEqual(
        got,
        [&](size_t i) { return i >= c.first && i < c.first + c.words ? c.word : kPoisonU32; },
        "buffer after the memset"));
  }
  // Checked: a range past the allocation is refused.
  vyre_graph_node_info info = NodeInfo(graph.get(), m);
  info.memset_dst = PointerOf(buffer.get()) + 4;
  info.memset_element_size = 4;
  info.memset_width = n;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                     vyre_graph_node_info_set(graph.get(), m, &info, 0));
  EXPECT_NE(LastErrorMessage().find("Fix:"), std::string::npos);
}

}  // namespace
}  // namespace vyre_test
