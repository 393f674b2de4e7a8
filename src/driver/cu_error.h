// Turning CUresult values into vyre errors with a Fix sentence.
//
// One table (cu_error.cc, CuResultTable) holds every CUresult of CUDA 13.0's
// cuda.h with the public status it maps to, what it means and the Fix a
// message gives. Device faults (IsStickyResult) are VYRE_STATUS_DEVICE_FAULT;
// environment problems (the toolkit's stub library, a driver/kernel-module
// mismatch, an unavailable device) are NO_DRIVER or NO_DEVICE, which the CLI
// answers with exit code 2; results vyre-cuda never expects from the calls it
// makes are DRIVER_ERROR with a Fix that says to report them.
#ifndef VYRE_DRIVER_CU_ERROR_H_
#define VYRE_DRIVER_CU_ERROR_H_

#include <cuda.h>

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "vyre_cuda.h"

namespace vyre::driver {

// One CUresult of cuda.h.
struct CuResultInfo {
  int32_t code;
  const char* name;    // "CUDA_ERROR_OUT_OF_MEMORY": cuda.h's spelling
  vyre_status status;  // the public status a failure with it maps to
  const char* cause;   // what it means, for when the driver has no description
  const char* fix;     // the Fix sentence, without "Fix: " and the final period
};

// Every CUresult of CUDA 13.0's cuda.h, in its order (CUDA_SUCCESS first).
absl::Span<const CuResultInfo> CuResultTable();
// The row of `result`, or nullptr for a code newer than the table.
const CuResultInfo* FindCuResult(CUresult result);

// The public status a driver error maps to (the table's; DRIVER_ERROR for a
// code the table does not know).
vyre_status StatusForCuResult(CUresult result);

// The Fix (without "Fix: " and the final period) for `result` when the call
// site knows no better one.
const char* DefaultFixFor(CUresult result);

// Builds "<what>: <driver call> returned CUDA_ERROR_X (<description>). Fix: <fix>."
// An empty `fix` takes the table's. A sticky result (a device fault:
// IsStickyResult in device_faults.h) is recorded against the context current
// on this thread and always gets the device-fault Fix.
absl::Status CuError(CUresult result, absl::string_view what, absl::string_view call,
                     absl::string_view fix = {});

// "CUDA_ERROR_OUT_OF_MEMORY" etc. from the table (works before the driver is
// loaded); for a newer code the driver's name, else "CUresult <n>" (a
// per-thread buffer, valid until this thread's next call). Never NULL.
const char* CuResultName(CUresult result);
// The driver's description ("out of memory"), else the table's cause, else
// "no description". Never NULL.
const char* CuResultDescription(CUresult result);

}  // namespace vyre::driver

// Calls a driver entry through the table and returns a vyre error on failure.
// Formatting happens only on the failure path.
#define VYRE_CU(what, call, ...)                                                  \
  do {                                                                            \
    CUresult vyre_cu_result_ = ::vyre::driver::Api().call(__VA_ARGS__);           \
    if (vyre_cu_result_ != CUDA_SUCCESS)                                          \
      return ::vyre::driver::CuError(vyre_cu_result_, (what), #call);             \
  } while (0)

#endif  // VYRE_DRIVER_CU_ERROR_H_
