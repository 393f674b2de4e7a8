// Graphs on a real GPU (include/vyre_cuda.h, "Graphs: record once, replay
// many times"): recorded dispatches replayed against eager vyre_dispatch on
// fresh data (host and resident bindings, fixpoint iterations, input-output
// bindings, scalars and null pointers through an explicit parameter list,
// dynamic shared memory, a 2-D grid), skipped input uploads, shape checks,
// resident rebinding, capacity classes, the node inventory and kernel node
// updates, asynchronous replays, threads, and 10,000 record/replay/destroy
// cycles that must leave the context's memory where it was.
//
// Every run starts from fresh random non-zero data with its outputs poisoned,
// and every element is compared with a CPU reference.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gpu_test_env.h"
#include "raw_driver.h"

namespace vyre_test {
namespace {


// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

// Threads per block of the vector-add programs below.
constexpr uint32_t kBlock = 256;

std::vector<vyre_binding_decl> AddDecls() {
  return {Decl(VYRE_ROLE_INPUT, 4, "a"), Decl(VYRE_ROLE_INPUT, 4, "b"),
          Decl(VYRE_ROLE_OUTPUT, 4, "out")};
}

// The last error's message has "Fix:" and every one of `needles`.
::testing::AssertionResult LastErrorSays(std::vector<std::string> needles = {}) {
  needles.insert(needles.begin(), "Fix:");
  return MessageContains(LastErrorMessage(), needles);
}

// For refusals the header names without pinning the status: any failure
// whose message carries a Fix passes (the status this engine gave is logged).
::testing::AssertionResult Refused(vyre_status actual, const char* expression) {
  if (actual == VYRE_STATUS_OK) {
    return ::testing::AssertionFailure() << expression << " succeeded; it should be refused";
  }
  const std::string message = LastErrorMessage();
  if (message.find("Fix:") == std::string::npos) {
    return ::testing::AssertionFailure() << expression << " returned "
                                         << vyre_status_name(actual)
                                         << " with a message lacking \"Fix:\": " << message;
  }
  return ::testing::AssertionSuccess();
}
#define EXPECT_REFUSED(expr) EXPECT_TRUE(::vyre_test::Refused((expr), #expr))

vyre_graph_info InfoOf(vyre_graph graph) {
  vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
  EXPECT_TRUE(
      StatusIs(vyre_graph_info_get(graph, &info), VYRE_STATUS_OK, "vyre_graph_info_get"));
  return info;
}

// A replay over `bindings` (kept alive and unmoved by the caller); an empty
// vector passes NULL, which keeps the current resident ranges.
vyre_graph_replay_desc ReplayDesc(const std::vector<vyre_dispatch_binding>& bindings) {
  vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
  desc.bindings = bindings.empty() ? nullptr : bindings.data();
  desc.binding_count = bindings.size();
  return desc;
}

// The node kinds of the whole graph, in order (empty on error).
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

std::string KindNames(const std::vector<vyre_graph_node_kind>& kinds) {
  std::string text;
  for (vyre_graph_node_kind kind : kinds) {
    if (!text.empty()) text += ", ";
    switch (kind) {
      case VYRE_GRAPH_NODE_KERNEL: text += "KERNEL"; break;
      case VYRE_GRAPH_NODE_MEMCPY: text += "MEMCPY"; break;
      case VYRE_GRAPH_NODE_MEMSET: text += "MEMSET"; break;
      case VYRE_GRAPH_NODE_OTHER: text += "OTHER"; break;
      default: text += std::to_string(static_cast<int>(kind)); break;
    }
  }
  return "[" + text + "]";
}

uint32_t Blocks(uint64_t elements, uint32_t threads) {
  return static_cast<uint32_t>((elements + threads - 1) / threads);
}

// A vector add over host memory: a, b in, out a host output. The bindings
// point into the vectors: Refill() regenerates the data and the bindings.
class HostAdd {
 public:
  explicit HostAdd(size_t n) : n_(n), params_{static_cast<uint32_t>(n)} {}
  HostAdd(const HostAdd&) = delete;
  HostAdd& operator=(const HostAdd&) = delete;

  void Refill(RandomSource& rng) {
    a_ = rng.NonZeroU32(n_);
    b_ = rng.NonZeroU32(n_);
    Poison();
  }
  // Poisons out and points the bindings at the current vectors.
  void Poison() {
    out_.assign(n_, kPoisonU32);
    bindings_ = {HostIn(a_.data(), ByteSize(a_)), HostIn(b_.data(), ByteSize(b_)),
                 HostOut(out_.data(), ByteSize(out_))};
  }
  vyre_dispatch_desc Dispatch() const { return DispatchDesc(bindings_, params_); }
  vyre_graph_replay_desc Replay() const { return ReplayDesc(bindings_); }
  ::testing::AssertionResult Check(const char* what) const {
    return AllElementsEqual(out_, [&](size_t i) { return a_[i] + b_[i]; }, what);
  }
  // out[i] = a + b for i < written, 0 (zeroed output) after.
  ::testing::AssertionResult CheckPrefix(size_t written, const char* what) const {
    return AllElementsEqual(
        out_, [&](size_t i) { return i < written ? a_[i] + b_[i] : 0u; }, what);
  }

  size_t n() const { return n_; }
  uint64_t bytes() const { return n_ * sizeof(uint32_t); }
  std::vector<uint32_t>& a() { return a_; }
  std::vector<uint32_t>& b() { return b_; }
  std::vector<uint32_t>& out() { return out_; }
  std::vector<vyre_dispatch_binding>& bindings() { return bindings_; }

 private:
  size_t n_;
  std::vector<uint32_t> params_;
  std::vector<uint32_t> a_, b_, out_;
  std::vector<vyre_dispatch_binding> bindings_;
};

// A vector add over resident buffers of `n` elements, all three bound whole.
class ResidentAdd {
 public:
  ResidentAdd(vyre_context context, size_t n)
      : context_(context), n_(n), params_{static_cast<uint32_t>(n)} {}
  ResidentAdd(const ResidentAdd&) = delete;
  ResidentAdd& operator=(const ResidentAdd&) = delete;

  ::testing::AssertionResult Allocate() {
    for (BufferHandle* buffer : {&a_, &b_, &out_}) {
      ::testing::AssertionResult ok = StatusIs(vyre_buffer_alloc(context_, bytes(), buffer->out()),
                                               VYRE_STATUS_OK, "vyre_buffer_alloc");
      if (!ok) return ok;
    }
    bindings_ = {Resident(a_.get()), Resident(b_.get()), Resident(out_.get())};
    return ::testing::AssertionSuccess();
  }
  // Fresh a and b, poisoned out.
  ::testing::AssertionResult Refill(RandomSource& rng) {
    a_values_ = rng.NonZeroU32(n_);
    b_values_ = rng.NonZeroU32(n_);
    std::vector<uint32_t> poison(n_, kPoisonU32);
    for (auto [buffer, values] : {std::make_pair(&a_, &a_values_), std::make_pair(&b_, &b_values_),
                                  std::make_pair(&out_, &poison)}) {
      ::testing::AssertionResult ok =
          StatusIs(vyre_buffer_upload(buffer->get(), 0, values->data(), bytes()), VYRE_STATUS_OK,
                   "vyre_buffer_upload");
      if (!ok) return ok;
    }
    return ::testing::AssertionSuccess();
  }
  vyre_dispatch_desc Dispatch() const { return DispatchDesc(bindings_, params_); }
  ::testing::AssertionResult Check(const char* what) const {
    std::vector<uint32_t> out;
    ::testing::AssertionResult downloaded = DownloadU32(out_.get(), n_, &out);
    if (!downloaded) return downloaded;
    return AllElementsEqual(out, [&](size_t i) { return a_values_[i] + b_values_[i]; }, what);
  }

  uint64_t bytes() const { return n_ * sizeof(uint32_t); }
  vyre_buffer a() const { return a_.get(); }
  vyre_buffer b() const { return b_.get(); }
  vyre_buffer out() const { return out_.get(); }
  BufferHandle& a_handle() { return a_; }
  BufferHandle& out_handle() { return out_; }
  const std::vector<uint32_t>& a_values() const { return a_values_; }
  const std::vector<uint32_t>& b_values() const { return b_values_; }
  std::vector<vyre_dispatch_binding>& bindings() { return bindings_; }

 private:
  vyre_context context_;
  size_t n_;
  std::vector<uint32_t> params_;
  BufferHandle a_, b_, out_;
  std::vector<uint32_t> a_values_, b_values_;
  std::vector<vyre_dispatch_binding> bindings_;
};

// The first failure any thread saw (threads keep going so none deadlocks).
class FailureLog {
 public:
  void Record(int thread, int iteration, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
    if (first_.empty()) {
      first_ = "thread " + std::to_string(thread) + " iteration " + std::to_string(iteration) +
               ": " + what;
    }
  }
  int count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }
  std::string first() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_;
  }

 private:
  mutable std::mutex mutex_;
  int count_ = 0;
  std::string first_;
};

class GraphTest : public GpuTest {
 protected:
  void CreateAddProgram(ProgramHandle* program) {
    ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32", AddDecls(), kBlock, program));
  }
  void CreateIncProgram(ProgramHandle* program) {
    ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_inc_u32",
                                  {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, kBlock, program));
  }
  // y = a * x + y over u32 with {SCALAR32 0, BINDING 0, BINDING 1, SCALAR64 1,
  // NULL_POINTER, NULL_POINTER}.
  void CreateAxpyProgram(ProgramHandle* program) {
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
    ASSERT_VYRE_OK(vyre_program_create(context(), &desc, program->out()));
  }
  // A second context on the same device.
  void CreateOtherContext(ContextHandle* other) {
    vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
    ASSERT_VYRE_OK(vyre_context_create(&desc, other->out()));
  }
};

// ---------------------------------------------------------------------------
// Replay equals eager dispatch, for several programs, host and resident
// ---------------------------------------------------------------------------

using Contents = std::vector<std::vector<uint32_t>>;  // per binding (empty: SHARED)

struct Data {
  Contents initial;  // OUTPUT bindings: poison
  std::vector<uint64_t> scalars;
};

// A program, how one dispatch of it is shaped, and its CPU reference. All
// data are u32, so every comparison is exact.
struct Case {
  std::string name;
  const char* entry = nullptr;
  std::vector<vyre_binding_decl> decls;
  std::vector<vyre_kernel_param> params;  // empty: default convention
  std::array<uint32_t, 3> workgroup = {kBlock, 1, 1};
  std::vector<size_t> counts;  // elements per binding (0 for SHARED)
  std::vector<uint32_t> param_words;
  std::array<uint32_t, 3> grid = {0, 0, 0};  // all zero: derived
  uint32_t iterations = 1;
  uint32_t dispatch_shared_bytes = 0;
  std::function<std::vector<uint64_t>(RandomSource&)> scalars;  // null: none
  std::function<Contents(const Data&)> reference;  // every binding after one run
};

