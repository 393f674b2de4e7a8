// The per-thread last error that the C API reports through vyre_last_error().
#ifndef VYRE_BASE_LAST_ERROR_H_
#define VYRE_BASE_LAST_ERROR_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "vyre_cuda.h"

namespace vyre {

void ClearLastError();
// Records `status` as this thread's last error and returns its public code.
// The stored message keeps the layout of base/message.h whatever made the
// status: its first line is shaped again (a no-op for MakeError's), and the
// whole log (LogOf, else the text after the first line) is kept apart for
// ReadLastErrorLog while the message holds it capped.
vyre_status SetLastError(const absl::Status& status);
vyre_status ReadLastError(vyre_status* out_status, int32_t* out_cu_result, char* message,
                          size_t capacity, size_t* out_length);
// The whole log of the last error (empty when it carried none), with the
// conventions of ReadLastError; returns the last error's code.
vyre_status ReadLastErrorLog(char* log, size_t capacity, size_t* out_length);

}  // namespace vyre

#endif  // VYRE_BASE_LAST_ERROR_H_
