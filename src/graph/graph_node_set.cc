// vyre_graph_node_info_set: a kernel or memset node of the executable graph
// changed from an edited vyre_graph_node_info. Everything is checked on a
// copy of the node's recorded state first, so a refused set changes nothing;
// the recorded state follows only once the driver took the change.
#include <algorithm>
#include <cstring>

#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/guards.h"
#include "graph/graph.h"
#include "runtime/dispatch/kernel_launch.h"

namespace vyre {
namespace {

const char* KindName(vyre_graph_node_kind kind) {
  switch (kind) {
    case VYRE_GRAPH_NODE_KERNEL: return "KERNEL";
    case VYRE_GRAPH_NODE_MEMCPY: return "MEMCPY";
    case VYRE_GRAPH_NODE_MEMSET: return "MEMSET";
    case VYRE_GRAPH_NODE_HOST: return "HOST";
    case VYRE_GRAPH_NODE_CHILD_GRAPH: return "CHILD_GRAPH";
    case VYRE_GRAPH_NODE_EMPTY: return "EMPTY";
    case VYRE_GRAPH_NODE_EVENT_RECORD: return "EVENT_RECORD";
    case VYRE_GRAPH_NODE_EVENT_WAIT: return "EVENT_WAIT";
    case VYRE_GRAPH_NODE_CONDITIONAL: return "CONDITIONAL";
    case VYRE_GRAPH_NODE_MEM_ALLOC: return "MEM_ALLOC";
    case VYRE_GRAPH_NODE_MEM_FREE: return "MEM_FREE";
    default: return "OTHER";
  }
}


const char* ParamKindName(uint32_t kind) {
  switch (kind) {
    case VYRE_PARAM_BINDING: return "a binding's pointer";
    case VYRE_PARAM_PARAM_WORDS: return "the parameter-word block's pointer";
    default: return "a null pointer";
  }
}

}  // namespace

absl::Status Graph::SetNodeInfo(uint64_t index, const vyre_graph_node_info& info, uint32_t flags,
                                const char* what) {
  if ((flags & ~uint32_t{VYRE_GRAPH_NODE_SET_RAW}) != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: flags 0x%x hold unknown bits. Fix: pass 0 (checked) or "
                  "VYRE_GRAPH_NODE_SET_RAW.",
                  what, flags);
  }
  const bool raw = (flags & VYRE_GRAPH_NODE_SET_RAW) != 0;
  std::lock_guard lock(mu_);
  VYRE_RETURN_IF_ERROR(CheckNodeIdentity(index, info, what));
  RecordedOp op = full_.ops[index];
  if (op.kind == VYRE_GRAPH_NODE_KERNEL && op.program == nullptr) {
    return CapturedKernelRefusal(index, what);
  }
  if (op.kind == VYRE_GRAPH_NODE_KERNEL) {
    VYRE_RETURN_IF_ERROR(KernelFromInfo(info, raw, &op, what));
  } else {
    VYRE_RETURN_IF_ERROR(MemsetFromInfo(info, &op.memset, what));
  }
  driver::ScopedContext bind(context_->cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  if (op.kind == VYRE_GRAPH_NODE_KERNEL) {
    VYRE_RETURN_IF_ERROR(OptInSharedMemory(*op.program, op.shape.shared_bytes, what));
  } else {
    VYRE_RETURN_IF_ERROR(CheckMemsetDestination(op.memset, raw, what));
  }
  absl::Status set = op.kind == VYRE_GRAPH_NODE_KERNEL ? SetKernelNode(index, op, what)
                                                       : SetMemsetNode(index, op.memset, what);
  if (!set.ok()) {
    // The full graph may hold the change and its twin not: the next replay
    // pushes the recorded state to both. (Without a twin, the one node the
    // driver refused is as it was.)
    if (unchanged_.exec) reapply_ = true;
    return set;
  }
  full_.ops[index] = std::move(op);
  return absl::OkStatus();
}

// The node exists, is of a kind that can be set, and `info` is of it.
absl::Status Graph::CheckNodeIdentity(uint64_t index, const vyre_graph_node_info& info,
                                      const char* what) const {
  VYRE_RETURN_IF_ERROR(CheckNodeIndex(index, what));
  const vyre_graph_node_kind kind = full_.ops[index].kind;
  if (kind != VYRE_GRAPH_NODE_KERNEL && kind != VYRE_GRAPH_NODE_MEMSET) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: node %u is a %s node, whose parameters cannot be set. Fix: pass the index "
                  "of a KERNEL or MEMSET node (vyre_graph_node_kind_get).",
                  what, index, KindName(kind));
  }
  if (info.kind != kind) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: info->kind is %d but node %u is a %s node. Fix: fill info with "
                  "vyre_graph_node_info_get for this node, then edit it.",
                  what, static_cast<int32_t>(info.kind), index, KindName(kind));
  }
  const uint64_t node = reinterpret_cast<uint64_t>(full_.nodes[index]);
  const uint64_t exec = reinterpret_cast<uint64_t>(full_.exec.get());
  if ((info.cu_graph_node != 0 && info.cu_graph_node != node) ||
      (info.cu_graph_exec != 0 && info.cu_graph_exec != exec)) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: info names CUgraphNode 0x%x of CUgraphExec 0x%x, but node %u is 0x%x of "
                  "0x%x: the info is another node's or another graph's. Fix: fill info with "
                  "vyre_graph_node_info_get for this graph and node (or set both handles to 0).",
                  what, info.cu_graph_node, info.cu_graph_exec, index, node, exec);
  }
  return absl::OkStatus();
}

