#include "graph/graph.h"

#include <cstring>

#include "base/checked_math.h"
#include "base/raw_enum.h"
#include "base/status.h"
#include "base/struct_size.h"
#include "driver/cu_error.h"
#include "graph/sequence.h"
#include "runtime/dispatch/dispatch_plan.h"
#include "runtime/dispatch/kernel_launch.h"

namespace vyre {
namespace {

// Parameter words a graph can take later without re-recording, at least.
constexpr uint64_t kMinParamCapacity = 256;

uint64_t Align(uint64_t bytes) { return *CheckedAlignUp(bytes, kSlabAlignment); }

}  // namespace

absl::StatusOr<std::shared_ptr<Graph>> Graph::RecordDispatch(std::shared_ptr<Program> program,
                                                             const vyre_dispatch_desc& desc,
                                                             const char* what) {
  const Program& prog = *program;
  Context& ctx = prog.context();
  DispatchPlan plan;
  VYRE_RETURN_IF_ERROR(BuildDispatchPlan(prog, desc, what, &plan));
  if (plan.flags & VYRE_DISPATCH_FLAG_COOPERATIVE) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: cooperative dispatches cannot be recorded: a graph launches its kernel "
                  "with cuLaunchKernel, which gives no grid-wide synchronisation. Fix: run "
                  "cooperative programs with vyre_dispatch.",
                  what);
  }
  std::shared_ptr<Graph> g(new Graph(prog.context_ref()));
  g->program_ = std::move(program);
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));

  // Element count and capacity class, as the dispatch derives its grid.
  g->grid_derived_ = desc.grid[0] == 0 && desc.grid[1] == 0 && desc.grid[2] == 0;
  g->threads_per_block_ = plan.block[0] * plan.block[1] * plan.block[2];
  uint64_t elements = desc.element_count;
  if (elements == 0) {
    for (const PlannedBinding& b : plan.bindings) {
      if (b.decl->role != VYRE_ROLE_SHARED) elements = std::max(elements, b.bytes / b.decl->element_size);
    }
  }
  g->element_count_ = g->recorded_count_ = elements;
  g->capacity_ = NextPowerOfTwo(elements).value_or(elements);
  if (g->grid_derived_) {
    // A replay's derived grid must fit the device's grid x too: the capacity
    // class stops at the elements its largest grid covers with these blocks
    // (the recorded count always fits: the plan checked it).
    g->capacity_ = std::max(elements, std::min(g->capacity_, g->GridCoverage()));
  }

  // Layout: device [parameter block][HOST bindings], pinned the same.
  const uint64_t words_bytes = plan.param_bytes;
  g->param_capacity_ = Align(std::max(words_bytes, kMinParamCapacity));
  uint64_t cursor = g->param_capacity_;
  g->inputs_reusable_ = true;
  bool host_inputs = false;
  g->bindings_.resize(plan.bindings.size());
  for (size_t i = 0; i < plan.bindings.size(); ++i) {
    const PlannedBinding& pb = plan.bindings[i];
    Binding& b = g->bindings_[i];
    b.decl = pb.decl;
    if (pb.decl->role == VYRE_ROLE_SHARED) continue;
    b.host = pb.host;
    b.bytes = pb.bytes;
    if (pb.host) {
      auto aligned = CheckedAlignUp(pb.bytes, kSlabAlignment);
      auto next = aligned ? CheckedAdd(cursor, *aligned) : std::nullopt;
      if (!next) {
        return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                      "%s: the HOST bindings total more than 2^64 bytes. Fix: record a smaller "
                      "dispatch.",
                      what);
      }
      b.device_offset = b.pinned_offset = cursor;
      cursor = *next;
      b.readback_offset = pb.readback_offset;
      b.readback_bytes = pb.readback_bytes;
      host_inputs = host_inputs || pb.decl->reads();
      if (pb.decl->role == VYRE_ROLE_INPUT_OUTPUT) g->inputs_reusable_ = false;
    } else {
      b.buffer = pb.buffer;
      b.offset = pb.offset;
      b.recorded_bytes = pb.bytes;
    }
    b.sized_by_count = g->grid_derived_ && pb.bytes / pb.decl->element_size == elements;
  }
  g->pinned_bytes_ = cursor > g->param_capacity_ ? cursor : 0;
  VYRE_ASSIGN_OR_RETURN(g->device_, OwnedBytes::Allocate(OwnedBytes::Kind::kDevice, ctx.cu(),
                                                         &ctx.telemetry(), cursor, what));
  VYRE_ASSIGN_OR_RETURN(g->pinned_, OwnedBytes::Allocate(OwnedBytes::Kind::kPinned, ctx.cu(),
                                                         &ctx.telemetry(), cursor, what));
  // The parameter words go up once now; the sample inputs wait in the pinned
  // buffers for the first replay.
  std::memset(g->pinned_.host(), 0, g->param_capacity_);
  if (words_bytes > 0) std::memcpy(g->pinned_.host(), plan.param_words, words_bytes);
  g->words_.assign(reinterpret_cast<const char*>(plan.param_words), words_bytes);
  for (const Binding& b : g->bindings_) {
    if (b.host && b.decl->reads()) {
      const PlannedBinding& pb = plan.bindings[&b - g->bindings_.data()];
      std::memcpy(g->pinned_.host() + b.pinned_offset, pb.host_input, b.bytes);
    }
  }
  VYRE_CU(what, cuMemcpyHtoDAsync, g->device_.device(), g->pinned_.host(), g->param_capacity_,
          ctx.stream());
  ctx.telemetry().h2d_operations.Add();
  ctx.telemetry().h2d_bytes.Add(g->param_capacity_);
  // Wait now: if recording fails below, the pinned source is freed at once.
  ctx.telemetry().sync_points.Add();
  VYRE_CU(what, cuStreamSynchronize, ctx.stream());
  g->scalars_.assign(plan.scalars, plan.scalars + plan.scalar_count);

  RecordedOp kernel;
  kernel.kind = VYRE_GRAPH_NODE_KERNEL;
  kernel.program = g->program_.get();
  for (int a = 0; a < 3; ++a) {
    kernel.shape.grid[a] = plan.grid[a];
    kernel.shape.block[a] = plan.block[a];
  }
  kernel.shape.shared_bytes = static_cast<uint32_t>(plan.shared_memory_bytes);
  const CUdeviceptr slab = g->device_.device();
  FillKernelValues(
      prog, [&](uint32_t i) -> uint64_t { return g->bindings_[i].Pointer(slab); }, slab,
      g->scalars_.data(), &kernel.values);
  VYRE_RETURN_IF_ERROR(OptInSharedMemory(prog, kernel.shape.shared_bytes, what));

  const uint32_t iterations = plan.iterations;
  Graph* self = g.get();
  auto record = [self, kernel, iterations, what](bool with_inputs, CUstream stream,
                                                 std::vector<RecordedOp>* ops) -> absl::Status {
    const CUdeviceptr dev = self->device_.device();
    unsigned char* pinned = self->pinned_.host();
    const std::vector<Binding>& bindings = self->bindings_;
    for (const Binding& b : bindings) {
      if (!with_inputs || !b.host || !b.decl->reads()) continue;
      VYRE_CU(what, cuMemcpyHtoDAsync, dev + b.device_offset, pinned + b.pinned_offset, b.bytes,
              stream);
      ops->push_back(RecordedOp{VYRE_GRAPH_NODE_MEMCPY});
    }
    for (size_t i = 0; i < bindings.size(); ++i) {
      const Binding& b = bindings[i];
      if (b.decl->role != VYRE_ROLE_OUTPUT) continue;
      CUdeviceptr at = b.Pointer(dev);
      VYRE_CU(what, cuMemsetD8Async, at, 0, b.bytes, stream);
      RecordedOp op{VYRE_GRAPH_NODE_MEMSET, at, static_cast<int>(i)};
      ops->push_back(std::move(op));
    }
    KernelValues values = kernel.values;
    KernelArgs args;
    PointKernelArgs(values, &args);
    VYRE_RETURN_IF_ERROR(LaunchKernel(*kernel.program, kernel.shape, iterations, args.data(),
                                      stream, /*cooperative=*/false, nullptr, what));
    for (uint32_t i = 0; i < iterations; ++i) ops->push_back(kernel);
    for (const Binding& b : bindings) {
      if (!b.host || !b.decl->writes()) continue;
      VYRE_CU(what, cuMemcpyDtoHAsync, pinned + b.pinned_offset + b.readback_offset,
              dev + b.device_offset + b.readback_offset, b.readback_bytes, stream);
      ops->push_back(RecordedOp{VYRE_GRAPH_NODE_MEMCPY});
    }
    return absl::OkStatus();
  };
  RecordFn full = [record](CUstream s, std::vector<RecordedOp>* ops) { return record(true, s, ops); };
  RecordFn unchanged = [record](CUstream s, std::vector<RecordedOp>* ops) {
    return record(false, s, ops);
  };
  // The graph without input copies only runs when the inputs can be reused:
  // an INPUT_OUTPUT binding's device copy changes with every run.
  const bool reusable = host_inputs && g->inputs_reusable_;
  VYRE_RETURN_IF_ERROR(g->Capture(full, reusable ? &unchanged : nullptr, what));
  for (size_t i = 0; i < g->full_.ops.size(); ++i) {
    const RecordedOp& op = g->full_.ops[i];
    if (op.kind == VYRE_GRAPH_NODE_MEMSET && op.binding >= 0) {
      g->bindings_[op.binding].memset_node = static_cast<int>(i);
    }
  }
  for (const Binding& b : g->bindings_) {
    if (b.host && b.decl->reads()) ++g->input_copies_;
  }
  g->full_counts_ = Count(g->full_.ops, g->bindings_, true);
  g->unchanged_counts_ = Count(g->unchanged_.ops, g->bindings_, false);
  return g;
}

