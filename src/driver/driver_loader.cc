#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/driver_api.h"

namespace vyre::driver {

DriverApi internal::g_table;

namespace {

constexpr const char* kEntryNames[] = {
#define VYRE_DRIVER_NAME(name) #name,
    VYRE_DRIVER_ENTRY_POINTS(VYRE_DRIVER_NAME)
#undef VYRE_DRIVER_NAME
};

using GetProcAddressFn = CUresult(CUDAAPI*)(const char*, void**, int, cuuint64_t,
                                            CUdriverProcAddressQueryResult*);

struct LoadedDriver {
  absl::once_flag once;
  absl::Status status;
  DriverApi& api = internal::g_table;
  void* library = nullptr;  // kept open for the life of the process
  int device_count = 0;
  int driver_version = 0;
};

LoadedDriver& Loaded() {
  // Never destroyed: driver calls may run from static destructors of callers.
  static LoadedDriver* driver = new LoadedDriver;
  return *driver;
}

absl::Status Resolve(GetProcAddressFn get_proc, const char* name, void** slot) {
  CUdriverProcAddressQueryResult query = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult result = get_proc(name, slot, kPinnedDriverVersion, CU_GET_PROC_ADDRESS_DEFAULT, &query);
  if (result != CUDA_SUCCESS || *slot == nullptr || query != CU_GET_PROC_ADDRESS_SUCCESS) {
    *slot = nullptr;
    return Errorf(VYRE_STATUS_DRIVER_TOO_OLD,
                  "loading the CUDA driver: entry point %s (CUDA %d ABI) is missing from the "
                  "installed driver. Fix: install an NVIDIA driver that supports CUDA 12.0 or "
                  "newer",
                  name, kPinnedDriverVersion);
  }
  return absl::OkStatus();
}

absl::Status Load(LoadedDriver& d) {
  const char* override_path = std::getenv("VYRE_CUDA_DRIVER_LIBRARY");
  std::string path = (override_path && *override_path) ? override_path : "libcuda.so.1";
  d.library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (d.library == nullptr) {
    const char* why = dlerror();
    return MakeError(VYRE_STATUS_NO_DRIVER,
                     absl::StrCat("loading the CUDA driver: dlopen(\"", path, "\") failed: ",
                                  why ? why : "unknown reason",
                                  ". Fix: install the NVIDIA driver so that libcuda.so.1 is "
                                  "on the loader path, or set VYRE_CUDA_DRIVER_LIBRARY to its "
                                  "full path."));
  }
  auto get_proc = reinterpret_cast<GetProcAddressFn>(dlsym(d.library, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    bool is_cuda = dlsym(d.library, "cuInit") != nullptr;
    return MakeError(
        is_cuda ? VYRE_STATUS_DRIVER_TOO_OLD : VYRE_STATUS_NO_DRIVER,
        absl::StrCat("loading the CUDA driver: \"", path,
                     is_cuda ? "\" has no cuGetProcAddress_v2, so it predates CUDA 12.0. Fix: "
                               "install an NVIDIA driver that supports CUDA 12.0 or newer."
                             : "\" is not a CUDA driver (no cuInit). Fix: point "
                               "VYRE_CUDA_DRIVER_LIBRARY at libcuda.so.1, or unset it."));
  }
  // cuInit and the version query come first so an old driver is named as such
  // rather than as a list of missing entry points.
  VYRE_RETURN_IF_ERROR(Resolve(get_proc, "cuInit", reinterpret_cast<void**>(&d.api.cuInit)));
  VYRE_RETURN_IF_ERROR(Resolve(get_proc, "cuDriverGetVersion",
                               reinterpret_cast<void**>(&d.api.cuDriverGetVersion)));
  // Error names are optional: messages fall back to the number without them.
  Resolve(get_proc, "cuGetErrorName", reinterpret_cast<void**>(&d.api.cuGetErrorName)).IgnoreError();
  Resolve(get_proc, "cuGetErrorString", reinterpret_cast<void**>(&d.api.cuGetErrorString)).IgnoreError();

  if (d.api.cuDriverGetVersion(&d.driver_version) != CUDA_SUCCESS) d.driver_version = 0;
  if (d.driver_version < kPinnedDriverVersion) {
    return Errorf(VYRE_STATUS_DRIVER_TOO_OLD,
                  "loading the CUDA driver: the installed driver supports CUDA %d.%d, older "
                  "than the CUDA 12.0 this library needs. Fix: install an NVIDIA driver that "
                  "supports CUDA 12.0 or newer",
                  d.driver_version / 1000, (d.driver_version % 1000) / 10);
  }
  void** slots = reinterpret_cast<void**>(&d.api);
  for (int i = 0; i < static_cast<int>(Entry::kCount); ++i) {
    if (slots[i] != nullptr) continue;
    VYRE_RETURN_IF_ERROR(Resolve(get_proc, kEntryNames[i], &slots[i]));
  }
  CUresult init = d.api.cuInit(0);
  if (init == CUDA_ERROR_NO_DEVICE) {
    Logf(VYRE_LOG_INFO, "CUDA driver %d loaded; cuInit reports no device", d.driver_version);
    d.device_count = 0;
    return absl::OkStatus();
  }
  if (init != CUDA_SUCCESS) {
    return CuError(init, "initialising the CUDA driver", "cuInit",
                   "check that the NVIDIA kernel module is loaded and the device nodes "
                   "(/dev/nvidia*) are accessible to this process");
  }
  if (d.api.cuDeviceGetCount(&d.device_count) != CUDA_SUCCESS) d.device_count = 0;
  Logf(VYRE_LOG_INFO, "CUDA driver %d loaded from %s with %d device(s)", d.driver_version, path,
       d.device_count);
  return absl::OkStatus();
}

static_assert(sizeof(DriverApi) == sizeof(void*) * static_cast<size_t>(Entry::kCount),
              "DriverApi must be exactly one pointer per entry");

}  // namespace

const char* EntryName(Entry entry) {
  int i = static_cast<int>(entry);
  return (i >= 0 && i < static_cast<int>(Entry::kCount)) ? kEntryNames[i] : "unknown";
}

absl::Status EnsureLoaded() {
  LoadedDriver& d = Loaded();
  absl::call_once(d.once, [&d] { d.status = Load(d); });
  return d.status;
}

DriverApi& MutableApiForTesting() { return internal::g_table; }
int DeviceCount() { return Loaded().device_count; }
int DriverVersion() { return Loaded().driver_version; }

}  // namespace vyre::driver