std::vector<Case> MakeCases() {
  std::vector<Case> cases;
  {
    Case c;
    c.name = "AddU32";
    c.entry = "vyre_test_add_u32";
    c.decls = AddDecls();
    const size_t n = 100003;
    c.counts = {n, n, n};
    c.param_words = {static_cast<uint32_t>(n)};
    c.reference = [](const Data& d) {
      Contents out = d.initial;
      for (size_t i = 0; i < out[2].size(); ++i) out[2][i] = d.initial[0][i] + d.initial[1][i];
      return out;
    };
    cases.push_back(std::move(c));
  }
  {
    Case c;
    c.name = "IncU32InputOutputThreeIterations";
    c.entry = "vyre_test_inc_u32";
    c.decls = {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")};
    const size_t n = 65537;
    c.counts = {n};
    c.param_words = {static_cast<uint32_t>(n)};
    c.iterations = 3;
    c.reference = [](const Data& d) {
      Contents out = d.initial;
      for (uint32_t& v : out[0]) v += 3u;
      return out;
    };
    cases.push_back(std::move(c));
  }
  {
    Case c;
    c.name = "AxpyScalarsAndNullPointers";
    c.entry = "vyre_test_axpy_scratch_u32";
    c.decls = {Decl(VYRE_ROLE_INPUT, 4, "x"), Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "y")};
    c.params = {{VYRE_PARAM_SCALAR32, 0},     {VYRE_PARAM_BINDING, 0},
                {VYRE_PARAM_BINDING, 1},      {VYRE_PARAM_SCALAR64, 1},
                {VYRE_PARAM_NULL_POINTER, 0}, {VYRE_PARAM_NULL_POINTER, 0}};
    const size_t n = 50001;
    c.counts = {n, n};
    // A new multiplier every run (the high half must be ignored by SCALAR32).
    c.scalars = [n](RandomSource& rng) {
      const uint64_t a = (rng.engine()() & 0xFFFFFFFF00000000ull) | rng.NonZeroU32(1)[0];
      return std::vector<uint64_t>{a, static_cast<uint64_t>(n)};
    };
    c.reference = [](const Data& d) {
      Contents out = d.initial;
      const uint32_t a = static_cast<uint32_t>(d.scalars[0]);
      for (size_t i = 0; i < out[1].size(); ++i) out[1][i] = a * d.initial[0][i] + d.initial[1][i];
      return out;
    };
    cases.push_back(std::move(c));
  }
  // Block mirror through extern __shared__ memory: out[i] = in[m] where m is
  // i mirrored inside its block, if m < n; else 0 (the zeroed output).
  auto mirror_reference = [](size_t in_binding, size_t out_binding) {
    return [in_binding, out_binding](const Data& d) {
      Contents out = d.initial;
      const std::vector<uint32_t>& in = d.initial[in_binding];
      const size_t n = in.size();
      for (size_t i = 0; i < n; ++i) {
        const size_t m = (i / kBlock) * kBlock + (kBlock - 1 - i % kBlock);
        out[out_binding][i] = m < n ? in[m] : 0u;
      }
      return out;
    };
  };
  {
    Case c;
    c.name = "DynamicSharedMemoryBinding";
    c.entry = "vyre_test_block_reverse_u32";
    vyre_binding_decl tile = Decl(VYRE_ROLE_SHARED, 4, "tile");
    tile.element_count = kBlock;  // 1 KiB
    c.decls = {Decl(VYRE_ROLE_INPUT, 4, "in"), tile, Decl(VYRE_ROLE_OUTPUT, 4, "out")};
    const size_t n = 10000;  // the last block is partial
    c.counts = {n, 0, n};
    c.param_words = {static_cast<uint32_t>(n), 1};
    c.reference = mirror_reference(0, 2);
    cases.push_back(std::move(c));
  }
  {
    Case c;
    c.name = "DynamicSharedMemory64KiB";
    c.entry = "vyre_test_block_reverse_u32";
    c.decls = {Decl(VYRE_ROLE_INPUT, 4, "in"), Decl(VYRE_ROLE_OUTPUT, 4, "out")};
    const size_t n = 10000;
    c.counts = {n, n};
    c.param_words = {static_cast<uint32_t>(n), 64};
    c.dispatch_shared_bytes = kBlock * 64 * 4;  // over the 48 KiB default: needs the opt-in
    c.reference = mirror_reference(0, 1);
    cases.push_back(std::move(c));
  }
  {
    Case c;
    c.name = "ExplicitGrid2D";
    c.entry = "vyre_test_add_2d_u32";
    c.decls = AddDecls();
    const uint32_t width = 1000, height = 300;
    c.workgroup = {16, 16, 1};
    c.counts = {size_t{width} * height, size_t{width} * height, size_t{width} * height};
    c.param_words = {width, height};
    c.grid = {Blocks(width, 16), Blocks(height, 16), 1};
    c.reference = [width, height](const Data& d) {
      Contents out = d.initial;
      for (uint32_t y = 0; y < height; ++y) {
        for (uint32_t x = 0; x < width; ++x) {
          const size_t i = size_t{y} * width + x;
          out[2][i] = d.initial[0][i] + d.initial[1][i] + (y << 16) + x;
        }
      }
      return out;
    };
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = MakeCases();
  return cases;
}

Data MakeData(const Case& c, RandomSource& rng) {
  Data d;
  for (size_t i = 0; i < c.decls.size(); ++i) {
    const vyre_binding_role role = c.decls[i].role;
    if (role == VYRE_ROLE_SHARED) {
      d.initial.emplace_back();
    } else if (role == VYRE_ROLE_OUTPUT) {
      d.initial.emplace_back(c.counts[i], kPoisonU32);
    } else {
      d.initial.push_back(rng.NonZeroU32(c.counts[i]));
    }
  }
  if (c.scalars) d.scalars = c.scalars(rng);
  return d;
}

::testing::AssertionResult CreateCaseProgram(vyre_context context, const Case& c,
                                             ProgramHandle* program) {
  vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
  desc.code = vyre_gpu_test_kernels_ptx;
  desc.entry = c.entry;
  desc.bindings = c.decls.data();
  desc.binding_count = c.decls.size();
  for (int a = 0; a < 3; ++a) desc.workgroup_size[a] = c.workgroup[a];
  desc.params = c.params.empty() ? nullptr : c.params.data();
  desc.param_count = c.params.size();
  return StatusIs(vyre_program_create(context, &desc, program->out()), VYRE_STATUS_OK,
                  "vyre_program_create");
}

enum class Placement { kHost, kResident };

// Puts a case's data where one run reads it (host arrays or resident
// buffers) and collects every binding's contents afterwards.
class CaseRunner {
 public:
  CaseRunner(vyre_context context, const Case& c, Placement placement)
      : context_(context), case_(c), placement_(placement) {}

  ::testing::AssertionResult Allocate() {
    buffers_.resize(case_.decls.size());
    if (placement_ == Placement::kHost) return ::testing::AssertionSuccess();
    for (size_t i = 0; i < case_.decls.size(); ++i) {
      if (case_.decls[i].role == VYRE_ROLE_SHARED) continue;
      ::testing::AssertionResult ok =
          StatusIs(vyre_buffer_alloc(context_, case_.counts[i] * 4, buffers_[i].out()),
                   VYRE_STATUS_OK, "vyre_buffer_alloc");
      if (!ok) return ok;
    }
    return ::testing::AssertionSuccess();
  }

  // Stages `data` and builds the bindings of one run. Host outputs (and the
  // output side of host INPUT_OUTPUT bindings) are separate poisoned arrays.
  ::testing::AssertionResult Stage(const Data& data) {
    bindings_.clear();
    inputs_ = data.initial;
    outputs_.assign(case_.decls.size(), {});
    for (size_t i = 0; i < case_.decls.size(); ++i) {
      const vyre_binding_role role = case_.decls[i].role;
      if (role == VYRE_ROLE_SHARED) {
        bindings_.push_back(VYRE_DISPATCH_BINDING_INIT);
        continue;
      }
      const uint64_t bytes = case_.counts[i] * 4;
      if (placement_ == Placement::kResident) {
        ::testing::AssertionResult ok =
            StatusIs(vyre_buffer_upload(buffers_[i].get(), 0, inputs_[i].data(), bytes),
                     VYRE_STATUS_OK, "vyre_buffer_upload");
        if (!ok) return ok;
        bindings_.push_back(Resident(buffers_[i].get()));
        continue;
      }
      vyre_dispatch_binding binding = HostIn(nullptr, bytes);
      if (role != VYRE_ROLE_OUTPUT) binding.host_input = inputs_[i].data();
      if (role != VYRE_ROLE_INPUT) {
        outputs_[i].assign(case_.counts[i], kPoisonU32);
        binding.host_output = outputs_[i].data();
      }
      bindings_.push_back(binding);
    }
    return ::testing::AssertionSuccess();
  }

  vyre_dispatch_desc Dispatch(const Data& data) const {
    vyre_dispatch_desc desc = DispatchDesc(bindings_, case_.param_words);
    desc.scalars = data.scalars.empty() ? nullptr : data.scalars.data();
    desc.scalar_count = data.scalars.size();
    for (int a = 0; a < 3; ++a) desc.grid[a] = case_.grid[a];
    desc.fixpoint_iterations = case_.iterations;
    desc.shared_memory_bytes = case_.dispatch_shared_bytes;
    return desc;
  }

  // Every binding's contents now: host inputs as the library left them, host
  // outputs, or the resident buffers.
  ::testing::AssertionResult Collect(Contents* out) {
    out->assign(case_.decls.size(), {});
    for (size_t i = 0; i < case_.decls.size(); ++i) {
      const vyre_binding_role role = case_.decls[i].role;
      if (role == VYRE_ROLE_SHARED) continue;
      if (placement_ == Placement::kResident) {
        ::testing::AssertionResult ok = DownloadU32(buffers_[i].get(), case_.counts[i], &(*out)[i]);
        if (!ok) return ok;
      } else {
        (*out)[i] = role == VYRE_ROLE_INPUT ? inputs_[i] : outputs_[i];
      }
    }
    return ::testing::AssertionSuccess();
  }

  const std::vector<vyre_dispatch_binding>& bindings() const { return bindings_; }

 private:
  vyre_context context_;
  const Case& case_;
  Placement placement_;
  std::vector<BufferHandle> buffers_;
  Contents inputs_, outputs_;
  std::vector<vyre_dispatch_binding> bindings_;
};

::testing::AssertionResult SameContents(const Case& c, const Contents& actual,
                                        const Contents& expected, const std::string& what) {
  for (size_t i = 0; i < c.decls.size(); ++i) {
    if (c.decls[i].role == VYRE_ROLE_SHARED) continue;
    if (actual[i].size() != expected[i].size()) {
      return ::testing::AssertionFailure() << what << ", binding " << i << ": "
                                           << actual[i].size() << " elements, want "
                                           << expected[i].size();
    }
    const std::string name = what + ", binding " + std::to_string(i) + " ('" +
                             c.decls[i].name + "')";
    ::testing::AssertionResult same =
        AllElementsEqual(actual[i], [&](size_t k) { return expected[i][k]; }, name.c_str());
    if (!same) return same;
  }
  return ::testing::AssertionSuccess();
}

constexpr int kReplaysPerCase = 16;

class ReplayMatchesEagerTest
    : public GpuTest,
      public ::testing::WithParamInterface<std::tuple<size_t, Placement>> {};

TEST_P(ReplayMatchesEagerTest, FreshDataEveryReplay) {
  const Case& c = Cases()[std::get<0>(GetParam())];
  const Placement placement = std::get<1>(GetParam());
  if (c.dispatch_shared_bytes > device().max_shared_memory_per_block) {
    VYRE_GPU_SKIP_OR_FAIL(c.dispatch_shared_bytes << " bytes of shared memory exceed the "
                          << "device's " << device().max_shared_memory_per_block);
  }
  ProgramHandle program;
  ASSERT_TRUE(CreateCaseProgram(context(), c, &program));
  CaseRunner runner(context(), c, placement);
  ASSERT_TRUE(runner.Allocate());

  // Record from sample data that no replay uses. Recording launches nothing.
  const Data sample = MakeData(c, rng());
  ASSERT_TRUE(runner.Stage(sample));
  const vyre_dispatch_desc record = runner.Dispatch(sample);
  const vyre_telemetry before_record = Telemetry(context());
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));
  const vyre_telemetry after_record = Telemetry(context());
  EXPECT_EQ(after_record.kernel_launches, before_record.kernel_launches);
  EXPECT_EQ(after_record.graph_records - before_record.graph_records, 1u);
  EXPECT_EQ(after_record.live_graphs - before_record.live_graphs, 1u);
  {
    Contents untouched;
    ASSERT_TRUE(runner.Collect(&untouched));
    Contents expected = sample.initial;
    if (placement == Placement::kHost) {
      for (size_t i = 0; i < c.decls.size(); ++i) {
        if (c.decls[i].role == VYRE_ROLE_INPUT_OUTPUT) expected[i].assign(c.counts[i], kPoisonU32);
      }
    }
    EXPECT_TRUE(SameContents(c, untouched, expected, "after recording (nothing ran)"));
  }

  for (int r = 0; r < kReplaysPerCase; ++r) {
    const Data data = MakeData(c, rng());
    const Contents expected = c.reference(data);
    const std::string run = "replay " + std::to_string(r);

    // Eager.
    ASSERT_TRUE(runner.Stage(data));
    const vyre_dispatch_desc eager = runner.Dispatch(data);
    ASSERT_VYRE_OK(vyre_dispatch(program.get(), &eager, nullptr));
    Contents eager_result;
    ASSERT_TRUE(runner.Collect(&eager_result));
    EXPECT_TRUE(SameContents(c, eager_result, expected, "eager dispatch before " + run));

    // Replay of the same data. Resident graphs alternate between keeping
    // their bindings (NULL) and passing the same ranges again.
    ASSERT_TRUE(runner.Stage(data));
    vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
    if (placement == Placement::kHost || r % 2 == 1) {
      replay.bindings = runner.bindings().data();
      replay.binding_count = runner.bindings().size();
    }
    replay.scalars = data.scalars.empty() ? nullptr : data.scalars.data();
    replay.scalar_count = data.scalars.size();
    const vyre_telemetry before = Telemetry(context());
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &replay, nullptr));
    const vyre_telemetry after = Telemetry(context());
    EXPECT_EQ(after.graph_replays - before.graph_replays, 1u);
    EXPECT_EQ(after.graph_launches - before.graph_launches, 1u);
    EXPECT_EQ(after.kernel_launches - before.kernel_launches, c.iterations);
    Contents replay_result;
    ASSERT_TRUE(runner.Collect(&replay_result));
    EXPECT_TRUE(SameContents(c, replay_result, expected, run));
    EXPECT_TRUE(SameContents(c, replay_result, eager_result, run + " against the eager result"));
    if (HasFailure()) break;
  }
  EXPECT_EQ(InfoOf(graph.get()).replays, static_cast<uint64_t>(kReplaysPerCase));
}

INSTANTIATE_TEST_SUITE_P(
    Programs, ReplayMatchesEagerTest,
    ::testing::Combine(::testing::Range(size_t{0}, Cases().size()),
                       ::testing::Values(Placement::kHost, Placement::kResident)),
    [](const ::testing::TestParamInfo<std::tuple<size_t, Placement>>& info) {
      return Cases()[std::get<0>(info.param)].name +
             (std::get<1>(info.param) == Placement::kHost ? "_Host" : "_Resident");
    });

// ---------------------------------------------------------------------------
// Skipped uploads
// ---------------------------------------------------------------------------

