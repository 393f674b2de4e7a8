// Replaying a graph: the replay's plan, its node updates, staging and launch.
#include "graph/graph.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/string_view.h"
#include "base/raw_enum.h"
#include "base/status.h"
#include "base/struct_size.h"
#include "driver/cu_error.h"
#include "graph/sequence.h"
#include "runtime/dispatch/dispatch_plan.h"
#include "runtime/dispatch/kernel_launch.h"

namespace vyre {
namespace {

// What an OUTPUT binding's zeroing node does: one row of bytes set to 0.
CUDA_MEMSET_NODE_PARAMS ZeroFill(CUdeviceptr dst, uint64_t bytes) {
  CUDA_MEMSET_NODE_PARAMS params{};
  params.dst = dst;
  params.value = 0;
  params.elementSize = 1;
  params.width = bytes;
  params.height = 1;
  return params;
}

}  // namespace

absl::Status Graph::Launch(const vyre_graph_replay_desc& desc, ReplayWork* work,
                           const char* what) {
  if ((desc.flags & ~uint32_t{VYRE_DISPATCH_FLAG_DEVICE_TIMING}) != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: flags 0x%x hold bits a replay does not take. Fix: pass 0 or "
                  "VYRE_DISPATCH_FLAG_DEVICE_TIMING.",
                  what, desc.flags);
  }
  if (sequence_) return LaunchSequence(desc, work, what);
  if (captured_) return LaunchCaptured(desc, what);
  absl::Status launched = LaunchDispatch(desc, work, what);
  launch_plan_.Release();
  return launched;
}

absl::Status Graph::LaunchSequence(const vyre_graph_replay_desc& desc, ReplayWork* work,
                                   const char* what) {
  if (desc.bindings != nullptr || desc.binding_count != 0 || desc.element_count != 0 ||
      desc.param_words != nullptr || desc.param_word_count != 0 || desc.scalars != nullptr ||
      desc.scalar_count != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: this graph was recorded from a sequence, which takes no bindings, "
                  "element count, parameter words or scalars at replay. Fix: pass a NULL "
                  "desc (or only flags); change a kernel node with "
                  "vyre_graph_kernel_node_update, or create and record another sequence.",
                  what);
  }
  const Sequence& seq = *sequence_;
  VYRE_RETURN_IF_ERROR(seq.CheckBuffersLive(what));
  if (reapply_) VYRE_RETURN_IF_ERROR(ApplyAll(what));
  seq.StageUploads(pinned_.host());
  VYRE_RETURN_IF_ERROR(LaunchExec(/*unchanged_inputs=*/false, what));
  work->downloads_of = &seq;
  work->pinned = pinned_.host();
  return absl::OkStatus();
}

// A captured graph replays as captured: nothing to bind or change.
absl::Status Graph::LaunchCaptured(const vyre_graph_replay_desc& desc, const char* what) {
  if (desc.bindings != nullptr || desc.binding_count != 0 || desc.element_count != 0 ||
      desc.param_words != nullptr || desc.param_word_count != 0 || desc.scalars != nullptr ||
      desc.scalar_count != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: this graph was %s, which takes no bindings, element count, parameter "
                  "words or scalars at replay. Fix: pass a NULL desc (or only flags); %s.",
                  what,
                  loop_body_ ? "made by vyre_graph_loop_create" : "captured (vyre_capture_end)",
                  loop_body_ ? "change the body and create the loop again"
                             : "capture again for other buffers or values");
  }
  for (const std::shared_ptr<Buffer>& buffer : captured_buffers_) {
    if (buffer->freed()) {
      return Errorf(VYRE_STATUS_STALE_HANDLE,
                    "%s: %s uses a buffer that was freed. Fix: keep %s until the graph is "
                    "destroyed, or %s with live buffers.",
                    what,
                    loop_body_ ? "this loop's condition or count word"
                               : "a dispatch captured into this graph",
                    loop_body_ ? "the loop's buffers" : "the buffers of captured dispatches",
                    loop_body_ ? "create the loop again" : "capture again");
    }
  }
  if (loop_body_) VYRE_RETURN_IF_ERROR(loop_body_->CheckLoopBodyLive(what));
  if (reapply_) VYRE_RETURN_IF_ERROR(ApplyAll(what));
  return LaunchExec(/*unchanged_inputs=*/false, what);
}

