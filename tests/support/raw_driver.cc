#include "raw_driver.h"

#include <dlfcn.h>

#include <cstdlib>

namespace vyre_test {
namespace {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

struct Loaded {
  RawDriver api;
  std::string error;
  bool ok = false;
};

Loaded Load() {
  Loaded loaded;
  const char* override_path = std::getenv("VYRE_CUDA_DRIVER_LIBRARY");
  const std::string path =
      (override_path != nullptr && *override_path != '\0') ? override_path : "libcuda.so.1";
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    loaded.error = "dlopen(" + path + "): " + (why ? why : "unknown");
    return loaded;
  }
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(library, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    loaded.error = path + " has no cuGetProcAddress_v2";
    return loaded;
  }
#define VYRE_TEST_RAW_RESOLVE(name)                                                         \
  {                                                                                         \
    void* fn = nullptr;                                                                     \
    CUdriverProcAddressQueryResult query = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;            \
    if (get_proc(#name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &query) != CUDA_SUCCESS || \
        fn == nullptr) {                                                                    \
      loaded.error = path + " lacks " #name;                                                \
      return loaded;                                                                        \
    }                                                                                       \
    loaded.api.name = reinterpret_cast<decltype(loaded.api.name)>(fn);                      \
  }
  VYRE_TEST_RAW_ENTRY_POINTS(VYRE_TEST_RAW_RESOLVE)
#undef VYRE_TEST_RAW_RESOLVE
  if (CUresult r = loaded.api.cuInit(0); r != CUDA_SUCCESS) {
    loaded.error = "cuInit returned " + std::to_string(static_cast<int>(r));
    return loaded;
  }
  loaded.ok = true;
  return loaded;
}

}  // namespace

const RawDriver* RawDriver::Get(std::string* why) {
  static const Loaded loaded = Load();
  if (!loaded.ok) {
    if (why != nullptr) *why = loaded.error;
    return nullptr;
  }
  return &loaded.api;
}

RawPrimaryContext::RawPrimaryContext(int ordinal) {
  api_ = RawDriver::Get(&error_);
  if (api_ == nullptr) return;
  if (CUresult r = api_->cuDeviceGet(&device_, ordinal); r != CUDA_SUCCESS) {
    error_ = "cuDeviceGet returned " + std::to_string(static_cast<int>(r));
    return;
  }
  CUcontext context = nullptr;
  if (CUresult r = api_->cuDevicePrimaryCtxRetain(&context, device_); r != CUDA_SUCCESS) {
    error_ = "cuDevicePrimaryCtxRetain returned " + std::to_string(static_cast<int>(r));
    return;
  }
  if (api_->cuCtxGetCurrent(&previous_) != CUDA_SUCCESS) previous_ = nullptr;
  if (CUresult r = api_->cuCtxSetCurrent(context); r != CUDA_SUCCESS) {
    error_ = "cuCtxSetCurrent returned " + std::to_string(static_cast<int>(r));
    api_->cuDevicePrimaryCtxRelease(device_);
    return;
  }
  context_ = context;
}

RawPrimaryContext::~RawPrimaryContext() {
  if (context_ == nullptr) return;
  api_->cuCtxSetCurrent(previous_);
  api_->cuDevicePrimaryCtxRelease(device_);
}

}  // namespace vyre_test