absl::StatusOr<std::shared_ptr<Graph>> Graph::RecordSequence(std::shared_ptr<Sequence> sequence,
                                                             const char* what) {
  Context& ctx = sequence->context();
  VYRE_RETURN_IF_ERROR(sequence->CheckBuffersLive(what));
  std::shared_ptr<Graph> g(new Graph(sequence->context_ref()));
  g->sequence_ = std::move(sequence);
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  const Sequence& seq = *g->sequence_;
  g->pinned_bytes_ = seq.pinned_bytes();
  if (g->pinned_bytes_ > 0) {
    VYRE_ASSIGN_OR_RETURN(g->pinned_, OwnedBytes::Allocate(OwnedBytes::Kind::kPinned, ctx.cu(),
                                                           &ctx.telemetry(), g->pinned_bytes_,
                                                           what));
  }
  Graph* self = g.get();
  RecordFn record = [self, what](CUstream stream, std::vector<RecordedOp>* ops) {
    return self->sequence_->Enqueue(stream, self->pinned_.host(), ops, what);
  };
  VYRE_RETURN_IF_ERROR(g->Capture(record, nullptr, what));
  const SequenceCounts& c = seq.counts();
  g->full_counts_ = ExecCounts{c.h2d_bytes,        c.h2d_operations,    c.d2h_bytes,
                               c.d2h_operations,   c.memset_operations, c.kernel_launches};
  return g;
}

