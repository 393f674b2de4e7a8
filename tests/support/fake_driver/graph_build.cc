// Graphs built node by node (the model: capture.cc), as the engine's loop
// graphs are (src/graph/graph_loop.cc): cuGraphCreate, memset, kernel and
// child-graph nodes, conditional handles and WHILE nodes (cuGraphAddNode),
// and the template-node setters. Dependencies must name nodes of the same
// graph; the fake keeps each graph's nodes in the order they were added,
// which is a topological order, and runs them so. A child-graph node copies
// the child's nodes when added (as the driver clones the child graph). A
// WHILE node's body graph belongs to the node; the executable graph copies
// the body at instantiation and cuGraphLaunch runs it while the handle's
// value is non-zero, the value reset to the handle's default at each launch
// (CU_GRAPH_COND_ASSIGN_DEFAULT is the only flag the fake takes). IF and
// SWITCH nodes, and every other node type, are refused (NOT_SUPPORTED).
// FAKE_CUDA_NO_CONDITIONAL=1 hides the CUDA 12.4 entry points, as an older
// driver would (driver.cc).
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "entry_points.h"
#include "kernels.h"
#include "state.h"

namespace fake_driver {
namespace {

CUresult CheckDependencies(const FakeGraph& g, const CUgraphNode* deps, size_t count,
                           const char* fn) {
  if (count > 0 && deps == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL dependencies with a count of %zu", fn,
                  count);
  }
  for (size_t i = 0; i < count; ++i) {
    bool found = false;
    for (const auto& node : g.nodes) found |= node.get() == reinterpret_cast<FakeGraphNode*>(deps[i]);
    if (!found) {
      return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: dependency %p is not a node of the graph", fn,
                    static_cast<void*>(deps[i]));
    }
  }
  return CUDA_SUCCESS;
}

// Finds the graph, checks the out-pointer and dependencies.
CUresult Prepare(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t count,
                 const char* fn, FakeGraph** g) {
  if (CUresult r = RequireContext(fn)) return r;
  if (out == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL node out-pointer", fn);
  *g = FindGraph(graph);
  if (*g == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown graph %p", fn,
                  static_cast<void*>(graph));
  }
  return CheckDependencies(**g, deps, count, fn);
}

CUgraphNode Append(FakeGraph* g, std::unique_ptr<FakeGraphNode> node) {
  FakeGraphNode* raw = node.get();
  g->nodes.push_back(std::move(node));
  S().graph_nodes.insert(raw);
  return reinterpret_cast<CUgraphNode>(raw);
}