// Identical host input bytes to the previous replay run the graph without
// input copies: no H2D byte moves, yet the outputs are right. Changed inputs
// move exactly the recorded input bytes.
TEST_F(GraphTest, UnchangedInputsMoveNoBytes) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  HostAdd add(65536 + 77);
  add.Refill(rng());
  const vyre_dispatch_desc record = add.Dispatch();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));
  const vyre_graph_info info = InfoOf(graph.get());
  EXPECT_EQ(info.host_input_bytes, 2 * add.bytes());
  EXPECT_EQ(info.host_output_bytes, add.bytes());

  struct Expect {
    const char* what;
    bool skipped;
  };
  auto replay = [&](const Expect& expect) {
    SCOPED_TRACE(expect.what);
    add.Poison();
    const vyre_graph_replay_desc desc = add.Replay();
    const vyre_telemetry before = Telemetry(context());
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
    const vyre_telemetry after = Telemetry(context());
    EXPECT_EQ(after.graph_uploads_skipped - before.graph_uploads_skipped,
              expect.skipped ? 1u : 0u);
    EXPECT_EQ(after.h2d_bytes - before.h2d_bytes, expect.skipped ? 0u : 2 * add.bytes());
    EXPECT_EQ(after.d2h_bytes - before.d2h_bytes, add.bytes());
    EXPECT_EQ(after.kernel_launches - before.kernel_launches, 1u);
    EXPECT_EQ(after.graph_replays - before.graph_replays, 1u);
    EXPECT_TRUE(add.Check("a + b"));
  };

  // The first replay has no previous one, even with the recorded sample bytes.
  ASSERT_NO_FATAL_FAILURE(replay({"first replay, the sample inputs", false}));
  ASSERT_NO_FATAL_FAILURE(replay({"same bytes again", true}));
  ASSERT_NO_FATAL_FAILURE(replay({"and again", true}));

  // Equal bytes in other arrays are still unchanged inputs.
  std::vector<uint32_t> a_copy = add.a(), b_copy = add.b();
  add.a().swap(a_copy);
  add.b().swap(b_copy);
  ASSERT_NO_FATAL_FAILURE(replay({"equal bytes at other addresses", true}));

  // One changed element of b: the full graph runs and both inputs go up.
  add.b()[add.n() / 2] ^= 0x10u;
  ASSERT_NO_FATAL_FAILURE(replay({"one element of b changed", false}));
  ASSERT_NO_FATAL_FAILURE(replay({"unchanged after the change", true}));

  // Fresh data.
  add.Refill(rng());
  ASSERT_NO_FATAL_FAILURE(replay({"fresh data", false}));
  ASSERT_NO_FATAL_FAILURE(replay({"fresh data, unchanged", true}));
  EXPECT_GT(InfoOf(graph.get()).unchanged_input_node_count, 0u);
}

// A host INPUT_OUTPUT binding is overwritten on the device by every run, so
// its input must go up every time even when the bytes are the same.
TEST_F(GraphTest, InputOutputBindingsAlwaysUpload) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateIncProgram(&program));
  const size_t n = 10007;
  const std::vector<uint32_t> input = rng().NonZeroU32(n);
  std::vector<uint32_t> output(n, kPoisonU32);
  vyre_dispatch_binding binding = HostIn(input.data(), ByteSize(input));
  binding.host_output = output.data();
  const std::vector<vyre_dispatch_binding> bindings = {binding};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const vyre_dispatch_desc record = DispatchDesc(bindings, params);
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));

  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("replay " + std::to_string(r));
    output.assign(n, kPoisonU32);  // same size: the binding's pointer stays valid
    const vyre_graph_replay_desc desc = ReplayDesc(bindings);
    const vyre_telemetry before = Telemetry(context());
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
    const vyre_telemetry after = Telemetry(context());
    EXPECT_EQ(after.graph_uploads_skipped - before.graph_uploads_skipped, 0u);
    EXPECT_EQ(after.h2d_bytes - before.h2d_bytes, ByteSize(input));
    EXPECT_TRUE(AllElementsEqual(output, [&](size_t i) { return input[i] + 1u; },
                                 "input + 1 (not + replays)"));
  }

  // In place (host_input == host_output): each replay reads the previous
  // result back in.
  std::vector<uint32_t> data = input;
  const std::vector<vyre_dispatch_binding> in_place = {HostInOut(data.data(), ByteSize(data))};
  for (uint32_t r = 1; r <= 3; ++r) {
    SCOPED_TRACE("in place, replay " + std::to_string(r));
    const vyre_graph_replay_desc desc = ReplayDesc(in_place);
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_TRUE(AllElementsEqual(data, [&](size_t i) { return input[i] + r; }, "input + r"));
  }
}

// A graph with HOST inputs and a RESIDENT output: rebinding the output while
// the inputs are unchanged updates the graph without input copies too.
TEST_F(GraphTest, MixedGraphRebindsOutputWhileInputsAreUnchanged) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  const size_t n = 12345;
  const std::vector<uint32_t> a = rng().NonZeroU32(n), b = rng().NonZeroU32(n);
  const std::vector<uint32_t> poison(n, kPoisonU32);
  BufferHandle out[3];
  for (BufferHandle& buffer : out) ASSERT_TRUE(CreateBufferWith(context(), poison, &buffer));
  auto bindings_for = [&](int k) {
    return std::vector<vyre_dispatch_binding>{HostIn(a.data(), n * 4), HostIn(b.data(), n * 4),
                                              Resident(out[k].get())};
  };
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const std::vector<vyre_dispatch_binding> recorded = bindings_for(0);
  const vyre_dispatch_desc record = DispatchDesc(recorded, params);
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));
  EXPECT_EQ(NodeKinds(graph.get()),
            (std::vector<vyre_graph_node_kind>{VYRE_GRAPH_NODE_MEMCPY, VYRE_GRAPH_NODE_MEMCPY,
                                               VYRE_GRAPH_NODE_MEMSET, VYRE_GRAPH_NODE_KERNEL}));

  for (int k : {0, 1, 2, 1}) {
    SCOPED_TRACE("output buffer " + std::to_string(k));
    for (BufferHandle& buffer : out) {
      ASSERT_VYRE_OK(vyre_buffer_upload(buffer.get(), 0, poison.data(), n * 4));
    }
    const std::vector<vyre_dispatch_binding> bindings = bindings_for(k);
    const vyre_graph_replay_desc desc = ReplayDesc(bindings);
    const vyre_telemetry before = Telemetry(context());
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_EQ(Telemetry(context()).graph_uploads_skipped - before.graph_uploads_skipped,
              k == 0 ? 0u : 1u);
    for (int j = 0; j < 3; ++j) {
      std::vector<uint32_t> got;
      ASSERT_TRUE(DownloadU32(out[j].get(), n, &got));
      EXPECT_TRUE(AllElementsEqual(
          got, [&](size_t i) { return j == k ? a[i] + b[i] : kPoisonU32; },
          j == k ? "the bound output" : "an output not bound this time"));
    }
  }
}

// ---------------------------------------------------------------------------
// Shapes, sources and rebinding
// ---------------------------------------------------------------------------

TEST_F(GraphTest, OtherHostBytesAreShapeMismatch) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  HostAdd add(4099);
  add.Refill(rng());
  const vyre_dispatch_desc record = add.Dispatch();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));

  // Larger arrays, so that a longer host_bytes stays inside host memory.
  std::vector<uint32_t> big_a = add.a(), big_b = add.b(), big_out(add.n() + 64, kPoisonU32);
  big_a.resize(add.n() + 64, 7u);
  big_b.resize(add.n() + 64, 7u);
  const uint64_t bytes = add.bytes();
  for (const auto& [binding, host_bytes] :
       {std::make_pair(0, bytes - 4), std::make_pair(1, bytes + 4), std::make_pair(2, bytes + 256),
        std::make_pair(0, bytes / 2), std::make_pair(2, uint64_t{4})}) {
    SCOPED_TRACE("binding " + std::to_string(binding) + " with " + std::to_string(host_bytes) +
                 " bytes");
    std::vector<vyre_dispatch_binding> bindings = {HostIn(big_a.data(), bytes),
                                                   HostIn(big_b.data(), bytes),
                                                   HostOut(big_out.data(), bytes)};
    bindings[binding].host_bytes = host_bytes;
    const vyre_graph_replay_desc desc = ReplayDesc(bindings);
    EXPECT_VYRE_STATUS(VYRE_STATUS_SHAPE_MISMATCH, vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_TRUE(LastErrorSays({"record", "again"}));
    EXPECT_TRUE(AllElementsEqual(big_out, [](size_t) { return kPoisonU32; },
                                 "nothing written by a refused replay"));
  }

  // Another binding count, another source.
  {
    std::vector<vyre_dispatch_binding> two = {add.bindings()[0], add.bindings()[1]};
    const vyre_graph_replay_desc desc = ReplayDesc(two);
    EXPECT_VYRE_STATUS(VYRE_STATUS_SHAPE_MISMATCH, vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_TRUE(LastErrorSays());
  }
  {
    BufferHandle buffer;
    ASSERT_TRUE(CreateBufferWith(context(), add.a(), &buffer));
    std::vector<vyre_dispatch_binding> bindings = add.bindings();
    bindings[0] = Resident(buffer.get());
    const vyre_graph_replay_desc desc = ReplayDesc(bindings);
    EXPECT_VYRE_STATUS(VYRE_STATUS_SHAPE_MISMATCH, vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_TRUE(LastErrorSays({"record"}));
  }
  // A graph with HOST bindings always needs them.
  EXPECT_REFUSED(vyre_graph_replay(graph.get(), nullptr, nullptr));

  // The refusals changed nothing: a proper replay still works.
  add.Refill(rng());
  const vyre_graph_replay_desc desc = add.Replay();
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
  EXPECT_TRUE(add.Check("a + b after the refusals"));
  EXPECT_EQ(InfoOf(graph.get()).replays, 1u);
}

// A resident graph rebound to other buffers (and to ranges inside larger
// ones) writes there, keeps the new ranges for later replays, and leaves the
// old buffers alone.
// vyre_graph_launch on a stream of other CUDA code: ~2 ms of memsets, then a
// memset of input a, are enqueued on the caller's stream before the launch,
// and the read-back of out after it, on the same stream; the stream is
// synchronised, not the pending. A graph not ordered after the stream reads
// the old a; a read-back not ordered after the graph reads the poison.
TEST_F(GraphTest, LaunchOnACallersStreamIsOrderedBothWays) {
  RawPrimaryContext raw(static_cast<int>(device().ordinal));
  ASSERT_TRUE(raw.ok()) << raw.error();
  const RawDriver& cu = raw.api();
  CUstream stream = nullptr;
  ASSERT_EQ(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr scratch = 0;
  const size_t scratch_words = size_t{64} << 20;  // 256 MiB
  ASSERT_EQ(cu.cuMemAlloc(&scratch, scratch_words * 4), CUDA_SUCCESS);
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  const size_t n = 1 << 20;
  ResidentAdd add(context(), n);
  ASSERT_TRUE(add.Allocate());
  const vyre_dispatch_desc record = add.Dispatch();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));
  vyre_buffer_info a_info = VYRE_BUFFER_INFO_INIT, out_info = VYRE_BUFFER_INFO_INIT;
  ASSERT_VYRE_OK(vyre_buffer_info_get(add.a(), &a_info));
  ASSERT_VYRE_OK(vyre_buffer_info_get(add.out(), &out_info));
  for (uint32_t round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    ASSERT_TRUE(add.Refill(rng()));
    const uint32_t a_value = 0x01010101u * (round + 3);
    for (int k = 0; k < 8; ++k) {
      ASSERT_EQ(cu.cuMemsetD32Async(scratch, k, scratch_words, stream), CUDA_SUCCESS);
    }
    ASSERT_EQ(cu.cuMemsetD32Async(a_info.device_pointer, a_value, n, stream), CUDA_SUCCESS);
    vyre_pending pending{0};
    ASSERT_VYRE_OK(vyre_graph_launch(graph.get(), nullptr, reinterpret_cast<uint64_t>(stream),
                                     &pending));
    std::vector<uint32_t> out(n, 0);
    ASSERT_EQ(cu.cuMemcpyDtoHAsync(out.data(), out_info.device_pointer, n * 4, stream),
              CUDA_SUCCESS);
    ASSERT_EQ(cu.cuStreamSynchronize(stream), CUDA_SUCCESS);
    EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return a_value + add.b_values()[i]; },
                                 "out read back on the caller's stream"));
    ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
    ASSERT_VYRE_OK(vyre_pending_release(pending));
  }
  EXPECT_EQ(cu.cuMemFree(scratch), CUDA_SUCCESS);
  EXPECT_EQ(cu.cuStreamDestroy(stream), CUDA_SUCCESS);
}

