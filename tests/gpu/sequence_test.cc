// Sequences on a real GPU (include/vyre_cuda.h, "Sequences"): a 100-step
// sequence of dispatches, fills, copies, uploads and downloads with a
// repeated block, run eagerly and recorded as a graph, both compared with a
// CPU model of the same steps on fresh random data; the repeated block's
// semantics, host memory read at every run, freed buffers, the graph
// outliving its sequence, step validation, replay descriptors, asynchronous
// replays, kernel node updates, threads and create/record/destroy cycles that
// must leave the context's memory where it was.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu_test_env.h"

namespace vyre_test {
namespace {


constexpr uint32_t kBlock = 256;

// The last error's message has "Fix:" and every one of `needles`.
::testing::AssertionResult LastErrorSays(std::vector<std::string> needles = {}) {
  needles.insert(needles.begin(), "Fix:");
  return MessageContains(LastErrorMessage(), needles);
}

vyre_graph_info InfoOf(vyre_graph graph) {
  vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
  EXPECT_TRUE(
      StatusIs(vyre_graph_info_get(graph, &info), VYRE_STATUS_OK, "vyre_graph_info_get"));
  return info;
}

std::vector<vyre_graph_node_kind> NodeKinds(vyre_graph graph) {
  const vyre_graph_info info = InfoOf(graph);
  std::vector<vyre_graph_node_kind> kinds;
  for (uint64_t i = 0; i < info.node_count; ++i) {
    vyre_graph_node_kind kind = VYRE_GRAPH_NODE_KIND_FORCE32;
    const vyre_status status = vyre_graph_node_kind_get(graph, i, &kind);
    EXPECT_EQ(status, VYRE_STATUS_OK) << "node " << i << ": " << DescribeLastError();
    kinds.push_back(kind);
  }
  return kinds;
}

vyre_sequence_step FillStep(vyre_buffer buffer, uint64_t offset, uint64_t bytes, uint32_t value) {
  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.kind = VYRE_STEP_FILL;
  step.buffer = buffer;
  step.offset = offset;
  step.bytes = bytes;
  step.fill_byte = value;
  return step;
}

vyre_sequence_step CopyStep(vyre_buffer dst, uint64_t dst_offset, vyre_buffer src,
                            uint64_t src_offset, uint64_t bytes) {
  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.kind = VYRE_STEP_COPY;
  step.buffer = dst;
  step.offset = dst_offset;
  step.src_buffer = src;
  step.src_offset = src_offset;
  step.bytes = bytes;
  return step;
}

vyre_sequence_step UploadStep(vyre_buffer dst, uint64_t offset, const void* src, uint64_t bytes) {
  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.kind = VYRE_STEP_UPLOAD;
  step.buffer = dst;
  step.offset = offset;
  step.host_src = src;
  step.bytes = bytes;
  return step;
}

vyre_sequence_step DownloadStep(vyre_buffer src, uint64_t offset, void* dst, uint64_t bytes) {
  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.kind = VYRE_STEP_DOWNLOAD;
  step.buffer = src;
  step.offset = offset;
  step.host_dst = dst;
  step.bytes = bytes;
  return step;
}

vyre_sequence_step DispatchStep(vyre_program program, const vyre_dispatch_desc* desc) {
  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.kind = VYRE_STEP_DISPATCH;
  step.program = program;
  step.dispatch = desc;
  return step;
}

vyre_sequence_desc SequenceDesc(const std::vector<vyre_sequence_step>& steps,
                                size_t repeat_first = 0, size_t repeat_step_count = 0,
                                uint32_t repeat_count = 0) {
  vyre_sequence_desc desc = VYRE_SEQUENCE_DESC_INIT;
  desc.steps = steps.data();
  desc.step_count = steps.size();
  desc.repeat_first = repeat_first;
  desc.repeat_step_count = repeat_step_count;
  desc.repeat_count = repeat_count;
  return desc;
}

// A dispatch descriptor and everything it points into, at a stable address.
struct DispatchStorage {
  std::vector<vyre_dispatch_binding> bindings;
  std::vector<uint32_t> params;
  std::vector<uint64_t> scalars;
  vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;

  const vyre_dispatch_desc* Finish(uint32_t iterations = 1) {
    desc = DispatchDesc(bindings, params);
    desc.scalars = scalars.empty() ? nullptr : scalars.data();
    desc.scalar_count = scalars.size();
    desc.fixpoint_iterations = iterations;
    return &desc;
  }
};

class SequenceTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32",
                                  {Decl(VYRE_ROLE_INPUT, 4, "a"), Decl(VYRE_ROLE_INPUT, 4, "b"),
                                   Decl(VYRE_ROLE_OUTPUT, 4, "out")},
                                  kBlock, &add_));
    ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_inc_u32",
                                  {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, kBlock, &inc_));
    const std::vector<vyre_binding_decl> decls = {Decl(VYRE_ROLE_INPUT, 4, "x"),
                                                  Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "y")};
    const vyre_kernel_param params[] = {{VYRE_PARAM_SCALAR32, 0},     {VYRE_PARAM_BINDING, 0},
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
    ASSERT_VYRE_OK(vyre_program_create(context(), &desc, axpy_.out()));
  }

  // An inc dispatch over `count` elements of `buffer` from element `first`.
  const vyre_dispatch_desc* IncDesc(vyre_buffer buffer, size_t first, size_t count,
                                    uint32_t iterations = 1) {
    storage_.push_back(std::make_unique<DispatchStorage>());
    DispatchStorage& s = *storage_.back();
    s.bindings = {Resident(buffer, first * 4, count * 4)};
    s.params = {static_cast<uint32_t>(count)};
    return s.Finish(iterations);
  }

  ProgramHandle add_, inc_, axpy_;
  std::vector<std::unique_ptr<DispatchStorage>> storage_;
};

// ---------------------------------------------------------------------------
// The 100-step sequence against a CPU model
// ---------------------------------------------------------------------------

constexpr int kBuffers = 6;
constexpr size_t kElems = 3001;
constexpr uint64_t kBufferBytes = kElems * 4;

enum class Op { kAdd, kInc, kAxpy, kFill, kCopy, kUpload, kDownload };

struct PlannedStep {
  Op op;
  int buffer[3] = {0, 0, 0};  // dispatch: a, b, out / data / x, y
  size_t first = 0, count = 0;  // dispatch range in elements
  uint32_t iterations = 1;
  uint32_t multiplier = 0;
  int dst = 0, src = 0;  // byte steps
  uint64_t dst_offset = 0, src_offset = 0, bytes = 0;
  uint32_t fill = 0;
  size_t host = 0;  // index of the upload source or download destination
  DispatchStorage dispatch;
};

using Buffers = std::array<std::vector<uint32_t>, kBuffers>;

class HundredSteps {
 public:
  static constexpr size_t kSteps = 100;
  static constexpr size_t kRepeatFirst = 60;
  static constexpr size_t kRepeatSteps = 12;
  static constexpr uint32_t kRepeatCount = 4;

