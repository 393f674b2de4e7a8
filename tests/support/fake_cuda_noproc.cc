// A "driver" too old for vyre-cuda: it has cuInit but no cuGetProcAddress_v2
// (added in CUDA 12.0). Loading it must give VYRE_STATUS_DRIVER_TOO_OLD.
#include <cuda.h>

extern "C" __attribute__((visibility("default"))) CUresult cuInit(unsigned int flags) {
  (void)flags;
  return CUDA_SUCCESS;
}
