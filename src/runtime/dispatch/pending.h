// One dispatch from enqueue to completion. The synchronous API runs one on
// the stack; the asynchronous API keeps one behind a pending handle. It owns
// everything the device work touches (slabs, events, references to resident
// buffers and the program) until that work has completed, which is what lets
// a buffer be freed while a dispatch still uses it.
#ifndef VYRE_RUNTIME_DISPATCH_PENDING_H_
#define VYRE_RUNTIME_DISPATCH_PENDING_H_

#include <cstdint>
#include <memory>

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
  // Async pendings are reused (the program's recycle pool): Detach drops the
  // program and every resource, Attach readies the object for a new dispatch.
  void Attach(std::shared_ptr<Program> program);
  void Detach();
  // Host clocks are read only when someone can ask for the timing (async
  // handles, a synchronous caller passing out_timing, or trace logging).
  void set_host_timing(bool wanted) { host_timing_ = wanted; }
  ~PendingDispatch() override;

  absl::Status Enqueue(const vyre_dispatch_desc& desc, const char* what);
  std::shared_ptr<Context> context_ref() const override { return program_->context_ref(); }
  void Recycle(std::shared_ptr<PendingWork> self) override;

  Context& context() const { return program_->context(); }
  const std::shared_ptr<Program>& program() const { return program_; }

 private:
  absl::Status PollInFlight(const char* what) override;
  absl::Status WaitInFlight(uint64_t timeout_ns, const char* what, bool* settled) override;
  absl::Status AbandonInFlight(const char* what) override;
  void ReleaseResources() override;

  absl::Status EnqueueLocked(const char* what);
  // Takes the slabs and copies the parameter words and the small inputs
  // into the pinned one (zeroing the small outputs' bytes).
  absl::Status StageOnHost(bool cached_params, const char* what);
  // The copies of host inputs too large for the pinned slab, and the zeroing
  // of the outputs on the device.
  absl::Status EnqueueLargeInputs(const char* what);
  absl::Status EnqueueOutputZeroing(const char* what);
  absl::Status Launch(const char* what);
  absl::Status UseParamCache(Program::ParamCache& cache, const char* what);
  absl::Status EnqueueReadbacks(const char* what);
  absl::Status AwaitDevice(uint64_t timeout_ns, const char* what);
  absl::Status Finish(const char* what);
  void LogStages(int64_t wait_start) const;

  std::shared_ptr<Program> program_;
  DispatchPlan plan_;
  PoolBlock device_slab_;
  PoolBlock pinned_slab_;
  CUdeviceptr param_pointer_ = 0;
  // Stage boundaries for VYRE_CUDA_TRACE / TRACE-level logging (host ns).
  struct StageTimes {
    int64_t planned = 0, staged = 0, enqueued = 0, completed = 0, read_back = 0;
  } stages_;
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_DISPATCH_PENDING_H_
