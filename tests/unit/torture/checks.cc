// The torture test's checks: the rules every call obeys, the statuses that
// bad handles and ranges call for, and host outputs against the model.
#include <cstdint>
#include <string>
#include <vector>

#include "torture.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace torture {

// ---------------------------------------------------------------------------
// Invariants
// ---------------------------------------------------------------------------

void Torture::Fail(const std::string& what) {
  ++failures_;
  if (failures_ <= 20) {
    ADD_FAILURE() << "op #" << op_index_ << " (" << OpName(current_op_) << "), seed " << seed_
                  << ": " << what;
  }
}

vyre_status Torture::Check(vyre_status status, const char* call) {
  histogram_[call][vyre_status_name(status)]++;
  int32_t raw = static_cast<int32_t>(status);
  if (raw < VYRE_STATUS_OK || raw > VYRE_STATUS_DEVICE_FAULT) {
    Fail(std::string(call) + " returned status " + std::to_string(raw) + ", outside the enum");
  }
  if (status == VYRE_STATUS_INTERNAL) Fail(std::string(call) + " returned INTERNAL");
  LastError error = ReadLastError();
  if (status == VYRE_STATUS_OK) {
    if (error.status != VYRE_STATUS_OK || !error.message.empty()) {
      Fail(std::string(call) + " returned OK but vyre_last_error says " +
           StatusName(error.status) + " \"" + error.message + "\"");
    }
  } else {
    if (error.status != status) {
      Fail(std::string(call) + " returned " + StatusName(status) + " but vyre_last_error says " +
           StatusName(error.status) + " \"" + error.message + "\"");
    }
    if (error.message.empty() || error.message.find("Fix:") == std::string::npos) {
      Fail(std::string(call) + " " + StatusName(status) + " message lacks \"Fix:\": \"" +
           error.message + "\"");
    }
    ::testing::AssertionResult layout = MessageLayoutOk(error.message);
    if (!layout) Fail(std::string(call) + " " + StatusName(status) + ": " + layout.message());
  }
  return status;
}

void Torture::ExpectStatus(vyre_status actual, vyre_status expected, const char* call) {
  if (actual != expected) {
    Fail(std::string(call) + " returned " + StatusName(actual) + ", expected " +
         StatusName(expected) + ": \"" + LastErrorMessage() + "\"");
  }
}

void Torture::ExpectNotOk(vyre_status actual, HandleChoice choice, const char* call) {
  if (choice != HandleChoice::kValid && actual == VYRE_STATUS_OK) {
    Fail(std::string(call) + " accepted a " + ChoiceName(choice) + " handle");
  }
}

void Torture::ExpectHandleError(vyre_status actual, HandleChoice choice, const char* call) {
  if (choice == HandleChoice::kForged) {
    if (actual != VYRE_STATUS_INVALID_HANDLE && actual != VYRE_STATUS_STALE_HANDLE) {
      Fail(std::string(call) + " returned " + StatusName(actual) + " for a forged handle");
    }
    return;
  }
  ExpectStatus(actual,
               choice == HandleChoice::kStale ? VYRE_STATUS_STALE_HANDLE
                                              : VYRE_STATUS_INVALID_HANDLE,
               call);
}

bool Torture::RangesCallAsExpected(vyre_status actual, HandleChoice choice, bool null_pointer,
                                   bool all_in_range, const char* call) {
  ExpectNotOk(actual, choice, call);
  if (choice != HandleChoice::kValid) return false;
  if (null_pointer) {
    if (actual == VYRE_STATUS_OK) Fail(std::string(call) + " accepted a NULL pointer");
    return false;
  }
  if (!all_in_range) {
    ExpectStatus(actual, VYRE_STATUS_OUT_OF_RANGE, call);
    return false;
  }
  ExpectStatus(actual, VYRE_STATUS_OK, call);
  return actual == VYRE_STATUS_OK;
}

// ---------------------------------------------------------------------------
// Host outputs
// ---------------------------------------------------------------------------

// After a read-back, host outputs hold the model's bytes; without one they
// are untouched.
void Torture::CheckHostOutputs(const PendingState& pending, bool read_back, const char* call) {
  for (const HostBinding& h : pending.host) {
    const std::vector<uint8_t>& actual = *h.memory;
    if (!read_back || !h.written) {
      if (actual != h.before) {
        Fail(std::string(call) + ": host memory changed without a read-back into it");
        return;
      }
      continue;
    }
    if (!pending.check_results || h.expected.empty()) continue;
    for (size_t i = 0; i < actual.size(); ++i) {
      if (h.expected_known[i] && actual[i] != h.expected[i]) {
        Fail(std::string(call) + ": host output byte " + std::to_string(i) + " of " +
             std::to_string(actual.size()) + " is " + std::to_string(actual[i]) + ", expected " +
             std::to_string(h.expected[i]));
        return;
      }
    }
    checked_elements_ += actual.size() / 4;
  }
}

}  // namespace torture
}  // namespace vyre_test
