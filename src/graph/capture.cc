#include "graph/capture.h"

#include <cstring>

#include "runtime/program/program.h"

#include "base/status.h"
#include "driver/cu_error.h"

namespace vyre {

CUresult ReleaseGraph(CUgraph graph) { return driver::Api().cuGraphDestroy(graph); }
CUresult ReleaseGraphExec(CUgraphExec exec) { return driver::Api().cuGraphExecDestroy(exec); }

vyre_graph_node_kind NodeKindOf(CUgraphNodeType type) {
  switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return VYRE_GRAPH_NODE_KERNEL;
    case CU_GRAPH_NODE_TYPE_MEMCPY: return VYRE_GRAPH_NODE_MEMCPY;
    case CU_GRAPH_NODE_TYPE_MEMSET: return VYRE_GRAPH_NODE_MEMSET;
    case CU_GRAPH_NODE_TYPE_HOST: return VYRE_GRAPH_NODE_HOST;
    case CU_GRAPH_NODE_TYPE_GRAPH: return VYRE_GRAPH_NODE_CHILD_GRAPH;
    case CU_GRAPH_NODE_TYPE_EMPTY: return VYRE_GRAPH_NODE_EMPTY;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return VYRE_GRAPH_NODE_EVENT_RECORD;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return VYRE_GRAPH_NODE_EVENT_WAIT;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return VYRE_GRAPH_NODE_CONDITIONAL;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return VYRE_GRAPH_NODE_MEM_ALLOC;
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return VYRE_GRAPH_NODE_MEM_FREE;
    default: return VYRE_GRAPH_NODE_OTHER;
  }
}