absl::Status Graph::Capture(const RecordFn& record_full, const RecordFn* record_unchanged,
                            const char* what) {
  Context& ctx = *context_;
  {
    std::lock_guard capture_lock(ctx.capture_mutex());
    VYRE_ASSIGN_OR_RETURN(CUstream stream, ctx.CaptureStream(what));
    bool stuck = false;
    absl::StatusOr<ExecutableGraph> full = CaptureGraph(stream, record_full, what, &stuck);
    if (full.ok() && record_unchanged != nullptr) {
      full_ = *std::move(full);
      full = CaptureGraph(stream, *record_unchanged, what, &stuck);
      if (full.ok()) unchanged_ = *std::move(full);
    } else if (full.ok()) {
      full_ = *std::move(full);
    }
    if (stuck) ctx.RetireCaptureStream();
    VYRE_RETURN_IF_ERROR(full.status());
  }
  // Upload the executable graphs now, in stream order before any replay, so
  // the first replay costs what every later one does.
  VYRE_CU(what, cuGraphUpload, full_.exec.get(), ctx.stream());
  if (unchanged_.exec) VYRE_CU(what, cuGraphUpload, unchanged_.exec.get(), ctx.stream());
  ctx.telemetry().sync_points.Add();
  VYRE_CU(what, cuStreamSynchronize, ctx.stream());
  ctx.telemetry().graph_records.Add();
  ctx.telemetry().live_graphs.Add();
  counted_ = true;
  return absl::OkStatus();
}

