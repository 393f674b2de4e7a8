#include "graph/graph_replay.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "graph/sequence.h"

namespace vyre {

namespace {

constexpr PendingWork::Words kReplayWords = {
    "replay", "enqueued", "vyre_graph_replay_async",
    "wait on a pending replay once; read its timing with vyre_pending_timing and release it "
    "with vyre_pending_release."};

}  // namespace

GraphReplay::GraphReplay(std::shared_ptr<Graph> graph, bool synchronous)
    : PendingWork(synchronous, kReplayWords) {
  work_.keep_buffers = !synchronous_;
  Attach(std::move(graph));
}

GraphReplay::~GraphReplay() { Detach(); }

void GraphReplay::Attach(std::shared_ptr<Graph> graph) {
  graph_ = std::move(graph);
  AttachTo(&graph_->context());
  host_timing_ = false;
}

void GraphReplay::Detach() {
  if (!graph_) return;
  DetachFromContext();
  graph_.reset();
}

void GraphReplay::Recycle(std::shared_ptr<PendingWork> self) {
  if (synchronous_ || !graph_) return;
  // Held past Detach: the graph keeps the pool (and through it the context),
  // and this may be the last reference to it.
  std::shared_ptr<Graph> graph = graph_;
  Detach();
  if (!graph->context().open()) return;
  // The same object and owner, typed: `self` is this object.
  std::shared_ptr<GraphReplay> kept(self, this);
  self.reset();
  graph->recycled_replays().Put(std::move(kept));
}

void GraphReplay::ReleaseResources() {
  DrainStream();
  work_.Clear();
  done_.reset();
  start_.reset();
  end_.reset();
  if (claimed_host_staging_) {
    std::lock_guard graph_lock(graph_->mutex());
    graph_->set_async_in_flight(false);
    claimed_host_staging_ = false;
  }
  if (graph_lock_.owns_lock()) graph_lock_.unlock();
}

absl::Status GraphReplay::Enqueue(const vyre_graph_replay_desc& desc, bool host_timing,
                                  const char* what) {
  auto lock = Lock();
  host_timing_ = host_timing || LogEnabled(VYRE_LOG_TRACE);
  if (host_timing_) started_ns_ = absl::GetCurrentTimeNanos();
  absl::Status status = EnqueueLocked(desc, what);
  if (!status.ok()) {
    ReleaseResources();
    return status;
  }
  state_ = State::kInFlight;
  if (host_timing_) {
    timing_.enqueue_ns = static_cast<uint64_t>(absl::GetCurrentTimeNanos() - started_ns_);
  }
  return absl::OkStatus();
}

absl::Status GraphReplay::EnqueueLocked(const vyre_graph_replay_desc& desc, const char* what) {
  Graph& graph = *graph_;
  Context& ctx = graph.context();
  std::unique_lock<std::mutex> graph_lock(graph.mutex());
  if (graph.has_host_staging() && graph.async_in_flight()) {
    return Errorf(VYRE_STATUS_INVALID_STATE,
                  "%s: an asynchronous replay of this graph is still unwaited, and its host "
                  "data lives in the graph's pinned buffers. Fix: wait on (or release) that "
                  "replay's pending handle first, or record a second graph for concurrent "
                  "replays.",
                  what);
  }
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  CUstream stream = ctx.stream();
  const bool timed = (desc.flags & VYRE_DISPATCH_FLAG_DEVICE_TIMING) || LogEnabled(VYRE_LOG_TRACE);
  if (timed) {
    VYRE_RETURN_IF_ERROR(start_.Acquire(&ctx.events(), /*timing=*/true, what));
    VYRE_RETURN_IF_ERROR(end_.Acquire(&ctx.events(), /*timing=*/true, what));
  }
  if (!synchronous_) VYRE_RETURN_IF_ERROR(done_.Acquire(&ctx.events(), /*timing=*/false, what));
  if (timed) {
    VYRE_CU(what, cuEventRecord, start_.get(), stream);
    device_work_pending_ = true;
  }
  absl::Status launched = graph.Launch(desc, &work_, what);
  // A parameter upload may have been queued even if the launch failed.
  device_work_pending_ = device_work_pending_ || work_.param_staging || launched.ok();
  VYRE_RETURN_IF_ERROR(launched);
  if (timed) VYRE_CU(what, cuEventRecord, end_.get(), stream);
  if (synchronous_) {
    graph_lock_ = std::move(graph_lock);
  } else {
    VYRE_CU(what, cuEventRecord, done_.get(), stream);
    if (graph.has_host_staging()) {
      graph.set_async_in_flight(true);
      claimed_host_staging_ = true;
    }
  }
  return absl::OkStatus();
}

absl::Status GraphReplay::PollInFlight(const char* what) {
  if (!device_work_pending_) return absl::OkStatus();
  driver::ScopedContext bind(graph_->context().cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  return PollEvent(done_.get(), what, "the graph replay");
}

absl::Status GraphReplay::WaitInFlight(uint64_t timeout_ns, const char* what, bool* settled) {
  Context& ctx = graph_->context();
  const int64_t wait_start = host_timing_ ? absl::GetCurrentTimeNanos() : 0;
  *settled = false;
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  ctx.telemetry().sync_points.Add();
  absl::Status status;
  if (synchronous_) {
    CUresult r = driver::Api().cuStreamSynchronize(ctx.stream());
    if (r != CUDA_SUCCESS) status = driver::CuError(r, what, "cuStreamSynchronize");
  } else {
    status = AwaitEvent(done_.get(), timeout_ns, what, "the graph replay");
    if (PublicCode(status) == VYRE_STATUS_TIMEOUT) return status;
  }
  *settled = true;
  if (status.ok()) FinishOnHost();
  if (host_timing_) {
    const int64_t end = absl::GetCurrentTimeNanos();
    timing_.wait_ns = static_cast<uint64_t>(end - wait_start);
    timing_.wall_ns = static_cast<uint64_t>(end - started_ns_);
  }
  return status;
}

void GraphReplay::FinishOnHost() {
  device_work_pending_ = false;
  for (const ReplayWork::HostCopy& copy : work_.outputs) {
    std::memcpy(copy.to, copy.from, copy.bytes);
  }
  if (work_.downloads_of != nullptr) work_.downloads_of->FinishDownloads(work_.pinned);
  ReadDeviceTime();
}

absl::Status GraphReplay::AbandonInFlight(const char* what) {
  // Never waited on: what its device work met would go with the handle.
  return AwaitAbandoned("the graph replay", what);
}

}  // namespace vyre
