#include "graph/graph_replay.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "graph/sequence.h"

namespace vyre {

GraphReplay::GraphReplay(std::shared_ptr<Graph> graph, bool synchronous)
    : synchronous_(synchronous) {
  work_.keep_buffers = !synchronous_;
  Attach(std::move(graph));
}

GraphReplay::~GraphReplay() { Detach(); }

void GraphReplay::Attach(std::shared_ptr<Graph> graph) {
  graph_ = std::move(graph);
  state_ = State::kIdle;
  device_work_pending_ = false;
  host_timing_ = false;
  timing_ = vyre_timing{};
  started_ns_ = 0;
  if (!synchronous_) graph_->context().telemetry().live_pendings.Add();
}

void GraphReplay::Detach() {
  if (!graph_) return;
  {
    auto lock = Lock();
    ReleaseResources();
  }
  if (!synchronous_) graph_->context().telemetry().live_pendings.Sub(1);
  graph_.reset();
}

void GraphReplay::Recycle(std::shared_ptr<PendingWork> self) {
  if (synchronous_ || !graph_) return;
  // Hold the context: detaching may drop the last reference to the graph,
  // and through it to the context.
  std::shared_ptr<Context> ctx = graph_->context_ref();
  Detach();
  ctx->RecycleReplay(std::move(self));
}

void GraphReplay::ReleaseResources() {
  Context& ctx = graph_->context();
  if (device_work_pending_) {
    driver::ScopedContext bind(ctx.cu(), driver::ScopedContext::Purpose::kRelease);
    CUresult r = driver::Api().cuStreamSynchronize(ctx.stream());
    if (r != CUDA_SUCCESS) driver::LogReleaseFailure("cuStreamSynchronize", r);
    device_work_pending_ = false;
  }
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

absl::Status GraphReplay::Poll(const char* what) {
  auto lock = Lock();
  if (state_ == State::kWaited || !device_work_pending_) return absl::OkStatus();
  driver::ScopedContext bind(graph_->context().cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  return PollEvent(done_.get(), what, "the graph replay");
}

absl::Status GraphReplay::Wait(uint64_t timeout_ns, const char* what) {
  auto lock = Lock();
  if (state_ == State::kWaited) {
    return Errorf(VYRE_STATUS_INVALID_STATE,
                  "%s: this replay was already waited on. Fix: wait on a pending replay once; "
                  "read its timing with vyre_pending_timing and release it with "
                  "vyre_pending_release.",
                  what);
  }
  if (state_ != State::kInFlight) {
    return Errorf(VYRE_STATUS_INVALID_STATE,
                  "%s: the replay was never enqueued. Fix: wait only on handles returned by "
                  "vyre_graph_replay_async.",
                  what);
  }
  Context& ctx = graph_->context();
  const int64_t wait_start = host_timing_ ? absl::GetCurrentTimeNanos() : 0;
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
  if (status.ok()) {
    device_work_pending_ = false;
    for (const ReplayWork::HostCopy& copy : work_.outputs) {
      std::memcpy(copy.to, copy.from, copy.bytes);
    }
    if (work_.downloads_of != nullptr) work_.downloads_of->FinishDownloads(work_.pinned);
    if (start_ && end_) {
      float ms = 0;
      if (driver::Api().cuEventElapsedTime(&ms, start_.get(), end_.get()) == CUDA_SUCCESS) {
        timing_.device_ns = static_cast<uint64_t>(static_cast<double>(ms) * 1e6);
      }
    }
  }
  if (host_timing_) {
    const int64_t end = absl::GetCurrentTimeNanos();
    timing_.wait_ns = static_cast<uint64_t>(end - wait_start);
    timing_.wall_ns = static_cast<uint64_t>(end - started_ns_);
  }
  state_ = State::kWaited;
  ReleaseResources();
  return status;
}

absl::StatusOr<vyre_timing> GraphReplay::Timing(const char* what) {
  auto lock = Lock();
  if (state_ != State::kWaited) {
    return Errorf(VYRE_STATUS_INVALID_STATE,
                  "%s: timing is known only after the replay is waited on. Fix: call "
                  "vyre_pending_wait first.",
                  what);
  }
  vyre_timing t = timing_;
  t.struct_size = sizeof(t);
  return t;
}

absl::Status GraphReplay::Abandon(const char* what) {
  auto lock = Lock();
  absl::Status status;
  if (state_ == State::kInFlight && device_work_pending_ && done_) {
    // Never waited on: what its device work met would go with the handle.
    driver::ScopedContext bind(graph_->context().cu(), driver::ScopedContext::Purpose::kRelease);
    CUresult r = driver::Api().cuEventSynchronize(done_.get());
    if (r == CUDA_SUCCESS) {
      device_work_pending_ = false;  // done_ follows all of the replay's work
    } else {
      status = driver::CuError(
          r, absl::StrCat(what, ": the graph replay (released without a wait)"),
          "cuEventSynchronize",
          "nothing is left to do for this handle (it is released); wait on pending work "
          "(vyre_pending_wait) before releasing it to see its errors where they happen, and "
          "check the driver and the device if they recur");
    }
  }
  ReleaseResources();
  return status;
}

}  // namespace vyre