// vyre_graph_node_info_get on a real driver: the memset's destination and
// the kernel's pointer arguments follow a rebinding replay, whose results are
// checked; the raw handles are the driver's.
TEST_F(GraphTest, NodeInfoFollowsRebinding) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  const size_t n = 4099;
  ResidentAdd first(context(), n), second(context(), n);
  ASSERT_TRUE(first.Allocate());
  ASSERT_TRUE(second.Allocate());
  ASSERT_TRUE(first.Refill(rng()));
  ASSERT_TRUE(second.Refill(rng()));
  const vyre_dispatch_desc record = first.Dispatch();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));
  auto pointer = [](vyre_buffer b) {
    vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
    EXPECT_VYRE_OK(vyre_buffer_info_get(b, &info));
    return info.device_pointer;
  };
  for (ResidentAdd* bound : {&first, &second}) {
    if (bound == &second) {
      const vyre_graph_replay_desc desc = ReplayDesc(second.bindings());
      ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
      EXPECT_TRUE(second.Check("rebound replay"));
    }
    vyre_graph_node_info set = VYRE_GRAPH_NODE_INFO_INIT, kernel = VYRE_GRAPH_NODE_INFO_INIT;
    ASSERT_VYRE_OK(vyre_graph_node_info_get(graph.get(), 0, &set));
    ASSERT_VYRE_OK(vyre_graph_node_info_get(graph.get(), 1, &kernel));
    EXPECT_EQ(set.kind, VYRE_GRAPH_NODE_MEMSET);
    EXPECT_EQ(set.memset_dst, pointer(bound->out()));
    EXPECT_EQ(set.memset_width, n * 4);
    EXPECT_EQ(kernel.kind, VYRE_GRAPH_NODE_KERNEL);
    EXPECT_NE(kernel.cu_function, 0u);
    EXPECT_EQ(kernel.arguments[0], pointer(bound->a()));
    EXPECT_EQ(kernel.arguments[1], pointer(bound->b()));
    EXPECT_EQ(kernel.arguments[2], pointer(bound->out()));
    EXPECT_GE(uint64_t{kernel.grid[0]} * kernel.block[0], n);
    EXPECT_NE(kernel.cu_graph_node, 0u);
    EXPECT_EQ(kernel.cu_graph_exec, set.cu_graph_exec);
  }
}

TEST_F(GraphTest, ResidentGraphRebindsToOtherBuffers) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  const size_t n = 30011;
  ResidentAdd first(context(), n), second(context(), n);
  ASSERT_TRUE(first.Allocate());
  ASSERT_TRUE(second.Allocate());
  ASSERT_TRUE(first.Refill(rng()));
  const vyre_dispatch_desc record = first.Dispatch();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));

  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
  EXPECT_TRUE(first.Check("first buffers"));

  // Rebind to the second set; the first set's output must keep its result.
  ASSERT_TRUE(second.Refill(rng()));
  {
    const vyre_graph_replay_desc desc = ReplayDesc(second.bindings());
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
  }
  EXPECT_TRUE(second.Check("second buffers"));
  EXPECT_TRUE(first.Check("first buffers untouched by the rebound replay"));

  // The new ranges persist: a replay with NULL uses the second set.
  ASSERT_TRUE(second.Refill(rng()));
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
  EXPECT_TRUE(second.Check("second buffers, bindings kept"));
  EXPECT_TRUE(first.Check("first buffers still untouched"));

  // Ranges at an offset inside larger buffers; guard elements stay as they were.
  const size_t before = 64, after = 192;
  const size_t total = before + n + after;
  std::vector<std::vector<uint32_t>> initial;
  BufferHandle big[3];
  for (BufferHandle& buffer : big) {
    initial.push_back(rng().NonZeroU32(total));
    ASSERT_TRUE(CreateBufferWith(context(), initial.back(), &buffer));
  }
  const std::vector<vyre_dispatch_binding> offset_bindings = {
      Resident(big[0].get(), before * 4, n * 4), Resident(big[1].get(), before * 4, n * 4),
      Resident(big[2].get(), before * 4, n * 4)};
  {
    const vyre_graph_replay_desc desc = ReplayDesc(offset_bindings);
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
  }
  for (int k = 0; k < 3; ++k) {
    std::vector<uint32_t> got;
    ASSERT_TRUE(DownloadU32(big[k].get(), total, &got));
    EXPECT_TRUE(AllElementsEqual(
        got,
        [&](size_t i) {
          if (k < 2 || i < before || i >= before + n) return initial[k][i];
          return initial[0][i] + initial[1][i];
        },
        k < 2 ? "input buffer at an offset" : "output range at an offset, guards untouched"));
  }

  // And back to the first set, with fresh data.
  ASSERT_TRUE(first.Refill(rng()));
  {
    const vyre_graph_replay_desc desc = ReplayDesc(first.bindings());
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
  }
  EXPECT_TRUE(first.Check("first buffers again"));
}

// Refused rebindings change nothing: the graph keeps replaying with the
// ranges it had.
TEST_F(GraphTest, ResidentRebindRefusals) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  const size_t n = 8192 + 5;
  ResidentAdd add(context(), n);
  ASSERT_TRUE(add.Allocate());
  ASSERT_TRUE(add.Refill(rng()));
  const vyre_dispatch_desc record = add.Dispatch();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));

  BufferHandle small, large;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), add.bytes() - 4, small.out()));
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), add.bytes() * 2, large.out()));
  ContextHandle other;
  ASSERT_NO_FATAL_FAILURE(CreateOtherContext(&other));
  BufferHandle foreign;
  ASSERT_VYRE_OK(vyre_buffer_alloc(other.get(), add.bytes(), foreign.out()));

  auto with = [&](size_t index, vyre_dispatch_binding binding) {
    std::vector<vyre_dispatch_binding> bindings = add.bindings();
    bindings[index] = binding;
    return bindings;
  };
  {
    SCOPED_TRACE("a smaller buffer for the output");
    const auto bindings = with(2, Resident(small.get()));
    const vyre_graph_replay_desc desc = ReplayDesc(bindings);
    EXPECT_REFUSED(vyre_graph_replay(graph.get(), &desc, nullptr));
  }
  {
    SCOPED_TRACE("a range one element short of a larger buffer");
    const auto bindings = with(0, Resident(large.get(), 0, add.bytes() - 4));
    const vyre_graph_replay_desc desc = ReplayDesc(bindings);
    EXPECT_REFUSED(vyre_graph_replay(graph.get(), &desc, nullptr));
  }
  {
    SCOPED_TRACE("a buffer of another context");
    const auto bindings = with(1, Resident(foreign.get()));
    const vyre_graph_replay_desc desc = ReplayDesc(bindings);
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_TRUE(LastErrorSays({"context"}));
  }
  {
    SCOPED_TRACE("a range past the buffer's end");
    const auto bindings = with(0, Resident(large.get(), add.bytes() + 8, add.bytes()));
    const vyre_graph_replay_desc desc = ReplayDesc(bindings);
    EXPECT_VYRE_STATUS(VYRE_STATUS_OUT_OF_RANGE, vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_TRUE(LastErrorSays());
  }
  {
    SCOPED_TRACE("an offset that is not a multiple of the element size");
    const auto bindings = with(0, Resident(large.get(), 2, add.bytes()));
    const vyre_graph_replay_desc desc = ReplayDesc(bindings);
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_TRUE(LastErrorSays());
  }
  {
    SCOPED_TRACE("a forged buffer handle");
    vyre_buffer forged{0x1234567890ull};
    const auto bindings = with(2, Resident(forged));
    const vyre_graph_replay_desc desc = ReplayDesc(bindings);
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_HANDLE, vyre_graph_replay(graph.get(), &desc, nullptr));
  }
  {
    SCOPED_TRACE("a larger range is fine");
    std::vector<uint32_t> poison(2 * n, kPoisonU32);
    ASSERT_VYRE_OK(vyre_buffer_upload(large.get(), 0, poison.data(), ByteSize(poison)));
    const auto bindings = with(2, Resident(large.get()));
    const vyre_graph_replay_desc desc = ReplayDesc(bindings);
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
    std::vector<uint32_t> got;
    ASSERT_TRUE(DownloadU32(large.get(), 2 * n, &got));
    // The whole bound range is an OUTPUT: zeroed, then the first n written.
    EXPECT_TRUE(AllElementsEqual(
        got, [&](size_t i) { return i < n ? add.a_values()[i] + add.b_values()[i] : 0u; },
        "a + b, then the zeroed rest of the larger output range"));
  }

  // The graph still replays with its own buffers.
  ASSERT_TRUE(add.Refill(rng()));
  const vyre_graph_replay_desc desc = ReplayDesc(add.bindings());
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
  EXPECT_TRUE(add.Check("own buffers after the refusals"));
}

// Freeing a buffer the graph uses makes its next replay STALE_HANDLE until
// the binding is rebound; then it works and lets the freed memory go.
TEST_F(GraphTest, FreedBufferIsStaleUntilRebound) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  const size_t n = 20000;
  ResidentAdd add(context(), n);
  ASSERT_TRUE(add.Allocate());
  ASSERT_TRUE(add.Refill(rng()));
  const vyre_dispatch_desc record = add.Dispatch();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
  EXPECT_TRUE(add.Check("before the free"));

  const vyre_buffer freed = add.out_handle().release();
  ASSERT_VYRE_OK(vyre_buffer_free(freed));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_replay(graph.get(), nullptr, nullptr));
  EXPECT_TRUE(LastErrorSays({"rebind"}));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_replay(graph.get(), nullptr, nullptr))
      << "still stale on a second try";
  {
    vyre_pending pending{0};
    EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE,
                       vyre_graph_replay_async(graph.get(), nullptr, &pending));
    EXPECT_EQ(pending.bits, 0u);
  }
  {
    // Passing the freed handle itself.
    const std::vector<vyre_dispatch_binding> bindings = {Resident(add.a()), Resident(add.b()),
                                                         Resident(freed)};
    const vyre_graph_replay_desc desc = ReplayDesc(bindings);
    EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_replay(graph.get(), &desc, nullptr));
  }

  const vyre_telemetry before_rebind = Telemetry(context());
  BufferHandle replacement;
  ASSERT_TRUE(CreateBufferWith(context(), std::vector<uint32_t>(n, kPoisonU32), &replacement));
  const std::vector<vyre_dispatch_binding> bindings = {Resident(add.a()), Resident(add.b()),
                                                       Resident(replacement.get())};
  const vyre_graph_replay_desc desc = ReplayDesc(bindings);
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(replacement.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(
      out, [&](size_t i) { return add.a_values()[i] + add.b_values()[i]; }, "rebound output"));
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr)) << "the new binding persists";

  // Once rebound, nothing holds the freed buffer: its memory is gone and the
  // replacement's is the only new allocation.
  const vyre_telemetry after_rebind = Telemetry(context());
  EXPECT_EQ(after_rebind.device_bytes_live, before_rebind.device_bytes_live)
      << "replacement allocated (+" << add.bytes() << "), freed buffer released (-"
      << add.bytes() << ")";
  EXPECT_EQ(after_rebind.live_buffers, before_rebind.live_buffers);

  // Freeing an input works the same way.
  BufferHandle a_copy;
  ASSERT_TRUE(CreateBufferWith(context(), add.a_values(), &a_copy));
  ASSERT_VYRE_OK(vyre_buffer_free(add.a_handle().release()));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_replay(graph.get(), nullptr, nullptr));
  std::vector<vyre_dispatch_binding> rebound = bindings;
  rebound[0] = Resident(a_copy.get());
  const vyre_graph_replay_desc rebind_a = ReplayDesc(rebound);
  const std::vector<uint32_t> poison(n, kPoisonU32);
  ASSERT_VYRE_OK(vyre_buffer_upload(replacement.get(), 0, poison.data(), n * 4));
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &rebind_a, nullptr));
  ASSERT_TRUE(DownloadU32(replacement.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(
      out, [&](size_t i) { return add.a_values()[i] + add.b_values()[i]; },
      "output after rebinding the freed input"));
}

// ---------------------------------------------------------------------------
// Capacity classes and the derived grid
// ---------------------------------------------------------------------------

