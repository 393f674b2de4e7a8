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

#include "absl/base/attributes.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "base/handle_registry.h"
#include "graph/capture.h"
#include "graph/graph_launch_plan.h"
#include "runtime/transfer/buffer.h"
#include "runtime/context/context.h"
#include "runtime/dispatch/recycle_pool.h"
#include "runtime/transfer/device_pools.h"
#include "runtime/transfer/memory.h"
#include "runtime/program/program.h"
#include "vyre_cuda.h"

namespace vyre {

struct DispatchPlan;
struct PlannedBinding;
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

class GraphReplay;

class Graph {
 public:
  static absl::StatusOr<std::shared_ptr<Graph>> RecordDispatch(std::shared_ptr<Program> program,
                                                               const vyre_dispatch_desc& desc,
                                                               const char* what);
  static absl::StatusOr<std::shared_ptr<Graph>> RecordSequence(std::shared_ptr<Sequence> sequence,
                                                               const char* what);
  // What vyre_capture_end hands over (user_capture.cc): the captured graph,
  // the parameter words its dispatches read (device, and the pinned copy
  // each replay uploads them from), and what those dispatches use.
  struct CapturedWork {
    GraphGuard graph;
    OwnedBytes device_params;
    OwnedBytes pinned_params;
    std::vector<std::shared_ptr<Buffer>> buffers;
    std::vector<std::shared_ptr<Program>> programs;
  };
  static absl::StatusOr<std::shared_ptr<Graph>> FromCapture(std::shared_ptr<Context> context,
                                                            CapturedWork work,
                                                            const char* what);
  // vyre_graph_loop_create (graph_loop.cc): `body` run while it asks for
  // another round, as a conditional WHILE node.
  static absl::StatusOr<std::shared_ptr<Graph>> CreateLoop(std::shared_ptr<Graph> body,
                                                           const vyre_graph_loop_desc& desc,
                                                           const char* what);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Context& context() const { return *context_; }
  const std::shared_ptr<Context>& context_ref() const { return context_; }
  // Released asynchronous replays of this graph, kept for reuse.
  RecyclePool<GraphReplay>& recycled_replays() { return recycled_replays_; }
  uint64_t handle() const { return handle_; }
  void set_handle(uint64_t bits) { handle_ = bits; }

