#include "base/last_error.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/message.h"
#include "base/status.h"

namespace vyre {
namespace {

// A cleared log keeps at most this much capacity, so one huge compile log
// does not stay allocated on the thread for good.
constexpr size_t kKeptLogCapacity = 64 * 1024;

struct LastError {
  vyre_status code = VYRE_STATUS_OK;
  int32_t cu_result = 0;
  std::string message;
  std::string log;
};

LastError& ThreadLastError() {
  thread_local LastError error;
  return error;
}

void CopyOut(const std::string& text, char* out, size_t capacity, size_t* out_length) {
  if (out_length) *out_length = text.size();
  if (out && capacity > 0) {
    size_t n = std::min(capacity - 1, text.size());
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
}

}  // namespace

void ClearLastError() {
  LastError& error = ThreadLastError();
  error.code = VYRE_STATUS_OK;
  error.cu_result = 0;
  error.message.clear();  // keeps capacity: clearing allocates nothing
  if (!error.log.empty()) {
    if (error.log.capacity() > kKeptLogCapacity) {
      std::string().swap(error.log);
    } else {
      error.log.clear();
    }
  }
}

vyre_status SetLastError(const absl::Status& status) {
  if (status.ok()) {
    ClearLastError();
    return VYRE_STATUS_OK;
  }
  LastError& error = ThreadLastError();
  error.code = PublicCode(status);
  error.cu_result = CuResultOf(status);
  try {
    absl::string_view first_line, rest;
    SplitMessage(status.message(), &first_line, &rest);
    error.log = LogOf(status);
    // A status not made by MakeErrorWithLog keeps what follows its first line
    // as its log.
    if (error.log.empty()) error.log.assign(rest.data(), rest.size());
    error.message = ComposeMessage(ShapeFirstLine(first_line), error.log);
  } catch (...) {
    // Out of host memory while storing the error (this runs inside the API
    // boundary's handlers, so nothing may escape): keep the code and a fixed
    // message in the capacity the thread already has.
    error.log.clear();
    error.message.clear();
    static constexpr char kFallback[] =
        "vyre-cuda: the error message could not be stored (host memory is exhausted). Fix: "
        "free memory in this process; the status and cu_result are still exact.";
    if (error.message.capacity() >= sizeof(kFallback)) error.message.assign(kFallback);
  }
  return error.code;
}

vyre_status ReadLastError(vyre_status* out_status, int32_t* out_cu_result, char* message,
                          size_t capacity, size_t* out_length) {
  const LastError& error = ThreadLastError();
  if (out_status) *out_status = error.code;
  if (out_cu_result) *out_cu_result = error.cu_result;
  CopyOut(error.message, message, capacity, out_length);
  return error.code;
}

vyre_status ReadLastErrorLog(char* log, size_t capacity, size_t* out_length) {
  const LastError& error = ThreadLastError();
  CopyOut(error.log, log, capacity, out_length);
  return error.code;
}

}  // namespace vyre