// Recorded at n0, replayable at any count up to the next power of two of n0.
// Each replay binds ranges of exactly n elements (inside buffers sized for
// the capacity) and passes n as the kernel's bound: exactly the first n
// output elements are written and the rest keep their poison.
TEST_F(GraphTest, CapacityClassReplaysAtOtherElementCounts) {
  constexpr size_t kCapacity = 4096;
  constexpr size_t kRecorded = 3001;  // next power of two: 4096
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  BufferHandle a, b, out;
  for (BufferHandle* buffer : {&a, &b, &out}) {
    ASSERT_VYRE_OK(vyre_buffer_alloc(context(), kCapacity * 4, buffer->out()));
  }
  std::vector<uint32_t> a_values, b_values;
  auto refill = [&] {
    a_values = rng().NonZeroU32(kCapacity);
    b_values = rng().NonZeroU32(kCapacity);
    const std::vector<uint32_t> poison(kCapacity, kPoisonU32);
    ASSERT_VYRE_OK(vyre_buffer_upload(a.get(), 0, a_values.data(), kCapacity * 4));
    ASSERT_VYRE_OK(vyre_buffer_upload(b.get(), 0, b_values.data(), kCapacity * 4));
    ASSERT_VYRE_OK(vyre_buffer_upload(out.get(), 0, poison.data(), kCapacity * 4));
  };
  auto check = [&](size_t n, const std::string& what) {
    std::vector<uint32_t> got;
    ASSERT_TRUE(DownloadU32(out.get(), kCapacity, &got));
    EXPECT_TRUE(AllElementsEqual(
        got, [&](size_t i) { return i < n ? a_values[i] + b_values[i] : kPoisonU32; },
        what.c_str()));
  };
  auto ranges = [&](size_t n) {
    return std::vector<vyre_dispatch_binding>{Resident(a.get(), 0, n * 4),
                                              Resident(b.get(), 0, n * 4),
                                              Resident(out.get(), 0, n * 4)};
  };

  ASSERT_NO_FATAL_FAILURE(refill());
  const std::vector<vyre_dispatch_binding> recorded = ranges(kRecorded);
  const std::vector<uint32_t> recorded_params = {kRecorded};
  const vyre_dispatch_desc record = DispatchDesc(recorded, recorded_params);
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));
  vyre_graph_info info = InfoOf(graph.get());
  EXPECT_EQ(info.element_count, kRecorded);
  EXPECT_EQ(info.capacity_elements, kCapacity);

  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
  ASSERT_NO_FATAL_FAILURE(check(kRecorded, "recorded count"));

  for (size_t n : {kCapacity, kCapacity / 2 + 1, size_t{1}, size_t{777}, kRecorded, kCapacity}) {
    SCOPED_TRACE("element_count " + std::to_string(n));
    ASSERT_NO_FATAL_FAILURE(refill());
    const std::vector<vyre_dispatch_binding> bindings = ranges(n);
    const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
    vyre_graph_replay_desc desc = ReplayDesc(bindings);
    desc.param_words = params.data();
    desc.param_word_count = params.size();
    desc.element_count = n;
    const vyre_telemetry before = Telemetry(context());
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_EQ(Telemetry(context()).kernel_launches - before.kernel_launches, 1u);
    ASSERT_NO_FATAL_FAILURE(check(n, "first n written, the rest poison"));
    info = InfoOf(graph.get());
    EXPECT_EQ(info.element_count, n);
    EXPECT_EQ(info.capacity_elements, kCapacity);
  }

  // Over the capacity class.
  {
    vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
    desc.element_count = kCapacity + 1;
    EXPECT_VYRE_STATUS(VYRE_STATUS_LIMIT_EXCEEDED, vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_TRUE(LastErrorSays({"record"}));
    desc.element_count = UINT64_MAX;
    EXPECT_VYRE_STATUS(VYRE_STATUS_LIMIT_EXCEEDED, vyre_graph_replay(graph.get(), &desc, nullptr));
  }
  // Within the class but larger than the ranges bound now (n = capacity
  // above, so bind one element and then ask for two without rebinding).
  {
    const std::vector<vyre_dispatch_binding> one = ranges(1);
    const std::vector<uint32_t> params = {1};
    vyre_graph_replay_desc desc = ReplayDesc(one);
    desc.param_words = params.data();
    desc.param_word_count = 1;
    desc.element_count = 1;
    ASSERT_NO_FATAL_FAILURE(refill());
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
    ASSERT_NO_FATAL_FAILURE(check(1, "one element"));
    vyre_graph_replay_desc grow = VYRE_GRAPH_REPLAY_DESC_INIT;
    grow.element_count = 2;
    EXPECT_REFUSED(vyre_graph_replay(graph.get(), &grow, nullptr));
  }
  EXPECT_EQ(InfoOf(graph.get()).element_count, 1u) << "refused replays change nothing";
}

// With the kernel's own bound above the count, the derived grid alone
// decides what runs: exactly ceil(count / 256) blocks.
TEST_F(GraphTest, DerivedGridFollowsElementCount) {
  constexpr size_t kCapacity = 4096;
  constexpr size_t kRecorded = 3001;
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  ResidentAdd add(context(), kCapacity);  // params {4096}: the kernel bound
  ASSERT_TRUE(add.Allocate());
  ASSERT_TRUE(add.Refill(rng()));
  vyre_dispatch_desc record = add.Dispatch();
  record.element_count = kRecorded;
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));
  EXPECT_EQ(InfoOf(graph.get()).capacity_elements, kCapacity);

  auto check = [&](size_t count) {
    const size_t written = std::min<size_t>(kCapacity, size_t{Blocks(count, kBlock)} * kBlock);
    std::vector<uint32_t> got;
    ASSERT_TRUE(DownloadU32(add.out(), kCapacity, &got));
    EXPECT_TRUE(AllElementsEqual(
        got,
        [&](size_t i) { return i < written ? add.a_values()[i] + add.b_values()[i] : 0u; },
        "a + b over ceil(count / 256) blocks, zero (the zeroed output) after"));
  };
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
  ASSERT_NO_FATAL_FAILURE(check(kRecorded));
  for (size_t count : {size_t{1}, size_t{300}, size_t{2049}, kCapacity, size_t{256}}) {
    SCOPED_TRACE("element_count " + std::to_string(count));
    ASSERT_TRUE(add.Refill(rng()));
    vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
    desc.element_count = count;
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
    ASSERT_NO_FATAL_FAILURE(check(count));
    // element_count 0 keeps the count.
    ASSERT_TRUE(add.Refill(rng()));
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
    ASSERT_NO_FATAL_FAILURE(check(count));
  }
}

// A graph recorded with an explicit grid has no derived grid to resize.
TEST_F(GraphTest, ExplicitGridRefusesElementCount) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  ResidentAdd add(context(), 1024);
  ASSERT_TRUE(add.Allocate());
  ASSERT_TRUE(add.Refill(rng()));
  vyre_dispatch_desc record = add.Dispatch();
  record.grid[0] = 4;
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));
  vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
  desc.element_count = 512;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_replay(graph.get(), &desc, nullptr));
  EXPECT_TRUE(LastErrorSays({"grid"}));
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
  EXPECT_TRUE(add.Check("a + b with the recorded grid"));
}

// ---------------------------------------------------------------------------
// Parameter words and scalars
// ---------------------------------------------------------------------------

TEST_F(GraphTest, ParamWordsReplaceAndPersist) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  HostAdd add(5000);
  add.Refill(rng());
  const vyre_dispatch_desc record = add.Dispatch();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));

  auto replay = [&](const std::vector<uint32_t>* words, size_t written, const char* what) {
    SCOPED_TRACE(what);
    add.Refill(rng());
    vyre_graph_replay_desc desc = add.Replay();
    if (words != nullptr) {
      desc.param_words = words->data();
      desc.param_word_count = words->size();
    }
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_TRUE(add.CheckPrefix(written, what));
  };
  const std::vector<uint32_t> half = {2500};
  const std::vector<uint32_t> tiny = {3};
  const std::vector<uint32_t> full = {5000};
  ASSERT_NO_FATAL_FAILURE(replay(nullptr, 5000, "recorded words"));
  ASSERT_NO_FATAL_FAILURE(replay(&half, 2500, "n = 2500"));
  ASSERT_NO_FATAL_FAILURE(replay(nullptr, 2500, "NULL keeps n = 2500"));
  ASSERT_NO_FATAL_FAILURE(replay(nullptr, 2500, "and keeps it"));
  ASSERT_NO_FATAL_FAILURE(replay(&tiny, 3, "n = 3"));
  ASSERT_NO_FATAL_FAILURE(replay(&full, 5000, "n = 5000 again"));

  // Up to 64 words fit a graph recorded with fewer; more do not.
  std::vector<uint32_t> many(64, 0u);
  many[0] = 1234;
  ASSERT_NO_FATAL_FAILURE(replay(&many, 1234, "64 words"));
  std::vector<uint32_t> too_many(65, 0u);
  too_many[0] = 77;
  {
    add.Refill(rng());
    vyre_graph_replay_desc desc = add.Replay();
    desc.param_words = too_many.data();
    desc.param_word_count = too_many.size();
    EXPECT_REFUSED(vyre_graph_replay(graph.get(), &desc, nullptr));
    desc.param_words = nullptr;  // with a count: an argument error
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_replay(graph.get(), &desc, nullptr));
  }
  ASSERT_NO_FATAL_FAILURE(replay(nullptr, 1234, "the refusals kept the 64 words"));

  // A parameter change moves its bytes even when the inputs are unchanged.
  add.Poison();
  vyre_graph_replay_desc desc = add.Replay();
  desc.param_words = full.data();
  desc.param_word_count = 1;
  const vyre_telemetry before = Telemetry(context());
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.graph_uploads_skipped - before.graph_uploads_skipped, 1u);
  EXPECT_GE(after.h2d_bytes - before.h2d_bytes, 4u);
  EXPECT_LT(after.h2d_bytes - before.h2d_bytes, add.bytes()) << "the inputs did not go up";
  EXPECT_TRUE(add.Check("unchanged inputs, new words"));
}

// Scalars passed to a replay replace the current ones and persist; a kernel
// node update changes them too. SCALAR64 carries the kernel's bound n.
TEST_F(GraphTest, ScalarsReplaceAndPersist) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAxpyProgram(&program));
  const size_t n = 40000;
  const std::vector<uint32_t> x = rng().NonZeroU32(n);
  BufferHandle x_buffer, y_buffer;
  ASSERT_TRUE(CreateBufferWith(context(), x, &x_buffer));
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), n * 4, y_buffer.out()));
  std::vector<uint32_t> y0;
  auto refill_y = [&] {
    y0 = rng().NonZeroU32(n);
    ASSERT_VYRE_OK(vyre_buffer_upload(y_buffer.get(), 0, y0.data(), n * 4));
  };
  auto check = [&](uint32_t a, size_t bound, const char* what) {
    std::vector<uint32_t> y;
    ASSERT_TRUE(DownloadU32(y_buffer.get(), n, &y));
    EXPECT_TRUE(AllElementsEqual(
        y, [&](size_t i) { return i < bound ? a * x[i] + y0[i] : y0[i]; }, what));
  };

  const std::vector<vyre_dispatch_binding> bindings = {Resident(x_buffer.get()),
                                                       Resident(y_buffer.get())};
  const uint32_t a0 = rng().NonZeroU32(1)[0];
  const std::vector<uint64_t> scalars0 = {a0, n};
  vyre_dispatch_desc record = DispatchDesc(bindings, {});
  record.scalars = scalars0.data();
  record.scalar_count = scalars0.size();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));
  EXPECT_EQ(NodeKinds(graph.get()), std::vector<vyre_graph_node_kind>{VYRE_GRAPH_NODE_KERNEL})
      << "INPUT_OUTPUT is not zeroed, resident bindings are not copied";

  ASSERT_NO_FATAL_FAILURE(refill_y());
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
  ASSERT_NO_FATAL_FAILURE(check(a0, n, "recorded scalars"));

  const uint32_t a1 = rng().NonZeroU32(1)[0];
  const std::vector<uint64_t> scalars1 = {a1, n / 3};
  vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
  desc.scalars = scalars1.data();
  desc.scalar_count = scalars1.size();
  ASSERT_NO_FATAL_FAILURE(refill_y());
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
  ASSERT_NO_FATAL_FAILURE(check(a1, n / 3, "replay scalars {a1, n / 3}"));
  ASSERT_NO_FATAL_FAILURE(refill_y());
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
  ASSERT_NO_FATAL_FAILURE(check(a1, n / 3, "NULL keeps {a1, n / 3}"));

  // Through the kernel node.
  const uint32_t a2 = rng().NonZeroU32(1)[0];
  const std::vector<uint64_t> scalars2 = {a2, n};
  vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
  update.flags = VYRE_KERNEL_NODE_UPDATE_SCALARS;
  update.scalars = scalars2.data();
  update.scalar_count = scalars2.size();
  ASSERT_VYRE_OK(vyre_graph_kernel_node_update(graph.get(), 0, &update));
  ASSERT_NO_FATAL_FAILURE(refill_y());
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
  ASSERT_NO_FATAL_FAILURE(check(a2, n, "node update {a2, n}"));

  // Too few scalars, or NULL with a count.
  update.scalar_count = 1;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                     vyre_graph_kernel_node_update(graph.get(), 0, &update));
  EXPECT_TRUE(LastErrorSays());
  desc.scalar_count = 1;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_replay(graph.get(), &desc, nullptr));
  EXPECT_TRUE(LastErrorSays());
  desc.scalars = nullptr;
  desc.scalar_count = 2;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_replay(graph.get(), &desc, nullptr));
  ASSERT_NO_FATAL_FAILURE(refill_y());
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), nullptr, nullptr));
  ASSERT_NO_FATAL_FAILURE(check(a2, n, "refusals kept {a2, n}"));
}

// ---------------------------------------------------------------------------
// Node inventory and kernel node updates
// ---------------------------------------------------------------------------

TEST_F(GraphTest, NodeInventoryOfHostVectorAdd) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  HostAdd add(1000);
  add.Refill(rng());
  const vyre_dispatch_desc record = add.Dispatch();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));

  const vyre_graph_info info = InfoOf(graph.get());
  EXPECT_EQ(info.from_sequence, 0u);
  EXPECT_EQ(info.context.bits, context().bits);
  EXPECT_EQ(info.node_count, 5u);
  EXPECT_EQ(info.kernel_node_count, 1u);
  EXPECT_EQ(info.unchanged_input_node_count, 3u) << "memset, kernel, output copy";
  EXPECT_EQ(info.element_count, 1000u);
  EXPECT_EQ(info.capacity_elements, 1024u);
  EXPECT_EQ(info.replays, 0u);
  EXPECT_EQ(info.host_input_bytes, 2 * add.bytes());
  EXPECT_EQ(info.host_output_bytes, add.bytes());

  const std::vector<vyre_graph_node_kind> expected = {
      VYRE_GRAPH_NODE_MEMCPY, VYRE_GRAPH_NODE_MEMCPY, VYRE_GRAPH_NODE_MEMSET,
      VYRE_GRAPH_NODE_KERNEL, VYRE_GRAPH_NODE_MEMCPY};
  const std::vector<vyre_graph_node_kind> kinds = NodeKinds(graph.get());
  EXPECT_EQ(kinds, expected) << "got " << KindNames(kinds) << ", want " << KindNames(expected);

  vyre_graph_node_kind kind = VYRE_GRAPH_NODE_KIND_FORCE32;
  EXPECT_VYRE_STATUS(VYRE_STATUS_OUT_OF_RANGE,
                     vyre_graph_node_kind_get(graph.get(), info.node_count, &kind));
  EXPECT_TRUE(LastErrorSays({"node_count"}));
  EXPECT_VYRE_STATUS(VYRE_STATUS_OUT_OF_RANGE,
                     vyre_graph_node_kind_get(graph.get(), UINT64_MAX, &kind));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                     vyre_graph_node_kind_get(graph.get(), 0, nullptr));

  // The graph replays correctly after being inspected.
  add.Refill(rng());
  const vyre_graph_replay_desc desc = add.Replay();
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
  EXPECT_TRUE(add.Check("a + b"));
  EXPECT_EQ(InfoOf(graph.get()).replays, 1u);
}