Graph::ExecCounts Graph::Count(const std::vector<RecordedOp>& ops,
                               const std::vector<Binding>& bindings, bool with_inputs) {
  ExecCounts c;
  for (const RecordedOp& op : ops) {
    if (op.kind == VYRE_GRAPH_NODE_MEMSET) ++c.memset_operations;
    if (op.kind == VYRE_GRAPH_NODE_KERNEL) ++c.kernel_launches;
  }
  if (ops.empty()) return c;
  for (const Binding& b : bindings) {
    if (!b.host) continue;
    if (with_inputs && b.decl->reads()) {
      ++c.h2d_operations;
      c.h2d_bytes += b.bytes;
    }
    if (b.decl->writes()) {
      ++c.d2h_operations;
      c.d2h_bytes += b.readback_bytes;
    }
  }
  return c;
}

Graph::~Graph() {
  driver::ScopedContext bind(context_->cu(), driver::ScopedContext::Purpose::kRelease);
  unchanged_ = ExecutableGraph{};
  full_ = ExecutableGraph{};
  device_.reset();
  pinned_.reset();
  if (counted_) context_->telemetry().live_graphs.Sub(1);
}

vyre_graph_info Graph::Info() {
  std::lock_guard lock(mu_);
  vyre_graph_info info{};
  info.struct_size = sizeof(info);
  info.from_sequence = sequence_ ? 1 : 0;
  info.context.bits = context_->handle();
  info.node_count = full_.nodes.size();
  for (const RecordedOp& op : full_.ops) info.kernel_node_count += op.kind == VYRE_GRAPH_NODE_KERNEL;
  info.unchanged_input_node_count = unchanged_.nodes.size();
  info.element_count = element_count_;
  info.capacity_elements = capacity_;
  info.replays = replays_;
  info.host_input_bytes = full_counts_.h2d_bytes;
  info.host_output_bytes = full_counts_.d2h_bytes;
  return info;
}

absl::StatusOr<vyre_graph_node_kind> Graph::NodeKind(uint64_t index, const char* what) {
  std::lock_guard lock(mu_);
  if (index >= full_.ops.size()) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: node index %u does not exist; the graph has %u nodes. Fix: pass an index "
                  "below vyre_graph_info.node_count.",
                  what, index, full_.ops.size());
  }
  return full_.ops[index].kind;
}

