// Stream capture and the graphs it hands over: begin and end a capture,
// destroy a graph, list its nodes and read their parameters.
//
// Stream capture and graphs: cuStreamBeginCapture on a created stream turns its
// memcpys (HtoD, DtoH, DtoD), byte memsets and kernel launches into nodes of a
// linear graph instead of running them. Arguments are validated at capture
// exactly as for a live call; a kernel node copies the argument values of the
// kernels that run on the host (kernels.cc; other kernels keep none and do
// nothing); copies keep host pointers, read or written when the graph runs. A
// failed call on a capturing stream invalidates the capture, as do
// cuStreamSynchronize and cuStreamQuery on it, cuLaunchCooperativeKernel,
// cuGraphLaunch or cuGraphUpload into it and cuCtxSynchronize while anything
// captures. The capture modes restrict the "potentially unsafe" calls
// cuMemAlloc, cuMemFree, cuMemHostAlloc, cuMemFreeHost, cuModuleLoadDataEx,
// cuModuleUnload and cuStreamSynchronize: forbidden to a thread with a GLOBAL
// or THREAD_LOCAL capture of its own, and to every thread while some thread
// captures in GLOBAL mode (every thread's interaction mode is GLOBAL, there
// being no cuThreadExchangeStreamCaptureMode); such a call fails with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates those captures.
// cuEventRecord on a capturing stream succeeds without a node; the event is
// then a "captured event" that cuEventQuery, cuEventSynchronize and
// cuEventElapsedTime reject (CUDA_ERROR_CAPTURED_EVENT) until recorded again
// outside capture. cuStreamEndCapture hands over the graph, or answers
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED with a NULL graph. A CUgraphNode is the
// captured node; cuGraphInstantiateWithFlags copies the nodes into the
// executable graph, whose kernel and memset nodes the cuGraphExec*SetParams
// calls update by naming the original node. cuGraphLaunch runs the nodes in
// order at once, re-validating every range (device ranges, and host ranges that
// were pinned at capture) as a live call would. Every violation above is
// misuse; the errors returned are those of the real driver.
#include <algorithm>
#include <memory>
#include <thread>
#include <utility>

#include "entry_points.h"
#include "kernels.h"
#include "state.h"

