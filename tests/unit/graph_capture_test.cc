// Captures of caller work (vyre_capture_begin / _dispatch / _end) on the fake
// driver, with "other CUDA code" played by raw driver calls
// (tests/support/raw_driver.h) on the capture stream: a foreign copy and
// kernel and the library's own dispatch captured into one graph, nothing run
// until it is replayed, replays checked element by element against a CPU
// model over fresh random data and poisoned outputs; every refusal checked
// for its status and a first line "<fn>: ... Fix: ...". Tests that make the
// driver invalidate a capture on purpose account for the one misuse the fake
// counts for it; otherwise the fixture checks the fake saw none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "api_fake_fixture.h"
#include "raw_driver.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {



class GraphCaptureTest : public FakeDriverTest {
 protected:
  void TearDown() override {
    FakeDriverTest::TearDown();
    const fake_cuda_stats after = FakeCuda::Stats();
    EXPECT_EQ(after.graphs_live, before_.graphs_live) << "CUDA graphs leaked";
    EXPECT_EQ(after.graph_execs_live, before_.graph_execs_live) << "executable graphs leaked";
  }
  // The test made the fake count `n` misuses on purpose (a call the driver
  // refuses during capture).
  void ExpectDeliberateMisuse(uint64_t misuse_before, uint64_t n) {
    const uint64_t now = FakeCuda::Stats().misuse_errors;
    EXPECT_EQ(now - misuse_before, n);
    before_.misuse_errors += now - misuse_before;
  }
};

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

uint64_t PointerOf(vyre_buffer buffer) {
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  EXPECT_VYRE_OK(vyre_buffer_info_get(buffer, &info));
  return info.device_pointer;
}

// A resident add over a, b, out of n elements.
vyre_dispatch_desc AddDesc(const std::vector<vyre_dispatch_binding>& bindings,
                           const std::vector<uint32_t>& words) {
  vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
  desc.bindings = bindings.data();
  desc.binding_count = bindings.size();
  desc.param_words = words.data();
  desc.param_word_count = words.size();
  return desc;
}

