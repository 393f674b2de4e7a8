#include "base/last_error.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/status.h"

namespace vyre {
namespace {

struct LastError {
  vyre_status code = VYRE_STATUS_OK;
  int32_t cu_result = 0;
  std::string message;
};

LastError& ThreadLastError() {
  thread_local LastError error;
  return error;
}

}  // namespace

void ClearLastError() {
  LastError& error = ThreadLastError();
  error.code = VYRE_STATUS_OK;
  error.cu_result = 0;
  error.message.clear();  // keeps capacity: clearing allocates nothing
}

vyre_status SetLastError(const absl::Status& status) {
  LastError& error = ThreadLastError();
  error.code = PublicCode(status);
  error.cu_result = CuResultOf(status);
  error.message.assign(status.message().data(), status.message().size());
  return error.code;
}

vyre_status ReadLastError(vyre_status* out_status, int32_t* out_cu_result, char* message,
                          size_t capacity, size_t* out_length) {
  const LastError& error = ThreadLastError();
  if (out_status) *out_status = error.code;
  if (out_cu_result) *out_cu_result = error.cu_result;
  if (out_length) *out_length = error.message.size();
  if (message && capacity > 0) {
    size_t n = std::min(capacity - 1, error.message.size());
    std::memcpy(message, error.message.data(), n);
    message[n] = '\0';
  }
  return error.code;
}

}  // namespace vyre