absl::Status Graph::SetKernelNode(size_t index, const RecordedOp& op, const char* what) {
  KernelValues values = op.values;
  KernelArgs args;
  PointKernelArgs(values, &args);
  CUDA_KERNEL_NODE_PARAMS params{};
  params.func = op.program->function();
  params.gridDimX = op.shape.grid[0];
  params.gridDimY = op.shape.grid[1];
  params.gridDimZ = op.shape.grid[2];
  params.blockDimX = op.shape.block[0];
  params.blockDimY = op.shape.block[1];
  params.blockDimZ = op.shape.block[2];
  params.sharedMemBytes = op.shape.shared_bytes;
  params.kernelParams = args.data();
  VYRE_CU(what, cuGraphExecKernelNodeSetParams, full_.exec.get(), full_.nodes[index], &params);
  if (unchanged_.exec) {
    VYRE_CU(what, cuGraphExecKernelNodeSetParams, unchanged_.exec.get(),
            unchanged_.nodes[index - input_copies_], &params);
  }
  return absl::OkStatus();
}

absl::Status Graph::SetMemsetNode(size_t index, CUdeviceptr dst, uint64_t bytes,
                                  const char* what) {
  CUDA_MEMSET_NODE_PARAMS params{};
  params.dst = dst;
  params.value = 0;
  params.elementSize = 1;
  params.width = bytes;
  params.height = 1;
  VYRE_CU(what, cuGraphExecMemsetNodeSetParams, full_.exec.get(), full_.nodes[index], &params,
          context_->cu());
  if (unchanged_.exec) {
    VYRE_CU(what, cuGraphExecMemsetNodeSetParams, unchanged_.exec.get(),
            unchanged_.nodes[index - input_copies_], &params, context_->cu());
  }
  return absl::OkStatus();
}

// Pushes every updatable node's current parameters (after a failed update
// left the executable graphs in an unknown mix of old and new).
absl::Status Graph::ApplyAll(const char* what) {
  const CUdeviceptr slab = device_.device();
  for (const Binding& b : bindings_) {
    if (b.memset_node >= 0) {
      VYRE_RETURN_IF_ERROR(SetMemsetNode(b.memset_node, b.Pointer(slab), b.bytes, what));
    }
  }
  for (size_t i = 0; i < full_.ops.size(); ++i) {
    if (full_.ops[i].kind == VYRE_GRAPH_NODE_KERNEL) {
      VYRE_RETURN_IF_ERROR(SetKernelNode(i, full_.ops[i], what));
    }
  }
  reapply_ = false;
  return absl::OkStatus();
}

