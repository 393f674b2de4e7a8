// Release paths report. A destroy, free or release call (vyre_context_destroy,
// vyre_buffer_free, vyre_pending_release, ...) releases everything its object
// owns and then returns the first device error it met on the way, or OK: a
// device fault (the object's context is recorded faulted, or a release call
// returned a sticky result) as VYRE_STATUS_DEVICE_FAULT, else a release call
// the driver failed with the status its CUresult maps to. The handle is gone
// either way; the message says so.
//
// The releases themselves run in destructors, which have no caller to return
// to: they report here. The API call opens a ReleaseReport on its thread for
// the length of the release; LogReleaseFailure (guards.h) and the primary
// context's release note failed driver calls in it, and the object's code
// notes the context it releases from (NoteContext). An object another
// thread's in-flight call still holds is released when that call lets go, and
// reports to that thread's report, if it has one (otherwise the log alone
// says what failed).
#ifndef VYRE_DRIVER_RELEASE_REPORT_H_
#define VYRE_DRIVER_RELEASE_REPORT_H_

#include <cuda.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "driver/device_faults.h"

namespace vyre::driver {

class ReleaseReport {
 public:
  // Becomes this thread's innermost report until destroyed.
  ReleaseReport();
  ~ReleaseReport();
  ReleaseReport(const ReleaseReport&) = delete;
  ReleaseReport& operator=(const ReleaseReport&) = delete;

  // A release driver call `call` failed with `result`: noted in this thread's
  // innermost report (the first failure counts); nothing when none is open.
  // A sticky result is a device fault on device `ordinal` (-1: unknown).
  static void NoteFailure(const char* call, CUresult result, int ordinal = -1);
  // The object being released belongs to `context` (a primary context a vyre
  // context holds): when the context is recorded faulted, the report notes
  // the fault (the first one counts). Nothing when no report is open.
  static void NoteContext(CUcontext context);

  // Whether a device fault was noted, and which.
  bool faulted() const { return fault_.cause != CUDA_SUCCESS; }
  const DeviceFault& fault() const { return fault_; }

  // OK when nothing was noted. Otherwise the error: "<what>: <released>, but
  // ..." (`released` says what was released, e.g. "the buffer is released"),
  // a device fault first (DEVICE_FAULT with the fault's CUresult and, unless
  // `fault_fix` is given, the device-fault Fix), else the first failed call
  // (its table status and CUresult).
  absl::Status Result(absl::string_view what, absl::string_view released,
                      absl::string_view fault_fix = {}) const;

 private:
  void Fault(CUresult cause, int ordinal);

  ReleaseReport* outer_;
  DeviceFault fault_;                 // the first device fault met
  CUresult failure_ = CUDA_SUCCESS;   // the first failed release call that was no fault
  const char* failed_call_ = "";
};

}  // namespace vyre::driver

#endif  // VYRE_DRIVER_RELEASE_REPORT_H_