  vyre_graph_info Info();
  absl::StatusOr<vyre_graph_node_kind> NodeKind(uint64_t index, const char* what);
  absl::StatusOr<vyre_graph_node_info> NodeInfo(uint64_t index, const char* what);
  absl::Status UpdateKernelNode(uint64_t index, const vyre_kernel_node_update& update,
                                const char* what);
  // vyre_graph_node_info_set (graph_node_set.cc).
  absl::Status SetNodeInfo(uint64_t index, const vyre_graph_node_info& info, uint32_t flags,
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

  // Where RecordDispatch laid out the HOST bindings.
  struct Layout {
    uint64_t slab_bytes = 0;   // device and pinned each: [parameter block][HOST bindings]
    bool host_inputs = false;  // some HOST binding is read
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

  // Recording a dispatch (graph_record.cc), in call order after the dispatch
  // plan: derive the element count and capacity class, lay out and stage the
  // HOST bindings, build the kernel node, capture, index the nodes.
  void DeriveShape(const DispatchPlan& plan, const vyre_dispatch_desc& desc);
  absl::StatusOr<Layout> LayOutBindings(const DispatchPlan& plan, const char* what);
  absl::Status PlaceHostBinding(const PlannedBinding& pb, Binding* b, Layout* layout,
                                const char* what);
  absl::Status StageRecordInputs(const DispatchPlan& plan, uint64_t slab_bytes,
                                 const char* what);
  absl::Status BuildKernelOp(const DispatchPlan& plan, RecordedOp* kernel, const char* what);
  absl::Status CaptureDispatch(const RecordedOp& kernel, uint32_t iterations, bool host_inputs,
                               const char* what);
  absl::Status RecordOps(bool with_inputs, const RecordedOp& kernel, uint32_t iterations,
                         CUstream stream, std::vector<RecordedOp>* ops, const char* what) const;
  void IndexNodes();
  absl::Status Capture(const RecordFn& record_full, const RecordFn* record_unchanged,
                       const char* what);
  static ExecCounts Count(const std::vector<RecordedOp>& ops, const std::vector<Binding>& bindings,
                          bool with_inputs);

  // OUT_OF_RANGE (with the Fix) for an index past the full graph's nodes;
  // the caller holds mu_.
  absl::Status CheckNodeIndex(uint64_t index, const char* what) const;
  // Node parameters (graph.cc).
  absl::Status SetKernelNode(size_t index, const RecordedOp& op, const char* what);
  absl::Status SetMemsetNode(size_t index, const CUDA_MEMSET_NODE_PARAMS& params,
                             const char* what);
  absl::Status ApplyAll(const char* what);
  // Brings the nodes of full_.graph (the graph the executable ones came
  // from) up to the parameters the next replay runs, so a clone of it runs
  // the same (graph_loop.cc). The caller holds mu_.
  absl::Status SyncTemplate(const char* what);
  // A loop body's buffers that the loop does not hold itself: a sequence's.
  absl::Status CheckLoopBodyLive(const char* what) const;

  // vyre_graph_node_info_set's checks (graph_node_set.cc): `info` applied to
  // a copy of the node's current state, touching nothing.
  absl::Status CheckNodeIdentity(uint64_t index, const vyre_graph_node_info& info,
                                 const char* what) const;
  absl::Status KernelFromInfo(const vyre_graph_node_info& info, bool raw, RecordedOp* op,
                              const char* what) const;
  absl::Status KernelArgumentsFromInfo(const vyre_graph_node_info& info, bool raw,
                                       RecordedOp* op, const char* what) const;
  absl::Status MemsetFromInfo(const vyre_graph_node_info& info, CUDA_MEMSET_NODE_PARAMS* params,
                              const char* what) const;
  absl::Status CheckMemsetDestination(const CUDA_MEMSET_NODE_PARAMS& params, bool raw,
                                      const char* what) const;

  // Replaying (graph_launch.cc). A dispatch graph's replay runs as: check
  // the descriptor, resolve its bindings, plan the kernel node changes (all
  // into launch_plan_, touching nothing), push the node changes, commit them,
  // upload parameter words, stage HOST inputs, launch. The steps are always
  // inlined into Launch, their one caller, so the split adds no call to the
  // replay's hot path.
  absl::Status LaunchSequence(const vyre_graph_replay_desc& desc, ReplayWork* work,
                              const char* what);
  absl::Status LaunchCaptured(const vyre_graph_replay_desc& desc, const char* what);
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status LaunchDispatch(
      const vyre_graph_replay_desc& desc, ReplayWork* work, const char* what);
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status PlanLaunch(
      const vyre_graph_replay_desc& desc, GraphLaunchPlan* plan, const char* what) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status CheckReplayBindings(
      const vyre_graph_replay_desc& desc, const char* what) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status CheckReplayCount(
      const vyre_graph_replay_desc& desc, uint64_t* count, const char* what) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status CheckReplayValues(
      const vyre_graph_replay_desc& desc, const char* what) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status ResolveBindings(
      const vyre_graph_replay_desc& desc, GraphLaunchPlan* plan, const char* what) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status Rebind(
      size_t i, const vyre_dispatch_binding& in, GraphLaunchPlan* plan, const char* what) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status RebindHost(
      size_t i, const vyre_dispatch_binding& in, GraphLaunchPlan* plan, const char* what) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status RebindResident(
      size_t i, const vyre_dispatch_binding& in, GraphLaunchPlan* plan, const char* what) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status KeepBinding(
      size_t i, GraphLaunchPlan* plan, const char* what) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status CheckBoundBytes(
      size_t i, uint64_t bytes, uint64_t count, const char* what) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline void PlanKernelUpdates(
      const vyre_graph_replay_desc& desc, GraphLaunchPlan* plan) const;
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status PushNodeUpdates(
      const GraphLaunchPlan& plan, const char* what);
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status PushMemsetUpdates(
      const GraphLaunchPlan& plan, const char* what);
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status PushKernelUpdates(
      const GraphLaunchPlan& plan, const char* what);
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline void CommitPlan(
      const vyre_graph_replay_desc& desc, GraphLaunchPlan* plan);
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status UploadParamWords(
      const vyre_graph_replay_desc& desc, ReplayWork* work, const char* what);
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool StageHostInputs(
      const GraphLaunchPlan& plan, ReplayWork* work);
  absl::Status LaunchExec(bool unchanged_inputs, const char* what);

  std::shared_ptr<Context> context_;  // first: outlives everything below
  std::shared_ptr<Program> program_;     // dispatch graphs
  std::shared_ptr<Sequence> sequence_;   // sequence graphs
  bool captured_ = false;                // vyre_capture_end graphs
  std::vector<std::shared_ptr<Buffer>> captured_buffers_;
  std::vector<std::shared_ptr<Program>> captured_programs_;
  // Loop graphs: the control kernel's module (outlives full_) and the body.
  std::shared_ptr<LoadedModule> loop_module_;
  std::shared_ptr<Graph> loop_body_;
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
  GraphLaunchPlan launch_plan_;  // reused by every dispatch replay
  RecyclePool<GraphReplay> recycled_replays_;
};

// A grid checked against the device's limits, axis by axis: 0 is
// INVALID_ARGUMENT, over the limit LIMIT_EXCEEDED.
absl::Status CheckGrid(const uint32_t grid[3], const vyre_device_info& device, const char* what);

// The refusal of a node change to a kernel node of captured work (no program).
absl::Status CapturedKernelRefusal(uint64_t index, const char* what);

// The process-wide table of graph handles.
HandleRegistry<Graph>& Graphs();

}  // namespace vyre

#endif  // VYRE_GRAPH_GRAPH_H_