CUresult MemsetNode(const CUDA_MEMSET_NODE_PARAMS* p, const char* fn, FakeGraphNode* node) {
  if (p == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL params", fn);
  if (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: element size %u", fn, p->elementSize);
  }
  if (p->height != 1 || p->width == 0) {
    return Misuse(CUDA_ERROR_NOT_SUPPORTED, "%s: the fake sets one row of width >= 1", fn);
  }
  node->op = NodeOp::kMemset;
  node->dst = p->dst;
  node->value = p->value;
  node->element_size = p->elementSize;
  node->bytes = p->width * p->elementSize;
  return CheckDeviceRange(node->dst, node->bytes, fn);
}

CUresult KernelNode(const CUDA_KERNEL_NODE_PARAMS* p, const char* fn, FakeGraphNode* node) {
  if (p == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL params", fn);
  FakeFunction* f = FindFunction(p->func);
  if (f == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "%s: unknown function", fn);
  const LaunchShape shape{{p->gridDimX, p->gridDimY, p->gridDimZ},
                          {p->blockDimX, p->blockDimY, p->blockDimZ},
                          p->sharedMemBytes};
  if (CUresult r = CheckLaunchShape(*f, shape)) {
    return Misuse(r, "%s(%s): shape exceeds device limits", fn, f->name.c_str());
  }
  KernelArgs args(p->kernelParams, p->extra);
  if (!args.present()) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: no kernel parameters", fn);
  if (CUresult r = KernelRefusal(f->name, fn)) return r;
  node->op = NodeOp::kKernel;
  node->module_serial = f->module->serial;
  node->kernel = f->name;
  node->function = p->func;
  node->shape = shape;
  return PackKernelArgs(f->name, args, &node->args);
}

// A copy of `g`'s nodes as they run: conditional bodies copied in turn.
std::vector<FakeGraphNode> Snapshot(const FakeGraph& g) {
  std::vector<FakeGraphNode> out;
  out.reserve(g.nodes.size());
  for (const auto& node : g.nodes) {
    out.push_back(*node);
    FakeGraphNode& n = out.back();
    if (n.op == NodeOp::kConditional && n.body != nullptr) {
      n.nodes = std::make_shared<const std::vector<FakeGraphNode>>(Snapshot(*n.body));
    }
  }
  return out;
}

}  // namespace

std::vector<FakeGraphNode> SnapshotGraph(const FakeGraph& g) { return Snapshot(g); }

void DestroyOwnedGraphs(const FakeGraph& g) {
  for (const auto& node : g.nodes) {
    if (node->op != NodeOp::kConditional || node->body == nullptr) continue;
    DestroyOwnedGraphs(*node->body);
    for (const auto& inner : node->body->nodes) S().graph_nodes.erase(inner.get());
    S().graphs.erase(node->body);
  }
}

CUresult fake_cuGraphCreate(CUgraph* graph, unsigned int flags) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphCreate")) return r;
  if (graph == nullptr || flags != 0) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphCreate: NULL graph or flags %u", flags);
  }
  auto g = std::make_unique<FakeGraph>();
  FakeGraph* raw = g.get();
  S().graphs.emplace(raw, std::move(g));
  *graph = reinterpret_cast<CUgraph>(raw);
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphAddMemsetNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                                   size_t count, const CUDA_MEMSET_NODE_PARAMS* params,
                                   CUcontext context) {
  static constexpr const char* fn = "cuGraphAddMemsetNode";
  Lock lock(S().mu);
  FakeGraph* g = nullptr;
  if (CUresult r = Prepare(out, graph, deps, count, fn, &g)) return r;
  if (context == nullptr) return Misuse(CUDA_ERROR_INVALID_CONTEXT, "%s: NULL context", fn);
  auto node = std::make_unique<FakeGraphNode>();
  if (CUresult r = MemsetNode(params, fn, node.get())) return r;
  *out = Append(g, std::move(node));
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphAddKernelNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                                   size_t count, const CUDA_KERNEL_NODE_PARAMS* params) {
  static constexpr const char* fn = "cuGraphAddKernelNode";
  ClearRefusedKernel();
  Lock lock(S().mu);
  FakeGraph* g = nullptr;
  if (CUresult r = Prepare(out, graph, deps, count, fn, &g)) return r;
  auto node = std::make_unique<FakeGraphNode>();
  if (CUresult r = KernelNode(params, fn, node.get())) return r;
  *out = Append(g, std::move(node));
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphAddChildGraphNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                                       size_t count, CUgraph child) {
  static constexpr const char* fn = "cuGraphAddChildGraphNode";
  Lock lock(S().mu);
  FakeGraph* g = nullptr;
  if (CUresult r = Prepare(out, graph, deps, count, fn, &g)) return r;
  FakeGraph* c = FindGraph(child);
  if (c == nullptr || c == g) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown child graph %p", fn,
                  static_cast<void*>(child));
  }
  auto node = std::make_unique<FakeGraphNode>();
  node->op = NodeOp::kChildGraph;
  node->nodes = std::make_shared<const std::vector<FakeGraphNode>>(Snapshot(*c));
  *out = Append(g, std::move(node));
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphConditionalHandleCreate(CUgraphConditionalHandle* out, CUgraph graph,
                                             CUcontext context, unsigned int default_value,
                                             unsigned int flags) {
  static constexpr const char* fn = "cuGraphConditionalHandleCreate";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  if (out == nullptr || FindGraph(graph) == nullptr || context == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL out, unknown graph or NULL context", fn);
  }
  if (flags != CU_GRAPH_COND_ASSIGN_DEFAULT) {
    return Misuse(CUDA_ERROR_NOT_SUPPORTED, "%s: the fake takes only CU_GRAPH_COND_ASSIGN_DEFAULT",
                  fn);
  }
  const CUgraphConditionalHandle handle = S().next_conditional++;
  S().conditionals[handle] = State::Conditional{default_value, default_value};
  *out = handle;
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphAddNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                             const CUgraphEdgeData* edges, size_t count,
                             CUgraphNodeParams* params) {
  static constexpr const char* fn = "cuGraphAddNode";
  Lock lock(S().mu);
  FakeGraph* g = nullptr;
  if (CUresult r = Prepare(out, graph, deps, count, fn, &g)) return r;
  if (edges != nullptr) {
    return Misuse(CUDA_ERROR_NOT_SUPPORTED, "%s: the fake takes no edge data", fn);
  }
  if (params == nullptr || params->type != CU_GRAPH_NODE_TYPE_CONDITIONAL ||
      params->conditional.type != CU_GRAPH_COND_TYPE_WHILE || params->conditional.size != 1) {
    return Misuse(CUDA_ERROR_NOT_SUPPORTED, "%s: the fake adds only WHILE nodes of size 1", fn);
  }
  if (S().conditionals.count(params->conditional.handle) == 0) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown conditional handle", fn);
  }
  auto node = std::make_unique<FakeGraphNode>();
  node->op = NodeOp::kConditional;
  node->handle = params->conditional.handle;
  auto body = std::make_unique<FakeGraph>();
  node->body = body.get();
  node->body_out[0] = reinterpret_cast<CUgraph>(body.get());
  S().graphs.emplace(body.get(), std::move(body));
  params->conditional.phGraph_out = node->body_out;
  *out = Append(g, std::move(node));
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphKernelNodeSetParams(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* params) {
  static constexpr const char* fn = "cuGraphKernelNodeSetParams";
  ClearRefusedKernel();
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  FakeGraphNode* n = FindGraphNode(node);
  if (n == nullptr || n->op != NodeOp::kKernel) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: %p is not a kernel node of a live graph", fn,
                  static_cast<void*>(node));
  }
  FakeGraphNode updated;
  if (CUresult r = KernelNode(params, fn, &updated)) return r;
  n->module_serial = updated.module_serial;
  n->kernel = updated.kernel;
  n->function = updated.function;
  n->shape = updated.shape;
  n->args = std::move(updated.args);
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphMemsetNodeSetParams(CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* params) {
  static constexpr const char* fn = "cuGraphMemsetNodeSetParams";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  FakeGraphNode* n = FindGraphNode(node);
  if (n == nullptr || n->op != NodeOp::kMemset) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: %p is not a memset node of a live graph", fn,
                  static_cast<void*>(node));
  }
  FakeGraphNode updated;
  if (CUresult r = MemsetNode(params, fn, &updated)) return r;
  n->dst = updated.dst;
  n->value = updated.value;
  n->element_size = updated.element_size;
  n->bytes = updated.bytes;
  return CUDA_SUCCESS;
}

}  // namespace fake_driver