absl::Status Graph::UpdateKernelNode(uint64_t index, const vyre_kernel_node_update& update,
                                     const char* what) {
  std::lock_guard lock(mu_);
  if (index >= full_.ops.size()) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: node index %u does not exist; the graph has %u nodes. Fix: pass an index "
                  "below vyre_graph_info.node_count.",
                  what, index, full_.ops.size());
  }
  RecordedOp op = full_.ops[index];
  if (op.kind != VYRE_GRAPH_NODE_KERNEL) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: node %u is not a kernel node. Fix: pass the index of a node whose kind "
                  "(vyre_graph_node_kind_get) is VYRE_GRAPH_NODE_KERNEL.",
                  what, index);
  }
  constexpr uint32_t kKnown = VYRE_KERNEL_NODE_UPDATE_GRID | VYRE_KERNEL_NODE_UPDATE_SCALARS;
  if (update.flags == 0 || (update.flags & ~kKnown) != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: flags 0x%x %s. Fix: set VYRE_KERNEL_NODE_UPDATE_GRID and/or "
                  "VYRE_KERNEL_NODE_UPDATE_SCALARS.",
                  what, update.flags, update.flags == 0 ? "ask for no change" : "hold unknown bits");
  }
  const vyre_device_info& device = context_->device();
  if (update.flags & VYRE_KERNEL_NODE_UPDATE_GRID) {
    for (int a = 0; a < 3; ++a) {
      if (update.grid[a] == 0) {
        return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                      "%s: grid dimension %c is 0. Fix: use at least 1 block per axis.", what,
                      "xyz"[a]);
      }
      if (update.grid[a] > device.max_grid_dim[a]) {
        return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                      "%s: grid dimension %c is %u, over the device's limit of %u. Fix: use a "
                      "smaller grid.",
                      what, "xyz"[a], update.grid[a], device.max_grid_dim[a]);
      }
      op.shape.grid[a] = update.grid[a];
    }
  }
  if (update.flags & VYRE_KERNEL_NODE_UPDATE_SCALARS) {
    const size_t needed = ScalarSlotsNeeded(*op.program);
    if (update.scalar_count > 0 && update.scalars == nullptr) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: scalars is NULL but scalar_count is %u. Fix: pass the scalar values.",
                    what, update.scalar_count);
    }
    if (update.scalar_count < needed) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: the kernel reads %u scalar slots but the update passes %u. Fix: pass "
                    "at least %u scalars.",
                    what, needed, update.scalar_count, needed);
    }
    UpdateKernelScalars(*op.program, update.scalars, &op.values);
  }
  driver::ScopedContext bind(context_->cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  absl::Status set = SetKernelNode(index, op, what);
  if (!set.ok()) {
    reapply_ = true;
    return set;
  }
  full_.ops[index] = std::move(op);
  return absl::OkStatus();
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

absl::Status Graph::Launch(const vyre_graph_replay_desc& desc, ReplayWork* work,
                           const char* what) {
  if ((desc.flags & ~uint32_t{VYRE_DISPATCH_FLAG_DEVICE_TIMING}) != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: flags 0x%x hold bits a replay does not take. Fix: pass 0 or "
                  "VYRE_DISPATCH_FLAG_DEVICE_TIMING.",
                  what, desc.flags);
  }
  if (sequence_) return LaunchSequence(desc, work, what);
  const Program& program = *program_;
  Context& ctx = *context_;
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
  uint64_t count = element_count_;
  if (desc.element_count != 0) {
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
    count = desc.element_count;
  }
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

  // Resolve every binding before changing anything.
  struct Next {
    std::shared_ptr<Buffer> buffer;
    uint64_t offset = 0;
    uint64_t bytes = 0;
    const void* host_input = nullptr;
    void* host_output = nullptr;
  };
  absl::InlinedVector<Next, 8> next(bindings_.size());
  bool resident_changed = false;
  uint32_t stride = 0;
  if (rebinding && !bindings_.empty()) {
    VYRE_ASSIGN_OR_RETURN(stride, BindingArrayStride(what, bindings_[0].decl, desc.bindings,
                                                     desc.binding_count));
  }
  for (size_t i = 0; i < bindings_.size(); ++i) {
    const Binding& b = bindings_[i];
    const BindingDecl& decl = *b.decl;
    if (decl.role == VYRE_ROLE_SHARED) continue;
    Next& n = next[i];
    if (rebinding) {
      vyre_dispatch_binding in;
      VYRE_RETURN_IF_ERROR(ReadArrayEntry(what, "vyre_dispatch_binding", "binding",
                                          "VYRE_DISPATCH_BINDING_INIT", desc.bindings, i, stride,
                                          &in));
      const uint32_t source = RawEnum(in.source);
      const uint32_t recorded = b.host ? VYRE_SOURCE_HOST : VYRE_SOURCE_RESIDENT;
      if (source != recorded) {
        return Errorf(VYRE_STATUS_SHAPE_MISMATCH,
                      "%s: binding %u ('%s') was recorded as %s but the replay passes source "
                      "%d. Fix: keep each binding's source, or record the graph again.",
                      what, i, decl.name, b.host ? "HOST" : "RESIDENT",
                      static_cast<int32_t>(source));
      }
      PlannedBinding bound;
      uint64_t elements = 0;
      if (b.host) {
        if (in.host_bytes != b.bytes) {
          return Errorf(VYRE_STATUS_SHAPE_MISMATCH,
                        "%s: binding %u ('%s') passes %u host bytes but the graph was recorded "
                        "with %u. Fix: replay with the recorded lengths, or record the graph "
                        "again for this shape.",
                        what, i, decl.name, in.host_bytes, b.bytes);
        }
        VYRE_RETURN_IF_ERROR(BindHost(what, i, decl, in, &bound));
        n.host_input = in.host_input;
        n.host_output = in.host_output;
        if (b.sized_by_count && count * decl.element_size > b.bytes) {
          return Errorf(VYRE_STATUS_SHAPE_MISMATCH,
                        "%s: element_count %u needs %u elements in HOST binding %u ('%s'), "
                        "which was recorded with %u. Fix: record the graph again for %u "
                        "elements.",
                        what, count, count, i, decl.name, b.bytes / decl.element_size, count);
        }
        continue;
      }
      VYRE_RETURN_IF_ERROR(BindResident(what, i, decl, ctx, in, &bound));
      VYRE_RETURN_IF_ERROR(CheckLength(what, i, decl, &bound, &elements));
      n.buffer = std::move(bound.buffer);
      n.offset = bound.offset;
      n.bytes = bound.bytes;
      resident_changed = resident_changed || n.buffer != b.buffer || n.offset != b.offset ||
                         n.bytes != b.bytes;
    } else {
      // Kept as bound: next[i].buffer stays empty (nothing changes hands).
      n.offset = b.offset;
      n.bytes = b.bytes;
      if (b.buffer->freed()) {
        return Errorf(VYRE_STATUS_STALE_HANDLE,
                      "%s: binding %u ('%s') is bound to a buffer that was freed. Fix: rebind "
                      "it to a live buffer through vyre_graph_replay_desc.bindings.",
                      what, i, decl.name);
      }
    }
    const uint64_t needed =
        b.sized_by_count ? count * decl.element_size : b.recorded_bytes;
    if (n.bytes < needed) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: binding %u ('%s') is bound to %u bytes but the graph needs %u there "
                    "(%u elements of %u bytes). Fix: bind a range of at least %u bytes, or "
                    "record the graph again.",
                    what, i, decl.name, n.bytes, needed, needed / decl.element_size,
                    decl.element_size, needed);
    }
  }

  // The new node parameters: every kernel node gets the new pointers,
  // scalars and grid; what the replay does not change is left as it is (a
  // vyre_graph_kernel_node_update included).
  const CUdeviceptr slab = device_.device();
  auto pointer_of = [&](uint32_t i) -> uint64_t {
    return bindings_[i].host ? slab + bindings_[i].device_offset
                             : next[i].buffer->device() + next[i].offset;
  };
  // count <= capacity_ <= GridCoverage(): the blocks fit grid x.
  const uint32_t grid_x = static_cast<uint32_t>(std::max<uint64_t>(BlocksFor(count), 1));
  absl::InlinedVector<RecordedOp, 4> kernels;
  absl::InlinedVector<size_t, 4> kernel_nodes;
  // A replay that changes nothing touches no node (the steady state).
  const bool kernels_change =
      resident_changed || desc.scalars != nullptr || count != element_count_;
  for (size_t i = 0; kernels_change && i < full_.ops.size(); ++i) {
    if (full_.ops[i].kind != VYRE_GRAPH_NODE_KERNEL) continue;
    RecordedOp op = full_.ops[i];
    if (resident_changed) UpdateKernelBindings(program, pointer_of, &op.values);
    if (desc.scalars != nullptr) UpdateKernelScalars(program, desc.scalars, &op.values);
    if (count != element_count_) op.shape.grid[0] = grid_x;
    kernels.push_back(std::move(op));
    kernel_nodes.push_back(i);
  }
  if (reapply_) VYRE_RETURN_IF_ERROR(ApplyAll(what));
  absl::Status updated;
  for (size_t i = 0; resident_changed && i < bindings_.size() && updated.ok(); ++i) {
    const Binding& b = bindings_[i];
    if (b.memset_node < 0 || b.host) continue;
    if (next[i].buffer == b.buffer && next[i].offset == b.offset && next[i].bytes == b.bytes) {
      continue;
    }
    updated = SetMemsetNode(b.memset_node, next[i].buffer->device() + next[i].offset,
                            next[i].bytes, what);
  }
  for (size_t k = 0; k < kernels.size() && updated.ok(); ++k) {
    const RecordedOp& now = full_.ops[kernel_nodes[k]];
    if (now.values == kernels[k].values &&
        std::equal(now.shape.grid, now.shape.grid + 3, kernels[k].shape.grid)) {
      continue;
    }
    updated = SetKernelNode(kernel_nodes[k], kernels[k], what);
  }
  if (!updated.ok()) {
    // Some nodes may hold the new parameters: the next call pushes the
    // current ones to all of them.
    reapply_ = true;
    return updated;
  }
  for (size_t k = 0; k < kernels.size(); ++k) full_.ops[kernel_nodes[k]] = std::move(kernels[k]);
  for (size_t i = 0; resident_changed && i < bindings_.size(); ++i) {
    Binding& b = bindings_[i];
    if (b.decl->role == VYRE_ROLE_SHARED || b.host) continue;
    b.buffer = std::move(next[i].buffer);
    b.offset = next[i].offset;
    b.bytes = next[i].bytes;
  }
  element_count_ = count;
  if (desc.scalars != nullptr) scalars_.assign(desc.scalars, desc.scalars + desc.scalar_count);

  // Parameter words, rewritten in stream order: replays already queued keep
  // reading the old ones.
  if (desc.param_words != nullptr) {
    absl::string_view words(reinterpret_cast<const char*>(desc.param_words),
                            desc.param_word_count * 4);
    if (words != words_) {
      // The whole block: words past a shorter list read 0, as at record.
      const uint64_t bytes = param_capacity_;
      VYRE_ASSIGN_OR_RETURN(work->param_staging, ctx.pinned_pool().Acquire(bytes, what));
      std::memset(work->param_staging.host(), 0, bytes);
      std::memcpy(work->param_staging.host(), words.data(), words.size());
      VYRE_CU(what, cuMemcpyHtoDAsync, slab, work->param_staging.host(), bytes, ctx.stream());
      ctx.telemetry().h2d_operations.Add();
      ctx.telemetry().h2d_bytes.Add(bytes);
      words_.assign(words.data(), words.size());
    }
  }

  // HOST inputs: equal bytes to what the device already holds skip the copies.
  bool unchanged_inputs = unchanged_.exec && device_inputs_valid_ && inputs_reusable_;
  for (size_t i = 0; i < bindings_.size(); ++i) {
    const Binding& b = bindings_[i];
    if (!b.host) continue;
    if (b.decl->reads()) {
      unsigned char* staged = pinned_.host() + b.pinned_offset;
      if (std::memcmp(staged, next[i].host_input, b.bytes) != 0) {
        // Until a full replay has run, the device holds other bytes.
        device_inputs_valid_ = false;
        std::memcpy(staged, next[i].host_input, b.bytes);
        unchanged_inputs = false;
      }
    }
    if (b.decl->writes()) {
      work->outputs.push_back({pinned_.host() + b.pinned_offset + b.readback_offset,
                               static_cast<unsigned char*>(next[i].host_output) + b.readback_offset,
                               b.readback_bytes});
    }
  }
  if (work->keep_buffers) {
    for (const Binding& b : bindings_) {
      if (b.buffer) work->buffers.push_back(b.buffer);
    }
  }
  VYRE_RETURN_IF_ERROR(LaunchExec(unchanged_inputs, what));
  device_inputs_valid_ = true;
  return absl::OkStatus();
}

}  // namespace vyre