  // Plans the steps over `buffers` with random ranges and values.
  void Plan(RandomSource& rng, const std::array<vyre_buffer, kBuffers>& buffers) {
    buffers_ = buffers;
    const Op pattern[10] = {Op::kUpload, Op::kAdd,  Op::kFill, Op::kInc,  Op::kCopy,
                            Op::kDownload, Op::kAxpy, Op::kCopy, Op::kAdd, Op::kDownload};
    steps_.clear();
    steps_.reserve(kSteps);
    for (size_t i = 0; i < kSteps; ++i) {
      steps_.emplace_back();
      PlannedStep& s = steps_.back();
      s.op = pattern[i % 10];
      // Three distinct buffers.
      std::array<int, kBuffers> order;
      for (int k = 0; k < kBuffers; ++k) order[k] = k;
      std::shuffle(order.begin(), order.end(), rng.engine());
      for (int k = 0; k < 3; ++k) s.buffer[k] = order[k];
      s.first = rng.Below(kElems / 2);
      s.count = 1 + rng.Below(kElems - s.first);
      if (rng.Below(4) == 0) {  // now and then the whole buffer
        s.first = 0;
        s.count = kElems;
      }
      s.iterations = 1 + static_cast<uint32_t>(rng.Below(3));
      s.multiplier = rng.NonZeroU32(1)[0];
      s.fill = static_cast<uint32_t>(rng.Below(256));
      s.dst = order[0];
      s.src = order[1];
      s.dst_offset = rng.Below(kBufferBytes);
      s.bytes = 1 + rng.Below(kBufferBytes - s.dst_offset);
      s.src_offset = rng.Below(kBufferBytes - s.bytes + 1);
      if (s.op == Op::kCopy && rng.Below(3) == 0) {
        // Within one buffer, between its two halves.
        s.src = s.dst;
        s.bytes = 1 + rng.Below(kBufferBytes / 2);
        const uint64_t low = rng.Below(kBufferBytes / 2 - s.bytes + 1);
        const uint64_t high = kBufferBytes / 2 + rng.Below(kBufferBytes / 2 - s.bytes + 1);
        const bool up = rng.Below(2) == 0;
        s.src_offset = up ? low : high;
        s.dst_offset = up ? high : low;
      }
      if (s.op == Op::kUpload) {
        s.host = upload_sources_.size();
        upload_sources_.emplace_back(s.bytes);
      }
      if (s.op == Op::kDownload) {
        s.host = download_targets_.size();
        download_targets_.emplace_back(s.bytes);
        s.src = s.dst;
        s.src_offset = s.dst_offset;
      }
    }
    order_.clear();
    for (size_t i = 0; i < kRepeatFirst; ++i) order_.push_back(i);
    for (uint32_t r = 0; r < kRepeatCount; ++r) {
      for (size_t i = kRepeatFirst; i < kRepeatFirst + kRepeatSteps; ++i) order_.push_back(i);
    }
    for (size_t i = kRepeatFirst + kRepeatSteps; i < kSteps; ++i) order_.push_back(i);
  }

  // The public steps, pointing into this object (keep it alive and unmoved).
  std::vector<vyre_sequence_step> Steps(vyre_program add, vyre_program inc, vyre_program axpy) {
    std::vector<vyre_sequence_step> out;
    for (PlannedStep& s : steps_) {
      DispatchStorage& d = s.dispatch;
      const uint64_t offset = s.first * 4, length = s.count * 4;
      switch (s.op) {
        case Op::kAdd:
          d.bindings = {Resident(buffers_[s.buffer[0]], offset, length),
                        Resident(buffers_[s.buffer[1]], offset, length),
                        Resident(buffers_[s.buffer[2]], offset, length)};
          d.params = {static_cast<uint32_t>(s.count)};
          out.push_back(DispatchStep(add, d.Finish()));
          break;
        case Op::kInc:
          d.bindings = {Resident(buffers_[s.buffer[0]], offset, length)};
          d.params = {static_cast<uint32_t>(s.count)};
          out.push_back(DispatchStep(inc, d.Finish(s.iterations)));
          break;
        case Op::kAxpy:
          d.bindings = {Resident(buffers_[s.buffer[0]], offset, length),
                        Resident(buffers_[s.buffer[1]], offset, length)};
          d.scalars = {s.multiplier, s.count};
          out.push_back(DispatchStep(axpy, d.Finish()));
          break;
        case Op::kFill:
          out.push_back(FillStep(buffers_[s.dst], s.dst_offset, s.bytes, s.fill));
          break;
        case Op::kCopy:
          out.push_back(
              CopyStep(buffers_[s.dst], s.dst_offset, buffers_[s.src], s.src_offset, s.bytes));
          break;
        case Op::kUpload:
          out.push_back(UploadStep(buffers_[s.dst], s.dst_offset,
                                   upload_sources_[s.host].data(), s.bytes));
          break;
        case Op::kDownload:
          out.push_back(DownloadStep(buffers_[s.src], s.src_offset,
                                     download_targets_[s.host].data(), s.bytes));
          break;
      }
    }
    return out;
  }

  vyre_sequence_desc Desc(const std::vector<vyre_sequence_step>& steps) const {
    return SequenceDesc(steps, kRepeatFirst, kRepeatSteps, kRepeatCount);
  }

  // New contents for the upload sources, written in place (the sequence
  // holds their addresses).
  void RefreshUploadSources(RandomSource& rng) {
    for (std::vector<uint8_t>& source : upload_sources_) {
      const std::vector<uint32_t> words = rng.NonZeroU32(source.size() / 4 + 1);
      std::memcpy(source.data(), words.data(), source.size());
    }
  }
  void PoisonDownloads() {
    for (std::vector<uint8_t>& target : download_targets_) {
      std::fill(target.begin(), target.end(), uint8_t{0xFF});
    }
  }
  const std::vector<std::vector<uint8_t>>& downloads() const { return download_targets_; }

  // Runs the steps on the CPU: the buffers after one run, and what each
  // DOWNLOAD step leaves in its host memory.
  void Model(Buffers* buffers, std::vector<std::vector<uint8_t>>* downloads) const {
    downloads->assign(download_targets_.size(), {});
    for (size_t index : order_) {
      const PlannedStep& s = steps_[index];
      switch (s.op) {
        case Op::kAdd: {
          const auto& a = (*buffers)[s.buffer[0]];
          const auto& b = (*buffers)[s.buffer[1]];
          auto& out = (*buffers)[s.buffer[2]];
          for (size_t i = s.first; i < s.first + s.count; ++i) out[i] = a[i] + b[i];
          break;
        }
        case Op::kInc: {
          auto& data = (*buffers)[s.buffer[0]];
          for (size_t i = s.first; i < s.first + s.count; ++i) data[i] += s.iterations;
          break;
        }
        case Op::kAxpy: {
          const auto& x = (*buffers)[s.buffer[0]];
          auto& y = (*buffers)[s.buffer[1]];
          for (size_t i = s.first; i < s.first + s.count; ++i) y[i] = s.multiplier * x[i] + y[i];
          break;
        }
        case Op::kFill:
          std::memset(Bytes(buffers, s.dst) + s.dst_offset, static_cast<int>(s.fill), s.bytes);
          break;
        case Op::kCopy:
          std::memmove(Bytes(buffers, s.dst) + s.dst_offset, Bytes(buffers, s.src) + s.src_offset,
                       s.bytes);
          break;
        case Op::kUpload:
          std::memcpy(Bytes(buffers, s.dst) + s.dst_offset, upload_sources_[s.host].data(),
                      s.bytes);
          break;
        case Op::kDownload: {
          const uint8_t* from = Bytes(buffers, s.src) + s.src_offset;
          (*downloads)[s.host].assign(from, from + s.bytes);
          break;
        }
      }
    }
  }

