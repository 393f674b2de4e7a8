#include "runtime/dispatch/pending_work.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/time/clock.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/driver_api.h"

namespace vyre {

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
