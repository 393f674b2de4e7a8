#include "driver/guards.h"

#include "driver/release_report.h"

namespace vyre::driver {

void LogReleaseFailure(const char* call, CUresult result) {
  if (IsStickyResult(result)) {
    // Expected after a device fault: the reset reclaims the resource. The
    // release call that runs this returns DEVICE_FAULT (release_report.h).
    ReleaseReport::NoteFailure(call, result, RecordFaultOnCurrentContext(result));
    Logf(VYRE_LOG_INFO,
         "%s returned %s while releasing a resource after a device fault; the device reset "
         "that follows the destruction of its last vyre context reclaims it",
         call, CuResultName(result));
    return;
  }
  ReleaseReport::NoteFailure(call, result);
  Logf(VYRE_LOG_WARNING, "%s returned %s while releasing a resource; it may leak", call,
       CuResultName(result));
}

void LogUnknownPrevious(CUresult result, CUcontext ours) {
  Logf(VYRE_LOG_WARNING,
       "cuCtxGetCurrent returned %s while a release bound its context; the caller's current "
       "CUDA context is unknown, so vyre-cuda's (%p) stays current on this thread",
       CuResultName(result), static_cast<void*>(ours));
}

void LogRestoreFailure(CUresult result, CUcontext previous, CUcontext ours) {
  Logf(VYRE_LOG_WARNING,
       "cuCtxSetCurrent returned %s while restoring the caller's current CUDA context (%p) "
       "after a vyre-cuda call; this thread's current context is still vyre-cuda's (%p), so "
       "the caller's own CUDA calls on this thread may use the wrong context",
       CuResultName(result), static_cast<void*>(previous), static_cast<void*>(ours));
}

CUresult ReleaseStream(CUstream s) { return Api().cuStreamDestroy(s); }
CUresult ReleaseEvent(CUevent e) { return Api().cuEventDestroy(e); }
CUresult ReleaseModule(CUmodule m) { return Api().cuModuleUnload(m); }
CUresult ReleaseDeviceMemory(CUdeviceptr p) { return Api().cuMemFree(p); }
CUresult ReleasePinnedMemory(void* p) { return Api().cuMemFreeHost(p); }
CUresult ReleaseIpcMapping(CUdeviceptr p) { return Api().cuIpcCloseMemHandle(p); }

PrimaryContextGuard::~PrimaryContextGuard() {
  if (context_ != nullptr) ReleasePrimaryContext(device_);
}

}  // namespace vyre::driver