  // What one run moves and the graph's node kinds, from the run order.
  struct Expected {
    uint64_t h2d_bytes = 0, d2h_bytes = 0, kernel_launches = 0, memsets = 0;
    std::vector<vyre_graph_node_kind> kinds;
  };
  Expected Counts() const {
    Expected e;
    for (size_t index : order_) {
      const PlannedStep& s = steps_[index];
      switch (s.op) {
        case Op::kAdd:
          e.memsets += 1;
          e.kernel_launches += 1;
          e.kinds.push_back(VYRE_GRAPH_NODE_MEMSET);
          e.kinds.push_back(VYRE_GRAPH_NODE_KERNEL);
          break;
        case Op::kInc:
          e.kernel_launches += s.iterations;
          for (uint32_t k = 0; k < s.iterations; ++k) e.kinds.push_back(VYRE_GRAPH_NODE_KERNEL);
          break;
        case Op::kAxpy:
          e.kernel_launches += 1;
          e.kinds.push_back(VYRE_GRAPH_NODE_KERNEL);
          break;
        case Op::kFill:
          e.memsets += 1;
          e.kinds.push_back(VYRE_GRAPH_NODE_MEMSET);
          break;
        case Op::kCopy: e.kinds.push_back(VYRE_GRAPH_NODE_MEMCPY); break;
        case Op::kUpload:
          e.h2d_bytes += s.bytes;
          e.kinds.push_back(VYRE_GRAPH_NODE_MEMCPY);
          break;
        case Op::kDownload:
          e.d2h_bytes += s.bytes;
          e.kinds.push_back(VYRE_GRAPH_NODE_MEMCPY);
          break;
      }
    }
    return e;
  }

 private:
  static uint8_t* Bytes(Buffers* buffers, int index) {
    return reinterpret_cast<uint8_t*>((*buffers)[index].data());
  }

  std::array<vyre_buffer, kBuffers> buffers_{};
  std::vector<PlannedStep> steps_;
  std::vector<size_t> order_;
  std::vector<std::vector<uint8_t>> upload_sources_;
  std::vector<std::vector<uint8_t>> download_targets_;
};

