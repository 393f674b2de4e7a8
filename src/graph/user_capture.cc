#include "graph/user_capture.h"

#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/checked_math.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/guards.h"
#include "runtime/dispatch/dispatch_plan.h"
#include "runtime/dispatch/kernel_launch.h"

namespace vyre {
namespace {

constexpr uint64_t kDefaultParamBytes = 64 * 1024;
constexpr uint64_t kParamAlignment = 256;

const char* ModeName(uint32_t mode) {
  switch (mode) {
    case VYRE_CAPTURE_MODE_GLOBAL: return "GLOBAL";
    case VYRE_CAPTURE_MODE_RELAXED: return "RELAXED";
    default: return "THREAD_LOCAL";
  }
}

CUstreamCaptureMode DriverMode(uint32_t mode) {
  switch (mode) {
    case VYRE_CAPTURE_MODE_GLOBAL: return CU_STREAM_CAPTURE_MODE_GLOBAL;
    case VYRE_CAPTURE_MODE_RELAXED: return CU_STREAM_CAPTURE_MODE_RELAXED;
    default: return CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  }
}

// One open capture. `mu` serialises what is enqueued into it (any thread
// may dispatch into it) and its end.
struct OpenCapture {
  std::shared_ptr<Context> context;
  driver::StreamGuard stream;
  std::thread::id thread;  // the thread that began it
  uint32_t mode = VYRE_CAPTURE_MODE_THREAD_LOCAL;
  std::mutex mu;
  // Parameter words: allocated at begin (the capture cannot allocate), each
  // dispatch's staged in pinned memory and uploaded once at end. A replay
  // takes no parameter words, so a captured copy per dispatch would redo
  // the same upload every replay (~3 us a node on an H200).
  OwnedBytes device_params;
  OwnedBytes pinned_params;
  uint64_t params_used = 0;
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::vector<std::shared_ptr<Program>> programs;
};

// Open captures by context. Leaked on purpose, as the handle tables.
struct CaptureTable {
  std::mutex mu;
  absl::flat_hash_map<const Context*, std::shared_ptr<OpenCapture>> open;
};
CaptureTable& Captures() {
  static auto* table = new CaptureTable;
  return *table;
}

std::shared_ptr<OpenCapture> FindCapture(const Context& context) {
  CaptureTable& t = Captures();
  std::lock_guard lock(t.mu);
  auto it = t.open.find(&context);
  return it == t.open.end() ? nullptr : it->second;
}

absl::Status NoCapture(const char* what) {
  return Errorf(VYRE_STATUS_INVALID_STATE,
                "%s: the context has no open capture. Fix: call vyre_capture_begin on the "
                "context first.",
                what);
}

// The dispatch's parameter words (or the context's zero block when it has
// none) at their place in the capture's block, staged for the upload at end.
absl::StatusOr<CUdeviceptr> CaptureParamWords(OpenCapture& c, const DispatchPlan& plan,
                                              const char* what) {
  if (plan.param_bytes == 0) return c.context->zero_params();
  const uint64_t room = c.device_params.bytes() - c.params_used;
  const uint64_t bytes = *CheckedAlignUp(plan.param_bytes, kParamAlignment);
  if (bytes > room) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: the dispatch's %u bytes of parameter words do not fit the %u bytes left "
                  "of the capture's %u-byte parameter block. Fix: begin the capture with a "
                  "larger vyre_capture_desc.param_bytes.",
                  what, plan.param_bytes, room, c.device_params.bytes());
  }
  const uint64_t at = c.params_used;
  std::memcpy(c.pinned_params.host() + at, plan.param_words, plan.param_bytes);
  c.params_used += bytes;
  return c.device_params.device() + at;
}

}  // namespace

