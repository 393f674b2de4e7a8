// Recording a dispatch or a sequence into a graph's executable graphs.
#include "graph/graph.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "base/checked_math.h"
#include "base/status.h"
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
  DispatchPlan plan;
  VYRE_RETURN_IF_ERROR(BuildDispatchPlan(*program, desc, what, &plan));
  if (plan.flags & VYRE_DISPATCH_FLAG_COOPERATIVE) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: cooperative dispatches cannot be recorded: a graph launches its kernel "
                  "with cuLaunchKernel, which gives no grid-wide synchronisation. Fix: run "
                  "cooperative programs with vyre_dispatch.",
                  what);
  }
  std::shared_ptr<Graph> g(new Graph(program->context_ref()));
  g->program_ = std::move(program);
  driver::ScopedContext bind(g->context_->cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  g->DeriveShape(plan, desc);
  VYRE_ASSIGN_OR_RETURN(const Layout layout, g->LayOutBindings(plan, what));
  VYRE_RETURN_IF_ERROR(g->StageRecordInputs(plan, layout.slab_bytes, what));
  RecordedOp kernel;
  VYRE_RETURN_IF_ERROR(g->BuildKernelOp(plan, &kernel, what));
  VYRE_RETURN_IF_ERROR(g->CaptureDispatch(kernel, plan.iterations, layout.host_inputs, what));
  g->IndexNodes();
  return g;
}

// Element count and capacity class, as the dispatch derives its grid.
void Graph::DeriveShape(const DispatchPlan& plan, const vyre_dispatch_desc& desc) {
  grid_derived_ = desc.grid[0] == 0 && desc.grid[1] == 0 && desc.grid[2] == 0;
  threads_per_block_ = plan.block[0] * plan.block[1] * plan.block[2];
  uint64_t elements = desc.element_count;
  if (elements == 0) {
    for (const PlannedBinding& b : plan.bindings) {
      if (b.decl->role == VYRE_ROLE_SHARED) continue;
      elements = std::max(elements, b.bytes / b.decl->element_size);
    }
  }
  element_count_ = recorded_count_ = elements;
  capacity_ = NextPowerOfTwo(elements).value_or(elements);
  if (grid_derived_) {
    // A replay's derived grid must fit the device's grid x too: the capacity
    // class stops at the elements its largest grid covers with these blocks
    // (the recorded count always fits: the plan checked it).
    capacity_ = std::max(elements, std::min(capacity_, GridCoverage()));
  }
}

// Layout: device [parameter block][HOST bindings], pinned the same.
absl::StatusOr<Graph::Layout> Graph::LayOutBindings(const DispatchPlan& plan, const char* what) {
  param_capacity_ = Align(std::max(plan.param_bytes, kMinParamCapacity));
  Layout layout;
  layout.slab_bytes = param_capacity_;
  inputs_reusable_ = true;
  bindings_.resize(plan.bindings.size());
  for (size_t i = 0; i < plan.bindings.size(); ++i) {
    const PlannedBinding& pb = plan.bindings[i];
    Binding& b = bindings_[i];
    b.decl = pb.decl;
    if (pb.decl->role == VYRE_ROLE_SHARED) continue;
    b.host = pb.host;
    b.bytes = pb.bytes;
    if (pb.host) {
      VYRE_RETURN_IF_ERROR(PlaceHostBinding(pb, &b, &layout, what));
    } else {
      b.buffer = pb.buffer;
      b.offset = pb.offset;
      b.recorded_bytes = pb.bytes;
    }
    b.sized_by_count = grid_derived_ && pb.bytes / pb.decl->element_size == recorded_count_;
  }
  pinned_bytes_ = layout.slab_bytes > param_capacity_ ? layout.slab_bytes : 0;
  return layout;
}

absl::Status Graph::PlaceHostBinding(const PlannedBinding& pb, Binding* b, Layout* layout,
                                     const char* what) {
  auto aligned = CheckedAlignUp(pb.bytes, kSlabAlignment);
  auto next = aligned ? CheckedAdd(layout->slab_bytes, *aligned) : std::nullopt;
  if (!next) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: the HOST bindings total more than 2^64 bytes. Fix: record a smaller "
                  "dispatch.",
                  what);
  }
  b->device_offset = b->pinned_offset = layout->slab_bytes;
  layout->slab_bytes = *next;
  b->readback_offset = pb.readback_offset;
  b->readback_bytes = pb.readback_bytes;
  layout->host_inputs = layout->host_inputs || pb.decl->reads();
  if (pb.decl->role == VYRE_ROLE_INPUT_OUTPUT) inputs_reusable_ = false;
  return absl::OkStatus();
}