::testing::AssertionResult SameBuffers(const Buffers& actual, const Buffers& expected,
                                       const std::string& what) {
  for (int k = 0; k < kBuffers; ++k) {
    const std::string name = what + ", buffer " + std::to_string(k);
    ::testing::AssertionResult same = AllElementsEqual(
        actual[k], [&](size_t i) { return expected[k][i]; }, name.c_str());
    if (!same) return same;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult SameDownloads(const std::vector<std::vector<uint8_t>>& actual,
                                         const std::vector<std::vector<uint8_t>>& expected,
                                         const std::string& what) {
  for (size_t k = 0; k < expected.size(); ++k) {
    if (actual[k] != expected[k]) {
      size_t first = 0;
      while (first < actual[k].size() && actual[k][first] == expected[k][first]) ++first;
      return ::testing::AssertionFailure()
             << what << ", download " << k << " (" << expected[k].size()
             << " bytes) differs first at byte " << first;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_F(SequenceTest, HundredStepsEagerAndGraphMatchCpu) {
  std::array<BufferHandle, kBuffers> handles;
  std::array<vyre_buffer, kBuffers> buffers;
  for (int k = 0; k < kBuffers; ++k) {
    ASSERT_VYRE_OK(vyre_buffer_alloc(context(), kBufferBytes, handles[k].out()));
    buffers[k] = handles[k].get();
  }
  HundredSteps plan;
  plan.Plan(rng(), buffers);
  const std::vector<vyre_sequence_step> steps = plan.Steps(add_.get(), inc_.get(), axpy_.get());
  ASSERT_EQ(steps.size(), HundredSteps::kSteps);
  const vyre_sequence_desc desc = plan.Desc(steps);
  SequenceHandle sequence;
  ASSERT_VYRE_OK(vyre_sequence_create(context(), &desc, sequence.out()));
  const HundredSteps::Expected counts = plan.Counts();

  auto upload_all = [&](const Buffers& contents) {
    for (int k = 0; k < kBuffers; ++k) {
      ASSERT_VYRE_OK(vyre_buffer_upload(buffers[k], 0, contents[k].data(), kBufferBytes));
    }
  };
  auto download_all = [&](Buffers* contents) {
    for (int k = 0; k < kBuffers; ++k) {
      ASSERT_TRUE(DownloadU32(buffers[k], kElems, &(*contents)[k]));
    }
  };

  GraphHandle graph;
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Buffers initial;
    for (auto& contents : initial) contents = rng().NonZeroU32(kElems);
    plan.RefreshUploadSources(rng());
    Buffers expected = initial;
    std::vector<std::vector<uint8_t>> expected_downloads;
    plan.Model(&expected, &expected_downloads);

    // Eagerly.
    ASSERT_NO_FATAL_FAILURE(upload_all(initial));
    plan.PoisonDownloads();
    vyre_telemetry before = Telemetry(context());
    vyre_timing timing = VYRE_TIMING_INIT;
    ASSERT_VYRE_OK(vyre_sequence_run(sequence.get(), &timing));
    vyre_telemetry after = Telemetry(context());
    EXPECT_GT(timing.wall_ns, 0u);
    EXPECT_EQ(after.sequence_runs - before.sequence_runs, 1u);
    EXPECT_EQ(after.h2d_bytes - before.h2d_bytes, counts.h2d_bytes);
    EXPECT_EQ(after.d2h_bytes - before.d2h_bytes, counts.d2h_bytes);
    EXPECT_EQ(after.kernel_launches - before.kernel_launches, counts.kernel_launches);
    EXPECT_EQ(after.memset_operations - before.memset_operations, counts.memsets);
    Buffers eager;
    ASSERT_NO_FATAL_FAILURE(download_all(&eager));
    const std::vector<std::vector<uint8_t>> eager_downloads = plan.downloads();
    EXPECT_TRUE(SameBuffers(eager, expected, "eager"));
    EXPECT_TRUE(SameDownloads(eager_downloads, expected_downloads, "eager"));

    // As a graph, from the same start.
    ASSERT_NO_FATAL_FAILURE(upload_all(initial));
    plan.PoisonDownloads();
    if (round == 0) {
      before = Telemetry(context());
      ASSERT_VYRE_OK(vyre_sequence_record(sequence.get(), graph.out()));
      after = Telemetry(context());
      EXPECT_EQ(after.kernel_launches, before.kernel_launches) << "recording runs nothing";
      EXPECT_EQ(after.graph_records - before.graph_records, 1u);
      Buffers untouched;
      ASSERT_NO_FATAL_FAILURE(download_all(&untouched));
      EXPECT_TRUE(SameBuffers(untouched, initial, "after recording"));
      for (const auto& target : plan.downloads()) {
        EXPECT_TRUE(std::all_of(target.begin(), target.end(), [](uint8_t b) { return b == 0xFF; }))
            << "a DOWNLOAD target was written by recording";
      }
      const vyre_graph_info info = InfoOf(graph.get());
      EXPECT_EQ(info.from_sequence, 1u);
      EXPECT_EQ(info.context.bits, context().bits);
      EXPECT_EQ(info.node_count, counts.kinds.size());
      EXPECT_EQ(info.kernel_node_count, counts.kernel_launches);
      EXPECT_EQ(info.unchanged_input_node_count, 0u);
      EXPECT_EQ(info.host_input_bytes, counts.h2d_bytes);
      EXPECT_EQ(info.host_output_bytes, counts.d2h_bytes);
      EXPECT_EQ(NodeKinds(graph.get()), counts.kinds);
      vyre_graph_node_kind kind;
      EXPECT_VYRE_STATUS(VYRE_STATUS_OUT_OF_RANGE,
                         vyre_graph_node_kind_get(graph.get(), info.node_count, &kind));
    }
    before = Telemetry(context());
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
    after = Telemetry(context());
    EXPECT_EQ(after.graph_replays - before.graph_replays, 1u);
    EXPECT_EQ(after.graph_launches - before.graph_launches, 1u);
    EXPECT_EQ(after.sequence_runs, before.sequence_runs);
    EXPECT_EQ(after.h2d_bytes - before.h2d_bytes, counts.h2d_bytes);
    EXPECT_EQ(after.d2h_bytes - before.d2h_bytes, counts.d2h_bytes);
    EXPECT_EQ(after.kernel_launches - before.kernel_launches, counts.kernel_launches);
    Buffers replayed;
    ASSERT_NO_FATAL_FAILURE(download_all(&replayed));
    EXPECT_TRUE(SameBuffers(replayed, expected, "graph"));
    EXPECT_TRUE(SameDownloads(plan.downloads(), expected_downloads, "graph"));
    EXPECT_TRUE(SameBuffers(replayed, eager, "graph against eager"));
    EXPECT_TRUE(SameDownloads(plan.downloads(), eager_downloads, "graph against eager"));
    if (HasFailure()) break;
  }
}

// ---------------------------------------------------------------------------
// Semantics of the repeated block, uploads and downloads
// ---------------------------------------------------------------------------

// upload x; [inc; download] x 5; inc. The download is the last repetition's
// (x + 5), the buffer ends at x + 6, and every run reads x afresh.
TEST_F(SequenceTest, RepeatedBlockAndHostMemoryReadEveryRun) {
  const size_t n = 5000;
  BufferHandle buffer;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), n * 4, buffer.out()));
  std::vector<uint32_t> x(n), d(n);
  const std::vector<vyre_sequence_step> steps = {
      UploadStep(buffer.get(), 0, x.data(), n * 4), DispatchStep(inc_.get(), IncDesc(buffer.get(), 0, n)),
      DownloadStep(buffer.get(), 0, d.data(), n * 4),
      DispatchStep(inc_.get(), IncDesc(buffer.get(), 0, n))};
  const vyre_sequence_desc desc = SequenceDesc(steps, 1, 2, 5);
  SequenceHandle sequence;
  ASSERT_VYRE_OK(vyre_sequence_create(context(), &desc, sequence.out()));
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_sequence_record(sequence.get(), graph.out()));
  std::vector<vyre_graph_node_kind> expected_kinds = {VYRE_GRAPH_NODE_MEMCPY};
  for (int r = 0; r < 5; ++r) {
    expected_kinds.push_back(VYRE_GRAPH_NODE_KERNEL);
    expected_kinds.push_back(VYRE_GRAPH_NODE_MEMCPY);
  }
  expected_kinds.push_back(VYRE_GRAPH_NODE_KERNEL);
  EXPECT_EQ(NodeKinds(graph.get()), expected_kinds);

  for (int round = 0; round < 6; ++round) {
    const bool eager = round % 2 == 0;
    SCOPED_TRACE(std::string(eager ? "eager" : "graph") + " round " + std::to_string(round));
    const std::vector<uint32_t> fresh = rng().NonZeroU32(n);
    std::copy(fresh.begin(), fresh.end(), x.begin());  // in place: the steps hold x's address
    std::fill(d.begin(), d.end(), kPoisonU32);
    const std::vector<uint32_t> poison(n, kPoisonU32);
    ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), 0, poison.data(), n * 4));
    if (eager) {
      ASSERT_VYRE_OK(vyre_sequence_run(sequence.get(), nullptr));
    } else {
      ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
    }
    EXPECT_TRUE(AllElementsEqual(d, [&](size_t i) { return fresh[i] + 5u; },
                                 "download of the last repetition"));
    std::vector<uint32_t> out;
    ASSERT_TRUE(DownloadU32(buffer.get(), n, &out));
    EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return fresh[i] + 6u; }, "buffer"));
  }
}

