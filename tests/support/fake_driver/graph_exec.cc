// Executable graphs (the model: capture.cc): instantiate, upload, launch,
// destroy, and the updates of their kernel and memset nodes.
#include <memory>
#include <utility>
#include <vector>

#include "entry_points.h"
#include "kernels.h"
#include "state.h"

namespace fake_driver {

CUresult fake_cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                          unsigned long long flags) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphInstantiateWithFlags")) return r;
  if (exec == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiateWithFlags: NULL exec");
  }
  FakeGraph* g = FindGraph(graph);
  if (g == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiateWithFlags: unknown graph %p",
                  static_cast<void*>(graph));
  }
  constexpr unsigned long long kKnownFlags = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                             CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
                                             CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  const bool device_launch = (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) != 0;
  if ((flags & ~kKnownFlags) != 0 ||
      (device_launch && (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0) ||
      (device_launch && g->nodes.empty())) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiateWithFlags: flags 0x%llx", flags);
  }
  auto x = std::make_unique<FakeGraphExec>();
  x->source = g;
  x->nodes = SnapshotGraph(*g);
  for (size_t i = 0; i < g->nodes.size(); ++i) x->index[g->nodes[i].get()] = i;
  FakeGraphExec* raw = x.get();
  S().graph_execs.emplace(raw, std::move(x));
  *exec = reinterpret_cast<CUgraphExec>(raw);
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphExecDestroy(CUgraphExec exec) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphExecDestroy")) return r;
  if (S().graph_execs.erase(reinterpret_cast<FakeGraphExec*>(exec)) == 0) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphExecDestroy: unknown graph exec %p",
                  static_cast<void*>(exec));
  }
  return CUDA_SUCCESS;
}

namespace {

// Kernels the fake does not know, anywhere in `nodes` (child graphs and
// WHILE bodies included), refuse the whole launch before any node runs.
CUresult RefuseUnknownKernels(const std::vector<FakeGraphNode>& nodes) {
  for (const FakeGraphNode& n : nodes) {
    if (n.op == NodeOp::kKernel) {
      if (CUresult r = KernelRefusal(n.kernel, "cuGraphLaunch")) return r;
    } else if (n.nodes != nullptr) {
      if (CUresult r = RefuseUnknownKernels(*n.nodes)) return r;
    }
  }
  return CUDA_SUCCESS;
}

// A WHILE node runs this many iterations at most before the fake calls the
// graph a runaway (a real GPU would spin on).
constexpr uint64_t kMaxWhileIterations = uint64_t{1} << 24;

}  // namespace

CUresult RunKernelNode(const FakeGraphNode& n);

// Runs `nodes` in order; WHILE bodies while their handle's value is non-zero.
CUresult RunGraphNodes(const std::vector<FakeGraphNode>& nodes) {
  fake_cuda_stats& st = S().stats;
  for (const FakeGraphNode& n : nodes) {
    if (S().sticky != CUDA_SUCCESS || S().latent != CUDA_SUCCESS) break;  // a node faulted
    if (n.op == NodeOp::kKernel) {
      if (CUresult r = RunKernelNode(n)) return r;
    } else if (n.op == NodeOp::kChildGraph) {
      if (CUresult r = RunGraphNodes(*n.nodes)) return r;
    } else if (n.op == NodeOp::kConditional) {
      State::Conditional& c = S().conditionals[n.handle];
      c.value = c.default_value;
      for (uint64_t i = 0; c.value != 0; ++i) {
        if (i == kMaxWhileIterations) {
          return Misuse(CUDA_ERROR_LAUNCH_TIMEOUT,
                        "cuGraphLaunch: a WHILE node ran %llu iterations without stopping",
                        static_cast<unsigned long long>(i));
        }
        if (n.nodes == nullptr) break;
        if (CUresult r = RunGraphNodes(*n.nodes)) return r;
        if (S().sticky != CUDA_SUCCESS || S().latent != CUDA_SUCCESS) break;
      }
    } else {
      if (CUresult r = CheckTransfer(n, "cuGraphLaunch")) return r;
      RunTransfer(n);
    }
    ++st.graph_nodes_run;
  }
  return CUDA_SUCCESS;
}

// Runs a graph's kernel node with the argument values it holds.
CUresult RunKernelNode(const FakeGraphNode& n) {
  bool module_live = false;
  for (const FakeModule* m : S().modules) module_live |= m->serial == n.module_serial;
  if (!module_live) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE,
                  "cuGraphLaunch: kernel node %s: its module has been unloaded", n.kernel.c_str());
  }
  size_t size = n.args.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER,
                   const_cast<unsigned char*>(n.args.data()), CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &size, CU_LAUNCH_PARAM_END};
  KernelArgs args(nullptr, n.args.empty() ? nullptr : extra);
  return RunLaunch(n.kernel, n.shape, args, false);
}

namespace {

// Validates the exec and stream of cuGraphLaunch and cuGraphUpload.
CUresult CheckGraphLaunch(FakeGraphExec* x, CUgraphExec exec, CUstream stream, const char* fn) {
  if (x == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown graph exec %p", fn,
                  static_cast<void*>(exec));
  }
  if (CUresult r = CheckStream(stream, fn)) return r;
  if (CUresult r = RejectOnCapturingStream(stream, fn)) return r;
  return RejectImplicitCaptureDependency(stream, fn);
}

}  // namespace