absl::Status Graph::LaunchDispatch(const vyre_graph_replay_desc& desc, ReplayWork* work,
                                   const char* what) {
  GraphLaunchPlan& plan = launch_plan_;
  VYRE_RETURN_IF_ERROR(PlanLaunch(desc, &plan, what));
  if (reapply_) VYRE_RETURN_IF_ERROR(ApplyAll(what));
  VYRE_RETURN_IF_ERROR(PushNodeUpdates(plan, what));
  CommitPlan(desc, &plan);
  VYRE_RETURN_IF_ERROR(UploadParamWords(desc, work, what));
  const bool unchanged_inputs = StageHostInputs(plan, work);
  if (work->keep_buffers) {
    for (const Binding& b : bindings_) {
      if (b.buffer) work->buffers.push_back(b.buffer);
    }
  }
  VYRE_RETURN_IF_ERROR(LaunchExec(unchanged_inputs, what));
  device_inputs_valid_ = true;
  return absl::OkStatus();
}

// Checks the whole replay and resolves every binding before anything
// changes.
absl::Status Graph::PlanLaunch(const vyre_graph_replay_desc& desc, GraphLaunchPlan* plan,
                               const char* what) const {
  plan->Begin(bindings_.size());
  plan->rebinding = desc.bindings != nullptr;
  VYRE_RETURN_IF_ERROR(CheckReplayBindings(desc, what));
  VYRE_RETURN_IF_ERROR(CheckReplayCount(desc, &plan->count, what));
  VYRE_RETURN_IF_ERROR(CheckReplayValues(desc, what));
  VYRE_RETURN_IF_ERROR(ResolveBindings(desc, plan, what));
  PlanKernelUpdates(desc, plan);
  return absl::OkStatus();
}

absl::Status Graph::CheckReplayBindings(const vyre_graph_replay_desc& desc,
                                        const char* what) const {
  const bool rebinding = desc.bindings != nullptr;
  if (!rebinding && desc.binding_count > 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: bindings is NULL but binding_count is %u. Fix: pass the binding array, "
                  "or NULL with a count of 0 to keep the current resident bindings.",
                  what, desc.binding_count);
  }
  if (!rebinding && has_host_staging()) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the graph has HOST bindings but the replay passes none. Fix: pass one "
                  "vyre_dispatch_binding per declared binding with this replay's host data.",
                  what);
  }
  if (rebinding && desc.binding_count != bindings_.size()) {
    return Errorf(VYRE_STATUS_SHAPE_MISMATCH,
                  "%s: the replay passes %u bindings but the graph was recorded with %u. Fix: "
                  "pass one binding per declared binding, or record the graph again for this "
                  "shape.",
                  what, desc.binding_count, bindings_.size());
  }
  return absl::OkStatus();
}

// The element count the replay runs: the current one, or a new one within
// the capacity class and the device's grid.
absl::Status Graph::CheckReplayCount(const vyre_graph_replay_desc& desc, uint64_t* count,
                                     const char* what) const {
  *count = element_count_;
  if (desc.element_count == 0) return absl::OkStatus();
  if (!grid_derived_) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: element_count %u needs a derived grid, but the graph was recorded with "
                  "an explicit grid. Fix: record with an all-zero grid, or pass "
                  "element_count 0.",
                  what, desc.element_count);
  }
  if (desc.element_count > capacity_ && desc.element_count > GridCoverage()) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: element_count %u needs %u blocks of %u threads, over the device's grid "
                  "limit of %u blocks. Fix: replay with at most %u elements, or record the "
                  "graph with larger blocks or an explicit grid.",
                  what, desc.element_count, BlocksFor(desc.element_count), threads_per_block_,
                  context_->device().max_grid_dim[0], capacity_);
  }
  if (desc.element_count > capacity_) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: element_count %u is above the graph's capacity class of %u elements "
                  "(recorded for %u). Fix: record the graph again for at least %u elements.",
                  what, desc.element_count, capacity_, recorded_count_, desc.element_count);
  }
  *count = desc.element_count;
  return absl::OkStatus();
}

