#include "base/status.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "base/message.h"

namespace vyre {
namespace {

constexpr char kCodePayload[] = "vyre.dev/status";
constexpr char kCuResultPayload[] = "vyre.dev/cu_result";
constexpr char kLogPayload[] = "vyre.dev/log";

absl::StatusCode CanonicalCode(vyre_status code) {
  switch (code) {
    case VYRE_STATUS_OK: return absl::StatusCode::kOk;
    case VYRE_STATUS_INVALID_ARGUMENT:
    case VYRE_STATUS_INVALID_HANDLE:
    case VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE:
    case VYRE_STATUS_COMPILE_FAILED: return absl::StatusCode::kInvalidArgument;
    case VYRE_STATUS_STALE_HANDLE:
    case VYRE_STATUS_ENTRY_NOT_FOUND: return absl::StatusCode::kNotFound;
    case VYRE_STATUS_OUT_OF_RANGE:
    case VYRE_STATUS_LIMIT_EXCEEDED: return absl::StatusCode::kOutOfRange;
    case VYRE_STATUS_NO_DRIVER:
    case VYRE_STATUS_NO_DEVICE:
    case VYRE_STATUS_DRIVER_TOO_OLD:
    case VYRE_STATUS_NVRTC_UNAVAILABLE: return absl::StatusCode::kFailedPrecondition;
    case VYRE_STATUS_OUT_OF_MEMORY: return absl::StatusCode::kResourceExhausted;
    case VYRE_STATUS_TIMEOUT: return absl::StatusCode::kDeadlineExceeded;
    case VYRE_STATUS_NOT_READY: return absl::StatusCode::kUnavailable;
    case VYRE_STATUS_INVALID_STATE: return absl::StatusCode::kFailedPrecondition;
    case VYRE_STATUS_LAUNCH_FAILED:
    case VYRE_STATUS_DEVICE_FAULT:
    case VYRE_STATUS_DRIVER_ERROR: return absl::StatusCode::kAborted;
    default: return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status MakeError(vyre_status code, std::string message, int32_t cu_result) {
  absl::Status status(CanonicalCode(code), ShapeFirstLine(message));
  status.SetPayload(kCodePayload, absl::Cord(absl::StrFormat("%d", static_cast<int>(code))));
  if (cu_result != 0) {
    status.SetPayload(kCuResultPayload, absl::Cord(absl::StrFormat("%d", cu_result)));
  }
  return status;
}

absl::Status MakeErrorWithLog(vyre_status code, std::string message, absl::string_view log,
                              int32_t cu_result) {
  return WithLog(MakeError(code, std::move(message), cu_result), log);
}

absl::Status WithLog(const absl::Status& status, absl::string_view log) {
  if (status.ok() || log.empty()) return status;
  absl::string_view first_line, rest;
  SplitMessage(status.message(), &first_line, &rest);
  absl::Status with_log(status.code(), ComposeMessage(ShapeFirstLine(first_line), log));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    with_log.SetPayload(url, payload);
  });
  with_log.SetPayload(kLogPayload, absl::Cord(log));
  return with_log;
}

std::string LogOf(const absl::Status& status) {
  auto payload = status.GetPayload(kLogPayload);
  return payload ? std::string(*payload) : std::string();
}

vyre_status PublicCode(const absl::Status& status) {
  if (status.ok()) return VYRE_STATUS_OK;
  int value = 0;
  auto payload = status.GetPayload(kCodePayload);
  if (payload && absl::SimpleAtoi(std::string(*payload), &value)) {
    return static_cast<vyre_status>(value);
  }
  return VYRE_STATUS_INTERNAL;
}

int32_t CuResultOf(const absl::Status& status) {
  int value = 0;
  auto payload = status.GetPayload(kCuResultPayload);
  if (payload && absl::SimpleAtoi(std::string(*payload), &value)) return value;
  return 0;
}

}  // namespace vyre
