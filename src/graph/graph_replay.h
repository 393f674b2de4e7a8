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
#include "runtime/dispatch/pending_work.h"

namespace vyre {

class GraphReplay final : public PendingWork {
 public:
  GraphReplay(std::shared_ptr<Graph> graph, bool synchronous);
  ~GraphReplay() override;
  // Released asynchronous replays are kept by their graph (detached, holding
  // nothing) and reused, so steady asynchronous replays allocate nothing.
  void Attach(std::shared_ptr<Graph> graph);
  void Detach();

  // `host_timing`: read host clocks (someone may ask for the timing).
  absl::Status Enqueue(const vyre_graph_replay_desc& desc, bool host_timing, const char* what);
  std::shared_ptr<Context> context_ref() const override { return graph_->context_ref(); }
  void Recycle(std::shared_ptr<PendingWork> self) override;

 private:
  absl::Status PollInFlight(const char* what) override;
  absl::Status WaitInFlight(uint64_t timeout_ns, const char* what, bool* settled) override;
  absl::Status AbandonInFlight(const char* what) override;
  // Drains the stream if the replay's work may still run, copies nothing,
  // drops every reference and lets the graph take another replay.
  void ReleaseResources() override;

  absl::Status EnqueueLocked(const vyre_graph_replay_desc& desc, const char* what);
  // The host side of a finished replay: outputs copied out of the graph's
  // pinned buffers, downloads finished, the device time read.
  void FinishOnHost();

  std::shared_ptr<Graph> graph_;
  // A synchronous replay holds the graph from enqueue to the end of its wait.
  std::unique_lock<std::mutex> graph_lock_;
  bool claimed_host_staging_ = false;  // async: this replay owns the pinned buffers
  ReplayWork work_;
};

}  // namespace vyre

#endif  // VYRE_GRAPH_GRAPH_REPLAY_H_
