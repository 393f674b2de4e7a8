// Errors inside the engine are absl::Status values that carry the public
// vyre_status and the driver's CUresult as payloads, so any layer can add
// context while the API layer still reports the precise code to the caller.
#ifndef VYRE_BASE_STATUS_H_
#define VYRE_BASE_STATUS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "vyre_cuda.h"

namespace vyre {

// Builds an error. `message` must read "<what failed>: <why>. Fix: <what to do>."
// It is one line: line breaks in it (from caller text) become spaces, and it
// is shaped to the first-line rules of base/message.h (at most 1023 bytes,
// ending with the Fix sentence, caller text elided in the middle if needed).
absl::Status MakeError(vyre_status code, std::string message, int32_t cu_result = 0);

// The same with a compiler or JIT log: the message is the shaped first line,
// '\n', then the log capped (base/message.h); the whole log rides along as a
// payload for vyre_last_error_log (LogOf). An empty log adds nothing.
absl::Status MakeErrorWithLog(vyre_status code, std::string message, absl::string_view log,
                              int32_t cu_result = 0);

// `status` with `log` attached as by MakeErrorWithLog: same code and
// payloads, its first line, then the capped log. OK stays OK.
absl::Status WithLog(const absl::Status& status, absl::string_view log);

// The whole log attached by MakeErrorWithLog or WithLog, empty when none.
std::string LogOf(const absl::Status& status);

template <typename... Args>
absl::Status Errorf(vyre_status code, const absl::FormatSpec<Args...>& format,
                    const Args&... args) {
  return MakeError(code, absl::StrFormat(format, args...));
}

// The public code of an error made by MakeError (INTERNAL for any other).
vyre_status PublicCode(const absl::Status& status);
// The CUresult attached by MakeError, 0 when none.
int32_t CuResultOf(const absl::Status& status);

}  // namespace vyre

// Propagates a non-OK absl::Status from the current function.
#define VYRE_RETURN_IF_ERROR(expr)                    \
  do {                                                \
    ::absl::Status vyre_status_tmp_ = (expr);         \
    if (!vyre_status_tmp_.ok()) return vyre_status_tmp_; \
  } while (0)

#define VYRE_STATUS_CONCAT_INNER_(a, b) a##b
#define VYRE_STATUS_CONCAT_(a, b) VYRE_STATUS_CONCAT_INNER_(a, b)
// Assigns the value of a StatusOr expression or propagates its error.
#define VYRE_ASSIGN_OR_RETURN(lhs, expr)                                         \
  auto VYRE_STATUS_CONCAT_(vyre_statusor_, __LINE__) = (expr);                   \
  if (!VYRE_STATUS_CONCAT_(vyre_statusor_, __LINE__).ok())                       \
    return VYRE_STATUS_CONCAT_(vyre_statusor_, __LINE__).status();               \
  lhs = std::move(VYRE_STATUS_CONCAT_(vyre_statusor_, __LINE__)).value()

#endif  // VYRE_BASE_STATUS_H_
