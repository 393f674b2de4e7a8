// Stream capture into an instantiated CUDA graph, with every driver object
// owned by one guard, and the node inventory checked against what was
// enqueued so that node i is known to be the i-th operation recorded.
#ifndef VYRE_GRAPH_CAPTURE_H_
#define VYRE_GRAPH_CAPTURE_H_

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "driver/guards.h"
#include "runtime/dispatch/kernel_launch.h"
#include "vyre_cuda.h"

namespace vyre {

class Program;

CUresult ReleaseGraph(CUgraph graph);
CUresult ReleaseGraphExec(CUgraphExec exec);
inline constexpr char kGraphName[] = "cuGraphDestroy";
inline constexpr char kGraphExecName[] = "cuGraphExecDestroy";
using GraphGuard = driver::UniqueResource<CUgraph, ReleaseGraph, kGraphName>;
using GraphExecGuard = driver::UniqueResource<CUgraphExec, ReleaseGraphExec, kGraphExecName>;

// One operation the recorder enqueued during capture, in order.
struct RecordedOp {
  vyre_graph_node_kind kind = VYRE_GRAPH_NODE_OTHER;
  // MEMSET: the destination, checked against the captured node.
  CUdeviceptr memset_dst = 0;
  // The binding a memset zeroes (dispatch graphs), or -1.
  int binding = -1;
  // KERNEL: what the node launches, kept for node-parameter updates.
  const Program* program = nullptr;
  LaunchShape shape;
  KernelValues values;
  // Last, after the fields recorders fill positionally.
  // MEMSET: the node's parameters as the next replay runs them: read from
  // the captured node, then kept current by rebinding and
  // vyre_graph_node_info_set (the driver cannot read an executable graph's
  // node back).
  CUDA_MEMSET_NODE_PARAMS memset{};
  // KERNEL of captured work (program null): the function the driver reports.
  CUfunction function = nullptr;
};

// Enqueues the work to record on `stream` and describes each operation.
using RecordFn = std::function<absl::Status(CUstream stream, std::vector<RecordedOp>* ops)>;

// An instantiated graph and its nodes in recording order.
struct ExecutableGraph {
  GraphGuard graph;
  GraphExecGuard exec;
  std::vector<CUgraphNode> nodes;
  std::vector<RecordedOp> ops;  // ops[i] made nodes[i]
};

// Captures what `record` enqueues on `stream` (thread-local capture mode),
// checks the node inventory and instantiates the graph. On any failure the
// capture is ended and everything made so far is released; if the driver
// would not end it, *capture_stuck says the stream must not be used again.
// The caller holds the context's capture mutex and has made the context
// current.
absl::StatusOr<ExecutableGraph> CaptureGraph(CUstream stream, const RecordFn& record,
                                             const char* what, bool* capture_stuck);

// Instantiates a graph captured from a caller's work (vyre_capture_end): the
// node inventory is the driver's, each op described from its node (kind; a
// memset's parameters; a kernel's function and shape, no program).
absl::StatusOr<ExecutableGraph> InstantiateCaptured(GraphGuard graph, const char* what);

// Classifies a driver node type.
vyre_graph_node_kind NodeKindOf(CUgraphNodeType type);

}  // namespace vyre

#endif  // VYRE_GRAPH_CAPTURE_H_