CUresult fake_cuGraphUpload(CUgraphExec exec, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphUpload", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  return CheckGraphLaunch(FindGraphExec(exec), exec, stream, "cuGraphUpload");
}

CUresult fake_cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  ClearRefusedKernel();
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphLaunch", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  FakeGraphExec* x = FindGraphExec(exec);
  if (CUresult r = CheckGraphLaunch(x, exec, stream, "cuGraphLaunch")) return r;
  // A kernel node of a kernel the fake does not know refuses the whole launch
  // before any node runs. (Captures refuse such launches already; this
  // guards graphs made any other way.)
  if (CUresult r = RefuseUnknownKernels(x->nodes)) return r;
  FlushDeferred();
  ++S().stats.graph_launches;
  return RunGraphNodes(x->nodes);
}

namespace {

// The exec's copy of original node `node`, which must be of the graph the exec
// was instantiated from (and that graph still alive).
FakeGraphNode* ExecNode(FakeGraphExec* x, CUgraphNode node, const char* fn) {
  if (x->source == nullptr) {
    Misuse(CUDA_ERROR_INVALID_VALUE, "%s: the graph the exec was instantiated from is destroyed",
           fn);
    return nullptr;
  }
  auto it = x->index.find(reinterpret_cast<const FakeGraphNode*>(node));
  if (it == x->index.end()) {
    Misuse(CUDA_ERROR_INVALID_VALUE,
           "%s: node %p is not a node of the graph the exec was instantiated from", fn,
           static_cast<void*>(node));
    return nullptr;
  }
  return &x->nodes[it->second];
}

}  // namespace

CUresult fake_cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                             const CUDA_KERNEL_NODE_PARAMS* params) {
  static constexpr const char* fn = "cuGraphExecKernelNodeSetParams";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  FakeGraphExec* x = FindGraphExec(exec);
  if (x == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown graph exec %p", fn,
                  static_cast<void*>(exec));
  }
  FakeGraphNode* n = ExecNode(x, node, fn);
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (n->op != NodeOp::kKernel) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: not a kernel node", fn);
  if (params == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL params", fn);
  if (params->func == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL func (the fake has no CUkernel)", fn);
  }
  FakeFunction* f = FindFunction(params->func);
  if (f == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown function", fn);
  if (f->module->serial != n->module_serial || f->name != n->kernel) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: changes the node's function from %s to %s", fn,
                  n->kernel.c_str(), f->name.c_str());
  }
  const LaunchShape shape{{params->gridDimX, params->gridDimY, params->gridDimZ},
                          {params->blockDimX, params->blockDimY, params->blockDimZ},
                          params->sharedMemBytes};
  if (CUresult r = CheckLaunchShape(*f, shape)) {
    return Misuse(r, "%s(%s): grid %ux%ux%u block %ux%ux%u shared %u exceeds device limits", fn,
                  f->name.c_str(), shape.grid[0], shape.grid[1], shape.grid[2], shape.block[0],
                  shape.block[1], shape.block[2], shape.shared_bytes);
  }
  KernelArgs args(params->kernelParams, params->extra);
  if (!args.present()) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: no kernel parameters", fn);
  std::vector<unsigned char> packed;
  if (CUresult r = PackKernelArgs(f->name, args, &packed)) return r;
  n->shape = shape;
  n->args = std::move(packed);
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphExecMemsetNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                             const CUDA_MEMSET_NODE_PARAMS* params,
                                             CUcontext context) {
  static constexpr const char* fn = "cuGraphExecMemsetNodeSetParams";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  FakeGraphExec* x = FindGraphExec(exec);
  if (x == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown graph exec %p", fn,
                  static_cast<void*>(exec));
  }
  FakeGraphNode* n = ExecNode(x, node, fn);
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (n->op != NodeOp::kMemset) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: not a memset node", fn);
  if (params == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL params", fn);
  if (context != current_context) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "%s: context %p is not the node's context", fn,
                  static_cast<void*>(context));
  }
  // The driver's rules: a non-empty one-row memset of 1, 2 or 4-byte
  // elements (aligned to them) whose value fits the element.
  const unsigned size = params->elementSize;
  if ((size != 1 && size != 2 && size != 4) || params->height != 1 || params->width == 0 ||
      (size < 4 && (params->value >> (8 * size)) != 0) || params->dst % size != 0) {
    return Misuse(CUDA_ERROR_INVALID_VALUE,
                  "%s: elementSize %u height %zu width %zu value 0x%x dst 0x%llx: a memset node "
                  "stays a non-empty one-row memset of aligned 1, 2 or 4-byte elements",
                  fn, size, params->height, params->width, params->value,
                  static_cast<unsigned long long>(params->dst));
  }
  if (CUresult r = CheckDeviceRange(params->dst, params->width * size, fn)) return r;
  n->dst = params->dst;
  n->value = params->value;
  n->element_size = size;
  n->bytes = params->width * size;
  return CUDA_SUCCESS;
}

}  // namespace fake_driver