// Scalars and parameter words: given with their arrays, and enough of them.
absl::Status Graph::CheckReplayValues(const vyre_graph_replay_desc& desc,
                                      const char* what) const {
  const Program& program = *program_;
  if (desc.scalar_count > 0 && desc.scalars == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: scalars is NULL but scalar_count is %u. Fix: pass the scalar values, or "
                  "NULL with a count of 0 to keep the current ones.",
                  what, desc.scalar_count);
  }
  if (desc.scalars != nullptr && desc.scalar_count < ScalarSlotsNeeded(program)) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the kernel reads %u scalar slots but the replay passes %u. Fix: pass at "
                  "least %u scalars.",
                  what, ScalarSlotsNeeded(program), desc.scalar_count,
                  ScalarSlotsNeeded(program));
  }
  if (desc.param_word_count > 0 && desc.param_words == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: param_words is NULL but param_word_count is %u. Fix: pass the words, or "
                  "NULL with a count of 0 to keep the current ones.",
                  what, desc.param_word_count);
  }
  if (desc.param_words != nullptr && desc.param_word_count > param_capacity_ / 4) {
    return Errorf(VYRE_STATUS_SHAPE_MISMATCH,
                  "%s: %u parameter words do not fit the graph's %u-word parameter block. Fix: "
                  "record the graph again with this many parameter words.",
                  what, desc.param_word_count, param_capacity_ / 4);
  }
  return absl::OkStatus();
}

absl::Status Graph::ResolveBindings(const vyre_graph_replay_desc& desc, GraphLaunchPlan* plan,
                                    const char* what) const {
  uint32_t stride = 0;
  if (plan->rebinding && !bindings_.empty()) {
    VYRE_ASSIGN_OR_RETURN(stride, BindingArrayStride(what, bindings_[0].decl, desc.bindings,
                                                     desc.binding_count));
  }
  for (size_t i = 0; i < bindings_.size(); ++i) {
    if (bindings_[i].decl->role == VYRE_ROLE_SHARED) continue;
    if (!plan->rebinding) {
      VYRE_RETURN_IF_ERROR(KeepBinding(i, plan, what));
      continue;
    }
    vyre_dispatch_binding in;
    VYRE_RETURN_IF_ERROR(ReadArrayEntry(what, "vyre_dispatch_binding", "binding",
                                        "VYRE_DISPATCH_BINDING_INIT", desc.bindings, i, stride,
                                        &in));
    VYRE_RETURN_IF_ERROR(Rebind(i, in, plan, what));
  }
  return absl::OkStatus();
}

// Binding i as the replay passes it, which keeps the recorded source.
absl::Status Graph::Rebind(size_t i, const vyre_dispatch_binding& in, GraphLaunchPlan* plan,
                           const char* what) const {
  const Binding& b = bindings_[i];
  const uint32_t source = RawEnum(in.source);
  const uint32_t recorded = b.host ? VYRE_SOURCE_HOST : VYRE_SOURCE_RESIDENT;
  if (source != recorded) {
    return Errorf(VYRE_STATUS_SHAPE_MISMATCH,
                  "%s: binding %u ('%s') was recorded as %s but the replay passes source "
                  "%d. Fix: keep each binding's source, or record the graph again.",
                  what, i, b.decl->name, b.host ? "HOST" : "RESIDENT",
                  static_cast<int32_t>(source));
  }
  if (b.host) return RebindHost(i, in, plan, what);
  VYRE_RETURN_IF_ERROR(RebindResident(i, in, plan, what));
  return CheckBoundBytes(i, plan->bindings[i].bytes, plan->count, what);
}