absl::StatusOr<uint64_t> BeginUserCapture(std::shared_ptr<Context> context,
                                          const vyre_capture_desc& desc, const char* what) {
  if (desc.mode > VYRE_CAPTURE_MODE_RELAXED) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: mode %u is not a capture mode. Fix: pass VYRE_CAPTURE_MODE_THREAD_LOCAL, "
                  "_GLOBAL or _RELAXED.",
                  what, desc.mode);
  }
  const uint64_t param_bytes = desc.param_bytes == 0 ? kDefaultParamBytes : desc.param_bytes;
  const std::optional<uint64_t> aligned = CheckedAlignUp(param_bytes, kParamAlignment);
  if (!aligned) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: param_bytes %u is too large. Fix: pass the bytes of parameter words the "
                  "capture's dispatches need (0 for 64 KiB).",
                  what, desc.param_bytes);
  }
  CaptureTable& t = Captures();
  std::lock_guard table_lock(t.mu);
  if (t.open.contains(context.get())) {
    return Errorf(VYRE_STATUS_INVALID_STATE,
                  "%s: the context already has an open capture. Fix: end it with "
                  "vyre_capture_end first (one capture per context at a time), or capture on "
                  "another context.",
                  what);
  }
  auto c = std::make_shared<OpenCapture>();
  c->context = context;
  c->mode = desc.mode;
  c->thread = std::this_thread::get_id();
  driver::ScopedContext bind(context->cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  VYRE_ASSIGN_OR_RETURN(c->device_params,
                        OwnedBytes::Allocate(OwnedBytes::Kind::kDevice, context->cu(),
                                             &context->telemetry(), *aligned, what));
  VYRE_ASSIGN_OR_RETURN(c->pinned_params,
                        OwnedBytes::Allocate(OwnedBytes::Kind::kPinned, context->cu(),
                                             &context->telemetry(), *aligned, what));
  // Non-blocking: work on the legacy stream never joins the capture.
  VYRE_CU(what, cuStreamCreate, c->stream.out(), CU_STREAM_NON_BLOCKING);
  VYRE_CU(what, cuStreamBeginCapture, c->stream.get(), DriverMode(desc.mode));
  const uint64_t stream = reinterpret_cast<uint64_t>(c->stream.get());
  t.open.emplace(context.get(), std::move(c));
  return stream;
}