// Fill and copy steps at unaligned byte ranges, checked byte for byte.
TEST_F(SequenceTest, FillAndCopyAtByteRanges) {
  const uint64_t bytes = 4099;  // not a multiple of 4
  BufferHandle first, second;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), bytes, first.out()));
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), bytes, second.out()));
  std::vector<uint8_t> source(bytes), out_first(bytes), out_second(bytes);
  const std::vector<vyre_sequence_step> steps = {
      UploadStep(first.get(), 0, source.data(), bytes),
      FillStep(second.get(), 0, bytes, 0x5A),
      FillStep(first.get(), 3, 17, 0xC3),
      CopyStep(second.get(), 1, first.get(), 0, 1001),
      CopyStep(first.get(), 2048, first.get(), 5, 2000),  // disjoint halves of one buffer
      FillStep(second.get(), bytes - 1, 1, 0x00),
      DownloadStep(first.get(), 0, out_first.data(), bytes),
      DownloadStep(second.get(), 0, out_second.data(), bytes)};
  const vyre_sequence_desc desc = SequenceDesc(steps);
  SequenceHandle sequence;
  ASSERT_VYRE_OK(vyre_sequence_create(context(), &desc, sequence.out()));
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_sequence_record(sequence.get(), graph.out()));
  const std::vector<vyre_graph_node_kind> kinds = {
      VYRE_GRAPH_NODE_MEMCPY, VYRE_GRAPH_NODE_MEMSET, VYRE_GRAPH_NODE_MEMSET,
      VYRE_GRAPH_NODE_MEMCPY, VYRE_GRAPH_NODE_MEMCPY, VYRE_GRAPH_NODE_MEMSET,
      VYRE_GRAPH_NODE_MEMCPY, VYRE_GRAPH_NODE_MEMCPY};
  EXPECT_EQ(NodeKinds(graph.get()), kinds);

  for (int round = 0; round < 4; ++round) {
    const bool eager = round % 2 == 0;
    SCOPED_TRACE(std::string(eager ? "eager" : "graph") + " round " + std::to_string(round));
    const std::vector<uint32_t> words = rng().NonZeroU32(bytes / 4 + 1);
    std::memcpy(source.data(), words.data(), bytes);
    std::fill(out_first.begin(), out_first.end(), uint8_t{0xFF});
    std::fill(out_second.begin(), out_second.end(), uint8_t{0xFF});
    // CPU model.
    std::vector<uint8_t> a = source, b(bytes, 0x5A);
    std::memset(a.data() + 3, 0xC3, 17);
    std::memcpy(b.data() + 1, a.data(), 1001);
    std::memcpy(a.data() + 2048, a.data() + 5, 2000);
    b[bytes - 1] = 0;
    if (eager) {
      ASSERT_VYRE_OK(vyre_sequence_run(sequence.get(), nullptr));
    } else {
      ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
    }
    EXPECT_TRUE(out_first == a) << "first buffer";
    EXPECT_TRUE(out_second == b) << "second buffer";
  }
}

// ---------------------------------------------------------------------------
// Lifetimes
// ---------------------------------------------------------------------------

TEST_F(SequenceTest, FreedBufferRefusesRunRecordAndReplay) {
  const size_t n = 2048;
  BufferHandle kept, freed;
  ASSERT_TRUE(CreateBufferWith(context(), rng().NonZeroU32(n), &kept));
  ASSERT_TRUE(CreateBufferWith(context(), rng().NonZeroU32(n), &freed));
  const std::vector<vyre_sequence_step> steps = {
      DispatchStep(inc_.get(), IncDesc(kept.get(), 0, n)),
      CopyStep(freed.get(), 0, kept.get(), 0, n * 4)};
  const vyre_sequence_desc desc = SequenceDesc(steps);
  SequenceHandle sequence;
  ASSERT_VYRE_OK(vyre_sequence_create(context(), &desc, sequence.out()));
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_sequence_record(sequence.get(), graph.out()));
  ASSERT_VYRE_OK(vyre_sequence_run(sequence.get(), nullptr));
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));

  ASSERT_VYRE_OK(vyre_buffer_free(freed.release()));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_sequence_run(sequence.get(), nullptr));
  EXPECT_TRUE(LastErrorSays());
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_replay(graph.get(), nullptr, nullptr));
  EXPECT_TRUE(LastErrorSays());
  vyre_graph other{0};
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_sequence_record(sequence.get(), &other));
  EXPECT_TRUE(LastErrorSays());
  EXPECT_EQ(other.bits, 0u);

  // The memory goes with the sequence and its graph.
  const vyre_telemetry before = Telemetry(context());
  graph.reset();
  sequence.reset();
  const vyre_telemetry after = Telemetry(context());
  EXPECT_GE(before.device_bytes_live - after.device_bytes_live, n * 4)
      << "the freed buffer's bytes are released with the last holder";
  EXPECT_EQ(after.live_sequences, 0u);
  EXPECT_EQ(after.live_graphs, 0u);
}

TEST_F(SequenceTest, GraphOutlivesItsSequence) {
  const size_t n = 10000;
  const std::vector<uint32_t> initial = rng().NonZeroU32(n);
  BufferHandle buffer;
  ASSERT_TRUE(CreateBufferWith(context(), initial, &buffer));
  std::vector<uint32_t> d(n, kPoisonU32);
  ASSERT_VYRE_OK(vyre_context_trim(context()));
  const vyre_telemetry baseline = Telemetry(context());
  const std::vector<vyre_sequence_step> steps = {
      DispatchStep(inc_.get(), IncDesc(buffer.get(), 0, n, 2)),
      DownloadStep(buffer.get(), 0, d.data(), n * 4)};
  const vyre_sequence_desc desc = SequenceDesc(steps);
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(vyre_sequence_create(context(), &desc, &sequence));
  EXPECT_EQ(Telemetry(context()).live_sequences, baseline.live_sequences + 1);
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_sequence_record(sequence, graph.out()));
  ASSERT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_sequence_run(sequence, nullptr));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_sequence_destroy(sequence));
  vyre_graph other{0};
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_sequence_record(sequence, &other));

  for (uint32_t r = 1; r <= 3; ++r) {
    std::fill(d.begin(), d.end(), kPoisonU32);
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
    EXPECT_TRUE(AllElementsEqual(d, [&](size_t i) { return initial[i] + 2u * r; },
                                 "data + 2 per replay, read back by the DOWNLOAD step"));
  }
  graph.reset();
  ASSERT_VYRE_OK(vyre_context_trim(context()));
  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.live_sequences, baseline.live_sequences);
  EXPECT_EQ(after.live_graphs, baseline.live_graphs);
  EXPECT_EQ(after.pinned_bytes_live, baseline.pinned_bytes_live);
  EXPECT_EQ(after.device_bytes_live, baseline.device_bytes_live);
}

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

