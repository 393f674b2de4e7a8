#include "driver/guards.h"

namespace vyre::driver {

void LogReleaseFailure(const char* call, CUresult result) {
  Logf(VYRE_LOG_WARNING, "%s returned %s while releasing a resource; it may leak", call,
       CuResultName(result));
}

CUresult ReleaseStream(CUstream s) { return Api().cuStreamDestroy(s); }
CUresult ReleaseEvent(CUevent e) { return Api().cuEventDestroy(e); }
CUresult ReleaseModule(CUmodule m) { return Api().cuModuleUnload(m); }
CUresult ReleaseDeviceMemory(CUdeviceptr p) { return Api().cuMemFree(p); }
CUresult ReleasePinnedMemory(void* p) { return Api().cuMemFreeHost(p); }

PrimaryContextGuard::~PrimaryContextGuard() {
  if (context_ != nullptr) {
    CUresult r = Api().cuDevicePrimaryCtxRelease(device_);
    if (r != CUDA_SUCCESS) LogReleaseFailure("cuDevicePrimaryCtxRelease", r);
  }
}

}  // namespace vyre::driver
