// Shared by the fault-injection suites (fault_injection_test.cc,
// graph_fault_injection_test.cc): the CUresults they inject and the status
// each must give, written out here rather than taken from the library's
// table (src/driver/cu_error.cc), so the suites check the table too; and the
// "first error" bookkeeping of a scenario that runs several calls.
#ifndef VYRE_TESTS_UNIT_INJECTED_RESULTS_H_
#define VYRE_TESTS_UNIT_INJECTED_RESULTS_H_

#include <gtest/gtest.h>

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/last_error.h"
#include "base/status.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {

// One CUresult a sweep injects and the public status it must give when the
// failing call is reported.
struct InjectedResult {
  CUresult code;
  vyre_status expected;
  bool sticky;  // a device fault: the context is then replaced
};

// A representative of every status class the CUresult table maps to (the
// table test in api_fake_results_test.cc runs every CUresult of cuda.h).
inline const std::vector<InjectedResult>& InjectedResults() {
  static const std::vector<InjectedResult> results = {
      {CUDA_ERROR_UNKNOWN, VYRE_STATUS_DRIVER_ERROR, false},
      {CUDA_ERROR_OUT_OF_MEMORY, VYRE_STATUS_OUT_OF_MEMORY, false},
      {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, VYRE_STATUS_LIMIT_EXCEEDED, false},
      {CUDA_ERROR_NO_BINARY_FOR_GPU, VYRE_STATUS_COMPILE_FAILED, false},
      {CUDA_ERROR_DEVICE_UNAVAILABLE, VYRE_STATUS_NO_DEVICE, false},
      {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, VYRE_STATUS_NO_DRIVER, false},
      {CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, VYRE_STATUS_DRIVER_TOO_OLD, false},
      {CUDA_ERROR_NOT_FOUND, VYRE_STATUS_ENTRY_NOT_FOUND, false},
      {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, VYRE_STATUS_INVALID_ARGUMENT, false},
      {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, VYRE_STATUS_INVALID_STATE, false},
      {CUDA_ERROR_ILLEGAL_ADDRESS, VYRE_STATUS_DEVICE_FAULT, true},
  };
  return results;
}

// The first error of a multi-call scenario, kept while clean-up calls run
// (they clear the thread's last error) and then made the last error again.
class FirstError {
 public:
  // Notes `status`; true when it is OK (so the caller may go on).
  bool Ok(vyre_status status) {
    if (status != VYRE_STATUS_OK && status_ == VYRE_STATUS_OK) {
      LastError e = ReadLastError();
      status_ = status;
      cu_result_ = e.cu_result;
      message_ = e.message;
    }
    return status == VYRE_STATUS_OK;
  }
  // A clean-up (free, destroy, release) after the steps: its own failure is
  // the first error when none came before. After an error it must release
  // quietly, except that after a device fault releases report the fault too.
  void Cleanup(vyre_status status) {
    if (!failed()) {
      Ok(status);
      return;
    }
    const bool fault_again =
        status_ == VYRE_STATUS_DEVICE_FAULT && status == VYRE_STATUS_DEVICE_FAULT;
    EXPECT_TRUE(status == VYRE_STATUS_OK || fault_again)
        << "a release after " << StatusName(status_) << " returned " << StatusName(status)
        << ": " << LastErrorMessage();
  }
  bool failed() const { return status_ != VYRE_STATUS_OK; }
  vyre_status status() const { return status_; }
  vyre_status Result() const {
    if (status_ == VYRE_STATUS_OK) return VYRE_STATUS_OK;
    return vyre::SetLastError(vyre::MakeError(status_, message_, cu_result_));
  }

 private:
  vyre_status status_ = VYRE_STATUS_OK;
  int32_t cu_result_ = 0;
  std::string message_;
};

}  // namespace vyre_test

#endif  // VYRE_TESTS_UNIT_INJECTED_RESULTS_H_