TEST_F(GraphTest, NodeInventoryOfOtherShapes) {
  ProgramHandle add_program, inc_program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&add_program));
  ASSERT_NO_FATAL_FAILURE(CreateIncProgram(&inc_program));
  const size_t n = 3000;
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  std::vector<uint32_t> a = rng().NonZeroU32(n), b = rng().NonZeroU32(n), out(n, kPoisonU32);
  BufferHandle ra, rb, rout;
  ASSERT_TRUE(CreateBufferWith(context(), a, &ra));
  ASSERT_TRUE(CreateBufferWith(context(), b, &rb));
  ASSERT_TRUE(CreateBufferWith(context(), out, &rout));
  const uint64_t bytes = n * 4;

  struct Shape {
    const char* what;
    vyre_program program;
    std::vector<vyre_dispatch_binding> bindings;
    uint32_t iterations;
    std::vector<vyre_graph_node_kind> kinds;
  };
  using K = vyre_graph_node_kind;
  const K copy = VYRE_GRAPH_NODE_MEMCPY, set = VYRE_GRAPH_NODE_MEMSET, run = VYRE_GRAPH_NODE_KERNEL;
  const std::vector<Shape> shapes = {
      {"resident add", add_program.get(),
       {Resident(ra.get()), Resident(rb.get()), Resident(rout.get())}, 1, {set, run}},
      {"host a, resident b, host out", add_program.get(),
       {HostIn(a.data(), bytes), Resident(rb.get()), HostOut(out.data(), bytes)}, 1,
       {copy, set, run, copy}},
      {"resident a and b, host out", add_program.get(),
       {Resident(ra.get()), Resident(rb.get()), HostOut(out.data(), bytes)}, 1,
       {set, run, copy}},
      {"host inc x3", inc_program.get(), {HostInOut(a.data(), bytes)}, 3,
       {copy, run, run, run, copy}},
      {"resident inc x4", inc_program.get(), {Resident(ra.get())}, 4, {run, run, run, run}},
  };
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(shape.what);
    vyre_dispatch_desc desc = DispatchDesc(shape.bindings, params);
    desc.fixpoint_iterations = shape.iterations;
    GraphHandle graph;
    ASSERT_VYRE_OK(vyre_graph_record(shape.program, &desc, graph.out()));
    const std::vector<vyre_graph_node_kind> kinds = NodeKinds(graph.get());
    EXPECT_EQ(kinds, shape.kinds) << "got " << KindNames(kinds) << ", want "
                                  << KindNames(shape.kinds);
    const vyre_graph_info info = InfoOf(graph.get());
    EXPECT_EQ(info.kernel_node_count,
              static_cast<uint64_t>(std::count(kinds.begin(), kinds.end(), run)));
    vyre_graph_node_kind kind;
    EXPECT_VYRE_STATUS(VYRE_STATUS_OUT_OF_RANGE,
                       vyre_graph_node_kind_get(graph.get(), info.node_count, &kind));
  }
}

// Setting a kernel node's grid changes what the next replay covers, in both
// the full graph and the one without input copies.
TEST_F(GraphTest, KernelNodeUpdateChangesTheGrid) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  HostAdd add(4096 + 17);
  add.Refill(rng());
  const vyre_dispatch_desc record = add.Dispatch();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));
  constexpr uint64_t kKernelNode = 3;  // memcpy, memcpy, memset, kernel, memcpy
  vyre_graph_node_kind kind;
  ASSERT_VYRE_OK(vyre_graph_node_kind_get(graph.get(), kKernelNode, &kind));
  ASSERT_EQ(kind, VYRE_GRAPH_NODE_KERNEL);

  vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
  update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
  update.grid[0] = 2;
  update.grid[1] = 1;
  update.grid[2] = 1;
  ASSERT_VYRE_OK(vyre_graph_kernel_node_update(graph.get(), kKernelNode, &update));

  add.Refill(rng());
  for (const bool unchanged : {false, true}) {
    const char* what = unchanged ? "2 blocks, inputs unchanged" : "2 blocks, inputs changed";
    add.Poison();
    const vyre_graph_replay_desc desc = add.Replay();
    const vyre_telemetry before = Telemetry(context());
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_EQ(Telemetry(context()).graph_uploads_skipped - before.graph_uploads_skipped,
              unchanged ? 1u : 0u);
    EXPECT_TRUE(add.CheckPrefix(2 * kBlock, what));
  }

  // Back to the full grid.
  update.grid[0] = Blocks(add.n(), kBlock);
  ASSERT_VYRE_OK(vyre_graph_kernel_node_update(graph.get(), kKernelNode, &update));
  add.Poison();
  {
    const vyre_graph_replay_desc desc = add.Replay();
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_TRUE(add.Check("full grid, inputs unchanged"));
  }
  add.Refill(rng());
  {
    const vyre_graph_replay_desc desc = add.Replay();
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_TRUE(add.Check("full grid, new inputs"));
  }

  // Refusals.
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                     vyre_graph_kernel_node_update(graph.get(), 0, &update))
      << "node 0 is a memcpy";
  EXPECT_TRUE(LastErrorSays());
  EXPECT_VYRE_STATUS(VYRE_STATUS_OUT_OF_RANGE,
                     vyre_graph_kernel_node_update(graph.get(), 5, &update));
  EXPECT_TRUE(LastErrorSays());
  vyre_kernel_node_update bad = update;
  bad.flags = 0;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                     vyre_graph_kernel_node_update(graph.get(), kKernelNode, &bad));
  EXPECT_TRUE(LastErrorSays());
  bad = update;
  bad.grid[1] = 0;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                     vyre_graph_kernel_node_update(graph.get(), kKernelNode, &bad));
  bad = update;
  bad.grid[0] = device().max_grid_dim[0];
  bad.grid[2] = device().max_grid_dim[2] + 1;
  EXPECT_VYRE_STATUS(VYRE_STATUS_LIMIT_EXCEEDED,
                     vyre_graph_kernel_node_update(graph.get(), kKernelNode, &bad));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                     vyre_graph_kernel_node_update(graph.get(), kKernelNode, nullptr));
  add.Refill(rng());
  const vyre_graph_replay_desc desc = add.Replay();
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
  EXPECT_TRUE(add.Check("refused updates changed nothing"));
}

// Each fixpoint iteration is its own kernel node: shrinking the middle one's
// grid leaves the elements past its first block one increment short.
TEST_F(GraphTest, KernelNodeUpdateOfOneIteration) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateIncProgram(&program));
  const size_t n = 4096 + 5;
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  std::vector<uint32_t> input = rng().NonZeroU32(n), output(n, kPoisonU32);
  vyre_dispatch_binding binding = HostIn(input.data(), n * 4);
  binding.host_output = output.data();
  const std::vector<vyre_dispatch_binding> bindings = {binding};
  vyre_dispatch_desc record = DispatchDesc(bindings, params);
  record.fixpoint_iterations = 3;
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));
  ASSERT_EQ(InfoOf(graph.get()).node_count, 5u);  // copy, kernel x3, copy

  vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
  update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
  update.grid[0] = 1;
  update.grid[1] = 1;
  update.grid[2] = 1;
  ASSERT_VYRE_OK(vyre_graph_kernel_node_update(graph.get(), 2, &update));
  for (int r = 0; r < 3; ++r) {
    input = rng().NonZeroU32(n);  // same size; rebind below
    output.assign(n, kPoisonU32);
    std::vector<vyre_dispatch_binding> now = bindings;
    now[0].host_input = input.data();
    now[0].host_output = output.data();
    const vyre_graph_replay_desc desc = ReplayDesc(now);
    ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
    EXPECT_TRUE(AllElementsEqual(
        output, [&](size_t i) { return input[i] + (i < kBlock ? 3u : 2u); },
        "+3 in the first block, +2 after"));
  }
}

// ---------------------------------------------------------------------------
// Asynchronous replays
// ---------------------------------------------------------------------------

TEST_F(GraphTest, AsyncReplayWaitAndTiming) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  HostAdd add(1 << 20);
  add.Refill(rng());
  const vyre_dispatch_desc record = add.Dispatch();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));

  for (const bool device_timing : {true, false}) {
    SCOPED_TRACE(device_timing ? "with device timing" : "without device timing");
    add.Refill(rng());
    const std::vector<uint32_t> a = add.a(), b = add.b();
    vyre_graph_replay_desc desc = add.Replay();
    desc.flags = device_timing ? uint32_t{VYRE_DISPATCH_FLAG_DEVICE_TIMING} : 0u;
    PendingHandle pending;
    ASSERT_VYRE_OK(vyre_graph_replay_async(graph.get(), &desc, pending.out()));
    // Inputs were read before the call returned: changing them now must not
    // change the result. Outputs are written by the wait, not before.
    std::fill(add.a().begin(), add.a().end(), 1u);
    vyre_timing timing = VYRE_TIMING_INIT;
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE, vyre_pending_timing(pending.get(), &timing));
    const vyre_status polled = vyre_pending_poll(pending.get());
    EXPECT_TRUE(polled == VYRE_STATUS_OK || polled == VYRE_STATUS_NOT_READY)
        << vyre_status_name(polled);
    EXPECT_TRUE(AllElementsEqual(add.out(), [](size_t) { return kPoisonU32; },
                                 "host output before the wait"));
    ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
    EXPECT_TRUE(AllElementsEqual(add.out(), [&](size_t i) { return a[i] + b[i]; },
                                 "a + b of the inputs at replay time"));
    ASSERT_VYRE_OK(vyre_pending_timing(pending.get(), &timing));
    EXPECT_GT(timing.wall_ns, 0u);
    EXPECT_GT(timing.enqueue_ns, 0u);
    EXPECT_GT(timing.wait_ns, 0u);
    EXPECT_LE(timing.enqueue_ns, timing.wall_ns);
    if (device_timing) {
      EXPECT_GT(timing.device_ns, 0u);
    } else if (std::getenv("VYRE_CUDA_TRACE") == nullptr) {
      EXPECT_EQ(timing.device_ns, 0u);
    }
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE,
                       vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER))
        << "second wait";
  }
  // Synchronous replays report timing too.
  add.Refill(rng());
  vyre_graph_replay_desc desc = add.Replay();
  desc.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
  vyre_timing timing = VYRE_TIMING_INIT;
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, &timing));
  EXPECT_TRUE(add.Check("synchronous replay"));
  EXPECT_GT(timing.wall_ns, 0u);
  EXPECT_GT(timing.device_ns, 0u);
  desc.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_replay(graph.get(), &desc, nullptr))
      << "a replay takes VYRE_DISPATCH_FLAG_DEVICE_TIMING only";
  EXPECT_EQ(Telemetry(context()).live_pendings, 0u);
}

// A host graph's pinned buffers hold one unwaited replay's data: a second
// asynchronous replay before the first is waited on is refused.
TEST_F(GraphTest, SecondAsyncReplayOfHostGraphIsInvalidState) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  HostAdd first(100000), second(100000);
  first.Refill(rng());
  second.Refill(rng());
  const vyre_dispatch_desc record = first.Dispatch();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));

  PendingHandle pending;
  const vyre_graph_replay_desc first_desc = first.Replay();
  ASSERT_VYRE_OK(vyre_graph_replay_async(graph.get(), &first_desc, pending.out()));
  const vyre_graph_replay_desc second_desc = second.Replay();
  vyre_pending refused{0};
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE,
                     vyre_graph_replay_async(graph.get(), &second_desc, &refused));
  EXPECT_TRUE(LastErrorSays({"wait"}));
  EXPECT_EQ(refused.bits, 0u);
  EXPECT_TRUE(AllElementsEqual(second.out(), [](size_t) { return kPoisonU32; },
                               "the refused replay's output"));

  ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  EXPECT_TRUE(first.Check("first replay, its own inputs"));

  // Once waited, the next one is accepted.
  ASSERT_VYRE_OK(vyre_graph_replay_async(graph.get(), &second_desc, pending.out()));
  ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  EXPECT_TRUE(second.Check("second replay"));

  // Releasing an unwaited replay frees the graph for the next one too (its
  // output is not written).
  first.Refill(rng());
  const vyre_graph_replay_desc third = first.Replay();
  ASSERT_VYRE_OK(vyre_graph_replay_async(graph.get(), &third, pending.out()));
  pending.reset();
  EXPECT_TRUE(AllElementsEqual(first.out(), [](size_t) { return kPoisonU32; },
                               "output of a replay released without waiting"));
  second.Refill(rng());
  const vyre_graph_replay_desc fourth = second.Replay();
  ASSERT_VYRE_OK(vyre_graph_replay_async(graph.get(), &fourth, pending.out()));
  ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  EXPECT_TRUE(second.Check("after a released replay"));
}

