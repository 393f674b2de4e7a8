// One rebuild of an e-graph image from its start to its result: behind
// vyre_egraph_rebuild_async's pending handle, or on the stack for
// vyre_egraph_rebuild. On the GPU the rounds run in batches with no host
// round trip inside a batch; the host reads the counters between batches
// (the batch doubles each time, so a rebuild of n rounds syncs about
// log2(n) times).
#ifndef VYRE_EGRAPH_EGRAPH_REBUILD_H_
#define VYRE_EGRAPH_EGRAPH_REBUILD_H_

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>

#include "egraph/egraph_image.h"
#include "graph/device_loop.h"
#include "runtime/transfer/device_pools.h"
#include "runtime/dispatch/pending_work.h"

namespace vyre {

class EgraphRebuild final : public PendingWork {
 public:
  EgraphRebuild(std::shared_ptr<EgraphImage> image, bool synchronous);
  ~EgraphRebuild() override;

  // Validates and applies the unions and enqueues the first batch of rounds
  // (a CPU image's rebuild runs to completion here).
  absl::Status Start(const vyre_egraph_rebuild_desc& desc, const char* what);
  std::shared_ptr<Context> context_ref() const override { return image_->context_ref(); }

  const vyre_egraph_rebuild_result& result() const { return result_; }

 private:
  absl::Status PollInFlight(const char* what) override;
  absl::Status WaitInFlight(uint64_t timeout_ns, const char* what, bool* settled) override;
  // Runs the rebuild to its end without the read-back, so the image's
  // union-find is whole again; its failure is returned.
  absl::Status AbandonInFlight(const char* what) override;
  void ReleaseResources() override;

  absl::Status StartOnDevice(const vyre_egraph_rebuild_desc& desc, const char* what);
  absl::Status StartOnHost(const vyre_egraph_rebuild_desc& desc, const char* what);
  // Uploads and applies the unions, then moves the linked roots' members.
  absl::Status EnqueueUnions(const vyre_egraph_rebuild_desc& desc, const char* what);
  // One round's launches in order: refresh, insert, relink, mark_parents,
  // round_end, with their item counts and arguments (refresh's its own,
  // the rest the image's). The host-driven batches launch it; the device
  // rounds make it the loop's body. Not copyable: a step points into it.
  struct Round {
    struct Step {
      CUfunction kernel;
      uint64_t items;
      const VyreEgArgs* args;
    };
    explicit Round(const EgraphImage& im);
    Round(const Round&) = delete;
    Round& operator=(const Round&) = delete;
    VyreEgArgs refresh_args;
    std::array<Step, 5> steps;
  };
  absl::Status EnqueueRounds(uint32_t rounds, const char* what);
  // Enqueues the copy of the counters to the image's pinned block.
  absl::Status ReadCountersBack(const char* what);
  // VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS: every round in one launch of a loop
  // graph (graph/device_loop.h) that stops at the fixpoint.
  absl::Status EnqueueDeviceRounds(const char* what);
  // Runs batches until the fixpoint, then reads the results back (into the
  // caller's memory unless `read_back` is false).
  absl::Status Finish(bool read_back, const char* what);

  std::shared_ptr<EgraphImage> image_;
  std::unique_lock<std::mutex> image_lock_;  // synchronous: held start to finish
  bool claimed_ = false;                     // asynchronous: set the image busy

  uint32_t flags_ = 0;
  uint32_t* canonical_out_ = nullptr;
  vyre_egraph_rebuild_result* result_out_ = nullptr;
  uint32_t batch_ = 0;
  uint32_t start_parent_state_ = VYRE_EG_PARENT_ANY;  // the union-find round 1 finds
  uint64_t classes_before_ = 0;
  PoolBlock unions_device_, unions_pinned_;
  bool device_rounds_ = false;
  DeviceLoop loop_;           // device rounds: the loop graph (module first)
  GraphExecGuard loop_exec_;  // and its instance, alive until the rounds ran
  vyre_egraph_rebuild_result result_{};
};

}  // namespace vyre

#endif  // VYRE_EGRAPH_EGRAPH_REBUILD_H_