// vyre_test_inc_u32 loaded by the raw driver, with its parameter word n in
// device memory allocated before any capture (a capture cannot allocate).
struct RawInc {
  explicit RawInc(const RawDriver& driver, uint32_t n) : cu(driver), count(n) {
    EXPECT_EQ(cu.cuModuleLoadDataEx(&module, vyre_test_kernels_ptx, 0, nullptr, nullptr),
              CUDA_SUCCESS);
    EXPECT_EQ(cu.cuModuleGetFunction(&function, module, "vyre_test_inc_u32"), CUDA_SUCCESS);
    EXPECT_EQ(cu.cuMemAlloc(&params, 4), CUDA_SUCCESS);
    EXPECT_EQ(cu.cuMemcpyHtoDAsync(params, &count, 4, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(cu.cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  }
  ~RawInc() {
    EXPECT_EQ(cu.cuMemFree(params), CUDA_SUCCESS);
    EXPECT_EQ(cu.cuModuleUnload(module), CUDA_SUCCESS);
  }
  CUresult Launch(CUdeviceptr data, CUstream stream) {
    void* args[] = {&data, &params};
    return cu.cuLaunchKernel(function, (count + 255) / 256, 1, 1, 256, 1, 1, 0, stream, args,
                             nullptr);
  }
  const RawDriver& cu;
  uint32_t count;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  CUdeviceptr params = 0;
};

// Foreign work (a copy into b from host memory, an increment of a) and the
// library's add, captured; nothing runs until the graph is replayed, and
// every replay runs all of it again in order.
TEST_F(GraphCaptureTest, ForeignWorkAndLibraryDispatchesReplayInOrder) {
  RawPrimaryContext raw(0);
  ASSERT_TRUE(raw.ok()) << raw.error();
  const RawDriver& cu = raw.api();
  const uint32_t n = 1000;
  RawInc inc(cu, n);
  vyre_program add = MakeProgram(context_, AddSpec());
  std::vector<uint32_t> a = RandomNonZeroU32(n, 101), b0 = RandomNonZeroU32(n, 102);
  std::vector<uint32_t> host_b = RandomNonZeroU32(n, 103);
  vyre_buffer ba = UploadNew(context_, a), bb = UploadNew(context_, b0);
  vyre_buffer out = UploadNew(context_, std::vector<uint32_t>(n, kPoison));

  uint64_t stream_bits = 0;
  ASSERT_VYRE_OK(vyre_capture_begin(context_, nullptr, &stream_bits));
  ASSERT_NE(stream_bits, 0u);
  const CUstream stream = reinterpret_cast<CUstream>(stream_bits);
  ASSERT_EQ(cu.cuMemcpyHtoDAsync(PointerOf(bb), host_b.data(), n * 4, stream), CUDA_SUCCESS);
  ASSERT_EQ(inc.Launch(PointerOf(ba), stream), CUDA_SUCCESS);
  const std::vector<vyre_dispatch_binding> bindings = {Resident(ba), Resident(bb),
                                                       Resident(out)};
  const std::vector<uint32_t> words = {n};
  vyre_dispatch_desc desc = AddDesc(bindings, words);
  ASSERT_VYRE_OK(vyre_capture_dispatch(add, &desc));
  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_capture_end(context_, &graph));
  ASSERT_NE(graph.bits, 0u);

  // Captured, not run.
  EXPECT_TRUE(SameU32(DownloadU32(ba, n), a));
  EXPECT_TRUE(SameU32(DownloadU32(bb, n), b0));
  EXPECT_TRUE(SameU32(DownloadU32(out, n), std::vector<uint32_t>(n, kPoison)));

  // The inventory: copy, kernel (foreign), then the dispatch's zeroing of
  // out and kernel (its parameter words were uploaded once, at end).
  vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
  ASSERT_VYRE_OK(vyre_graph_info_get(graph, &info));
  ASSERT_EQ(info.node_count, 4u);
  EXPECT_EQ(info.kernel_node_count, 2u);
  const vyre_graph_node_kind kinds[] = {VYRE_GRAPH_NODE_MEMCPY, VYRE_GRAPH_NODE_KERNEL,
                                        VYRE_GRAPH_NODE_MEMSET, VYRE_GRAPH_NODE_KERNEL};
  for (uint64_t i = 0; i < 4; ++i) {
    vyre_graph_node_info node = VYRE_GRAPH_NODE_INFO_INIT;
    ASSERT_VYRE_OK(vyre_graph_node_info_get(graph, i, &node));
    EXPECT_EQ(node.kind, kinds[i]) << "node " << i;
    EXPECT_NE(node.cu_graph_node, 0u);
    if (i == 1) {
      EXPECT_EQ(node.cu_function, reinterpret_cast<uint64_t>(inc.function));
      EXPECT_EQ(node.grid[0], (n + 255) / 256);
      EXPECT_EQ(node.block[0], 256u);
      EXPECT_EQ(node.argument_count, 0u) << "a captured kernel's arguments are not known";
      EXPECT_API_ERROR(vyre_graph_node_info_set(graph, i, &node, VYRE_GRAPH_NODE_SET_RAW),
                       VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_node_info_set");
      vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
      update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
      update.grid[0] = update.grid[1] = update.grid[2] = 1;
      EXPECT_API_ERROR(vyre_graph_kernel_node_update(graph, i, &update),
                       VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_kernel_node_update");
    }
    if (i == 2) {
      EXPECT_EQ(node.memset_dst, PointerOf(out));
      EXPECT_EQ(node.memset_width, n * 4);
    }
  }

  // Replays: a grows by one each time; b is copied from host_b as it is then.
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    // In place: the captured copy reads this storage.
    const std::vector<uint32_t> fresh = RandomNonZeroU32(n, 200 + round);
    std::copy(fresh.begin(), fresh.end(), host_b.begin());
    for (uint32_t& v : a) v += 1;
    std::vector<uint32_t> poison(n, kPoison);
    ASSERT_VYRE_OK(vyre_buffer_upload(out, 0, poison.data(), n * 4));
    if (round < 2) {
      ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
    } else {
      // On a caller's stream, as any graph.
      vyre_pending pending{0};
      ASSERT_VYRE_OK(vyre_graph_launch(graph, nullptr, 1, &pending));
      ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
      ASSERT_VYRE_OK(vyre_pending_release(pending));
    }
    EXPECT_TRUE(SameU32(DownloadU32(ba, n), a));
    EXPECT_TRUE(SameU32(DownloadU32(bb, n), host_b));
    EXPECT_TRUE(SameU32(DownloadU32(out, n), CpuAdd(a, host_b)));
  }
  // A captured graph takes nothing at replay.
  vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
  replay.element_count = 5;
  EXPECT_API_ERROR(vyre_graph_replay(graph, &replay, nullptr), VYRE_STATUS_INVALID_ARGUMENT,
                   "vyre_graph_replay");
  // Its dispatch's buffers stay alive; a freed one makes replays stale.
  EXPECT_VYRE_OK(vyre_buffer_free(out));
  EXPECT_API_ERROR(vyre_graph_replay(graph, nullptr, nullptr), VYRE_STATUS_STALE_HANDLE,
                   "vyre_graph_replay");
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_buffer_free(ba));
  EXPECT_VYRE_OK(vyre_buffer_free(bb));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// Work of other threads on the context runs outside the capture.
TEST_F(GraphCaptureTest, OtherThreadsWorkStaysOutOfTheCapture) {
  vyre_program add = MakeProgram(context_, AddSpec());
  const uint32_t n = 256;
  const std::vector<uint32_t> a = RandomNonZeroU32(n, 111), b = RandomNonZeroU32(n, 112);
  vyre_buffer ba = UploadNew(context_, a), bb = UploadNew(context_, b);
  vyre_buffer captured_out = UploadNew(context_, std::vector<uint32_t>(n, kPoison));
  vyre_buffer eager_out = UploadNew(context_, std::vector<uint32_t>(n, kPoison));
  uint64_t stream = 0;
  ASSERT_VYRE_OK(vyre_capture_begin(context_, nullptr, &stream));
  const std::vector<uint32_t> words = {n};
  const std::vector<vyre_dispatch_binding> captured = {Resident(ba), Resident(bb),
                                                       Resident(captured_out)};
  vyre_dispatch_desc desc = AddDesc(captured, words);
  ASSERT_VYRE_OK(vyre_capture_dispatch(add, &desc));
  // Another thread dispatches on the same context meanwhile: it runs now.
  // (This thread may not wait for it: its THREAD_LOCAL capture forbids
  // synchronisations here.)
  std::thread other([&] {
    const std::vector<vyre_dispatch_binding> eager = {Resident(ba), Resident(bb),
                                                      Resident(eager_out)};
    vyre_dispatch_desc d = AddDesc(eager, words);
    EXPECT_VYRE_OK(vyre_dispatch(add, &d, nullptr));
    EXPECT_TRUE(SameU32(DownloadU32(eager_out, n), CpuAdd(a, b)));
  });
  other.join();
  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_capture_end(context_, &graph));
  vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
  ASSERT_VYRE_OK(vyre_graph_info_get(graph, &info));
  EXPECT_EQ(info.kernel_node_count, 1u) << "only the captured dispatch";
  EXPECT_TRUE(SameU32(DownloadU32(captured_out, n), std::vector<uint32_t>(n, kPoison)));
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(DownloadU32(captured_out, n), CpuAdd(a, b)));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  for (vyre_buffer buffer : {ba, bb, captured_out, eager_out}) {
    EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  }
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(GraphCaptureTest, Refusals) {
  constexpr const char* kBegin = "vyre_capture_begin";
  constexpr const char* kDispatch = "vyre_capture_dispatch";
  constexpr const char* kEnd = "vyre_capture_end";
  vyre_program add = MakeProgram(context_, AddSpec());
  const uint32_t n = 64;
  const std::vector<uint32_t> a = RandomNonZeroU32(n, 121), b = RandomNonZeroU32(n, 122);
  vyre_buffer ba = UploadNew(context_, a), bb = UploadNew(context_, b);
  vyre_buffer out = UploadNew(context_, std::vector<uint32_t>(n, kPoison));
  const std::vector<vyre_dispatch_binding> resident = {Resident(ba), Resident(bb),
                                                       Resident(out)};
  const std::vector<uint32_t> words = {n};
  vyre_dispatch_desc desc = AddDesc(resident, words);
  vyre_graph graph{0};
  uint64_t stream = 0;

  // Nothing open.
  EXPECT_API_ERROR(vyre_capture_end(context_, &graph), VYRE_STATUS_INVALID_STATE, kEnd);
  EXPECT_API_ERROR(vyre_capture_dispatch(add, &desc), VYRE_STATUS_INVALID_STATE, kDispatch);
  // Arguments of begin.
  EXPECT_API_ERROR(vyre_capture_begin(context_, nullptr, nullptr), VYRE_STATUS_INVALID_ARGUMENT,
                   kBegin);
  vyre_capture_desc cdesc = VYRE_CAPTURE_DESC_INIT;
  cdesc.mode = 7;
  EXPECT_API_ERROR(vyre_capture_begin(context_, &cdesc, &stream), VYRE_STATUS_INVALID_ARGUMENT,
                   kBegin);
  cdesc = VYRE_CAPTURE_DESC_INIT;
  cdesc.struct_size = 2;
  EXPECT_API_ERROR(vyre_capture_begin(context_, &cdesc, &stream),
                   VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, kBegin);

  // One open capture with a 256-byte parameter block.
  cdesc = VYRE_CAPTURE_DESC_INIT;
  cdesc.param_bytes = 256;
  ASSERT_VYRE_OK(vyre_capture_begin(context_, &cdesc, &stream));
  EXPECT_API_ERROR(vyre_capture_begin(context_, nullptr, &stream), VYRE_STATUS_INVALID_STATE,
                   kBegin);
  EXPECT_API_ERROR(vyre_context_destroy(context_), VYRE_STATUS_INVALID_STATE,
                   "vyre_context_destroy");
  std::vector<uint32_t> host_out(n, kPoison);
  const std::vector<vyre_dispatch_binding> host = {Resident(ba), Resident(bb),
                                                   HostOut(host_out.data(), n * 4)};
  vyre_dispatch_desc host_desc = AddDesc(host, words);
  EXPECT_API_ERROR(vyre_capture_dispatch(add, &host_desc), VYRE_STATUS_INVALID_ARGUMENT,
                   kDispatch);
  vyre_dispatch_desc coop = desc;
  coop.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
  EXPECT_API_ERROR(vyre_capture_dispatch(add, &coop), VYRE_STATUS_INVALID_ARGUMENT, kDispatch);
  EXPECT_API_ERROR(vyre_capture_dispatch(add, nullptr), VYRE_STATUS_INVALID_ARGUMENT, kDispatch);
  const std::vector<uint32_t> many_words(65, n);  // 260 bytes > 256
  vyre_dispatch_desc big = AddDesc(resident, many_words);
  EXPECT_API_ERROR(vyre_capture_dispatch(add, &big), VYRE_STATUS_LIMIT_EXCEEDED, kDispatch);
  // Joins of the capture stream to the work stream would sweep other
  // threads' work into the capture.
  vyre_graph recorded{0};
  ASSERT_VYRE_OK(vyre_capture_dispatch(add, &desc)) << "the refusals left the capture usable";
  EXPECT_API_ERROR(vyre_context_wait_stream(context_, stream), VYRE_STATUS_INVALID_ARGUMENT,
                   "vyre_context_wait_stream");
  EXPECT_API_ERROR(vyre_context_signal_stream(context_, stream), VYRE_STATUS_INVALID_ARGUMENT,
                   "vyre_context_signal_stream");
  {
    // A graph recorded before the capture (allocations are over by then).
    std::thread recorder([&] {
      EXPECT_VYRE_OK(vyre_graph_record(add, &desc, &recorded));
    });
    recorder.join();
    vyre_pending pending{0};
    EXPECT_API_ERROR(vyre_graph_launch(recorded, nullptr, stream, &pending),
                     VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_launch");
    EXPECT_EQ(pending.bits, 0u);
  }
  // Ended only on the thread that began a THREAD_LOCAL capture.
  std::thread other([&] {
    vyre_graph g{0};
    EXPECT_API_ERROR(vyre_capture_end(context_, &g), VYRE_STATUS_INVALID_STATE, kEnd);
  });
  other.join();
  EXPECT_API_ERROR(vyre_capture_end(context_, nullptr), VYRE_STATUS_INVALID_ARGUMENT, kEnd);
  ASSERT_VYRE_OK(vyre_capture_end(context_, &graph));
  ASSERT_VYRE_OK(vyre_graph_replay(graph, nullptr, nullptr));
  EXPECT_TRUE(SameU32(DownloadU32(out, n), CpuAdd(a, b)));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_graph_destroy(recorded));

  // RELAXED: any thread may end it.
  cdesc = VYRE_CAPTURE_DESC_INIT;
  cdesc.mode = VYRE_CAPTURE_MODE_RELAXED;
  ASSERT_VYRE_OK(vyre_capture_begin(context_, &cdesc, &stream));
  std::thread ender([&] { EXPECT_VYRE_OK(vyre_capture_end(context_, &graph)); });
  ender.join();
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));