// Without HOST bindings any number of asynchronous replays may be in flight;
// they run in submission order.
TEST_F(GraphTest, ResidentGraphTakesManyAsyncReplays) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateIncProgram(&program));
  const size_t n = 50000;
  const std::vector<uint32_t> initial = rng().NonZeroU32(n);
  BufferHandle buffer;
  ASSERT_TRUE(CreateBufferWith(context(), initial, &buffer));
  const std::vector<vyre_dispatch_binding> bindings = {Resident(buffer.get())};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  vyre_dispatch_desc record = DispatchDesc(bindings, params);
  record.fixpoint_iterations = 2;
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));

  constexpr int kInFlight = 12;
  std::vector<PendingHandle> pendings(kInFlight);
  for (PendingHandle& pending : pendings) {
    ASSERT_VYRE_OK(vyre_graph_replay_async(graph.get(), nullptr, pending.out()));
  }
  EXPECT_EQ(Telemetry(context()).live_pendings, static_cast<uint64_t>(kInFlight));
  // Wait in reverse order: the last one's completion implies the others'.
  for (int i = kInFlight - 1; i >= 0; --i) {
    ASSERT_VYRE_OK(vyre_pending_wait(pendings[i].get(), VYRE_WAIT_FOREVER));
  }
  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(buffer.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return initial[i] + 2u * kInFlight; },
                               "data + 2 x replays"));
  pendings.clear();
  EXPECT_EQ(Telemetry(context()).live_pendings, 0u);
}

// Destroying a graph while its replay is in flight is deferred: the wait
// still succeeds and writes the right outputs.
TEST_F(GraphTest, DestroyWhileAsyncReplayInFlight) {
  constexpr uint32_t kSpinMicroseconds = 300'000;
  const size_t n = 1000;
  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_spin",
                                {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, kBlock, &program));
  const std::vector<uint32_t> params = {kSpinMicroseconds, static_cast<uint32_t>(n)};
  std::vector<uint32_t> input = rng().NonZeroU32(n), output(n, kPoisonU32);
  vyre_dispatch_binding binding = HostIn(input.data(), n * 4);
  binding.host_output = output.data();
  const std::vector<vyre_dispatch_binding> bindings = {binding};
  const vyre_dispatch_desc record = DispatchDesc(bindings, params);
  ASSERT_VYRE_OK(vyre_context_trim(context()));
  const vyre_telemetry baseline = Telemetry(context());
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));

  input = rng().NonZeroU32(n);
  std::vector<vyre_dispatch_binding> now = bindings;
  now[0].host_input = input.data();
  const vyre_graph_replay_desc desc = ReplayDesc(now);
  PendingHandle pending;
  ASSERT_VYRE_OK(vyre_graph_replay_async(graph.get(), &desc, pending.out()));
  const vyre_graph destroyed = graph.release();
  ASSERT_VYRE_OK(vyre_graph_destroy(destroyed));
  vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_info_get(destroyed, &info));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_replay(destroyed, &desc, nullptr));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_destroy(destroyed));
  EXPECT_VYRE_STATUS(VYRE_STATUS_NOT_READY, vyre_pending_poll(pending.get()))
      << "the kernel spins for " << kSpinMicroseconds << " us";

  ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  EXPECT_TRUE(AllElementsEqual(output, [&](size_t i) { return input[i] + 1u; },
                               "data + 1 from a destroyed graph's replay"));
  pending.reset();
  ASSERT_VYRE_OK(vyre_context_trim(context()));
  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.live_graphs, baseline.live_graphs);
  EXPECT_EQ(after.live_pendings, baseline.live_pendings);
  EXPECT_EQ(after.pinned_bytes_live, baseline.pinned_bytes_live)
      << "the graph's pinned memory went with its replay";
}

// Freeing a buffer while a replay that uses it is in flight is safe: the
// replay completes, the next one is refused until the binding is rebound,
// and the memory goes with the graph.
TEST_F(GraphTest, FreeBufferWhileAsyncReplayInFlight) {
  constexpr uint32_t kSpinMicroseconds = 200'000;
  const size_t n = 1000;
  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_spin",
                                {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, kBlock, &program));
  ASSERT_VYRE_OK(vyre_context_trim(context()));
  const vyre_telemetry baseline = Telemetry(context());
  const std::vector<uint32_t> initial = rng().NonZeroU32(n);
  BufferHandle buffer, replacement;
  ASSERT_TRUE(CreateBufferWith(context(), initial, &buffer));
  ASSERT_TRUE(CreateBufferWith(context(), initial, &replacement));
  const std::vector<uint32_t> params = {kSpinMicroseconds, static_cast<uint32_t>(n)};
  const std::vector<vyre_dispatch_binding> bindings = {Resident(buffer.get())};
  const vyre_dispatch_desc record = DispatchDesc(bindings, params);
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));

  PendingHandle pending;
  ASSERT_VYRE_OK(vyre_graph_replay_async(graph.get(), nullptr, pending.out()));
  ASSERT_VYRE_OK(vyre_buffer_free(buffer.release()));
  ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  pending.reset();
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_replay(graph.get(), nullptr, nullptr));

  const std::vector<vyre_dispatch_binding> rebound = {Resident(replacement.get())};
  const vyre_graph_replay_desc desc = ReplayDesc(rebound);
  ASSERT_VYRE_OK(vyre_graph_replay(graph.get(), &desc, nullptr));
  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(replacement.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return initial[i] + 1u; }, "data + 1"));

  graph.reset();
  replacement.reset();
  ASSERT_VYRE_OK(vyre_context_trim(context()));
  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.device_bytes_live, baseline.device_bytes_live);
  EXPECT_EQ(after.pinned_bytes_live, baseline.pinned_bytes_live);
  EXPECT_EQ(after.live_buffers, baseline.live_buffers);
  EXPECT_EQ(after.live_graphs, baseline.live_graphs);
}

// ---------------------------------------------------------------------------
// Recording refusals and handles
// ---------------------------------------------------------------------------

TEST_F(GraphTest, CooperativeDispatchCannotBeRecorded) {
  if (device().cooperative_launch == 0) VYRE_GPU_SKIP_OR_FAIL("no cooperative launch on this device");
  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_grid_sync",
                                {Decl(VYRE_ROLE_INPUT, 4, "in"), Decl(VYRE_ROLE_OUTPUT, 4, "scratch"),
                                 Decl(VYRE_ROLE_OUTPUT, 4, "out")},
                                kBlock, &program));
  const size_t n = 2 * kBlock;
  std::vector<uint32_t> in = rng().NonZeroU32(n), scratch(n, kPoisonU32), out(n, kPoisonU32);
  const std::vector<vyre_dispatch_binding> bindings = {HostIn(in.data(), n * 4),
                                                       HostOut(scratch.data(), n * 4),
                                                       HostOut(out.data(), n * 4)};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  desc.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
  const vyre_telemetry before = Telemetry(context());
  vyre_graph graph{0};
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                     vyre_graph_record(program.get(), &desc, &graph));
  EXPECT_TRUE(LastErrorSays({"cooperative"}));
  EXPECT_EQ(graph.bits, 0u);
  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.live_graphs, before.live_graphs);
  EXPECT_EQ(after.device_bytes_live, before.device_bytes_live);
  EXPECT_EQ(after.pinned_bytes_live, before.pinned_bytes_live);

  // The same program still dispatches cooperatively.
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, nullptr));
  EXPECT_TRUE(AllElementsEqual(
      out, [&](size_t i) { return in[(i + kBlock) % n] * 2u + 1u; }, "grid-synchronised result"));
}

// vyre_graph_record validates its descriptor as vyre_dispatch does.
TEST_F(GraphTest, RecordValidatesLikeDispatch) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  HostAdd add(100);
  add.Refill(rng());
  vyre_graph graph{0};
  {
    vyre_dispatch_desc desc = add.Dispatch();
    desc.binding_count = 2;
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_record(program.get(), &desc, &graph));
    EXPECT_TRUE(LastErrorSays());
  }
  {
    vyre_dispatch_desc desc = add.Dispatch();
    desc.fixpoint_iterations = 0;
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_record(program.get(), &desc, &graph));
  }
  {
    std::vector<vyre_dispatch_binding> bindings = add.bindings();
    bindings[2].host_output = nullptr;
    const std::vector<uint32_t> params = {100};
    const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
    EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_record(program.get(), &desc, &graph));
  }
  {
    vyre_dispatch_desc desc = add.Dispatch();
    desc.block[0] = device().max_threads_per_block + 1;
    EXPECT_VYRE_STATUS(VYRE_STATUS_LIMIT_EXCEEDED, vyre_graph_record(program.get(), &desc, &graph));
  }
  const vyre_dispatch_desc desc = add.Dispatch();
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_record(program.get(), nullptr, &graph));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_graph_record(program.get(), &desc, nullptr));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_HANDLE, vyre_graph_record(vyre_program{0}, &desc, &graph));
  EXPECT_EQ(graph.bits, 0u);
  EXPECT_EQ(Telemetry(context()).live_graphs, 0u);
}

TEST_F(GraphTest, DestroyedGraphAndContextHandlesAreStale) {
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  HostAdd add(100);
  add.Refill(rng());
  const vyre_dispatch_desc record = add.Dispatch();
  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, &graph));
  ASSERT_VYRE_OK(vyre_graph_destroy(graph));
  const vyre_graph_replay_desc desc = add.Replay();
  vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
  vyre_graph_node_kind kind;
  vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
  update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
  update.grid[0] = update.grid[1] = update.grid[2] = 1;
  vyre_pending pending{0};
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_replay(graph, &desc, nullptr));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_replay_async(graph, &desc, &pending));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_info_get(graph, &info));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_node_kind_get(graph, 0, &kind));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_kernel_node_update(graph, 3, &update));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_destroy(graph));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_HANDLE, vyre_graph_replay(vyre_graph{0}, &desc, nullptr));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_HANDLE,
                     vyre_graph_replay(vyre_graph{program.get().bits}, &desc, nullptr))
      << "a program handle is not a graph";

  // A context's graphs go with it.
  ContextHandle other;
  ASSERT_NO_FATAL_FAILURE(CreateOtherContext(&other));
  ProgramHandle other_program;
  ASSERT_TRUE(CreateTestProgram(other.get(), "vyre_test_add_u32", AddDecls(), kBlock,
                                &other_program));
  vyre_graph other_graph{0};
  ASSERT_VYRE_OK(vyre_graph_record(other_program.get(), &record, &other_graph));
  ASSERT_VYRE_OK(vyre_graph_replay(other_graph, &desc, nullptr));
  EXPECT_TRUE(add.Check("graph of the second context"));
  other_program.release();  // goes with its context
  ASSERT_VYRE_OK(vyre_context_destroy(other.release()));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_replay(other_graph, &desc, nullptr));
  EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_graph_destroy(other_graph));
}

// ---------------------------------------------------------------------------
// Threads
// ---------------------------------------------------------------------------

// Eight threads, each recording and replaying its own graph (host bindings
// on even threads, resident on odd ones) on one shared context, 200 replays
// each with fresh data, every result checked.
TEST_F(GraphTest, EightThreadsReplayTheirOwnGraphs) {
  constexpr int kThreads = 8;
  constexpr int kReplays = 200;
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  const vyre_telemetry before = Telemetry(context());

  FailureLog failures;
  std::atomic<int> checked{0};
  const uint64_t base_seed = rng().seed();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      RandomSource thread_rng(base_seed + 1 + static_cast<uint64_t>(t));
      const size_t n = 1000 + 997 * static_cast<size_t>(t);
      const bool host = t % 2 == 0;
      HostAdd host_add(n);
      ResidentAdd resident_add(context(), n);
      vyre_graph graph{0};
      if (host) {
        host_add.Refill(thread_rng);
        const vyre_dispatch_desc record = host_add.Dispatch();
        if (vyre_graph_record(program.get(), &record, &graph) != VYRE_STATUS_OK) {
          failures.Record(t, -1, "record: " + DescribeLastError());
          return;
        }
      } else {
        ::testing::AssertionResult ok = resident_add.Allocate();
        if (ok) ok = resident_add.Refill(thread_rng);
        const vyre_dispatch_desc record = resident_add.Dispatch();
        if (!ok || vyre_graph_record(program.get(), &record, &graph) != VYRE_STATUS_OK) {
          failures.Record(t, -1, std::string("setup: ") + ok.message() + DescribeLastError());
          return;
        }
      }
      for (int r = 0; r < kReplays; ++r) {
        ::testing::AssertionResult result = ::testing::AssertionSuccess();
        const bool async = r % 10 == 9;
        if (host) {
          host_add.Refill(thread_rng);
          const vyre_graph_replay_desc desc = host_add.Replay();
          vyre_status status;
          if (async) {
            vyre_pending pending{0};
            status = vyre_graph_replay_async(graph, &desc, &pending);
            if (status == VYRE_STATUS_OK) {
              status = vyre_pending_wait(pending, VYRE_WAIT_FOREVER);
              vyre_pending_release(pending);
            }
          } else {
            status = vyre_graph_replay(graph, &desc, nullptr);
          }
          if (status != VYRE_STATUS_OK) {
            failures.Record(t, r, "replay: " + DescribeLastError());
            continue;
          }
          result = host_add.Check("a + b");
        } else {
          result = resident_add.Refill(thread_rng);
          if (!result) {
            failures.Record(t, r, result.message());
            continue;
          }
          if (vyre_graph_replay(graph, nullptr, nullptr) != VYRE_STATUS_OK) {
            failures.Record(t, r, "replay: " + DescribeLastError());
            continue;
          }
          result = resident_add.Check("a + b");
        }
        if (!result) {
          failures.Record(t, r, result.message());
        } else {
          checked.fetch_add(1);
        }
      }
      if (vyre_graph_destroy(graph) != VYRE_STATUS_OK) {
        failures.Record(t, kReplays, "destroy: " + DescribeLastError());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(failures.count(), 0) << "first failure: " << failures.first();
  EXPECT_EQ(checked.load(), kThreads * kReplays);
  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.graph_replays - before.graph_replays, uint64_t{kThreads} * kReplays);
  EXPECT_EQ(after.graph_records - before.graph_records, uint64_t{kThreads});
  EXPECT_EQ(after.live_graphs, before.live_graphs);
  EXPECT_EQ(after.live_pendings, 0u);
}

