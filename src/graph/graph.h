// A recorded graph: a dispatch (host or resident bindings) or a sequence
// captured once, instantiated, and replayed with cuGraphLaunch. Changes a
// replay asks for (other resident ranges, element count, scalars, parameter
// words) are applied to the executable graph's nodes, never by capturing
// again.
#ifndef VYRE_GRAPH_GRAPH_H_
#define VYRE_GRAPH_GRAPH_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "graph/capture.h"
#include "runtime/transfer/buffer.h"
#include "runtime/context/context.h"
#include "runtime/transfer/device_pools.h"
#include "runtime/transfer/memory.h"
#include "runtime/program/program.h"
#include "vyre_cuda.h"

namespace vyre {

class Sequence;

// What one replay leaves for its wait: host copies out of the graph's pinned
// memory, and references that keep its device memory alive until then.
struct ReplayWork {
  struct HostCopy {
    const unsigned char* from;
    unsigned char* to;
    uint64_t bytes;
  };
  absl::InlinedVector<HostCopy, 8> outputs;
  const Sequence* downloads_of = nullptr;  // sequence graphs: DOWNLOAD steps
  const unsigned char* pinned = nullptr;
  // Asynchronous replays hold the resident buffers they use; a synchronous
  // one holds the graph's lock until its wait ends, so the graph's own
  // references cannot go meanwhile.
  bool keep_buffers = false;
  absl::InlinedVector<std::shared_ptr<Buffer>, 8> buffers;
  PoolBlock param_staging;

  void Clear() {
    outputs.clear();
    downloads_of = nullptr;
    pinned = nullptr;
    buffers.clear();
    param_staging.reset();
  }
};

class Graph {
 public:
  static absl::StatusOr<std::shared_ptr<Graph>> RecordDispatch(std::shared_ptr<Program> program,
                                                               const vyre_dispatch_desc& desc,
                                                               const char* what);
  static absl::StatusOr<std::shared_ptr<Graph>> RecordSequence(std::shared_ptr<Sequence> sequence,
                                                               const char* what);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Context& context() const { return *context_; }
  const std::shared_ptr<Context>& context_ref() const { return context_; }
  uint64_t handle() const { return handle_; }
  void set_handle(uint64_t bits) { handle_ = bits; }

  vyre_graph_info Info();
  absl::StatusOr<vyre_graph_node_kind> NodeKind(uint64_t index, const char* what);
  absl::Status UpdateKernelNode(uint64_t index, const vyre_kernel_node_update& update,
                                const char* what);

  // Replays, used by GraphReplay. The caller holds mutex() and has made the
  // context current. A graph with host staging (pinned buffers a replay
  // fills and reads back) allows one unwaited asynchronous replay at a time.
  std::mutex& mutex() { return mu_; }
  bool has_host_staging() const { return pinned_bytes_ > 0; }
  bool async_in_flight() const { return async_in_flight_; }
  void set_async_in_flight(bool in_flight) { async_in_flight_ = in_flight; }
  // Validates `desc`, applies its changes, stages host inputs and launches
  // the graph on the context's work stream.
  absl::Status Launch(const vyre_graph_replay_desc& desc, ReplayWork* work, const char* what);

 private:
  explicit Graph(std::shared_ptr<Context> context) : context_(std::move(context)) {}

  struct Binding {
    const BindingDecl* decl = nullptr;
    bool host = false;
    // HOST: the graph's own memory.
    uint64_t bytes = 0;
    uint64_t device_offset = 0;
    uint64_t pinned_offset = 0;
    uint64_t readback_offset = 0;
    uint64_t readback_bytes = 0;
    // RESIDENT: the range bound now.
    std::shared_ptr<Buffer> buffer;
    uint64_t offset = 0;
    uint64_t recorded_bytes = 0;
    // Bound to exactly the recorded element count, so it must hold the
    // replay's element count (capacity classes).
    bool sized_by_count = false;
    int memset_node = -1;  // OUTPUT: the node that zeroes it

    CUdeviceptr Pointer(CUdeviceptr device_slab) const {
      return host ? device_slab + device_offset : buffer->device() + offset;
    }
  };
  // What a replay moves, per executable graph.
  struct ExecCounts {
    uint64_t h2d_bytes = 0, h2d_operations = 0, d2h_bytes = 0, d2h_operations = 0;
    uint64_t memset_operations = 0, kernel_launches = 0;
  };

  // Elements the device's largest derived grid (max grid x blocks of
  // threads_per_block_ threads) covers: the most a replay may ask for.
  uint64_t GridCoverage() const {
    return uint64_t{context_->device().max_grid_dim[0]} * threads_per_block_;
  }
  // Blocks of threads_per_block_ threads that `count` elements need.
  uint64_t BlocksFor(uint64_t count) const {
    return count / threads_per_block_ + (count % threads_per_block_ != 0);
  }
  absl::Status Capture(const RecordFn& record_full, const RecordFn* record_unchanged,
                       const char* what);
  absl::Status LaunchSequence(const vyre_graph_replay_desc& desc, ReplayWork* work,
                              const char* what);
  absl::Status SetKernelNode(size_t index, const RecordedOp& op, const char* what);
  absl::Status SetMemsetNode(size_t index, CUdeviceptr dst, uint64_t bytes, const char* what);
  absl::Status ApplyAll(const char* what);
  absl::Status LaunchExec(bool unchanged_inputs, const char* what);
  static ExecCounts Count(const std::vector<RecordedOp>& ops, const std::vector<Binding>& bindings,
                          bool with_inputs);

  std::shared_ptr<Context> context_;  // first: outlives everything below
  std::shared_ptr<Program> program_;     // dispatch graphs
  std::shared_ptr<Sequence> sequence_;   // sequence graphs
  ExecutableGraph full_;
  ExecutableGraph unchanged_;  // without the input copies (HOST inputs only)
  size_t input_copies_ = 0;    // full_'s leading input-copy nodes
  ExecCounts full_counts_, unchanged_counts_;
  std::vector<Binding> bindings_;
  OwnedBytes device_;  // [parameter block][HOST bindings]
  OwnedBytes pinned_;  // [parameter staging][HOST bindings], or sequence staging
  uint64_t pinned_bytes_ = 0;  // host staging a replay uses (0: none)
  uint64_t param_capacity_ = 0;
  std::string words_;
  std::vector<uint64_t> scalars_;
  bool grid_derived_ = false;
  uint32_t threads_per_block_ = 1;
  uint64_t element_count_ = 0;
  uint64_t recorded_count_ = 0;
  uint64_t capacity_ = 1;
  bool inputs_reusable_ = false;  // no HOST binding is INPUT_OUTPUT
  uint64_t handle_ = 0;
  bool counted_ = false;

  std::mutex mu_;  // guards the state below and the executable graphs' nodes
  bool device_inputs_valid_ = false;
  bool async_in_flight_ = false;
  bool reapply_ = false;  // a node update failed: push every node again
  uint64_t replays_ = 0;
};

}  // namespace vyre

#endif  // VYRE_GRAPH_GRAPH_H_
