#include "graph/graph.h"

#include <cstring>

#include "base/status.h"
#include "driver/cu_error.h"
#include "runtime/dispatch/kernel_launch.h"

namespace vyre {

// A grid checked against the device's limits, axis by axis (graph.h).
absl::Status CheckGrid(const uint32_t grid[3], const vyre_device_info& device, const char* what) {
  for (int a = 0; a < 3; ++a) {
    if (grid[a] == 0) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: grid dimension %c is 0. Fix: use at least 1 block per axis.", what,
                    "xyz"[a]);
    }
    if (grid[a] > device.max_grid_dim[a]) {
      return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                    "%s: grid dimension %c is %u, over the device's limit of %u. Fix: use a "
                    "smaller grid.",
                    what, "xyz"[a], grid[a], device.max_grid_dim[a]);
    }
  }
  return absl::OkStatus();
}

namespace {

// A node update's grid, checked against the device's limits axis by axis.
absl::Status UpdateGrid(const uint32_t grid[3], const vyre_device_info& device,
                        LaunchShape* shape, const char* what) {
  VYRE_RETURN_IF_ERROR(CheckGrid(grid, device, what));
  for (int a = 0; a < 3; ++a) shape->grid[a] = grid[a];
  return absl::OkStatus();
}

// A node update's scalars, enough for every slot the kernel reads.
absl::Status UpdateScalars(const vyre_kernel_node_update& update, RecordedOp* op,
                           const char* what) {
  const size_t needed = ScalarSlotsNeeded(*op->program);
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
  UpdateKernelScalars(*op->program, update.scalars, &op->values);
  return absl::OkStatus();
}

}  // namespace

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
  for (const RecordedOp& op : full_.ops) {
    info.kernel_node_count += op.kind == VYRE_GRAPH_NODE_KERNEL;
  }
  info.unchanged_input_node_count = unchanged_.nodes.size();
  info.element_count = element_count_;
  info.capacity_elements = capacity_;
  info.replays = replays_;
  info.host_input_bytes = full_counts_.h2d_bytes;
  info.host_output_bytes = full_counts_.d2h_bytes;
  return info;
}

absl::Status Graph::CheckNodeIndex(uint64_t index, const char* what) const {
  if (index < full_.ops.size()) return absl::OkStatus();
  return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                "%s: node index %u does not exist; the graph has %u nodes. Fix: pass an index "
                "below vyre_graph_info.node_count.",
                what, index, full_.ops.size());
}

absl::StatusOr<vyre_graph_node_kind> Graph::NodeKind(uint64_t index, const char* what) {
  std::lock_guard lock(mu_);
  VYRE_RETURN_IF_ERROR(CheckNodeIndex(index, what));
  return full_.ops[index].kind;
}

absl::StatusOr<vyre_graph_node_info> Graph::NodeInfo(uint64_t index, const char* what) {
  std::lock_guard lock(mu_);
  VYRE_RETURN_IF_ERROR(CheckNodeIndex(index, what));
  const RecordedOp& op = full_.ops[index];
  const vyre_graph_node_kind kind = op.kind;
  vyre_graph_node_info info{};
  info.struct_size = sizeof(info);
  info.kind = kind;
  info.cu_graph_node = reinterpret_cast<uint64_t>(full_.nodes[index]);
  info.cu_graph_exec = reinterpret_cast<uint64_t>(full_.exec.get());
  if (kind == VYRE_GRAPH_NODE_KERNEL) {
    // The recorded op is kept current by every replay's node updates (the
    // driver has no call that reads an executable graph's node back).
    // Captured work has no program: its function as the driver reported it,
    // and no arguments (the library does not know their sizes).
    info.cu_function = reinterpret_cast<uint64_t>(
        op.program != nullptr ? op.program->function() : op.function);
    for (int d = 0; d < 3; ++d) {
      info.grid[d] = op.shape.grid[d];
      info.block[d] = op.shape.block[d];
    }
    info.shared_memory_bytes = op.shape.shared_bytes;
    info.argument_count = static_cast<uint32_t>(op.values.size());
    for (size_t i = 0; i < op.values.size() && i < VYRE_GRAPH_NODE_MAX_ARGUMENTS; ++i) {
      info.arguments[i] = op.values[i];
    }
  } else if (kind == VYRE_GRAPH_NODE_MEMSET) {
    // As the next replay runs it: captured, then moved by rebinding (an
    // OUTPUT binding's zeroing follows its range) or vyre_graph_node_info_set.
    const CUDA_MEMSET_NODE_PARAMS& params = op.memset;
    info.memset_dst = params.dst;
    info.memset_value = params.value;
    info.memset_element_size = params.elementSize;
    info.memset_width = params.width;
    info.memset_height = params.height;
    info.memset_pitch = params.pitch;
  }
  return info;
}

