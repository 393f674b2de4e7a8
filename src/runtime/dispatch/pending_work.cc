#include "runtime/dispatch/pending_work.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/driver_api.h"
#include "driver/guards.h"
#include "runtime/context/context.h"

namespace vyre {

HandleRegistry<PendingWork>& Pendings() {
  // Leaked on purpose, as every handle table (see Contexts()).
  static auto* registry =
      new HandleRegistry<PendingWork>(HandleType::kPending, ReleaseRank::kPendingWork);
  return *registry;
}

void PendingWork::AttachTo(Context* context) {
  context_ = context;
  state_ = State::kIdle;
  device_work_pending_ = false;
  timing_ = vyre_timing{};
  started_ns_ = 0;
  if (!synchronous_ && context_ != nullptr) context_->telemetry().live_pendings.Add();
}

void PendingWork::DetachFromContext() {
  {
    auto lock = Lock();
    ReleaseResources();
  }
  if (!synchronous_ && context_ != nullptr) context_->telemetry().live_pendings.Sub(1);
  context_ = nullptr;
}

absl::Status PendingWork::Poll(const char* what) {
  auto lock = Lock();
  if (state_ != State::kInFlight) return absl::OkStatus();
  return PollInFlight(what);
}

absl::Status PendingWork::Wait(uint64_t timeout_ns, const char* what) {
  auto lock = Lock();
  if (state_ == State::kWaited) {
    return Errorf(VYRE_STATUS_INVALID_STATE, "%s: this %s was already waited on. Fix: %s", what,
                  words_.noun, words_.wait_once_fix);
  }
  if (state_ != State::kInFlight) {
    return Errorf(VYRE_STATUS_INVALID_STATE,
                  "%s: the %s was never %s. Fix: wait only on handles returned by %s.", what,
                  words_.noun, words_.start_verb, words_.async_call);
  }
  bool settled = true;
  absl::Status status = WaitInFlight(timeout_ns, what, &settled);
  if (!settled) return status;
  state_ = State::kWaited;
  ReleaseResources();
  return status;
}

absl::StatusOr<vyre_timing> PendingWork::Timing(const char* what) {
  auto lock = Lock();
  if (state_ != State::kWaited) {
    return Errorf(VYRE_STATUS_INVALID_STATE,
                  "%s: timing is known only after the %s is waited on. Fix: call "
                  "vyre_pending_wait first.",
                  what, words_.noun);
  }
  return timing_;
}

absl::Status PendingWork::Abandon(const char* what) {
  auto lock = Lock();
  absl::Status status;
  if (state_ == State::kInFlight) {
    status = AbandonInFlight(what);
    state_ = State::kWaited;
  }
  ReleaseResources();
  return status;
}

void PendingWork::DrainStream() {
  if (!device_work_pending_ || context_ == nullptr) return;
  driver::ScopedContext bind(context_->cu(), driver::ScopedContext::Purpose::kRelease);
  CUresult r = driver::Api().cuStreamSynchronize(context_->stream());
  if (r != CUDA_SUCCESS) driver::LogReleaseFailure("cuStreamSynchronize", r);
  device_work_pending_ = false;
}

absl::Status PendingWork::AwaitAbandoned(absl::string_view work, const char* what) {
  if (!device_work_pending_ || !done_) return absl::OkStatus();
  driver::ScopedContext bind(context_->cu(), driver::ScopedContext::Purpose::kRelease);
  CUresult r = driver::Api().cuEventSynchronize(done_.get());
  if (r == CUDA_SUCCESS) {
    device_work_pending_ = false;  // done_ follows all of the work
    return absl::OkStatus();
  }
  return driver::CuError(
      r, absl::StrCat(what, ": ", work, " (released without a wait)"), "cuEventSynchronize",
      "nothing is left to do for this handle (it is released); wait on pending work "
      "(vyre_pending_wait) before releasing it to see its errors where they happen, and "
      "check the driver and the device if they recur");
}

void PendingWork::ReadDeviceTime() {
  if (!start_ || !end_) return;
  float ms = 0;
  if (driver::Api().cuEventElapsedTime(&ms, start_.get(), end_.get()) == CUDA_SUCCESS) {
    timing_.device_ns = static_cast<uint64_t>(static_cast<double>(ms) * 1e6);
  }
}

absl::Status PollEvent(CUevent event, const char* what, absl::string_view work) {
  CUresult r = driver::Api().cuEventQuery(event);
  if (r == CUDA_SUCCESS) return absl::OkStatus();
  if (r == CUDA_ERROR_NOT_READY) {
    return Errorf(VYRE_STATUS_NOT_READY,
                  "%s: %s is still running. Fix: poll again later or call vyre_pending_wait.",
                  what, work);
  }
  return driver::CuError(r, what, "cuEventQuery");
}

absl::Status AwaitEvent(CUevent event, uint64_t timeout_ns, const char* what,
                        absl::string_view work) {
  if (timeout_ns == VYRE_WAIT_FOREVER) {
    VYRE_CU(what, cuEventSynchronize, event);
    return absl::OkStatus();
  }
  const int64_t deadline =
      absl::GetCurrentTimeNanos() +
      static_cast<int64_t>(timeout_ns > INT64_MAX / 2 ? INT64_MAX / 2 : timeout_ns);
  int64_t sleep_ns = 2000;
  for (;;) {
    CUresult r = driver::Api().cuEventQuery(event);
    if (r == CUDA_SUCCESS) return absl::OkStatus();
    if (r != CUDA_ERROR_NOT_READY) return driver::CuError(r, what, "cuEventQuery");
    int64_t now = absl::GetCurrentTimeNanos();
    if (now >= deadline) {
      return Errorf(VYRE_STATUS_TIMEOUT,
                    "%s: %s did not complete within %u ns. Fix: wait again (it is still "
                    "pending) or with a longer timeout.",
                    what, work, timeout_ns);
    }
    int64_t nap = std::min<int64_t>(sleep_ns, deadline - now);
    std::this_thread::sleep_for(std::chrono::nanoseconds(nap));
    sleep_ns = std::min<int64_t>(sleep_ns * 2, 1000000);
  }
}

}  // namespace vyre
