#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
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

// The optional entries (VYRE_DRIVER_OPTIONAL_ENTRY_POINTS) end the table.
constexpr int CountOptional() {
  int n = 0;
#define VYRE_DRIVER_COUNT(name) ++n;
  VYRE_DRIVER_OPTIONAL_ENTRY_POINTS(VYRE_DRIVER_COUNT)
#undef VYRE_DRIVER_COUNT
  return n;
}
constexpr int kRequiredCount = static_cast<int>(Entry::kCount) - CountOptional();

using GetProcAddressFn = CUresult(CUDAAPI*)(const char*, void**, int, cuuint64_t,
                                            CUdriverProcAddressQueryResult*);
// The fake driver's fake_cuda_take_refused_kernel (tests/support/fake_driver).
using TakeRefusedKernelFn = size_t (*)(char* name, size_t size);

struct LoadedDriver {
  absl::once_flag once;
  absl::Status status;
  DriverApi& api = internal::g_table;
  void* library = nullptr;  // kept open for the life of the process
  // Set only on the tests' fake driver, which exports it.
  TakeRefusedKernelFn take_refused_kernel = nullptr;
  int device_count = 0;
  int driver_version = 0;
};

LoadedDriver& Loaded() {
  // Never destroyed: driver calls may run from static destructors of callers.
  static LoadedDriver* driver = new LoadedDriver;
  return *driver;
}