TEST_F(SequenceTest, CreateRefusesInvalidSteps) {
  const size_t n = 1024;
  BufferHandle a, b;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), n * 4, a.out()));
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), n * 4, b.out()));
  vyre_context_desc other_desc = VYRE_CONTEXT_DESC_INIT;
  ContextHandle other;
  ASSERT_VYRE_OK(vyre_context_create(&other_desc, other.out()));
  BufferHandle foreign;
  ASSERT_VYRE_OK(vyre_buffer_alloc(other.get(), n * 4, foreign.out()));
  std::vector<uint32_t> host(n, 1u);

  struct Refusal {
    const char* what;
    std::vector<vyre_sequence_step> steps;
    vyre_status status;
    size_t repeat_first = 0, repeat_step_count = 0;
    uint32_t repeat_count = 0;
  };
  std::vector<Refusal> refusals;
  refusals.push_back({"COPY between overlapping ranges of one buffer",
                      {CopyStep(a.get(), 0, a.get(), 8, 64)}, VYRE_STATUS_INVALID_ARGUMENT});
  refusals.push_back({"FILL of 0 bytes", {FillStep(a.get(), 0, 0, 1)}, VYRE_STATUS_INVALID_ARGUMENT});
  refusals.push_back({"FILL past the end", {FillStep(a.get(), n * 4 - 4, 8, 1)},
                      VYRE_STATUS_OUT_OF_RANGE});
  refusals.push_back({"FILL with 256", {FillStep(a.get(), 0, 4, 256)}, VYRE_STATUS_INVALID_ARGUMENT});
  refusals.push_back({"UPLOAD from NULL", {UploadStep(a.get(), 0, nullptr, 4)},
                      VYRE_STATUS_INVALID_ARGUMENT});
  refusals.push_back({"DOWNLOAD to NULL", {DownloadStep(a.get(), 0, nullptr, 4)},
                      VYRE_STATUS_INVALID_ARGUMENT});
  refusals.push_back({"COPY from another context's buffer",
                      {CopyStep(a.get(), 0, foreign.get(), 0, 64)}, VYRE_STATUS_INVALID_ARGUMENT});
  refusals.push_back({"COPY from a forged handle",
                      {CopyStep(a.get(), 0, vyre_buffer{0x77777777ull}, 0, 64)},
                      VYRE_STATUS_INVALID_HANDLE});
  refusals.push_back({"repeat_count 0 with a block", {FillStep(a.get(), 0, 4, 1)},
                      VYRE_STATUS_INVALID_ARGUMENT, 0, 1, 0});
  refusals.push_back({"repeat_count without a block", {FillStep(a.get(), 0, 4, 1)},
                      VYRE_STATUS_INVALID_ARGUMENT, 0, 0, 2});
  refusals.push_back({"block past the steps", {FillStep(a.get(), 0, 4, 1)},
                      VYRE_STATUS_OUT_OF_RANGE, 0, 2, 1});
  {
    vyre_sequence_step bad_kind = FillStep(a.get(), 0, 4, 1);
    bad_kind.kind = static_cast<vyre_step_kind>(99);
    refusals.push_back({"unknown step kind", {bad_kind}, VYRE_STATUS_INVALID_ARGUMENT});
  }
  {
    // A DISPATCH step with a HOST binding.
    storage_.push_back(std::make_unique<DispatchStorage>());
    DispatchStorage& s = *storage_.back();
    s.bindings = {HostInOut(host.data(), n * 4)};
    s.params = {static_cast<uint32_t>(n)};
    refusals.push_back({"DISPATCH with a HOST binding", {DispatchStep(inc_.get(), s.Finish())},
                        VYRE_STATUS_INVALID_ARGUMENT});
  }
  if (device().cooperative_launch != 0) {
    storage_.push_back(std::make_unique<DispatchStorage>());
    DispatchStorage& s = *storage_.back();
    s.bindings = {Resident(a.get())};
    s.params = {static_cast<uint32_t>(n)};
    s.Finish();
    s.desc.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
    refusals.push_back({"cooperative DISPATCH", {DispatchStep(inc_.get(), &s.desc)},
                        VYRE_STATUS_INVALID_ARGUMENT});
  }
  {
    storage_.push_back(std::make_unique<DispatchStorage>());
    DispatchStorage& s = *storage_.back();
    s.bindings = {Resident(a.get()), Resident(b.get())};  // inc declares one binding
    s.params = {static_cast<uint32_t>(n)};
    refusals.push_back({"DISPATCH with the wrong binding count",
                        {FillStep(a.get(), 0, 4, 1), DispatchStep(inc_.get(), s.Finish())},
                        VYRE_STATUS_INVALID_ARGUMENT});
  }
  refusals.push_back({"DISPATCH with a NULL descriptor", {DispatchStep(inc_.get(), nullptr)},
                      VYRE_STATUS_INVALID_ARGUMENT});

  const vyre_telemetry before = Telemetry(context());
  for (const Refusal& refusal : refusals) {
    SCOPED_TRACE(refusal.what);
    const vyre_sequence_desc desc = SequenceDesc(refusal.steps, refusal.repeat_first,
                                                 refusal.repeat_step_count, refusal.repeat_count);
    vyre_sequence sequence{0};
    EXPECT_VYRE_STATUS(refusal.status, vyre_sequence_create(context(), &desc, &sequence));
    if (refusal.status != VYRE_STATUS_INVALID_HANDLE) {
      EXPECT_TRUE(LastErrorSays());
    }
    EXPECT_EQ(sequence.bits, 0u);
  }
  {
    vyre_sequence sequence{0};
    const std::vector<vyre_sequence_step> none;
    vyre_sequence_desc desc = SequenceDesc(none);
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_sequence_create(context(), &desc, &sequence));
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_sequence_create(context(), nullptr, &sequence));
  }
  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.live_sequences, before.live_sequences);
  EXPECT_EQ(after.device_bytes_live, before.device_bytes_live);
  EXPECT_EQ(after.pinned_bytes_live, before.pinned_bytes_live);
}

// A cooperative DISPATCH step is refused with a Fix that says why.
TEST_F(SequenceTest, CooperativeDispatchStepIsRefused) {
  if (device().cooperative_launch == 0) VYRE_GPU_SKIP_OR_FAIL("no cooperative launch on this device");
  ProgramHandle grid_sync;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_grid_sync",
                                {Decl(VYRE_ROLE_INPUT, 4, "in"), Decl(VYRE_ROLE_OUTPUT, 4, "scratch"),
                                 Decl(VYRE_ROLE_OUTPUT, 4, "out")},
                                kBlock, &grid_sync));
  BufferHandle in, scratch, out;
  const size_t n = 2 * kBlock;
  for (BufferHandle* buffer : {&in, &scratch, &out}) {
    ASSERT_VYRE_OK(vyre_buffer_alloc(context(), n * 4, buffer->out()));
  }
  DispatchStorage s;
  s.bindings = {Resident(in.get()), Resident(scratch.get()), Resident(out.get())};
  s.params = {static_cast<uint32_t>(n)};
  s.Finish();
  s.desc.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
  const std::vector<vyre_sequence_step> steps = {DispatchStep(grid_sync.get(), &s.desc)};
  const vyre_sequence_desc desc = SequenceDesc(steps);
  vyre_sequence sequence{0};
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_sequence_create(context(), &desc, &sequence));
  EXPECT_TRUE(LastErrorSays({"cooperative"}));
  EXPECT_EQ(sequence.bits, 0u);
}

