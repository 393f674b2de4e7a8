// One dispatch from enqueue to completion. The synchronous API runs one on
// the stack; the asynchronous API keeps one behind a pending handle. It owns
// everything the device work touches (slabs, events, references to resident
// buffers and the program) until that work has completed, which is what lets
// a buffer be freed while a dispatch still uses it.
#ifndef VYRE_RUNTIME_DISPATCH_PENDING_H_
#define VYRE_RUNTIME_DISPATCH_PENDING_H_

#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "runtime/transfer/device_pools.h"
#include "runtime/dispatch/dispatch_plan.h"
#include "runtime/dispatch/pending_work.h"
#include "runtime/program/program.h"
#include "vyre_cuda.h"

namespace vyre {

class PendingDispatch final : public PendingWork {
 public:
  // `synchronous`: the caller waits right away, so completion is a stream
  // synchronise (no event).
  PendingDispatch(std::shared_ptr<Program> program, bool synchronous);
  // Async pendings are reused (see Context::RecyclePending): Detach drops the
  // program and every resource, Attach readies the object for a new dispatch.
  void Attach(std::shared_ptr<Program> program);
  void Detach();
  // Host clocks are read only when someone can ask for the timing (async
  // handles, a synchronous caller passing out_timing, or trace logging).
  void set_host_timing(bool wanted) { host_timing_ = wanted; }
  ~PendingDispatch() override;
  PendingDispatch(const PendingDispatch&) = delete;
  PendingDispatch& operator=(const PendingDispatch&) = delete;

  absl::Status Enqueue(const vyre_dispatch_desc& desc, const char* what);
  absl::Status Poll(const char* what) override;
  absl::Status Wait(uint64_t timeout_ns, const char* what) override;
  absl::StatusOr<vyre_timing> Timing(const char* what) override;
  absl::Status Abandon(const char* what) override;
  std::shared_ptr<Context> context_ref() const override { return program_->context_ref(); }
  void Recycle(std::shared_ptr<PendingWork> self) override;

  Context& context() const { return program_->context(); }
  const std::shared_ptr<Program>& program() const { return program_; }

 private:
  enum class State { kIdle, kInFlight, kWaited };

  std::unique_lock<std::mutex> Lock() {
    return synchronous_ ? std::unique_lock<std::mutex>() : std::unique_lock<std::mutex>(mu_);
  }

  absl::Status EnqueueLocked(const char* what);
  absl::Status Launch(const char* what);
  absl::Status UseParamCache(Program::ParamCache& cache, const char* what);
  absl::Status EnqueueReadbacks(const char* what);
  absl::Status AwaitDevice(uint64_t timeout_ns, const char* what);
  absl::Status Finish(const char* what);
  // Drains the stream if work was enqueued and not yet seen complete, then
  // drops every resource. Never fails: used on error and destruction paths.
  void ReleaseResources();

  std::shared_ptr<Program> program_;
  const bool synchronous_;
  bool host_timing_ = true;

  // Guards the state below for async pendings, which any thread may poll or
  // wait on. The synchronous one lives on one caller's stack and takes no
  // lock (see Lock()).
  std::mutex mu_;
  State state_ = State::kIdle;
  bool device_work_pending_ = false;
  DispatchPlan plan_;
  PoolBlock device_slab_;
  PoolBlock pinned_slab_;
  PooledEvent done_;
  PooledEvent start_;
  PooledEvent end_;
  CUdeviceptr param_pointer_ = 0;
  vyre_timing timing_{};
  int64_t started_ns_ = 0;
  // Stage boundaries for VYRE_CUDA_TRACE / TRACE-level logging (host ns).
  struct StageTimes {
    int64_t planned = 0, staged = 0, enqueued = 0, completed = 0, read_back = 0;
  } stages_;
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_DISPATCH_PENDING_H_