absl::Status Graph::KernelFromInfo(const vyre_graph_node_info& info, bool raw, RecordedOp* op,
                                   const char* what) const {
  const Program& program = *op->program;
  const uint64_t function = reinterpret_cast<uint64_t>(program.function());
  if (info.cu_function != function) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: cu_function 0x%x is not the node's function 0x%x ('%s'); a node keeps "
                  "its function. Fix: keep cu_function as vyre_graph_node_info_get gave it, or "
                  "record a graph of the other program.",
                  what, info.cu_function, function, program.entry());
  }
  const vyre_device_info& device = context_->device();
  VYRE_RETURN_IF_ERROR(CheckGrid(info.grid, device, what));
  VYRE_RETURN_IF_ERROR(CheckBlockShape(what, info.block, device, program.max_threads_per_block()));
  const bool block_changed = !std::equal(info.block, info.block + 3, op->shape.block);
  if (!raw && block_changed && grid_derived_) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the block changes from %ux%ux%u to %ux%ux%u, but the graph derives its "
                  "grid from the element count in blocks of %u threads, so replays would cover "
                  "another count. Fix: keep the block, record the graph with an explicit grid, "
                  "or pass VYRE_GRAPH_NODE_SET_RAW and set the grid to match yourself.",
                  what, op->shape.block[0], op->shape.block[1], op->shape.block[2],
                  info.block[0], info.block[1], info.block[2], threads_per_block_);
  }
  VYRE_RETURN_IF_ERROR(
      CheckSharedMemory(what, info.shared_memory_bytes, program, "shared_memory_bytes asks"));
  if (!raw && info.shared_memory_bytes < program.shared_memory_bytes()) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: shared_memory_bytes %u is below the %u bytes of dynamic shared memory "
                  "program '%s' declares (its SHARED bindings and shared_memory_bytes), which "
                  "the kernel may use. Fix: pass at least %u, or VYRE_GRAPH_NODE_SET_RAW if the "
                  "kernel needs less at this shape.",
                  what, info.shared_memory_bytes, program.shared_memory_bytes(), program.entry(),
                  program.shared_memory_bytes());
  }
  VYRE_RETURN_IF_ERROR(KernelArgumentsFromInfo(info, raw, op, what));
  for (int a = 0; a < 3; ++a) {
    op->shape.grid[a] = info.grid[a];
    op->shape.block[a] = info.block[a];
  }
  op->shape.shared_bytes = info.shared_memory_bytes;
  return absl::OkStatus();
}

// The argument slots `info` carries (the first VYRE_GRAPH_NODE_MAX_ARGUMENTS),
// checked against the program's parameter list unless `raw`.
absl::Status Graph::KernelArgumentsFromInfo(const vyre_graph_node_info& info, bool raw,
                                            RecordedOp* op, const char* what) const {
  KernelValues& values = op->values;
  if (info.argument_count != values.size()) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: argument_count is %u but the kernel takes %u parameters; a node keeps "
                  "its parameter list. Fix: keep argument_count as vyre_graph_node_info_get "
                  "gave it.",
                  what, info.argument_count, values.size());
  }
  const std::vector<vyre_kernel_param>& params = op->program->params();
  const size_t carried = std::min<size_t>(values.size(), VYRE_GRAPH_NODE_MAX_ARGUMENTS);
  for (size_t i = 0; i < carried; ++i) {
    const uint64_t v = info.arguments[i];
    if (!raw && i < params.size()) {
      const uint32_t kind = params[i].kind;
      if (kind == VYRE_PARAM_SCALAR32 && (v >> 32) != 0) {
        return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                      "%s: argument %u is a 32-bit scalar but the value 0x%x has bits in its "
                      "high half. Fix: pass the value in the low 32 bits, the high ones 0.",
                      what, i, v);
      }
      if (kind != VYRE_PARAM_SCALAR32 && kind != VYRE_PARAM_SCALAR64 && v != values[i]) {
        return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                      "%s: argument %u is %s, which the graph manages, and changes from 0x%x "
                      "to 0x%x. Fix: rebind buffers through vyre_graph_replay_desc.bindings "
                      "(words through param_words); or pass VYRE_GRAPH_NODE_SET_RAW and keep "
                      "the memory it points to allocated and large enough while the graph "
                      "may run.",
                      what, i, ParamKindName(kind), values[i], v);
      }
    }
    values[i] = v;
  }
  return absl::OkStatus();
}

