// A WHILE loop on the device, shared by loop graphs (graph_loop.cc) and the
// e-graph rebuild's device rounds (egraph_rebuild.cc):
//
//   top:  [vyre_loop_start: condition = count = 0] -> [WHILE h]
//   body:   [what `fill` adds] -> [vyre_loop_control]
//
// h defaults to 1 at every launch (CU_GRAPH_COND_ASSIGN_DEFAULT), so the body
// runs at least once. The control kernel (src/kernels/graph_loop.cu) counts
// the iteration and sets h to "condition != 0 and count < max", clearing the
// condition when it goes on. A WHILE iteration costs ~4.5 us of the driver's
// on an H200 even for one kernel node, so the loop adds one kernel node per
// iteration and nothing else.
#ifndef VYRE_GRAPH_DEVICE_LOOP_H_
#define VYRE_GRAPH_DEVICE_LOOP_H_

#include <cuda.h>

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/capture.h"
#include "runtime/context/context.h"

namespace vyre {

struct DeviceLoop {
  // The control kernel's module first: it must outlive the graph and any
  // executable graph made from it.
  std::shared_ptr<LoadedModule> module;
  GraphGuard graph;
};

// Adds the body's nodes to `inner` (the WHILE node's body graph) and returns
// the nodes the control kernel must follow.
using FillLoopBody = std::function<absl::Status(CUgraph inner, std::vector<CUgraphNode>* last)>;

// Builds the loop over `fill`'s body. DRIVER_TOO_OLD without CUDA 12.4's
// conditional nodes. The context must be current.
absl::StatusOr<DeviceLoop> MakeDeviceLoop(Context& ctx, CUdeviceptr condition,
                                          CUdeviceptr count, uint32_t max_iterations,
                                          const FillLoopBody& fill, const char* what);

}  // namespace vyre

#endif  // VYRE_GRAPH_DEVICE_LOOP_H_