// A HOST binding keeps the graph's memory and its recorded length: only the
// caller's pointers change.
absl::Status Graph::RebindHost(size_t i, const vyre_dispatch_binding& in, GraphLaunchPlan* plan,
                               const char* what) const {
  const Binding& b = bindings_[i];
  const BindingDecl& decl = *b.decl;
  if (in.host_bytes != b.bytes) {
    return Errorf(VYRE_STATUS_SHAPE_MISMATCH,
                  "%s: binding %u ('%s') passes %u host bytes but the graph was recorded "
                  "with %u. Fix: replay with the recorded lengths, or record the graph "
                  "again for this shape.",
                  what, i, decl.name, in.host_bytes, b.bytes);
  }
  PlannedBinding bound;
  VYRE_RETURN_IF_ERROR(BindHost(what, i, decl, in, &bound));
  GraphLaunchPlan::Binding& n = plan->bindings[i];
  n.host_input = in.host_input;
  n.host_output = in.host_output;
  const uint64_t count = plan->count;
  if (b.sized_by_count && count * decl.element_size > b.bytes) {
    return Errorf(VYRE_STATUS_SHAPE_MISMATCH,
                  "%s: element_count %u needs %u elements in HOST binding %u ('%s'), "
                  "which was recorded with %u. Fix: record the graph again for %u "
                  "elements.",
                  what, count, count, i, decl.name, b.bytes / decl.element_size, count);
  }
  return absl::OkStatus();
}

absl::Status Graph::RebindResident(size_t i, const vyre_dispatch_binding& in,
                                   GraphLaunchPlan* plan, const char* what) const {
  const Binding& b = bindings_[i];
  PlannedBinding bound;
  uint64_t elements = 0;
  VYRE_RETURN_IF_ERROR(BindResident(what, i, *b.decl, *context_, in, &bound));
  VYRE_RETURN_IF_ERROR(CheckLength(what, i, *b.decl, &bound, &elements));
  GraphLaunchPlan::Binding& n = plan->bindings[i];
  n.buffer = std::move(bound.buffer);
  n.offset = bound.offset;
  n.bytes = bound.bytes;
  plan->resident_changed = plan->resident_changed || n.buffer != b.buffer ||
                           n.offset != b.offset || n.bytes != b.bytes;
  return absl::OkStatus();
}

// A binding the replay does not pass stays as bound (its plan entry holds no
// buffer: nothing changes hands).
absl::Status Graph::KeepBinding(size_t i, GraphLaunchPlan* plan, const char* what) const {
  const Binding& b = bindings_[i];
  GraphLaunchPlan::Binding& n = plan->bindings[i];
  n.offset = b.offset;
  n.bytes = b.bytes;
  if (b.buffer->freed()) {
    return Errorf(VYRE_STATUS_STALE_HANDLE,
                  "%s: binding %u ('%s') is bound to a buffer that was freed. Fix: rebind "
                  "it to a live buffer through vyre_graph_replay_desc.bindings.",
                  what, i, b.decl->name);
  }
  return CheckBoundBytes(i, n.bytes, plan->count, what);
}

// A RESIDENT range must hold what the graph reads and writes there: the
// replay's element count where the binding is sized by it, else the
// recorded length.
absl::Status Graph::CheckBoundBytes(size_t i, uint64_t bytes, uint64_t count,
                                    const char* what) const {
  const Binding& b = bindings_[i];
  const BindingDecl& decl = *b.decl;
  const uint64_t needed = b.sized_by_count ? count * decl.element_size : b.recorded_bytes;
  if (bytes < needed) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: binding %u ('%s') is bound to %u bytes but the graph needs %u there "
                  "(%u elements of %u bytes). Fix: bind a range of at least %u bytes, or "
                  "record the graph again.",
                  what, i, decl.name, bytes, needed, needed / decl.element_size,
                  decl.element_size, needed);
  }
  return absl::OkStatus();
}