absl::Status CapturedKernelRefusal(uint64_t index, const char* what) {
  return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                "%s: node %u is a kernel of captured work, whose parameter list the library "
                "does not know. Fix: change it through the driver "
                "(cuGraphExecKernelNodeSetParams on vyre_graph_node_info's cu_graph_exec and "
                "cu_graph_node), or capture it again as you want it.",
                what, index);
}

namespace {

// A recorded launch's kernel node parameters; `args` points into `values`.
CUDA_KERNEL_NODE_PARAMS KernelNodeParams(const RecordedOp& op, KernelValues& values,
                                         KernelArgs* args) {
  values = op.values;
  PointKernelArgs(values, args);
  CUDA_KERNEL_NODE_PARAMS params{};
  params.func = op.program->function();
  params.gridDimX = op.shape.grid[0];
  params.gridDimY = op.shape.grid[1];
  params.gridDimZ = op.shape.grid[2];
  params.blockDimX = op.shape.block[0];
  params.blockDimY = op.shape.block[1];
  params.blockDimZ = op.shape.block[2];
  params.sharedMemBytes = op.shape.shared_bytes;
  params.kernelParams = args->data();
  return params;
}

}  // namespace

absl::Status Graph::SyncTemplate(const char* what) {
  for (size_t i = 0; i < full_.ops.size(); ++i) {
    const RecordedOp& op = full_.ops[i];
    if (op.kind == VYRE_GRAPH_NODE_MEMSET) {
      VYRE_CU(what, cuGraphMemsetNodeSetParams, full_.nodes[i], &op.memset);
    } else if (op.kind == VYRE_GRAPH_NODE_KERNEL && op.program != nullptr) {
      KernelValues values;
      KernelArgs args;
      const CUDA_KERNEL_NODE_PARAMS params = KernelNodeParams(op, values, &args);
      VYRE_CU(what, cuGraphKernelNodeSetParams, full_.nodes[i], &params);
    }
  }
  return absl::OkStatus();
}

absl::Status Graph::SetKernelNode(size_t index, const RecordedOp& op, const char* what) {
  KernelValues values;
  KernelArgs args;
  const CUDA_KERNEL_NODE_PARAMS params = KernelNodeParams(op, values, &args);
  VYRE_CU(what, cuGraphExecKernelNodeSetParams, full_.exec.get(), full_.nodes[index], &params);
  if (unchanged_.exec) {
    VYRE_CU(what, cuGraphExecKernelNodeSetParams, unchanged_.exec.get(),
            unchanged_.nodes[index - input_copies_], &params);
  }
  return absl::OkStatus();
}

absl::Status Graph::SetMemsetNode(size_t index, const CUDA_MEMSET_NODE_PARAMS& params,
                                  const char* what) {
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
  for (size_t i = 0; i < full_.ops.size(); ++i) {
    if (full_.ops[i].kind == VYRE_GRAPH_NODE_MEMSET) {
      VYRE_RETURN_IF_ERROR(SetMemsetNode(i, full_.ops[i].memset, what));
    }
    // Kernels of captured work are never changed through the library.
    if (full_.ops[i].kind == VYRE_GRAPH_NODE_KERNEL && full_.ops[i].program != nullptr) {
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
  if (op.program == nullptr) return CapturedKernelRefusal(index, what);
  constexpr uint32_t kKnown = VYRE_KERNEL_NODE_UPDATE_GRID | VYRE_KERNEL_NODE_UPDATE_SCALARS;
  if (update.flags == 0 || (update.flags & ~kKnown) != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: flags 0x%x %s. Fix: set VYRE_KERNEL_NODE_UPDATE_GRID and/or "
                  "VYRE_KERNEL_NODE_UPDATE_SCALARS.",
                  what, update.flags,
                  update.flags == 0 ? "ask for no change" : "hold unknown bits");
  }
  if (update.flags & VYRE_KERNEL_NODE_UPDATE_GRID) {
    VYRE_RETURN_IF_ERROR(UpdateGrid(update.grid, context_->device(), &op.shape, what));
  }
  if (update.flags & VYRE_KERNEL_NODE_UPDATE_SCALARS) {
    VYRE_RETURN_IF_ERROR(UpdateScalars(update, &op, what));
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

HandleRegistry<Graph>& Graphs() {
  // Leaked on purpose, as every handle table (see Contexts()).
  static auto* registry = new HandleRegistry<Graph>(HandleType::kGraph, ReleaseRank::kGraphs);
  return *registry;
}

}  // namespace vyre