// A sequence graph takes no bindings, count, words or scalars at replay;
// flags may ask for device timing.
TEST_F(SequenceTest, SequenceGraphReplayDescriptor) {
  const size_t n = 4096;
  const std::vector<uint32_t> initial = rng().NonZeroU32(n);
  BufferHandle buffer;
  ASSERT_TRUE(CreateBufferWith(context(), initial, &buffer));
  const std::vector<vyre_sequence_step> steps = {
      DispatchStep(inc_.get(), IncDesc(buffer.get(), 0, n))};
  const vyre_sequence_desc desc = SequenceDesc(steps);
  SequenceHandle sequence;
  ASSERT_VYRE_OK(vyre_sequence_create(context(), &desc, sequence.out()));
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_sequence_record(sequence.get(), graph.out()));

  const std::vector<vyre_dispatch_binding> bindings = {Resident(buffer.get())};
  const std::vector<uint32_t> words = {1};
  const std::vector<uint64_t> scalars = {1};
  for (int field = 0; field < 4; ++field) {
    SCOPED_TRACE("field " + std::to_string(field));
    vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
    if (field == 0) {
      replay.bindings = bindings.data();
      replay.binding_count = 1;
    } else if (field == 1) {
      replay.element_count = 10;
    } else if (field == 2) {
      replay.param_words = words.data();
      replay.param_word_count = 1;
    } else {
      replay.scalars = scalars.data();
      replay.scalar_count = 1;
    }
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_replay(graph.get(), &replay, nullptr));
    EXPECT_TRUE(LastErrorSays());
  }
  vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
  replay.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_replay(graph.get(), &replay, nullptr));
  replay.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
  vyre_timing timing = VYRE_TIMING_INIT;
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &replay, &timing));
  EXPECT_GT(timing.wall_ns, 0u);
  EXPECT_GT(timing.device_ns, 0u);
  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(buffer.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return initial[i] + 1u; },
                               "one replay ran; the refused ones did not"));
}

// ---------------------------------------------------------------------------
// Asynchronous replays and node updates
// ---------------------------------------------------------------------------

TEST_F(SequenceTest, AsyncReplayOfSequenceGraphs) {
  const size_t n = 20000;
  BufferHandle buffer;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), n * 4, buffer.out()));
  std::vector<uint32_t> x(n), d(n);

  // With host staging (UPLOAD/DOWNLOAD): one unwaited replay at a time, and
  // the DOWNLOAD target is written by the wait.
  const std::vector<vyre_sequence_step> staged_steps = {
      UploadStep(buffer.get(), 0, x.data(), n * 4),
      DispatchStep(inc_.get(), IncDesc(buffer.get(), 0, n, 3)),
      DownloadStep(buffer.get(), 0, d.data(), n * 4)};
  const vyre_sequence_desc staged_desc = SequenceDesc(staged_steps);
  SequenceHandle staged;
  ASSERT_VYRE_OK(vyre_sequence_create(context(), &staged_desc, staged.out()));
  GraphHandle staged_graph;
  ASSERT_VYRE_OK(vyre_sequence_record(staged.get(), staged_graph.out()));
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::vector<uint32_t> fresh = rng().NonZeroU32(n);
    std::copy(fresh.begin(), fresh.end(), x.begin());
    std::fill(d.begin(), d.end(), kPoisonU32);
    PendingHandle pending;
    ASSERT_VYRE_OK(vyre_graph_replay_async(staged_graph.get(), nullptr, pending.out()));
    vyre_pending refused{0};
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE,
                       vyre_graph_replay_async(staged_graph.get(), nullptr, &refused));
    EXPECT_TRUE(LastErrorSays());
    EXPECT_TRUE(AllElementsEqual(d, [](size_t) { return kPoisonU32; },
                                 "DOWNLOAD target before the wait"));
    ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
    EXPECT_TRUE(AllElementsEqual(d, [&](size_t i) { return fresh[i] + 3u; },
                                 "DOWNLOAD target after the wait"));
    vyre_timing timing = VYRE_TIMING_INIT;
    ASSERT_VYRE_OK(vyre_pending_timing(pending.get(), &timing));
    EXPECT_GT(timing.wall_ns, 0u);
  }

  // Without host staging: many in flight, in order.
  const std::vector<uint32_t> initial = rng().NonZeroU32(n);
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), 0, initial.data(), n * 4));
  const std::vector<vyre_sequence_step> device_steps = {
      DispatchStep(inc_.get(), IncDesc(buffer.get(), 0, n)),
      DispatchStep(inc_.get(), IncDesc(buffer.get(), 0, n / 2))};
  const vyre_sequence_desc device_desc = SequenceDesc(device_steps);
  SequenceHandle device_only;
  ASSERT_VYRE_OK(vyre_sequence_create(context(), &device_desc, device_only.out()));
  GraphHandle device_graph;
  ASSERT_VYRE_OK(vyre_sequence_record(device_only.get(), device_graph.out()));
  constexpr int kInFlight = 8;
  std::vector<PendingHandle> pendings(kInFlight);
  for (PendingHandle& pending : pendings) {
    ASSERT_VYRE_OK(vyre_graph_replay_async(device_graph.get(), nullptr, pending.out()));
  }
  for (PendingHandle& pending : pendings) {
    ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  }
  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(buffer.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(
      out, [&](size_t i) { return initial[i] + (i < n / 2 ? 2u : 1u) * kInFlight; },
      "+2 per replay in the first half, +1 after"));
}