// The new node parameters: every kernel node gets the new pointers,
// scalars and grid; what the replay does not change is left as it is (a
// vyre_graph_kernel_node_update included).
void Graph::PlanKernelUpdates(const vyre_graph_replay_desc& desc, GraphLaunchPlan* plan) const {
  const bool count_changed = plan->count != element_count_;
  // A replay that changes nothing touches no node (the steady state).
  if (!plan->resident_changed && desc.scalars == nullptr && !count_changed) return;
  const CUdeviceptr slab = device_.device();
  const GraphLaunchPlan::Binding* next = plan->bindings.data();
  auto pointer_of = [&](uint32_t i) -> uint64_t {
    return bindings_[i].host ? slab + bindings_[i].device_offset
                             : next[i].buffer->device() + next[i].offset;
  };
  // count <= capacity_ <= GridCoverage(): the blocks fit grid x.
  const uint32_t grid_x = static_cast<uint32_t>(std::max<uint64_t>(BlocksFor(plan->count), 1));
  for (size_t i = 0; i < full_.ops.size(); ++i) {
    if (full_.ops[i].kind != VYRE_GRAPH_NODE_KERNEL) continue;
    RecordedOp op = full_.ops[i];
    if (plan->resident_changed) UpdateKernelBindings(*program_, pointer_of, &op.values);
    if (desc.scalars != nullptr) UpdateKernelScalars(*program_, desc.scalars, &op.values);
    if (count_changed) op.shape.grid[0] = grid_x;
    plan->kernels.push_back(std::move(op));
    plan->kernel_nodes.push_back(i);
  }
}

absl::Status Graph::PushNodeUpdates(const GraphLaunchPlan& plan, const char* what) {
  absl::Status updated = PushMemsetUpdates(plan, what);
  if (updated.ok()) updated = PushKernelUpdates(plan, what);
  if (!updated.ok()) {
    // Some nodes may hold the new parameters: the next call pushes the
    // current ones to all of them.
    reapply_ = true;
    return updated;
  }
  return absl::OkStatus();
}

// OUTPUT bindings rebound to another range: their zeroing nodes follow.
absl::Status Graph::PushMemsetUpdates(const GraphLaunchPlan& plan, const char* what) {
  if (!plan.resident_changed) return absl::OkStatus();
  for (size_t i = 0; i < bindings_.size(); ++i) {
    const Binding& b = bindings_[i];
    if (b.memset_node < 0 || b.host) continue;
    const GraphLaunchPlan::Binding& n = plan.bindings[i];
    if (n.buffer == b.buffer && n.offset == b.offset && n.bytes == b.bytes) continue;
    VYRE_RETURN_IF_ERROR(SetMemsetNode(
        b.memset_node, ZeroFill(n.buffer->device() + n.offset, n.bytes), what));
  }
  return absl::OkStatus();
}

// Kernel nodes whose values or grid differ from what they hold now.
absl::Status Graph::PushKernelUpdates(const GraphLaunchPlan& plan, const char* what) {
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const RecordedOp& now = full_.ops[plan.kernel_nodes[k]];
    const RecordedOp& next = plan.kernels[k];
    if (now.values == next.values &&
        std::equal(now.shape.grid, now.shape.grid + 3, next.shape.grid)) {
      continue;
    }
    VYRE_RETURN_IF_ERROR(SetKernelNode(plan.kernel_nodes[k], next, what));
  }
  return absl::OkStatus();
}

// The nodes hold the plan now: so does the graph's own record of them.
void Graph::CommitPlan(const vyre_graph_replay_desc& desc, GraphLaunchPlan* plan) {
  for (size_t k = 0; k < plan->kernels.size(); ++k) {
    full_.ops[plan->kernel_nodes[k]] = std::move(plan->kernels[k]);
  }
  for (size_t i = 0; plan->resident_changed && i < bindings_.size(); ++i) {
    Binding& b = bindings_[i];
    if (b.decl->role == VYRE_ROLE_SHARED || b.host) continue;
    GraphLaunchPlan::Binding& n = plan->bindings[i];
    if (b.memset_node >= 0 &&
        (n.buffer != b.buffer || n.offset != b.offset || n.bytes != b.bytes)) {
      // The node zeroes the new range now (PushMemsetUpdates), whatever
      // vyre_graph_node_info_set had made of it.
      full_.ops[b.memset_node].memset = ZeroFill(n.buffer->device() + n.offset, n.bytes);
    }
    b.buffer = std::move(n.buffer);
    b.offset = n.offset;
    b.bytes = n.bytes;
  }
  element_count_ = plan->count;
  if (desc.scalars != nullptr) scalars_.assign(desc.scalars, desc.scalars + desc.scalar_count);
}