// The file the dynamic loader actually opened (a search for "libcuda.so.1"
// may find it anywhere on the loader path), or `requested` if unknown.
std::string LoadedPath(void* library, const std::string& requested) {
  struct link_map* map = nullptr;
  if (dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return requested;
}

// The CUDA toolkit's lib64/stubs/libcuda.so lets programs link without a
// driver; every call of it, cuGetProcAddress_v2 included, returns
// CUDA_ERROR_STUB_LIBRARY. A stub that ever misses entry points instead is
// still recognised by its directory.
bool IsStubPath(const std::string& path) {
  return path.find("/stubs/") != std::string::npos || path.rfind("stubs/", 0) == 0;
}

absl::Status StubError(const std::string& path, absl::string_view evidence) {
  const char* override_path = std::getenv("VYRE_CUDA_DRIVER_LIBRARY");
  const bool overridden = override_path != nullptr && *override_path != '\0';
  std::string where = overridden
                          ? "set VYRE_CUDA_DRIVER_LIBRARY to the NVIDIA driver's libcuda.so.1 "
                            "(ldconfig -p | grep libcuda.so.1 shows where it is) or unset it"
                          : "remove the toolkit's stubs directory from LD_LIBRARY_PATH (and "
                            "from /etc/ld.so.conf.d, then run ldconfig) so that the loader finds "
                            "the NVIDIA driver's libcuda.so.1";
  return MakeError(
      VYRE_STATUS_NO_DRIVER,
      absl::StrCat("loading the CUDA driver: \"", path,
                   "\" is the CUDA toolkit's link stub, which lets programs link without a "
                   "driver but cannot run anything (",
                   evidence, "). Fix: load the real driver instead: ", where,
                   "; if no NVIDIA driver is installed, install one."),
      static_cast<int32_t>(CUDA_ERROR_STUB_LIBRARY));
}

absl::Status Resolve(GetProcAddressFn get_proc, const char* name, void** slot,
                     const std::string& path) {
  CUdriverProcAddressQueryResult query = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult result = get_proc(name, slot, kPinnedDriverVersion, CU_GET_PROC_ADDRESS_DEFAULT, &query);
  if (result != CUDA_SUCCESS || *slot == nullptr || query != CU_GET_PROC_ADDRESS_SUCCESS) {
    *slot = nullptr;
    if (result == CUDA_ERROR_STUB_LIBRARY) {
      return StubError(path, absl::StrCat("cuGetProcAddress_v2(\"", name,
                                          "\") returned CUDA_ERROR_STUB_LIBRARY"));
    }
    if (IsStubPath(path)) {
      return StubError(path, absl::StrCat("its entry point ", name, " is missing"));
    }
    return Errorf(VYRE_STATUS_DRIVER_TOO_OLD,
                  "loading the CUDA driver: entry point %s (CUDA %d ABI) is missing from the "
                  "installed driver \"%s\". Fix: install an NVIDIA driver that supports CUDA "
                  "12.0 or newer.",
                  name, kPinnedDriverVersion, path);
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
  path = LoadedPath(d.library, path);
  // The tests' fake driver refuses kernels it does not run; the library
  // asks it which one, to say so (CuError). No real driver exports this.
  d.take_refused_kernel =
      reinterpret_cast<TakeRefusedKernelFn>(dlsym(d.library, "fake_cuda_take_refused_kernel"));
  auto get_proc = reinterpret_cast<GetProcAddressFn>(dlsym(d.library, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    bool is_cuda = dlsym(d.library, "cuInit") != nullptr;
    if (is_cuda && IsStubPath(path)) return StubError(path, "it has no cuGetProcAddress_v2");
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
  VYRE_RETURN_IF_ERROR(
      Resolve(get_proc, "cuInit", reinterpret_cast<void**>(&d.api.cuInit), path));
  VYRE_RETURN_IF_ERROR(Resolve(get_proc, "cuDriverGetVersion",
                               reinterpret_cast<void**>(&d.api.cuDriverGetVersion), path));
  // Error names are optional: messages fall back to the table's without them.
  Resolve(get_proc, "cuGetErrorName", reinterpret_cast<void**>(&d.api.cuGetErrorName), path)
      .IgnoreError();
  Resolve(get_proc, "cuGetErrorString", reinterpret_cast<void**>(&d.api.cuGetErrorString), path)
      .IgnoreError();

  CUresult version = d.api.cuDriverGetVersion(&d.driver_version);
  if (version == CUDA_ERROR_STUB_LIBRARY) {
    return StubError(path, "cuDriverGetVersion returned CUDA_ERROR_STUB_LIBRARY");
  }
  if (version != CUDA_SUCCESS) {
    d.driver_version = 0;
    return CuError(version, absl::StrCat("loading the CUDA driver \"", path, "\""),
                   "cuDriverGetVersion");
  }
  if (d.driver_version < kPinnedDriverVersion) {
    return Errorf(VYRE_STATUS_DRIVER_TOO_OLD,
                  "loading the CUDA driver: the installed driver supports CUDA %d.%d, older "
                  "than the CUDA 12.0 this library needs. Fix: install an NVIDIA driver that "
                  "supports CUDA 12.0 or newer.",
                  d.driver_version / 1000, (d.driver_version % 1000) / 10);
  }
  void** slots = reinterpret_cast<void**>(&d.api);
  for (int i = 0; i < kRequiredCount; ++i) {
    if (slots[i] != nullptr) continue;
    VYRE_RETURN_IF_ERROR(Resolve(get_proc, kEntryNames[i], &slots[i], path));
  }
  // Newer drivers' entry points: null when missing; their features say so.
  for (int i = kRequiredCount; i < static_cast<int>(Entry::kCount); ++i) {
    if (slots[i] != nullptr) continue;
    CUdriverProcAddressQueryResult query = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (get_proc(kEntryNames[i], &slots[i], kOptionalDriverVersion, CU_GET_PROC_ADDRESS_DEFAULT,
                 &query) != CUDA_SUCCESS ||
        query != CU_GET_PROC_ADDRESS_SUCCESS) {
      slots[i] = nullptr;
    }
  }
  CUresult init = d.api.cuInit(0);
  if (init == CUDA_ERROR_NO_DEVICE) {
    Logf(VYRE_LOG_INFO, "CUDA driver %d loaded; cuInit reports no device", d.driver_version);
    d.device_count = 0;
    return absl::OkStatus();
  }
  if (init == CUDA_ERROR_STUB_LIBRARY) {
    return StubError(path, "cuInit returned CUDA_ERROR_STUB_LIBRARY");
  }
  if (init != CUDA_SUCCESS) {
    if (StatusForCuResult(init) != VYRE_STATUS_DRIVER_ERROR) {
      return CuError(init, "initialising the CUDA driver", "cuInit");
    }
    // A generic failure of cuInit (CUDA_ERROR_UNKNOWN, OPERATING_SYSTEM, ...)
    // means the library cannot reach the kernel module: no usable driver.
    absl::Status error = CuError(init, "initialising the CUDA driver", "cuInit",
                                 "check that the NVIDIA kernel module is loaded (nvidia-smi, "
                                 "lsmod | grep nvidia) and that the device nodes (/dev/nvidia*) "
                                 "are accessible to this process");
    return MakeError(VYRE_STATUS_NO_DRIVER, std::string(error.message()),
                     static_cast<int32_t>(init));
  }
  CUresult count = d.api.cuDeviceGetCount(&d.device_count);
  if (count != CUDA_SUCCESS) {
    d.device_count = 0;
    return CuError(count, "initialising the CUDA driver: counting its devices",
                   "cuDeviceGetCount");
  }
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

std::string TakeFakeDriverRefusedKernel() {
  const TakeRefusedKernelFn take = Loaded().take_refused_kernel;
  if (take == nullptr) return std::string();
  char name[4096];
  const size_t length = take(name, sizeof name);
  if (length == 0) return std::string();
  // A longer name comes back cut; the message shortens long names anyway.
  return std::string(name, strnlen(name, sizeof name));
}

DriverApi& MutableApiForTesting() { return internal::g_table; }
int DeviceCount() { return Loaded().device_count; }
int DriverVersion() { return Loaded().driver_version; }

}  // namespace vyre::driver
