// One replay of a graph from enqueue to completion: the pending work behind
// vyre_graph_replay_async's handle, or on the stack for vyre_graph_replay.
// It holds the graph (and the buffers the replay uses) until the replay is
// seen complete, so destroying either meanwhile is safe.
#ifndef VYRE_GRAPH_GRAPH_REPLAY_H_
#define VYRE_GRAPH_GRAPH_REPLAY_H_

#include <cstdint>
#include <memory>
#include <mutex>

#include "graph/graph.h"
#include "runtime/transfer/device_pools.h"
#include "runtime/dispatch/pending_work.h"

namespace vyre {

class GraphReplay final : public PendingWork {
 public:
  GraphReplay(std::shared_ptr<Graph> graph, bool synchronous);
  ~GraphReplay() override;
  // Released asynchronous replays are kept by the context (detached, holding
  // nothing) and reused, so steady asynchronous replays allocate nothing.
  void Attach(std::shared_ptr<Graph> graph);
  void Detach();
  GraphReplay(const GraphReplay&) = delete;
  GraphReplay& operator=(const GraphReplay&) = delete;

  // `host_timing`: read host clocks (someone may ask for the timing).
  absl::Status Enqueue(const vyre_graph_replay_desc& desc, bool host_timing, const char* what);
  absl::Status Poll(const char* what) override;
  absl::Status Wait(uint64_t timeout_ns, const char* what) override;
  absl::StatusOr<vyre_timing> Timing(const char* what) override;
  absl::Status Abandon(const char* what) override;
  std::shared_ptr<Context> context_ref() const override { return graph_->context_ref(); }
  void Recycle(std::shared_ptr<PendingWork> self) override;

 private:
  enum class State { kIdle, kInFlight, kWaited };

  std::unique_lock<std::mutex> Lock() {
    return synchronous_ ? std::unique_lock<std::mutex>() : std::unique_lock<std::mutex>(mu_);
  }
  absl::Status EnqueueLocked(const vyre_graph_replay_desc& desc, const char* what);
  // Drains the stream if the replay's work may still run, copies nothing,
  // drops every reference and lets the graph take another replay.
  void ReleaseResources();

  std::shared_ptr<Graph> graph_;
  const bool synchronous_;
  // A synchronous replay holds the graph from enqueue to the end of its wait.
  std::unique_lock<std::mutex> graph_lock_;
  bool claimed_host_staging_ = false;  // async: this replay owns the pinned buffers

  std::mutex mu_;  // async only: any thread may poll or wait
  State state_ = State::kIdle;
  bool device_work_pending_ = false;
  ReplayWork work_;
  PooledEvent done_, start_, end_;
  bool host_timing_ = false;
  vyre_timing timing_{};
  int64_t started_ns_ = 0;
};

}  // namespace vyre

#endif  // VYRE_GRAPH_GRAPH_REPLAY_H_
