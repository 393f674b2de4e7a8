#include "driver/cu_error.h"

#include <string>

#include "absl/strings/string_view.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "driver/device_faults.h"
#include "driver/driver_api.h"

namespace vyre::driver {

vyre_status StatusForCuResult(CUresult result) {
  // Device faults: the context takes no more work until it is reset.
  if (IsStickyResult(result)) return VYRE_STATUS_DEVICE_FAULT;
  switch (result) {
    case CUDA_SUCCESS: return VYRE_STATUS_OK;
    case CUDA_ERROR_OUT_OF_MEMORY: return VYRE_STATUS_OUT_OF_MEMORY;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE: return VYRE_STATUS_NO_DEVICE;
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return VYRE_STATUS_DRIVER_TOO_OLD;
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_JIT_COMPILATION_DISABLED:
    case CUDA_ERROR_INVALID_SOURCE: return VYRE_STATUS_COMPILE_FAILED;
    case CUDA_ERROR_NOT_FOUND: return VYRE_STATUS_ENTRY_NOT_FOUND;
    case CUDA_ERROR_NOT_READY: return VYRE_STATUS_NOT_READY;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: return VYRE_STATUS_LIMIT_EXCEEDED;
    default: return VYRE_STATUS_DRIVER_ERROR;
  }
}

const char* CuResultName(CUresult result) {
  const char* name = nullptr;
  if (Api().cuGetErrorName != nullptr && Api().cuGetErrorName(result, &name) == CUDA_SUCCESS &&
      name != nullptr) {
    return name;
  }
  return "CUDA_ERROR_UNKNOWN_CODE";
}

const char* CuResultDescription(CUresult result) {
  const char* description = nullptr;
  if (Api().cuGetErrorString == nullptr ||
      Api().cuGetErrorString(result, &description) != CUDA_SUCCESS || description == nullptr) {
    return "no description";
  }
  return description;
}

namespace {

const char* DefaultFix(vyre_status status) {
  switch (status) {
    case VYRE_STATUS_OUT_OF_MEMORY:
      return "free buffers or programs you no longer need, call vyre_context_trim, or use "
             "smaller sizes";
    case VYRE_STATUS_LIMIT_EXCEEDED:
      return "reduce the block size, shared memory or grid to the device limits that "
             "vyre_device_info_get reports";
    case VYRE_STATUS_COMPILE_FAILED:
      return "fix the kernel code so the driver's JIT accepts it for this device";
    case VYRE_STATUS_NO_DEVICE:
      return "check that a CUDA device is visible (nvidia-smi, CUDA_VISIBLE_DEVICES)";
    case VYRE_STATUS_DRIVER_TOO_OLD:
      return "install an NVIDIA driver that supports CUDA 12.0 or newer";
    default:
      return "check the arguments of this call; if they are valid, the CUDA driver or "
             "device is in a bad state: recreate the context, and report the error if it "
             "persists";
  }
}

}  // namespace

absl::Status CuError(CUresult result, absl::string_view what, absl::string_view call,
                     absl::string_view fix) {
  const char* description = CuResultDescription(result);
  vyre_status status = StatusForCuResult(result);
  std::string fault_fix;
  if (IsStickyResult(result)) {
    // The caller's Fix is about its own call; after a fault only one helps.
    fault_fix = absl::StrCat(DeviceFaultFix(RecordFaultOnCurrentContext(result)),
                             ", which CUDA leaves refusing all work after a fault (to find a "
                             "kernel's bad access, run it under compute-sanitizer)");
    fix = fault_fix;
  }
  std::string message = absl::StrCat(what, ": ", call, " returned ", CuResultName(result), " (",
                                     description, "). Fix: ",
                                     fix.empty() ? DefaultFix(status) : fix, ".");
  return MakeError(status, std::move(message), static_cast<int32_t>(result));
}

}  // namespace vyre::driver
