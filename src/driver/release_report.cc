#include "driver/release_report.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "driver/cu_error.h"

namespace vyre::driver {
namespace {

thread_local ReleaseReport* t_innermost = nullptr;

}  // namespace

ReleaseReport::ReleaseReport() : outer_(t_innermost) { t_innermost = this; }

ReleaseReport::~ReleaseReport() { t_innermost = outer_; }

void ReleaseReport::Fault(CUresult cause, int ordinal) {
  if (fault_.cause != CUDA_SUCCESS) return;
  fault_.cause = cause;
  fault_.ordinal = ordinal;
}

void ReleaseReport::NoteFailure(const char* call, CUresult result, int ordinal) {
  ReleaseReport* report = t_innermost;
  if (report == nullptr || result == CUDA_SUCCESS) return;
  if (IsStickyResult(result)) {
    report->Fault(result, ordinal);
    return;
  }
  if (report->failure_ != CUDA_SUCCESS) return;
  report->failure_ = result;
  report->failed_call_ = call;
}

void ReleaseReport::NoteContext(CUcontext context) {
  ReleaseReport* report = t_innermost;
  if (report == nullptr || context == nullptr) return;
  if (!AnyDeviceFaulted()) return;  // one relaxed load while no device is faulted
  DeviceFault fault;
  if (FindFault(context, &fault)) report->Fault(fault.cause, fault.ordinal);
}

absl::Status ReleaseReport::Result(absl::string_view what, absl::string_view released,
                                   absl::string_view fault_fix) const {
  if (fault_.cause != CUDA_SUCCESS) {
    return MakeError(
        VYRE_STATUS_DEVICE_FAULT,
        absl::StrCat(what, ": ", released, ", but ",
                     fault_.ordinal >= 0 ? absl::StrCat("device ", fault_.ordinal)
                                         : std::string("its device"),
                     " faulted (", CuResultName(fault_.cause), ": ",
                     CuResultDescription(fault_.cause),
                     ") and CUDA accepts no more work on its contexts. Fix: ",
                     fault_fix.empty() ? DeviceFaultFix(fault_.ordinal) : std::string(fault_fix),
                     "."),
        static_cast<int32_t>(fault_.cause));
  }
  if (failure_ != CUDA_SUCCESS) {
    return MakeError(
        StatusForCuResult(failure_),
        absl::StrCat(what, ": ", released, ", but ", failed_call_, " returned ",
                     CuResultName(failure_), " (", CuResultDescription(failure_),
                     ") while releasing it, so driver memory or objects may have leaked. Fix: "
                     "nothing is left to do for this handle (it is gone); if releases keep "
                     "failing, check the driver and the device (nvidia-smi, Xid errors in the "
                     "kernel log)."),
        static_cast<int32_t>(failure_));
  }
  return absl::OkStatus();
}

}  // namespace vyre::driver