namespace {

const char* KindName(vyre_graph_node_kind kind) {
  switch (kind) {
    case VYRE_GRAPH_NODE_KERNEL: return "kernel";
    case VYRE_GRAPH_NODE_MEMCPY: return "memcpy";
    case VYRE_GRAPH_NODE_MEMSET: return "memset";
    default: return "other";
  }
}

absl::Status InventoryMismatch(const char* what, const char* detail, size_t index) {
  return Errorf(VYRE_STATUS_INTERNAL,
                "%s: the captured graph does not match what was recorded (%s at node %u). Fix: "
                "report this as a vyre-cuda bug with the driver version; dispatch without a "
                "graph meanwhile.",
                what, detail, index);
}

// Kernel nodes are told apart by function, shape and argument values, so a
// node index always names the launch recorded at that position (updates by
// index depend on it).
absl::Status CheckKernelNode(CUgraphNode node, const RecordedOp& op, size_t index,
                             const char* what) {
  CUDA_KERNEL_NODE_PARAMS params{};
  VYRE_CU(what, cuGraphKernelNodeGetParams, node, &params);
  if (params.func != nullptr && params.func != op.program->function()) {
    return InventoryMismatch(what, "a kernel node of another function", index);
  }
  if (params.gridDimX != op.shape.grid[0] || params.gridDimY != op.shape.grid[1] ||
      params.gridDimZ != op.shape.grid[2] || params.blockDimX != op.shape.block[0]) {
    return InventoryMismatch(what, "a kernel node of another shape", index);
  }
  if (params.kernelParams == nullptr) return absl::OkStatus();
  // Pointer arguments only: they are 8 bytes in any kernel, while a scalar's
  // true size is the kernel's business (a dispatch passes the low bytes).
  const std::vector<vyre_kernel_param>& kinds = op.program->params();
  for (size_t p = 0; p < kinds.size() && p < op.values.size(); ++p) {
    if (kinds[p].kind == VYRE_PARAM_SCALAR32 || kinds[p].kind == VYRE_PARAM_SCALAR64) continue;
    if (params.kernelParams[p] == nullptr ||
        std::memcmp(params.kernelParams[p], &op.values[p], sizeof(uint64_t)) != 0) {
      return InventoryMismatch(what, "a kernel node with other arguments", index);
    }
  }
  return absl::OkStatus();
}

// Reads the graph's nodes and checks them, in order, against the recorded
// ops, and keeps each memset node's captured parameters in its op.
absl::Status TakeInventory(CUgraph graph, std::vector<RecordedOp>* recorded,
                           std::vector<CUgraphNode>* nodes, const char* what) {
  std::vector<RecordedOp>& ops = *recorded;
  size_t count = 0;
  VYRE_CU(what, cuGraphGetNodes, graph, nullptr, &count);
  if (count != ops.size()) {
    return Errorf(VYRE_STATUS_INTERNAL,
                  "%s: the captured graph has %u nodes but %u operations were recorded. Fix: "
                  "report this as a vyre-cuda bug with the driver version; dispatch without a "
                  "graph meanwhile.",
                  what, count, ops.size());
  }
  nodes->assign(count, nullptr);
  if (count == 0) return absl::OkStatus();
  VYRE_CU(what, cuGraphGetNodes, graph, nodes->data(), &count);
  for (size_t i = 0; i < ops.size(); ++i) {
    CUgraphNodeType type;
    VYRE_CU(what, cuGraphNodeGetType, (*nodes)[i], &type);
    if (NodeKindOf(type) != ops[i].kind) {
      return InventoryMismatch(what, absl::StrFormat("a %s node where a %s was recorded",
                                                     KindName(NodeKindOf(type)),
                                                     KindName(ops[i].kind))
                                         .c_str(),
                               i);
    }
    if (ops[i].kind == VYRE_GRAPH_NODE_KERNEL) {
      VYRE_RETURN_IF_ERROR(CheckKernelNode((*nodes)[i], ops[i], i, what));
    }
    if (ops[i].kind == VYRE_GRAPH_NODE_MEMSET) {
      CUDA_MEMSET_NODE_PARAMS params{};
      VYRE_CU(what, cuGraphMemsetNodeGetParams, (*nodes)[i], &params);
      if (params.dst != ops[i].memset_dst) {
        return InventoryMismatch(what, "a memset of another address", i);
      }
      ops[i].memset = params;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExecutableGraph> InstantiateCaptured(GraphGuard graph, const char* what) {
  ExecutableGraph out;
  out.graph = std::move(graph);
  size_t count = 0;
  VYRE_CU(what, cuGraphGetNodes, out.graph.get(), nullptr, &count);
  out.nodes.assign(count, nullptr);
  out.ops.resize(count);
  if (count > 0) VYRE_CU(what, cuGraphGetNodes, out.graph.get(), out.nodes.data(), &count);
  for (size_t i = 0; i < out.nodes.size(); ++i) {
    CUgraphNodeType type;
    VYRE_CU(what, cuGraphNodeGetType, out.nodes[i], &type);
    RecordedOp& op = out.ops[i];
    op.kind = NodeKindOf(type);
    if (op.kind == VYRE_GRAPH_NODE_MEMSET) {
      VYRE_CU(what, cuGraphMemsetNodeGetParams, out.nodes[i], &op.memset);
      op.memset_dst = op.memset.dst;
    } else if (op.kind == VYRE_GRAPH_NODE_KERNEL) {
      CUDA_KERNEL_NODE_PARAMS params{};
      VYRE_CU(what, cuGraphKernelNodeGetParams, out.nodes[i], &params);
      op.function = params.func;
      op.shape.grid[0] = params.gridDimX;
      op.shape.grid[1] = params.gridDimY;
      op.shape.grid[2] = params.gridDimZ;
      op.shape.block[0] = params.blockDimX;
      op.shape.block[1] = params.blockDimY;
      op.shape.block[2] = params.blockDimZ;
      op.shape.shared_bytes = params.sharedMemBytes;
    }
  }
  VYRE_CU(what, cuGraphInstantiateWithFlags, out.exec.out(), out.graph.get(), 0);
  return out;
}

absl::StatusOr<ExecutableGraph> CaptureGraph(CUstream stream, const RecordFn& record,
                                             const char* what, bool* capture_stuck) {
  *capture_stuck = false;
  ExecutableGraph out;
  VYRE_CU(what, cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  absl::Status recorded = record(stream, &out.ops);
  // End the capture whatever happened, so the stream is usable again; the
  // guard owns any graph that comes back, whole or partial.
  CUgraph raw = nullptr;
  CUresult ended = driver::Api().cuStreamEndCapture(stream, &raw);
  out.graph = GraphGuard(raw);
  if (ended != CUDA_SUCCESS && raw == nullptr) {
    // The capture may still be on: in thread-local mode it would keep this
    // thread from freeing memory. Ending it again either ends it, or says
    // it has ended (ILLEGAL_STATE); anything else leaves the stream stuck.
    CUgraph again = nullptr;
    CUresult retry = driver::Api().cuStreamEndCapture(stream, &again);
    GraphGuard discard(again);
    if (retry != CUDA_SUCCESS && retry != CUDA_ERROR_ILLEGAL_STATE && again == nullptr) {
      *capture_stuck = true;
    }
  }
  VYRE_RETURN_IF_ERROR(recorded);
  if (ended != CUDA_SUCCESS) {
    return driver::CuError(ended, what, "cuStreamEndCapture",
                           "check the program's launch configuration; if it works with "
                           "vyre_dispatch, report this as a vyre-cuda bug");
  }
  if (raw == nullptr) {
    return Errorf(VYRE_STATUS_INTERNAL,
                  "%s: cuStreamEndCapture returned no graph after reporting success. Fix: "
                  "update the NVIDIA driver, or dispatch without a graph.",
                  what);
  }
  VYRE_RETURN_IF_ERROR(TakeInventory(raw, &out.ops, &out.nodes, what));
  VYRE_CU(what, cuGraphInstantiateWithFlags, out.exec.out(), raw, 0);
  return out;
}

}  // namespace vyre
