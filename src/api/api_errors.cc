// Version, status names, the last error and the log callback: the calls that
// work without a driver.
#include "api/api_call.h"
#include "base/log.h"
#include "base/raw_enum.h"

extern "C" {

VYRE_API uint32_t vyre_version(void) { return VYRE_CUDA_VERSION; }

VYRE_API const char* vyre_status_name(vyre_status status) {
  switch (vyre::RawEnum(status)) {
#define VYRE_STATUS_CASE(name) \
  case name: return #name;
    VYRE_STATUS_CASE(VYRE_STATUS_OK)
    VYRE_STATUS_CASE(VYRE_STATUS_INVALID_ARGUMENT)
    VYRE_STATUS_CASE(VYRE_STATUS_INVALID_HANDLE)
    VYRE_STATUS_CASE(VYRE_STATUS_STALE_HANDLE)
    VYRE_STATUS_CASE(VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE)
    VYRE_STATUS_CASE(VYRE_STATUS_OUT_OF_RANGE)
    VYRE_STATUS_CASE(VYRE_STATUS_NO_DRIVER)
    VYRE_STATUS_CASE(VYRE_STATUS_NO_DEVICE)
    VYRE_STATUS_CASE(VYRE_STATUS_DRIVER_TOO_OLD)
    VYRE_STATUS_CASE(VYRE_STATUS_NVRTC_UNAVAILABLE)
    VYRE_STATUS_CASE(VYRE_STATUS_OUT_OF_MEMORY)
    VYRE_STATUS_CASE(VYRE_STATUS_COMPILE_FAILED)
    VYRE_STATUS_CASE(VYRE_STATUS_ENTRY_NOT_FOUND)
    VYRE_STATUS_CASE(VYRE_STATUS_LIMIT_EXCEEDED)
    VYRE_STATUS_CASE(VYRE_STATUS_LAUNCH_FAILED)
    VYRE_STATUS_CASE(VYRE_STATUS_TIMEOUT)
    VYRE_STATUS_CASE(VYRE_STATUS_NOT_READY)
    VYRE_STATUS_CASE(VYRE_STATUS_INVALID_STATE)
    VYRE_STATUS_CASE(VYRE_STATUS_DRIVER_ERROR)
    VYRE_STATUS_CASE(VYRE_STATUS_INTERNAL)
    VYRE_STATUS_CASE(VYRE_STATUS_SHAPE_MISMATCH)
    VYRE_STATUS_CASE(VYRE_STATUS_DEVICE_FAULT)
#undef VYRE_STATUS_CASE
    default: return "VYRE_STATUS_UNKNOWN";
  }
}

VYRE_API vyre_status vyre_last_error(vyre_status* out_status, int32_t* out_cu_result,
                                     char* message, size_t message_capacity,
                                     size_t* out_message_length) {
  // Deliberately not ApiCall: reading the last error must not clear it.
  return vyre::ReadLastError(out_status, out_cu_result, message, message_capacity,
                             out_message_length);
}

VYRE_API vyre_status vyre_last_error_log(char* log, size_t log_capacity,
                                         size_t* out_log_length) {
  // Like vyre_last_error: not ApiCall, reading must not clear the last error.
  return vyre::ReadLastErrorLog(log, log_capacity, out_log_length);
}

VYRE_API vyre_status vyre_set_log_callback(vyre_log_callback callback, void* user_data,
                                           vyre_log_level max_level) {
  return vyre::ApiCall("vyre_set_log_callback", [&]() -> absl::Status {
    uint32_t level = vyre::RawEnum(max_level);
    if (level > VYRE_LOG_TRACE) {
      return vyre::Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                          "vyre_set_log_callback: max_level %d is not a vyre_log_level. Fix: "
                          "use VYRE_LOG_ERROR .. VYRE_LOG_TRACE.",
                          static_cast<int32_t>(level));
    }
    vyre::SetLogCallback(callback, user_data, static_cast<vyre_log_level>(level));
    return absl::OkStatus();
  });
}

}  // extern "C"