// Parameter words, rewritten in stream order: replays already queued keep
// reading the old ones.
absl::Status Graph::UploadParamWords(const vyre_graph_replay_desc& desc, ReplayWork* work,
                                     const char* what) {
  if (desc.param_words == nullptr) return absl::OkStatus();
  absl::string_view words(reinterpret_cast<const char*>(desc.param_words),
                          desc.param_word_count * 4);
  if (words == words_) return absl::OkStatus();
  Context& ctx = *context_;
  // The whole block: words past a shorter list read 0, as at record.
  const uint64_t bytes = param_capacity_;
  VYRE_ASSIGN_OR_RETURN(work->param_staging, ctx.pinned_pool().Acquire(bytes, what));
  std::memset(work->param_staging.host(), 0, bytes);
  std::memcpy(work->param_staging.host(), words.data(), words.size());
  VYRE_CU(what, cuMemcpyHtoDAsync, device_.device(), work->param_staging.host(), bytes,
          ctx.stream());
  ctx.telemetry().h2d_operations.Add();
  ctx.telemetry().h2d_bytes.Add(bytes);
  words_.assign(words.data(), words.size());
  return absl::OkStatus();
}

// HOST inputs: equal bytes to what the device already holds skip the copies.
// Returns whether the graph without input copies can run.
bool Graph::StageHostInputs(const GraphLaunchPlan& plan, ReplayWork* work) {
  bool unchanged_inputs = unchanged_.exec && device_inputs_valid_ && inputs_reusable_;
  for (size_t i = 0; i < bindings_.size(); ++i) {
    const Binding& b = bindings_[i];
    if (!b.host) continue;
    const GraphLaunchPlan::Binding& n = plan.bindings[i];
    if (b.decl->reads()) {
      unsigned char* staged = pinned_.host() + b.pinned_offset;
      if (std::memcmp(staged, n.host_input, b.bytes) != 0) {
        // Until a full replay has run, the device holds other bytes.
        device_inputs_valid_ = false;
        std::memcpy(staged, n.host_input, b.bytes);
        unchanged_inputs = false;
      }
    }
    if (b.decl->writes()) {
      work->outputs.push_back({pinned_.host() + b.pinned_offset + b.readback_offset,
                               static_cast<unsigned char*>(n.host_output) + b.readback_offset,
                               b.readback_bytes});
    }
  }
  return unchanged_inputs;
}

absl::Status Graph::LaunchExec(bool unchanged_inputs, const char* what) {
  Context& ctx = *context_;
  const ExecutableGraph& exec = unchanged_inputs ? unchanged_ : full_;
  VYRE_CU(what, cuGraphLaunch, exec.exec.get(), ctx.stream());
  const ExecCounts& c = unchanged_inputs ? unchanged_counts_ : full_counts_;
  Telemetry& t = ctx.telemetry();
  t.graph_replays.Add();
  t.graph_launches.Add();
  if (unchanged_inputs) t.graph_uploads_skipped.Add();
  // Each counter is an atomic add: skip the ones this graph never moves.
  auto add = [](Counter& counter, uint64_t n) {
    if (n != 0) counter.Add(n);
  };
  add(t.h2d_bytes, c.h2d_bytes);
  add(t.h2d_operations, c.h2d_operations);
  add(t.d2h_bytes, c.d2h_bytes);
  add(t.d2h_operations, c.d2h_operations);
  add(t.memset_operations, c.memset_operations);
  add(t.kernel_launches, c.kernel_launches);
  ++replays_;
  return absl::OkStatus();
}

}  // namespace vyre
