// Raw CUDA driver calls for tests that play "other CUDA code in the process"
// (CuPy, PyTorch, a user's own cuMemAlloc): the driver the library loaded
// (VYRE_CUDA_DRIVER_LIBRARY, else libcuda.so.1; dlopen of the same path
// returns the same instance, so on the fake driver these calls see the
// library's fake device), with entry points resolved through
// cuGetProcAddress_v2 at the library's pinned version (CUDA 12.0).
#ifndef VYRE_TESTS_SUPPORT_RAW_DRIVER_H_
#define VYRE_TESTS_SUPPORT_RAW_DRIVER_H_

#include <cuda.h>

#include <string>

namespace vyre_test {

#define VYRE_TEST_RAW_ENTRY_POINTS(X) \
  X(cuInit)                           \
  X(cuDeviceGet)                      \
  X(cuDevicePrimaryCtxRetain)         \
  X(cuDevicePrimaryCtxRelease)        \
  X(cuCtxGetCurrent)                  \
  X(cuCtxSetCurrent)                  \
  X(cuMemAlloc)                       \
  X(cuMemFree)                        \
  X(cuMemHostAlloc)                   \
  X(cuMemFreeHost)                    \
  X(cuMemcpyHtoDAsync)                \
  X(cuMemcpyDtoHAsync)                \
  X(cuMemsetD32Async)                 \
  X(cuStreamCreate)                   \
  X(cuStreamDestroy)                  \
  X(cuStreamSynchronize)              \
  X(cuModuleLoadDataEx)               \
  X(cuModuleUnload)                   \
  X(cuModuleGetFunction)              \
  X(cuLaunchKernel)

struct RawDriver {
#define VYRE_TEST_RAW_MEMBER(name) decltype(&::name) name = nullptr;
  VYRE_TEST_RAW_ENTRY_POINTS(VYRE_TEST_RAW_MEMBER)
#undef VYRE_TEST_RAW_MEMBER

  // The loaded driver, or nullptr (with *why set) when it cannot be loaded
  // or lacks an entry point. Loaded once per process.
  static const RawDriver* Get(std::string* why = nullptr);
};

// Makes device `ordinal`'s primary context (retained for the scope) current
// on this thread, and restores the previous one afterwards. ok() is false
// when the driver or the context is unusable (error() says why).
class RawPrimaryContext {
 public:
  explicit RawPrimaryContext(int ordinal = 0);
  ~RawPrimaryContext();
  RawPrimaryContext(const RawPrimaryContext&) = delete;
  RawPrimaryContext& operator=(const RawPrimaryContext&) = delete;

  bool ok() const { return context_ != nullptr; }
  const std::string& error() const { return error_; }
  CUcontext get() const { return context_; }
  const RawDriver& api() const { return *api_; }

 private:
  const RawDriver* api_ = nullptr;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUcontext previous_ = nullptr;
  std::string error_;
};

}  // namespace vyre_test

#endif  // VYRE_TESTS_SUPPORT_RAW_DRIVER_H_
