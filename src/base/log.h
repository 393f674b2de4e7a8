// Process-wide logging to the caller's callback, and the trace switch
// (VYRE_CUDA_TRACE=1) that turns on per-stage timings.
#ifndef VYRE_BASE_LOG_H_
#define VYRE_BASE_LOG_H_

#include <string>

#include "absl/strings/str_format.h"
#include "vyre_cuda.h"

namespace vyre {

void SetLogCallback(vyre_log_callback callback, void* user_data, vyre_log_level max_level);
bool LogEnabled(vyre_log_level level);
void LogMessage(vyre_log_level level, const std::string& message);
// True when VYRE_CUDA_TRACE is set to a non-zero value.
bool TraceEnabled();

template <typename... Args>
void Logf(vyre_log_level level, const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (LogEnabled(level)) LogMessage(level, absl::StrFormat(format, args...));
}

}  // namespace vyre

#endif  // VYRE_BASE_LOG_H_