// The parameter words go up once now; the sample inputs wait in the pinned
// buffers for the first replay.
absl::Status Graph::StageRecordInputs(const DispatchPlan& plan, uint64_t slab_bytes,
                                      const char* what) {
  Context& ctx = *context_;
  VYRE_ASSIGN_OR_RETURN(device_, OwnedBytes::Allocate(OwnedBytes::Kind::kDevice, ctx.cu(),
                                                      &ctx.telemetry(), slab_bytes, what));
  VYRE_ASSIGN_OR_RETURN(pinned_, OwnedBytes::Allocate(OwnedBytes::Kind::kPinned, ctx.cu(),
                                                      &ctx.telemetry(), slab_bytes, what));
  const uint64_t words_bytes = plan.param_bytes;
  std::memset(pinned_.host(), 0, param_capacity_);
  if (words_bytes > 0) std::memcpy(pinned_.host(), plan.param_words, words_bytes);
  words_.assign(reinterpret_cast<const char*>(plan.param_words), words_bytes);
  for (size_t i = 0; i < bindings_.size(); ++i) {
    const Binding& b = bindings_[i];
    if (b.host && b.decl->reads()) {
      std::memcpy(pinned_.host() + b.pinned_offset, plan.bindings[i].host_input, b.bytes);
    }
  }
  VYRE_CU(what, cuMemcpyHtoDAsync, device_.device(), pinned_.host(), param_capacity_,
          ctx.stream());
  ctx.telemetry().h2d_operations.Add();
  ctx.telemetry().h2d_bytes.Add(param_capacity_);
  // Wait now: if recording fails below, the pinned source is freed at once.
  ctx.telemetry().sync_points.Add();
  VYRE_CU(what, cuStreamSynchronize, ctx.stream());
  scalars_.assign(plan.scalars, plan.scalars + plan.scalar_count);
  return absl::OkStatus();
}

absl::Status Graph::BuildKernelOp(const DispatchPlan& plan, RecordedOp* kernel,
                                  const char* what) {
  kernel->kind = VYRE_GRAPH_NODE_KERNEL;
  kernel->program = program_.get();
  kernel->shape = LaunchShapeOf(plan);
  const CUdeviceptr slab = device_.device();
  FillKernelValues(
      *program_, [&](uint32_t i) -> uint64_t { return bindings_[i].Pointer(slab); }, slab,
      scalars_.data(), &kernel->values);
  return OptInSharedMemory(*program_, kernel->shape.shared_bytes, what);
}

absl::Status Graph::CaptureDispatch(const RecordedOp& kernel, uint32_t iterations,
                                    bool host_inputs, const char* what) {
  // Capture runs the recorders before it returns: `kernel` outlives them.
  RecordFn full = [this, &kernel, iterations, what](CUstream s, std::vector<RecordedOp>* ops) {
    return RecordOps(/*with_inputs=*/true, kernel, iterations, s, ops, what);
  };
  RecordFn unchanged = [this, &kernel, iterations, what](CUstream s,
                                                         std::vector<RecordedOp>* ops) {
    return RecordOps(/*with_inputs=*/false, kernel, iterations, s, ops, what);
  };
  // The graph without input copies only runs when the inputs can be reused:
  // an INPUT_OUTPUT binding's device copy changes with every run.
  const bool reusable = host_inputs && inputs_reusable_;
  return Capture(full, reusable ? &unchanged : nullptr, what);
}

// Enqueues one run of the dispatch: HOST input copies (`with_inputs`), the
// OUTPUT zeroing, the kernel's iterations, the HOST read-backs.
absl::Status Graph::RecordOps(bool with_inputs, const RecordedOp& kernel, uint32_t iterations,
                              CUstream stream, std::vector<RecordedOp>* ops,
                              const char* what) const {
  const CUdeviceptr dev = device_.device();
  unsigned char* pinned = pinned_.host();
  for (const Binding& b : bindings_) {
    if (!with_inputs || !b.host || !b.decl->reads()) continue;
    VYRE_CU(what, cuMemcpyHtoDAsync, dev + b.device_offset, pinned + b.pinned_offset, b.bytes,
            stream);
    ops->push_back(RecordedOp{VYRE_GRAPH_NODE_MEMCPY});
  }
  for (size_t i = 0; i < bindings_.size(); ++i) {
    const Binding& b = bindings_[i];
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
  for (const Binding& b : bindings_) {
    if (!b.host || !b.decl->writes()) continue;
    VYRE_CU(what, cuMemcpyDtoHAsync, pinned + b.pinned_offset + b.readback_offset,
            dev + b.device_offset + b.readback_offset, b.readback_bytes, stream);
    ops->push_back(RecordedOp{VYRE_GRAPH_NODE_MEMCPY});
  }
  return absl::OkStatus();
}

// Which node zeroes each OUTPUT binding, where the unchanged-input graph's
// nodes start, and what each executable graph moves.
void Graph::IndexNodes() {
  for (size_t i = 0; i < full_.ops.size(); ++i) {
    const RecordedOp& op = full_.ops[i];
    if (op.kind == VYRE_GRAPH_NODE_MEMSET && op.binding >= 0) {
      bindings_[op.binding].memset_node = static_cast<int>(i);
    }
  }
  for (const Binding& b : bindings_) {
    if (b.host && b.decl->reads()) ++input_copies_;
  }
  full_counts_ = Count(full_.ops, bindings_, true);
  unchanged_counts_ = Count(unchanged_.ops, bindings_, false);
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

}  // namespace vyre
