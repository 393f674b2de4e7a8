#include "driver/guards.h"

namespace vyre::driver {

void LogReleaseFailure(const char* call, CUresult result) {
  if (IsStickyResult(result)) {
    // Expected after a device fault: the reset reclaims the resource.
    RecordFaultOnCurrentContext(result);
    Logf(VYRE_LOG_INFO,
         "%s returned %s while releasing a resource after a device fault; the device reset "
         "that follows the destruction of its last vyre context reclaims it",
         call, CuResultName(result));
    return;
  }
  Logf(VYRE_LOG_WARNING, "%s returned %s while releasing a resource; it may leak", call,
       CuResultName(result));
}

CUresult ReleaseStream(CUstream s) { return Api().cuStreamDestroy(s); }
CUresult ReleaseEvent(CUevent e) { return Api().cuEventDestroy(e); }
CUresult ReleaseModule(CUmodule m) { return Api().cuModuleUnload(m); }
CUresult ReleaseDeviceMemory(CUdeviceptr p) { return Api().cuMemFree(p); }
CUresult ReleasePinnedMemory(void* p) { return Api().cuMemFreeHost(p); }

PrimaryContextGuard::~PrimaryContextGuard() {
  if (context_ != nullptr) ReleasePrimaryContext(device_);
}

}  // namespace vyre::driver
