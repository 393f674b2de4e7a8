// The plan of one dispatch-graph replay: what the replay changes (element
// count, rebound ranges, kernel node parameters), worked out in full before
// any node or binding is touched, so a replay that fails its checks leaves
// the graph as it was. A graph keeps one plan and reuses its storage, so a
// steady-state replay allocates nothing.
#ifndef VYRE_GRAPH_GRAPH_LAUNCH_PLAN_H_
#define VYRE_GRAPH_GRAPH_LAUNCH_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/base/attributes.h"
#include "absl/container/inlined_vector.h"
#include "graph/capture.h"
#include "runtime/transfer/buffer.h"

namespace vyre {

struct GraphLaunchPlan {
  // One binding as this replay binds it.
  struct Binding {
    // RESIDENT: the range to bind; `buffer` stays empty when the replay keeps
    // the bound one (nothing changes hands).
    std::shared_ptr<Buffer> buffer;
    uint64_t offset = 0;
    uint64_t bytes = 0;
    // HOST: this replay's memory.
    const void* host_input = nullptr;
    void* host_output = nullptr;
  };

  bool rebinding = false;         // the replay passes bindings
  uint64_t count = 0;             // the element count it runs
  bool resident_changed = false;  // some RESIDENT binding moves
  absl::InlinedVector<Binding, 8> bindings;
  // The kernel nodes whose parameters change, and their new parameters.
  absl::InlinedVector<RecordedOp, 4> kernels;
  absl::InlinedVector<size_t, 4> kernel_nodes;

  // Starts a plan for a graph of `binding_count` bindings (the size only
  // changes at a graph's first replay).
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Begin(size_t binding_count) {
    if (bindings.size() != binding_count) bindings.resize(binding_count);
    for (Binding& b : bindings) b = Binding{};
    kernels.clear();
    kernel_nodes.clear();
    resident_changed = false;
  }
  // Lets go of the buffers the plan resolved: a replay's references end with
  // the call, and a buffer freed meanwhile must not wait for the next one.
  void Release() {
    for (Binding& b : bindings) b.buffer.reset();
  }
};

}  // namespace vyre

#endif  // VYRE_GRAPH_GRAPH_LAUNCH_PLAN_H_