// Replays of one graph are serialised: four threads replaying one resident
// graph add up exactly, and four replaying one host graph with their own
// data each get their own result.
TEST_F(GraphTest, OneGraphReplayedFromFourThreads) {
  constexpr int kThreads = 4;
  constexpr int kReplays = 100;
  ProgramHandle inc, add_program;
  ASSERT_NO_FATAL_FAILURE(CreateIncProgram(&inc));
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&add_program));

  const size_t n = 30000;
  const std::vector<uint32_t> initial = rng().NonZeroU32(n);
  BufferHandle buffer;
  ASSERT_TRUE(CreateBufferWith(context(), initial, &buffer));
  const std::vector<vyre_dispatch_binding> bindings = {Resident(buffer.get())};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const vyre_dispatch_desc inc_desc = DispatchDesc(bindings, params);
  GraphHandle inc_graph;
  ASSERT_VYRE_OK(vyre_graph_record(inc.get(), &inc_desc, inc_graph.out()));

  HostAdd sample(n);
  sample.Refill(rng());
  const vyre_dispatch_desc add_desc = sample.Dispatch();
  GraphHandle add_graph;
  ASSERT_VYRE_OK(vyre_graph_record(add_program.get(), &add_desc, add_graph.out()));

  FailureLog failures;
  const uint64_t base_seed = rng().seed();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      RandomSource thread_rng(base_seed + 100 + static_cast<uint64_t>(t));
      HostAdd mine(n);
      for (int r = 0; r < kReplays; ++r) {
        if (vyre_graph_replay(inc_graph.get(), nullptr, nullptr) != VYRE_STATUS_OK) {
          failures.Record(t, r, "inc replay: " + DescribeLastError());
        }
        mine.Refill(thread_rng);
        const vyre_graph_replay_desc desc = mine.Replay();
        if (vyre_graph_replay(add_graph.get(), &desc, nullptr) != VYRE_STATUS_OK) {
          failures.Record(t, r, "add replay: " + DescribeLastError());
          continue;
        }
        const ::testing::AssertionResult result = mine.Check("this thread's a + b");
        if (!result) failures.Record(t, r, result.message());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.count(), 0) << "first failure: " << failures.first();
  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(buffer.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(
      out, [&](size_t i) { return initial[i] + static_cast<uint32_t>(kThreads * kReplays); },
      "data + every replay of every thread"));
}

// Recording does not block other threads: one thread replays a graph, one
// dispatches eagerly, while a third records, replays and destroys 100 graphs
// on the same context. Every result is checked.
TEST_F(GraphTest, ReplayAndDispatchWhileAnotherThreadRecords) {
  constexpr int kRecordings = 100;
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  HostAdd sample(50000);
  sample.Refill(rng());
  const vyre_dispatch_desc record = sample.Dispatch();
  GraphHandle graph;
  ASSERT_VYRE_OK(vyre_graph_record(program.get(), &record, graph.out()));

  FailureLog failures;
  std::atomic<bool> recording_done{false};
  std::atomic<int> replays{0}, dispatches{0}, replays_during_recording{0};
  const uint64_t base_seed = rng().seed();

  std::thread replayer([&] {
    RandomSource thread_rng(base_seed + 11);
    HostAdd add(50000);
    for (int r = 0; !recording_done.load() || r < 50; ++r) {
      add.Refill(thread_rng);
      const vyre_graph_replay_desc desc = add.Replay();
      if (vyre_graph_replay(graph.get(), &desc, nullptr) != VYRE_STATUS_OK) {
        failures.Record(0, r, "replay: " + DescribeLastError());
        continue;
      }
      const ::testing::AssertionResult result = add.Check("replayer a + b");
      if (!result) failures.Record(0, r, result.message());
      replays.fetch_add(1);
      if (!recording_done.load()) replays_during_recording.fetch_add(1);
    }
  });
  std::thread dispatcher([&] {
    RandomSource thread_rng(base_seed + 12);
    HostAdd add(20000);
    for (int r = 0; !recording_done.load() || r < 50; ++r) {
      add.Refill(thread_rng);
      const vyre_dispatch_desc desc = add.Dispatch();
      if (vyre_dispatch(program.get(), &desc, nullptr) != VYRE_STATUS_OK) {
        failures.Record(1, r, "dispatch: " + DescribeLastError());
        continue;
      }
      const ::testing::AssertionResult result = add.Check("dispatcher a + b");
      if (!result) failures.Record(1, r, result.message());
      dispatches.fetch_add(1);
    }
  });
  std::thread recorder([&] {
    RandomSource thread_rng(base_seed + 13);
    for (int r = 0; r < kRecordings; ++r) {
      const size_t n = 1 + thread_rng.Below(100000);
      if (r % 2 == 0) {
        HostAdd add(n);
        add.Refill(thread_rng);
        const vyre_dispatch_desc desc = add.Dispatch();
        vyre_graph recorded{0};
        if (vyre_graph_record(program.get(), &desc, &recorded) != VYRE_STATUS_OK) {
          failures.Record(2, r, "record: " + DescribeLastError());
          continue;
        }
        add.Refill(thread_rng);
        const vyre_graph_replay_desc replay = add.Replay();
        if (vyre_graph_replay(recorded, &replay, nullptr) != VYRE_STATUS_OK) {
          failures.Record(2, r, "replay: " + DescribeLastError());
        } else if (const auto result = add.Check("recorder host a + b"); !result) {
          failures.Record(2, r, result.message());
        }
        vyre_graph_destroy(recorded);
      } else {
        ResidentAdd add(context(), n);
        ::testing::AssertionResult ok = add.Allocate();
        if (ok) ok = add.Refill(thread_rng);
        vyre_graph recorded{0};
        const vyre_dispatch_desc desc = add.Dispatch();
        if (!ok || vyre_graph_record(program.get(), &desc, &recorded) != VYRE_STATUS_OK) {
          failures.Record(2, r, std::string("record: ") + ok.message() + DescribeLastError());
          continue;
        }
        if (vyre_graph_replay(recorded, nullptr, nullptr) != VYRE_STATUS_OK) {
          failures.Record(2, r, "replay: " + DescribeLastError());
        } else if (const auto result = add.Check("recorder resident a + b"); !result) {
          failures.Record(2, r, result.message());
        }
        vyre_graph_destroy(recorded);
      }
    }
    recording_done.store(true);
  });
  recorder.join();
  replayer.join();
  dispatcher.join();
  EXPECT_EQ(failures.count(), 0) << "first failure (thread 0 replays, 1 dispatches, 2 records): "
                                 << failures.first();
  std::printf("[ info     ] %d replays (%d while recording), %d dispatches, %d recordings\n",
              replays.load(), replays_during_recording.load(), dispatches.load(), kRecordings);
  EXPECT_GT(replays_during_recording.load(), 0) << "no replay ran while the recorder worked";
}

// ---------------------------------------------------------------------------
// Leaks
// ---------------------------------------------------------------------------

// 10,000 record/replay/destroy cycles of four kinds (host sync, resident with
// new parameter words, host async, host destroyed while its async replay is
// in flight) leave the context's memory and counts at their baseline.
TEST_F(GraphTest, TenThousandCyclesLeaveMemoryAtBaseline) {
  constexpr int kCycles = 10000;
  constexpr size_t kN = 256;
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateAddProgram(&program));
  HostAdd host(kN);
  ResidentAdd resident(context(), kN);
  ASSERT_TRUE(resident.Allocate());

  auto cycle = [&](int i) -> std::string {
    const int kind = i % 4;
    vyre_graph graph{0};
    if (kind == 1) {
      ::testing::AssertionResult ok = resident.Refill(rng());
      if (!ok) return ok.message();
      // Recorded with n = 1; the replay passes n = kN, which goes up through
      // the pinned pool.
      const uint32_t one = 1;
      vyre_dispatch_desc record = resident.Dispatch();
      record.param_words = &one;
      record.param_word_count = 1;
      if (vyre_graph_record(program.get(), &record, &graph) != VYRE_STATUS_OK) {
        return "record: " + DescribeLastError();
      }
      const std::vector<uint32_t> words = {static_cast<uint32_t>(kN)};
      vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
      desc.param_words = words.data();
      desc.param_word_count = 1;
      vyre_status status = vyre_graph_replay(graph, &desc, nullptr);
      std::string failure = status == VYRE_STATUS_OK ? "" : "replay: " + DescribeLastError();
      if (vyre_graph_destroy(graph) != VYRE_STATUS_OK && failure.empty()) {
        failure = "destroy: " + DescribeLastError();
      }
      if (failure.empty()) {
        ok = resident.Check("resident a + b");
        if (!ok) failure = ok.message();
      }
      return failure;
    }
    host.Refill(rng());
    const vyre_dispatch_desc record = host.Dispatch();
    if (vyre_graph_record(program.get(), &record, &graph) != VYRE_STATUS_OK) {
      return "record: " + DescribeLastError();
    }
    host.Refill(rng());
    const vyre_graph_replay_desc desc = host.Replay();
    std::string failure;
    if (kind == 0) {
      if (vyre_graph_replay(graph, &desc, nullptr) != VYRE_STATUS_OK) {
        failure = "replay: " + DescribeLastError();
      }
      if (vyre_graph_destroy(graph) != VYRE_STATUS_OK && failure.empty()) {
        failure = "destroy: " + DescribeLastError();
      }
    } else {
      vyre_pending pending{0};
      if (vyre_graph_replay_async(graph, &desc, &pending) != VYRE_STATUS_OK) {
        failure = "replay_async: " + DescribeLastError();
        vyre_graph_destroy(graph);
        return failure;
      }
      if (kind == 3 && vyre_graph_destroy(graph) != VYRE_STATUS_OK) {
        failure = "destroy in flight: " + DescribeLastError();
      }
      if (vyre_pending_wait(pending, VYRE_WAIT_FOREVER) != VYRE_STATUS_OK && failure.empty()) {
        failure = "wait: " + DescribeLastError();
      }
      if (vyre_pending_release(pending) != VYRE_STATUS_OK && failure.empty()) {
        failure = "release: " + DescribeLastError();
      }
      if (kind == 2 && vyre_graph_destroy(graph) != VYRE_STATUS_OK && failure.empty()) {
        failure = "destroy: " + DescribeLastError();
      }
    }
    if (failure.empty()) {
      const ::testing::AssertionResult ok = host.Check("host a + b");
      if (!ok) failure = ok.message();
    }
    return failure;
  };

  for (int i = 0; i < 8; ++i) ASSERT_EQ(cycle(i), "") << "warm-up cycle " << i;
  ASSERT_VYRE_OK(vyre_context_trim(context()));
  const vyre_telemetry baseline = Telemetry(context());

  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < kCycles; ++i) {
    const std::string failure = cycle(i);
    ASSERT_EQ(failure, "") << "cycle " << i;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("[ info     ] %d cycles in %.1f s (%.0f us each)\n", kCycles, seconds,
              seconds * 1e6 / kCycles);

  ASSERT_VYRE_OK(vyre_context_trim(context()));
  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.device_bytes_live, baseline.device_bytes_live);
  EXPECT_EQ(after.pinned_bytes_live, baseline.pinned_bytes_live);
  EXPECT_EQ(after.live_graphs, baseline.live_graphs);
  EXPECT_EQ(after.live_pendings, baseline.live_pendings);
  EXPECT_EQ(after.live_buffers, baseline.live_buffers);
  EXPECT_EQ(after.live_programs, baseline.live_programs);
  EXPECT_EQ(after.transient_pool_cached_bytes, 0u);
  EXPECT_EQ(after.pinned_pool_cached_bytes, 0u);
  EXPECT_EQ(after.graph_records - baseline.graph_records, uint64_t{kCycles});
  EXPECT_EQ(after.graph_replays - baseline.graph_replays, uint64_t{kCycles});
  EXPECT_EQ(after.live_graphs, 0u);
}

}  // namespace
}  // namespace vyre_test
