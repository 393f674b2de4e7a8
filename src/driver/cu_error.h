// Turning CUresult values into vyre errors with a Fix sentence.
#ifndef VYRE_DRIVER_CU_ERROR_H_
#define VYRE_DRIVER_CU_ERROR_H_

#include <cuda.h>

#include <string_view>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "vyre_cuda.h"

namespace vyre::driver {

// The public status a driver error maps to.
vyre_status StatusForCuResult(CUresult result);

// Builds "<what>: <driver call> returned CUDA_ERROR_X (<description>). Fix: <fix>."
// An empty `fix` picks a generic one for the error class. A sticky result (a
// device fault: IsStickyResult in device_faults.h) is recorded against the
// context current on this thread and always gets the device-fault Fix.
absl::Status CuError(CUresult result, absl::string_view what, absl::string_view call,
                     absl::string_view fix = {});

// "CUDA_ERROR_OUT_OF_MEMORY" etc.; works before the driver is loaded.
const char* CuResultName(CUresult result);
// The driver's description ("out of memory"), or "no description".
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
