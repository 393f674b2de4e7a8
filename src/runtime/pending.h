// One dispatch from enqueue to completion. The synchronous API runs one on
// the stack; the asynchronous API keeps one behind a pending handle. It owns
// everything the device work touches (slabs, events, references to resident
// buffers and the program) until that work has completed, which is what lets
// a buffer be freed while a dispatch still uses it.
#ifndef VYRE_RUNTIME_PENDING_H_
#define VYRE_RUNTIME_PENDING_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/device_pools.h"
#include "runtime/dispatch_plan.h"
#include "runtime/program.h"
#include "vyre_cuda.h"

namespace vyre {

class PendingDispatch {
 public:
  // `synchronous`: the caller waits right away, so completion is a stream
  // synchronise (no event) and large read-backs are issued at enqueue.
  PendingDispatch(std::shared_ptr<Program> program, bool synchronous);
  ~PendingDispatch();
  PendingDispatch(const PendingDispatch&) = delete;
  PendingDispatch& operator=(const PendingDispatch&) = delete;

  absl::Status Enqueue(const vyre_dispatch_desc& desc, const char* what);
  // OK when complete, NOT_READY otherwise.
  absl::Status Poll(const char* what);
  absl::Status Wait(uint64_t timeout_ns, const char* what);
  absl::StatusOr<vyre_timing> Timing(const char* what);
  // Waits for the device work without reading back (release of an unwaited
  // handle).
  void Abandon();

  Context& context() const { return program_->context(); }
  uint64_t handle() const { return handle_; }
  void set_handle(uint64_t bits) { handle_ = bits; }

 private:
  enum class State { kIdle, kInFlight, kWaited };

  absl::Status EnqueueLocked(const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Launch(const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status UseParamCache(Program::ParamCache& cache, const char* what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_, cache.mu);
  absl::Status EnqueueReadbacks(bool include_direct, const char* what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AwaitDevice(uint64_t timeout_ns, const char* what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Finish(const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drains the stream if work was enqueued and not yet seen complete, then
  // drops every resource. Never fails: used on error and destruction paths.
  void ReleaseResources() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<Program> program_;
  const bool synchronous_;
  uint64_t handle_ = 0;

  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kIdle;
  bool device_work_pending_ ABSL_GUARDED_BY(mu_) = false;
  DispatchPlan plan_ ABSL_GUARDED_BY(mu_);
  PoolBlock device_slab_ ABSL_GUARDED_BY(mu_);
  PoolBlock pinned_slab_ ABSL_GUARDED_BY(mu_);
  PooledEvent done_ ABSL_GUARDED_BY(mu_);
  PooledEvent start_ ABSL_GUARDED_BY(mu_);
  PooledEvent end_ ABSL_GUARDED_BY(mu_);
  CUdeviceptr param_pointer_ ABSL_GUARDED_BY(mu_) = 0;
  vyre_timing timing_ ABSL_GUARDED_BY(mu_){};
  int64_t started_ns_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_PENDING_H_