// The shape rules are the driver's, raw or not (the destination's are
// CheckMemsetDestination's).
absl::Status Graph::MemsetFromInfo(const vyre_graph_node_info& info,
                                   CUDA_MEMSET_NODE_PARAMS* params, const char* what) const {
  const uint32_t size = info.memset_element_size;
  if (size != 1 && size != 2 && size != 4) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: memset_element_size is %u. Fix: pass 1, 2 or 4 (bytes per element).",
                  what, size);
  }
  if (size < 4 && (info.memset_value >> (8 * size)) != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: memset_value 0x%x does not fit an element of %u bytes. Fix: pass a value "
                  "below 0x%x, or a larger memset_element_size.",
                  what, info.memset_value, size, 1u << (8 * size));
  }
  if (info.memset_width == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: memset_width is 0; the driver does not update a memset node to an empty "
                  "one. Fix: set at least 1 element.",
                  what);
  }
  if (info.memset_height != 1) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: memset_height is %u; the driver updates only one-row memsets of an "
                  "executable graph. Fix: pass memset_height 1 with the row's elements in "
                  "memset_width (or one node per row).",
                  what, info.memset_height);
  }
  if (info.memset_dst == 0 || info.memset_dst % size != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: memset_dst 0x%x is %s. Fix: pass a device address aligned to the "
                  "%u-byte element.",
                  what, info.memset_dst, info.memset_dst == 0 ? "0" : "misaligned", size);
  }
  if (info.memset_width > UINT64_MAX / size) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: memset_width %u elements of %u bytes overflows 64 bits. Fix: pass the "
                  "width of the range to set.",
                  what, info.memset_width, size);
  }
  *params = CUDA_MEMSET_NODE_PARAMS{};
  params->dst = info.memset_dst;
  params->value = info.memset_value;
  params->elementSize = size;
  params->width = info.memset_width;
  params->height = 1;
  params->pitch = 0;
  return absl::OkStatus();
}

// Checked sets: the range must lie in one device allocation of the graph's
// context, as the driver describes the destination address.
absl::Status Graph::CheckMemsetDestination(const CUDA_MEMSET_NODE_PARAMS& params, bool raw,
                                           const char* what) const {
  if (raw) return absl::OkStatus();
  const CUdeviceptr dst = params.dst;
  const uint64_t bytes = uint64_t{params.width} * params.elementSize;
  unsigned int type = 0;
  CUcontext owner = nullptr;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                      CU_POINTER_ATTRIBUTE_CONTEXT,
                                      CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                      CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* values[] = {&type, &owner, &start, &size};
  static_assert(sizeof(attributes) / sizeof(attributes[0]) == sizeof(values) / sizeof(values[0]));
  const CUresult queried = driver::Api().cuPointerGetAttributes(
      sizeof(values) / sizeof(values[0]), attributes, values, dst);
  // A pointer the driver does not know reads memory type 0, or (older
  // drivers) is CUDA_ERROR_INVALID_VALUE.
  const bool unknown = queried == CUDA_ERROR_INVALID_VALUE || (queried == CUDA_SUCCESS && type == 0);
  if (!unknown && queried != CUDA_SUCCESS) {
    return driver::CuError(queried, what, "cuPointerGetAttributes");
  }
  const bool device_memory = type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED;
  const bool ours = owner == nullptr || owner == context_->cu();
  const uint64_t offset = dst - start;
  if (unknown || !device_memory || !ours || dst < start || offset > size ||
      bytes > size - offset) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the memset range [0x%x, +%u bytes) is not inside one device allocation "
                  "of the graph's context (%s). Fix: set a range inside a buffer of this "
                  "context (vyre_buffer_info.device_pointer and bytes), or pass "
                  "VYRE_GRAPH_NODE_SET_RAW and keep the memory allocated while the graph may "
                  "run.",
                  what, dst, bytes,
                  unknown             ? "the driver does not know the address"
                  : !device_memory    ? "it is not device memory"
                  : !ours             ? "it is another context's memory"
                                      : "it runs past the end of its allocation");
  }
  return absl::OkStatus();
}

}  // namespace vyre