// A kernel node of a sequence graph can be updated; eager runs keep the
// sequence's own launch shape.
TEST_F(SequenceTest, KernelNodeUpdateOnSequenceGraph) {
  const size_t n = 4096 + 3;
  BufferHandle buffer;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), n * 4, buffer.out()));
  const std::vector<vyre_sequence_step> steps = {
      FillStep(buffer.get(), 0, n * 4, 0x11),
      DispatchStep(inc_.get(), IncDesc(buffer.get(), 0, n))};
  const vyre_sequence_desc desc = SequenceDesc(steps);
  SequenceHandle sequence;
  ASSERT_VYRE_OK(vyre_sequence_create(context(), &desc, sequence.out()));
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_sequence_record(sequence.get(), graph.out()));
  ASSERT_EQ(NodeKinds(graph.get()),
            (std::vector<vyre_graph_node_kind>{VYRE_GRAPH_NODE_MEMSET, VYRE_GRAPH_NODE_KERNEL}));

  vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
  update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
  update.grid[0] = update.grid[1] = update.grid[2] = 1;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                     vyre_graph_kernel_node_update(graph.get(), 0, &update))
      << "node 0 is the FILL's memset";
  ASSERT_VYRE_OK(vyre_graph_kernel_node_update(graph.get(), 1, &update));

  constexpr uint32_t kFilled = 0x11111111u;
  std::vector<uint32_t> out;
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
  ASSERT_TRUE(DownloadU32(buffer.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(
      out, [&](size_t i) { return kFilled + (i < kBlock ? 1u : 0u); }, "one block incremented"));
  ASSERT_VYRE_OK(vyre_sequence_run(sequence.get(), nullptr));
  ASSERT_TRUE(DownloadU32(buffer.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(out, [&](size_t) { return kFilled + 1u; },
                               "eager run: the whole buffer incremented"));
}

// ---------------------------------------------------------------------------
// Threads and leaks
// ---------------------------------------------------------------------------

// Four threads, each with its own buffers and sequence on one context,
// alternate eager runs and graph replays over fresh uploaded data.
TEST_F(SequenceTest, FourThreadsRunTheirOwnSequences) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 60;
  std::mutex mutex;
  int failures = 0;
  std::string first_failure;
  auto fail = [&](int t, int r, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failures++ == 0) {
      first_failure = "thread " + std::to_string(t) + " round " + std::to_string(r) + ": " + what;
    }
  };
  const uint64_t base_seed = rng().seed();
  const vyre_program inc = inc_.get(), add = add_.get();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      RandomSource thread_rng(base_seed + 1 + static_cast<uint64_t>(t));
      const size_t n = 3000 + 1000 * static_cast<size_t>(t);
      BufferHandle x_buffer, sum_buffer;
      if (vyre_buffer_alloc(context(), n * 4, x_buffer.out()) != VYRE_STATUS_OK ||
          vyre_buffer_alloc(context(), n * 4, sum_buffer.out()) != VYRE_STATUS_OK) {
        fail(t, -1, "alloc: " + DescribeLastError());
        return;
      }
      std::vector<uint32_t> x(n), sum(n);
      DispatchStorage inc_storage, add_storage;
      inc_storage.bindings = {Resident(x_buffer.get())};
      inc_storage.params = {static_cast<uint32_t>(n)};
      add_storage.bindings = {Resident(x_buffer.get()), Resident(x_buffer.get()),
                              Resident(sum_buffer.get())};
      add_storage.params = {static_cast<uint32_t>(n)};
      // sum = 2 * (x + 1)
      const std::vector<vyre_sequence_step> steps = {
          UploadStep(x_buffer.get(), 0, x.data(), n * 4),
          DispatchStep(inc, inc_storage.Finish()), DispatchStep(add, add_storage.Finish()),
          DownloadStep(sum_buffer.get(), 0, sum.data(), n * 4)};
      const vyre_sequence_desc desc = SequenceDesc(steps);
      SequenceHandle sequence;
      GraphHandle graph;
      if (vyre_sequence_create(context(), &desc, sequence.out()) != VYRE_STATUS_OK ||
          vyre_sequence_record(sequence.get(), graph.out()) != VYRE_STATUS_OK) {
        fail(t, -1, "create/record: " + DescribeLastError());
        return;
      }
      for (int r = 0; r < kRounds; ++r) {
        const std::vector<uint32_t> fresh = thread_rng.NonZeroU32(n);
        std::copy(fresh.begin(), fresh.end(), x.begin());
        std::fill(sum.begin(), sum.end(), kPoisonU32);
        const vyre_status status = r % 2 == 0 ? vyre_sequence_run(sequence.get(), nullptr)
                                              : vyre_graph_replay(graph.get(), nullptr, nullptr);
        if (status != VYRE_STATUS_OK) {
          fail(t, r, DescribeLastError());
          continue;
        }
        const ::testing::AssertionResult ok = AllElementsEqual(
            sum, [&](size_t i) { return 2u * (fresh[i] + 1u); }, "2 * (x + 1)");
        if (!ok) fail(t, r, ok.message());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures, 0) << "first failure: " << first_failure;
}

// 1,000 create/run/record/replay/destroy cycles leave the context's memory
// and counts at their baseline.
TEST_F(SequenceTest, ThousandCyclesLeaveMemoryAtBaseline) {
  constexpr int kCycles = 1000;
  const size_t n = 512;
  BufferHandle buffer, copy;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), n * 4, buffer.out()));
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), n * 4, copy.out()));
  std::vector<uint32_t> x(n), d(n);
  const vyre_dispatch_desc* inc = IncDesc(buffer.get(), 0, n, 2);

  auto cycle = [&](int i) -> std::string {
    const std::vector<uint32_t> fresh = rng().NonZeroU32(n);
    std::copy(fresh.begin(), fresh.end(), x.begin());
    const std::vector<vyre_sequence_step> steps = {
        UploadStep(buffer.get(), 0, x.data(), n * 4), DispatchStep(inc_.get(), inc),
        CopyStep(copy.get(), 0, buffer.get(), 0, n * 4),
        DownloadStep(copy.get(), 0, d.data(), n * 4)};
    const vyre_sequence_desc desc = SequenceDesc(steps);
    vyre_sequence sequence{0};
    if (vyre_sequence_create(context(), &desc, &sequence) != VYRE_STATUS_OK) {
      return "create: " + DescribeLastError();
    }
    std::string failure;
    auto check = [&](const char* what) {
      const ::testing::AssertionResult ok =
          AllElementsEqual(d, [&](size_t k) { return fresh[k] + 2u; }, what);
      if (!ok && failure.empty()) failure = ok.message();
    };
    std::fill(d.begin(), d.end(), kPoisonU32);
    if (vyre_sequence_run(sequence, nullptr) != VYRE_STATUS_OK) {
      failure = "run: " + DescribeLastError();
    } else {
      check("eager");
    }
    vyre_graph graph{0};
    if (failure.empty() && vyre_sequence_record(sequence, &graph) != VYRE_STATUS_OK) {
      failure = "record: " + DescribeLastError();
    }
    // Odd cycles destroy the sequence before replaying its graph.
    if (i % 2 == 1 && vyre_sequence_destroy(sequence) == VYRE_STATUS_OK) sequence.bits = 0;
    if (failure.empty()) {
      std::fill(d.begin(), d.end(), kPoisonU32);
      if (vyre_graph_replay(graph, nullptr, nullptr) != VYRE_STATUS_OK) {
        failure = "replay: " + DescribeLastError();
      } else {
        check("graph");
      }
    }
    if (graph.bits != 0 && vyre_graph_destroy(graph) != VYRE_STATUS_OK && failure.empty()) {
      failure = "graph destroy: " + DescribeLastError();
    }
    if (sequence.bits != 0 && vyre_sequence_destroy(sequence) != VYRE_STATUS_OK &&
        failure.empty()) {
      failure = "sequence destroy: " + DescribeLastError();
    }
    return failure;
  };

  for (int i = 0; i < 4; ++i) ASSERT_EQ(cycle(i), "") << "warm-up cycle " << i;
  ASSERT_VYRE_OK(vyre_context_trim(context()));
  const vyre_telemetry baseline = Telemetry(context());
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < kCycles; ++i) ASSERT_EQ(cycle(i), "") << "cycle " << i;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("[ info     ] %d cycles in %.1f s\n", kCycles, seconds);
  ASSERT_VYRE_OK(vyre_context_trim(context()));
  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.device_bytes_live, baseline.device_bytes_live);
  EXPECT_EQ(after.pinned_bytes_live, baseline.pinned_bytes_live);
  EXPECT_EQ(after.live_sequences, 0u);
  EXPECT_EQ(after.live_graphs, 0u);
  EXPECT_EQ(after.live_buffers, baseline.live_buffers);
  EXPECT_EQ(after.live_programs, baseline.live_programs);
  EXPECT_EQ(after.sequence_runs - baseline.sequence_runs, uint64_t{kCycles});
  EXPECT_EQ(after.graph_replays - baseline.graph_replays, uint64_t{kCycles});
}

}  // namespace
}  // namespace vyre_test
