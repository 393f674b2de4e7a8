// The boundary between C callers and the C++ engine: clears the thread's last
// error, runs the body, maps its absl::Status to a vyre_status, and stops
// every exception at the boundary.
#ifndef VYRE_API_API_CALL_H_
#define VYRE_API_API_CALL_H_

#include <new>

#include "absl/status/status.h"
#include "base/last_error.h"
#include "base/nvtx.h"
#include "base/status.h"
#include "vyre_cuda.h"

namespace vyre {

template <typename Body>
vyre_status ApiCall(const char* what, Body&& body) noexcept {
  ClearLastError();
  NvtxRange range(what);
  try {
    absl::Status status = body();
    if (status.ok()) return VYRE_STATUS_OK;
    return SetLastError(status);
  } catch (const std::bad_alloc&) {
    return SetLastError(Errorf(VYRE_STATUS_OUT_OF_MEMORY,
                               "%s: host memory is exhausted. Fix: free memory in this process "
                               "or reduce the sizes passed to vyre-cuda.",
                               what));
  } catch (...) {
    return SetLastError(Errorf(VYRE_STATUS_INTERNAL,
                               "%s: an internal exception reached the API boundary. Fix: "
                               "report this as a vyre-cuda bug with the call that caused it.",
                               what));
  }
}

// For NULL out-pointer checks at the top of an entry point.
inline absl::Status RequireOut(const char* what, const void* out, const char* name) {
  if (out != nullptr) return absl::OkStatus();
  return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                "%s: %s is NULL. Fix: pass a pointer to storage for the result.", what, name);
}

}  // namespace vyre

#endif  // VYRE_API_API_CALL_H_