  for (vyre_buffer buffer : {ba, bb, out}) EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// A call on the capture stream that cannot be captured invalidates the
// capture: vyre_capture_end says so and the context captures again.
TEST_F(GraphCaptureTest, AnUncapturableForeignCallInvalidatesTheCapture) {
  RawPrimaryContext raw(0);
  ASSERT_TRUE(raw.ok()) << raw.error();
  uint64_t stream = 0;
  ASSERT_VYRE_OK(vyre_capture_begin(context_, nullptr, &stream));
  const uint64_t misuse = FakeCuda::Stats().misuse_errors;
  EXPECT_NE(raw.api().cuStreamSynchronize(reinterpret_cast<CUstream>(stream)), CUDA_SUCCESS);
  ExpectDeliberateMisuse(misuse, 1);
  vyre_graph graph{0};
  EXPECT_API_ERROR(vyre_capture_end(context_, &graph), VYRE_STATUS_INVALID_STATE,
                   "vyre_capture_end");
  EXPECT_NE(LastErrorMessage().find("invalidated"), std::string::npos) << LastErrorMessage();
  EXPECT_EQ(graph.bits, 0u);
  ASSERT_VYRE_OK(vyre_capture_begin(context_, nullptr, &stream)) << "the context begins again";
  ASSERT_VYRE_OK(vyre_capture_end(context_, &graph));
  vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
  ASSERT_VYRE_OK(vyre_graph_info_get(graph, &info));
  EXPECT_EQ(info.node_count, 0u);
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
}

// GLOBAL mode: another thread's allocation is refused with a status naming
// the capture, and the capture is invalidated.
TEST_F(GraphCaptureTest, GlobalModeRefusesOtherThreadsAllocations) {
  vyre_capture_desc cdesc = VYRE_CAPTURE_DESC_INIT;
  cdesc.mode = VYRE_CAPTURE_MODE_GLOBAL;
  uint64_t stream = 0;
  ASSERT_VYRE_OK(vyre_capture_begin(context_, &cdesc, &stream));
  const uint64_t misuse = FakeCuda::Stats().misuse_errors;
  std::thread other([&] {
    vyre_buffer buffer{0};
    const vyre_status status = vyre_buffer_alloc(context_, 1 << 20, &buffer);
    EXPECT_NE(status, VYRE_STATUS_OK);
    EXPECT_NE(LastErrorMessage().find("Fix:"), std::string::npos) << LastErrorMessage();
    EXPECT_NE(LastErrorMessage().find("captur"), std::string::npos) << LastErrorMessage();
    if (status == VYRE_STATUS_OK) {
      EXPECT_VYRE_OK(vyre_buffer_free(buffer));
    }
  });
  other.join();
  ExpectDeliberateMisuse(misuse, 1);
  vyre_graph graph{0};
  EXPECT_API_ERROR(vyre_capture_end(context_, &graph), VYRE_STATUS_INVALID_STATE,
                   "vyre_capture_end");
  // After the capture, allocations work again.
  vyre_buffer buffer = MakeBuffer(context_, 1 << 20);
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

// A second context can be destroyed once its capture is ended.
TEST_F(GraphCaptureTest, DestroyRefusedWhileACaptureIsOpen) {
  vyre_context other = MakeContext();
  uint64_t stream = 0;
  ASSERT_VYRE_OK(vyre_capture_begin(other, nullptr, &stream));
  EXPECT_API_ERROR(vyre_context_destroy(other), VYRE_STATUS_INVALID_STATE,
                   "vyre_context_destroy");
  // Other threads work on meanwhile (this one may not allocate: its
  // THREAD_LOCAL capture is open).
  std::thread worker([&] {
    vyre_buffer buffer = MakeBuffer(context_, 64);
    EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  });
  worker.join();
  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_capture_end(other, &graph));
  EXPECT_VYRE_OK(vyre_context_destroy(other)) << "destroys the captured graph with it";
}

}  // namespace
}  // namespace vyre_test