absl::Status CaptureDispatch(std::shared_ptr<Program> program, const vyre_dispatch_desc& desc,
                             const char* what) {
  std::shared_ptr<OpenCapture> c = FindCapture(program->context());
  if (c == nullptr) return NoCapture(what);
  DispatchPlan plan;
  VYRE_RETURN_IF_ERROR(BuildDispatchPlan(*program, desc, what, &plan));
  if (plan.flags & VYRE_DISPATCH_FLAG_COOPERATIVE) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: cooperative dispatches cannot be captured: a graph launches its kernel "
                  "with cuLaunchKernel, which gives no grid-wide synchronisation. Fix: run "
                  "cooperative programs with vyre_dispatch.",
                  what);
  }
  for (size_t i = 0; i < plan.bindings.size(); ++i) {
    if (plan.bindings[i].host) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: binding %u ('%s') is HOST memory, which a dispatch stages for that "
                    "call only and a graph cannot replay. Fix: use RESIDENT bindings "
                    "(vyre_buffer_alloc and vyre_buffer_upload before the capture).",
                    what, i, plan.bindings[i].decl->name);
    }
  }
  std::lock_guard lock(c->mu);
  {
    // Ended meanwhile: this dispatch would go nowhere.
    CaptureTable& t = Captures();
    std::lock_guard table_lock(t.mu);
    auto it = t.open.find(&program->context());
    if (it == t.open.end() || it->second != c) return NoCapture(what);
  }
  Context& ctx = *c->context;
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  const CUstream stream = c->stream.get();
  VYRE_ASSIGN_OR_RETURN(const CUdeviceptr params, CaptureParamWords(*c, plan, what));
  // OUTPUT bindings are zeroed before the kernel, as a dispatch does.
  for (const PlannedBinding& b : plan.bindings) {
    if (b.decl->role != VYRE_ROLE_OUTPUT || b.bytes == 0) continue;
    VYRE_CU(what, cuMemsetD8Async, b.buffer->device() + b.offset, 0, b.bytes, stream);
  }
  const LaunchShape shape = LaunchShapeOf(plan);
  KernelValues values;
  FillKernelValues(
      *program,
      [&](uint32_t i) -> uint64_t {
        const PlannedBinding& b = plan.bindings[i];
        return b.buffer ? b.buffer->device() + b.offset : 0;
      },
      params, plan.scalars, &values);
  KernelArgs args;
  PointKernelArgs(values, &args);
  VYRE_RETURN_IF_ERROR(OptInSharedMemory(*program, shape.shared_bytes, what));
  // No telemetry: nothing runs until the graph is replayed.
  VYRE_RETURN_IF_ERROR(LaunchKernel(*program, shape, plan.iterations, args.data(), stream,
                                    /*cooperative=*/false, nullptr, what));
  for (const PlannedBinding& b : plan.bindings) {
    if (b.buffer) c->buffers.push_back(b.buffer);
  }
  c->programs.push_back(std::move(program));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Graph>> EndUserCapture(const std::shared_ptr<Context>& context,
                                                      const char* what) {
  std::shared_ptr<OpenCapture> c = FindCapture(*context);
  if (c == nullptr) return NoCapture(what);
  if (c->mode != VYRE_CAPTURE_MODE_RELAXED && c->thread != std::this_thread::get_id()) {
    return Errorf(VYRE_STATUS_INVALID_STATE,
                  "%s: the capture was begun in %s mode on another thread, and the driver ends "
                  "such a capture only on the thread that began it. Fix: call vyre_capture_end "
                  "on that thread (or begin with VYRE_CAPTURE_MODE_RELAXED).",
                  what, ModeName(c->mode));
  }
  std::lock_guard lock(c->mu);
  {
    CaptureTable& t = Captures();
    std::lock_guard table_lock(t.mu);
    auto it = t.open.find(context.get());
    if (it == t.open.end() || it->second != c) return NoCapture(what);
    t.open.erase(it);  // ended, whatever the driver says below
  }
  driver::ScopedContext bind(context->cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  CUgraph raw = nullptr;
  const CUresult ended = driver::Api().cuStreamEndCapture(c->stream.get(), &raw);
  c->stream.reset();  // while the context is bound
  Graph::CapturedWork work;
  work.graph = GraphGuard(raw);
  if (ended == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
    return MakeError(
        VYRE_STATUS_INVALID_STATE,
        absl::StrFormat(
            "%s: the driver invalidated the capture: a call on its stream could not be captured "
            "(a synchronisation or query of the stream, a dependency on the legacy stream or on "
            "another stream's unrelated work), or an unsafe call (an allocation, a free, a "
            "module load, a synchronisation) was made while the %s capture was open. Fix: "
            "begin a new capture and leave that call out (it returned an error naming the "
            "capture), or make it before vyre_capture_begin.",
            what, ModeName(c->mode)),
        static_cast<int32_t>(ended));
  }
  if (ended != CUDA_SUCCESS) {
    return driver::CuError(ended, what, "cuStreamEndCapture",
                           "begin a new capture; if this repeats, report it as a vyre-cuda bug "
                           "with the driver version");
  }
  if (raw == nullptr) {
    return Errorf(VYRE_STATUS_INTERNAL,
                  "%s: cuStreamEndCapture returned no graph after reporting success. Fix: "
                  "update the NVIDIA driver.",
                  what);
  }
  if (c->params_used > 0) {
    // The capture is over: the dispatches' words go up once, before any
    // replay can read them.
    VYRE_CU(what, cuMemcpyHtoDAsync, c->device_params.device(), c->pinned_params.host(),
            c->params_used, context->stream());
    context->telemetry().sync_points.Add();
    VYRE_CU(what, cuStreamSynchronize, context->stream());
    context->telemetry().h2d_operations.Add();
    context->telemetry().h2d_bytes.Add(c->params_used);
  }
  work.device_params = std::move(c->device_params);
  work.buffers = std::move(c->buffers);
  work.programs = std::move(c->programs);
  return Graph::FromCapture(context, std::move(work), what);
}

bool UserCaptureOpen(const Context& context) { return FindCapture(context) != nullptr; }

absl::Status RefuseCaptureStream(uint64_t cu_stream, const char* what) {
  CaptureTable& t = Captures();
  std::lock_guard lock(t.mu);
  for (const auto& [context, capture] : t.open) {
    if (reinterpret_cast<uint64_t>(capture->stream.get()) != cu_stream) continue;
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: cu_stream is the stream of an open vyre capture; joining it to the "
                  "context's work stream would sweep other threads' work into the capture. Fix: "
                  "enqueue library work there with vyre_capture_dispatch, or replay the graph "
                  "after vyre_capture_end.",
                  what);
  }
  return absl::OkStatus();
}

// A captured graph: the driver's inventory, instantiated and uploaded as a
// recorded one is.
absl::StatusOr<std::shared_ptr<Graph>> Graph::FromCapture(std::shared_ptr<Context> context,
                                                          CapturedWork work, const char* what) {
  std::shared_ptr<Graph> g(new Graph(std::move(context)));
  Context& ctx = *g->context_;
  g->captured_ = true;
  g->device_ = std::move(work.device_params);
  g->pinned_ = std::move(work.pinned_params);
  g->captured_buffers_ = std::move(work.buffers);
  g->captured_programs_ = std::move(work.programs);
  VYRE_ASSIGN_OR_RETURN(g->full_, InstantiateCaptured(std::move(work.graph), what));
  g->full_counts_ = Count(g->full_.ops, g->bindings_, /*with_inputs=*/true);
  VYRE_CU(what, cuGraphUpload, g->full_.exec.get(), ctx.stream());
  ctx.telemetry().sync_points.Add();
  VYRE_CU(what, cuStreamSynchronize, ctx.stream());
  ctx.telemetry().graph_records.Add();
  ctx.telemetry().live_graphs.Add();
  g->counted_ = true;
  return g;
}

}  // namespace vyre