namespace fake_driver {

// ---------------------------------------------------------------------------
// Stream capture and graphs
// ---------------------------------------------------------------------------

CUresult fake_cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode mode) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamBeginCapture")) return r;
  if (IsLegacyStream(stream)) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuStreamBeginCapture on the legacy stream");
  }
  if (stream == CU_STREAM_PER_THREAD) {
    return Misuse(CUDA_ERROR_NOT_SUPPORTED,
                  "cuStreamBeginCapture: the fake does not capture the per-thread stream");
  }
  if (CUresult r = CheckStream(stream, "cuStreamBeginCapture")) return r;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuStreamBeginCapture: unknown mode %d",
                  static_cast<int>(mode));
  }
  FakeStream* s = FindStream(stream);
  if (s->capture) {
    return Misuse(CUDA_ERROR_ILLEGAL_STATE, "cuStreamBeginCapture on a stream already capturing");
  }
  s->ended_invalidated = false;
  s->capture = std::make_unique<FakeCapture>();
  s->capture->graph = std::make_unique<FakeGraph>();
  s->capture->mode = mode;
  s->capture->thread = std::this_thread::get_id();
  ++S().stats.captures_begun;
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamEndCapture")) return r;
  if (CUresult r = CheckStream(stream, "cuStreamEndCapture")) return r;
  if (graph == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuStreamEndCapture: NULL graph");
  FakeStream* s = FindStream(stream);
  if (s != nullptr && !s->capture && s->ended_invalidated) {
    // Ending again a capture that just ended invalidated: the engine makes
    // sure the capture is off (src/graph/capture.cc), which a real driver
    // answers so, and which is no misuse.
    s->ended_invalidated = false;
    *graph = nullptr;
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  if (s == nullptr || !s->capture) {
    return Misuse(CUDA_ERROR_ILLEGAL_STATE, "cuStreamEndCapture on a stream that is not capturing");
  }
  if (s->capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
      s->capture->thread != std::this_thread::get_id()) {
    return Misuse(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
                  "cuStreamEndCapture from another thread than cuStreamBeginCapture");
  }
  std::unique_ptr<FakeCapture> capture = std::move(s->capture);
  if (capture->invalidated) {
    *graph = nullptr;  // the partial graph dies with `capture`
    s->ended_invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  FakeGraph* g = capture->graph.get();
  for (const auto& node : g->nodes) S().graph_nodes.insert(node.get());
  S().graphs.emplace(g, std::move(capture->graph));
  *graph = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}

FakeGraph* FindGraph(CUgraph graph) {
  auto it = S().graphs.find(reinterpret_cast<FakeGraph*>(graph));
  return it == S().graphs.end() ? nullptr : it->second.get();
}

FakeGraphExec* FindGraphExec(CUgraphExec exec) {
  auto it = S().graph_execs.find(reinterpret_cast<FakeGraphExec*>(exec));
  return it == S().graph_execs.end() ? nullptr : it->second.get();
}

FakeGraphNode* FindGraphNode(CUgraphNode node) {
  auto* n = reinterpret_cast<FakeGraphNode*>(node);
  return S().graph_nodes.count(n) ? n : nullptr;
}

CUresult fake_cuGraphDestroy(CUgraph graph) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphDestroy")) return r;
  FakeGraph* g = FindGraph(graph);
  if (g == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphDestroy: unknown graph %p",
                  static_cast<void*>(graph));
  }
  DestroyOwnedGraphs(*g);
  for (const auto& node : g->nodes) S().graph_nodes.erase(node.get());
  for (auto& [handle, exec] : S().graph_execs) {
    if (exec->source == g) exec->source = nullptr;  // its nodes can no longer be named
  }
  S().graphs.erase(g);
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphGetNodes")) return r;
  FakeGraph* g = FindGraph(graph);
  if (g == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphGetNodes: unknown graph %p",
                  static_cast<void*>(graph));
  }
  if (count == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphGetNodes: NULL count");
  const size_t total = g->nodes.size();
  if (nodes == nullptr) {
    *count = total;
    return CUDA_SUCCESS;
  }
  // Fills *count entries (NULL past the last node) and reports how many nodes
  // it returned.
  for (size_t i = 0; i < *count; ++i) {
    nodes[i] = i < total ? reinterpret_cast<CUgraphNode>(g->nodes[i].get()) : nullptr;
  }
  *count = std::min(*count, total);
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphNodeGetType")) return r;
  FakeGraphNode* n = FindGraphNode(node);
  if (n == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphNodeGetType: unknown node %p",
                  static_cast<void*>(node));
  }
  if (type == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphNodeGetType: NULL type");
  *type = n->type();
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphMemsetNodeGetParams(CUgraphNode node, CUDA_MEMSET_NODE_PARAMS* params) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphMemsetNodeGetParams")) return r;
  FakeGraphNode* n = FindGraphNode(node);
  if (n == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphMemsetNodeGetParams: unknown node %p",
                  static_cast<void*>(node));
  }
  if (n->op != NodeOp::kMemset) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphMemsetNodeGetParams on a non-memset node");
  }
  if (params == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphMemsetNodeGetParams: NULL params");
  }
  *params = CUDA_MEMSET_NODE_PARAMS{};
  params->dst = n->dst;
  params->pitch = 0;
  params->value = n->value;
  params->elementSize = n->element_size;
  params->width = n->bytes / n->element_size;
  params->height = 1;
  return CUDA_SUCCESS;
}

// Gives the node's function, shape and argument values (kernelParams points
// into the node, valid until the graph is destroyed, as the driver's is).
CUresult fake_cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* params) {
  static constexpr const char* fn = "cuGraphKernelNodeGetParams";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  FakeGraphNode* n = FindGraphNode(node);
  if (n == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown node %p", fn, static_cast<void*>(node));
  }
  if (n->op != NodeOp::kKernel) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s on a non-kernel node", fn);
  if (params == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL params", fn);
  n->arg_pointers.clear();
  size_t offset = 0;
  for (size_t size : KernelParamSizes(n->kernel)) {
    offset = (offset + size - 1) / size * size;
    n->arg_pointers.push_back(n->args.data() + offset);
    offset += size;
  }
  *params = CUDA_KERNEL_NODE_PARAMS{};
  params->func = n->function;
  params->gridDimX = n->shape.grid[0];
  params->gridDimY = n->shape.grid[1];
  params->gridDimZ = n->shape.grid[2];
  params->blockDimX = n->shape.block[0];
  params->blockDimY = n->shape.block[1];
  params->blockDimZ = n->shape.block[2];
  params->sharedMemBytes = n->shape.shared_bytes;
  params->kernelParams = n->arg_pointers.empty() ? nullptr : n->arg_pointers.data();
  return CUDA_SUCCESS;
}

}  // namespace fake_driver
