// A fake CUDA driver on host memory, so CI machines without a GPU can run the
// engine's contexts, buffers, programs, dispatch and error paths.
//
// The engine loads it through VYRE_CUDA_DRIVER_LIBRARY and resolves every
// entry point through cuGetProcAddress_v2, which maps the unversioned API
// names to the fake_* functions below. Device memory is malloc'd (device
// pointers are host addresses), streams are synchronous (every copy, memset
// and kernel runs at once), and the kernels named in docs/ENGINE_CONTRACT.md
// run on the host (vyre_test_add_u32, vyre_test_inc_u32, vyre_test_saxpy_f32,
// the library's vyre_selftest_add_u32, and vyre_test_probe_params, which
// records its arguments); launches of any other kernel do nothing. Modules
// may be PTX text (entries found after ".entry"), cubins (ELF FUNC symbols
// marked as CUDA entries) or fatbins holding either, uncompressed.
//
// Misuse the real driver would reject (no current context, pointers outside
// any allocation, unknown handles, double frees) is rejected here too, printed
// to stderr and counted in fake_cuda_stats.misuse_errors so tests can assert
// the engine never does it.
//
// Test controls (fake_cuda_control.h): fake_cuda_get_stats, fake_cuda_set_hold.
// Environment:
//   FAKE_CUDA_MODE          unset/"ok" normal; "no_device": cuInit says
//                           CUDA_ERROR_NO_DEVICE; "old": driver version 11080.
//   FAKE_CUDA_MEMORY_BYTES  device memory capacity (default 1 GiB).
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fake_cuda_control.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// ---------------------------------------------------------------------------
// Device description
// ---------------------------------------------------------------------------

constexpr const char* kDeviceName = "Fake CUDA Device";
constexpr int kMultiprocessors = 132;
constexpr int kMaxThreadsPerBlock = 1024;
constexpr int kMaxBlockDim[3] = {1024, 1024, 64};
constexpr int kMaxGridDim[3] = {2147483647, 65535, 65535};
constexpr int kSharedBytesPerBlock = 48 * 1024;
constexpr int kMaxThreadsPerMultiprocessor = 2048;
constexpr uint64_t kDefaultMemoryBytes = uint64_t{1} << 30;
constexpr size_t kDeviceAlignment = 256;
constexpr unsigned char kFreshMemoryPattern = 0xA5;  // never zero: zeroing must be explicit
constexpr auto kHoldLimit = std::chrono::seconds(5);

enum class Mode { kOk, kNoDevice, kOld };

Mode CurrentMode() {
  const char* mode = std::getenv("FAKE_CUDA_MODE");
  if (mode == nullptr || std::strcmp(mode, "") == 0 || std::strcmp(mode, "ok") == 0) {
    return Mode::kOk;
  }
  if (std::strcmp(mode, "no_device") == 0) return Mode::kNoDevice;
  if (std::strcmp(mode, "old") == 0) return Mode::kOld;
  std::fprintf(stderr, "fake cuda: unknown FAKE_CUDA_MODE '%s', using 'ok'\n", mode);
  return Mode::kOk;
}

uint64_t MemoryCapacity() {
  const char* text = std::getenv("FAKE_CUDA_MEMORY_BYTES");
  if (text == nullptr || *text == '\0') return kDefaultMemoryBytes;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 0);
  if (end == text || *end != '\0') {
    std::fprintf(stderr, "fake cuda: FAKE_CUDA_MEMORY_BYTES='%s' is not a number\n", text);
    return kDefaultMemoryBytes;
  }
  return value;
}

// ---------------------------------------------------------------------------
// Objects behind the opaque handles
// ---------------------------------------------------------------------------

struct FakeContext {
  int device = 0;
};
struct FakeModule {
  std::vector<std::string> entries;
};
struct FakeFunction {
  FakeModule* module = nullptr;
  std::string name;
  int max_dynamic_shared_bytes = kSharedBytesPerBlock;
};
struct FakeStream {
  unsigned flags = 0;
};
struct FakeEvent {
  unsigned flags = 0;
  bool recorded = false;
  std::chrono::steady_clock::time_point time;
};

struct State {
  std::mutex mu;
  std::condition_variable hold_changed;
  bool initialized = false;
  bool hold = false;
  FakeContext primary;
  int64_t primary_retains = 0;
  uint64_t capacity = kDefaultMemoryBytes;
  std::map<uintptr_t, size_t> device_allocations;  // base -> bytes
  uint64_t device_bytes = 0;
  std::map<uintptr_t, size_t> pinned_allocations;
  uint64_t pinned_bytes = 0;
  std::set<FakeModule*> modules;
  std::map<FakeFunction*, std::unique_ptr<FakeFunction>> functions;
  std::set<FakeStream*> streams;
  std::set<FakeEvent*> events;
  fake_cuda_stats stats{};
};

State& S() {
  static State* state = new State();  // never destroyed: engine teardown may run late
  return *state;
}

thread_local CUcontext current_context = nullptr;

using Lock = std::unique_lock<std::mutex>;

// Reports a call the real driver would reject and the engine should never make.
CUresult Misuse(CUresult code, const char* format, ...) __attribute__((format(printf, 2, 3)));
CUresult Misuse(CUresult code, const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  std::fprintf(stderr, "fake cuda: MISUSE (CUresult %d): %s\n", static_cast<int>(code), text);
  ++S().stats.misuse_errors;
  return code;
}

// Every call but version/error-name queries needs cuInit first.
CUresult RequireInit(const char* fn) {
  if (!S().initialized) return Misuse(CUDA_ERROR_NOT_INITIALIZED, "%s before cuInit", fn);
  return CUDA_SUCCESS;
}

// Calls that act on device state need the primary context current.
CUresult RequireContext(const char* fn) {
  CUresult init = RequireInit(fn);
  if (init != CUDA_SUCCESS) return init;
  if (current_context == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "%s with no current context on this thread", fn);
  }
  if (current_context != reinterpret_cast<CUcontext>(&S().primary) || S().primary_retains <= 0) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "%s with a current context that is not retained",
                  fn);
  }
  return CUDA_SUCCESS;
}

CUresult RequireDevice(CUdevice dev, const char* fn) {
  if (dev != 0) return Misuse(CUDA_ERROR_INVALID_DEVICE, "%s on device %d", fn, dev);
  return CUDA_SUCCESS;
}

// True when [ptr, ptr + bytes) lies inside one live device allocation.
bool DeviceRangeValid(CUdeviceptr ptr, uint64_t bytes) {
  const auto& allocs = S().device_allocations;
  auto it = allocs.upper_bound(static_cast<uintptr_t>(ptr));
  if (it == allocs.begin()) return false;
  --it;
  uint64_t offset = ptr - it->first;
  return offset <= it->second && bytes <= it->second - offset;
}

CUresult CheckDeviceRange(CUdeviceptr ptr, uint64_t bytes, const char* fn) {
  if (!DeviceRangeValid(ptr, bytes)) {
    return Misuse(CUDA_ERROR_INVALID_VALUE,
                  "%s: device range [0x%llx, +%llu) is not inside a live allocation", fn,
                  static_cast<unsigned long long>(ptr), static_cast<unsigned long long>(bytes));
  }
  return CUDA_SUCCESS;
}

CUresult CheckStream(CUstream stream, const char* fn) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
    return CUDA_SUCCESS;
  }
  if (S().streams.count(reinterpret_cast<FakeStream*>(stream)) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "%s: unknown stream %p", fn,
                  static_cast<void*>(stream));
  }
  return CUDA_SUCCESS;
}

FakeEvent* FindEvent(CUevent event) {
  auto* e = reinterpret_cast<FakeEvent*>(event);
  return S().events.count(e) ? e : nullptr;
}

FakeFunction* FindFunction(CUfunction function) {
  auto it = S().functions.find(reinterpret_cast<FakeFunction*>(function));
  return it == S().functions.end() ? nullptr : it->second.get();
}

// Blocks while fake_cuda_set_hold(1) is in force (bounded, counted on expiry).
void WaitWhileHeld(Lock& lock) {
  State& s = S();
  if (!s.hold) return;
  if (!s.hold_changed.wait_for(lock, kHoldLimit, [&] { return !s.hold; })) {
    std::fprintf(stderr, "fake cuda: a synchronisation waited %llds for the hold; giving up\n",
                 static_cast<long long>(kHoldLimit.count()));
    ++s.stats.hold_timeouts;
  }
}

// ---------------------------------------------------------------------------
// Initialisation, version, errors
// ---------------------------------------------------------------------------

CUresult FakeInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CurrentMode() == Mode::kNoDevice) return CUDA_ERROR_NO_DEVICE;
  Lock lock(S().mu);
  if (!S().initialized) {
    S().initialized = true;
    S().capacity = MemoryCapacity();
  }
  return CUDA_SUCCESS;
}

CUresult fake_cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = CurrentMode() == Mode::kOld ? 11080 : 13000;
  return CUDA_SUCCESS;
}

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX",
     "a PTX JIT compilation failed"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT",
     "the launch timed out and was terminated"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
     "too many blocks in cooperative launch"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* FindError(CUresult code) {
  for (const ErrorText& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

CUresult fake_cuGetErrorName(CUresult error, const char** out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = FindError(error);
  *out = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult fake_cuGetErrorString(CUresult error, const char** out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = FindError(error);
  *out = e ? e->text : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------

CUresult fake_cuDeviceGetCount(int* count) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDeviceGetCount")) return r;
  if (count == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetCount: NULL count");
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGet(CUdevice* device, int ordinal) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDeviceGet")) return r;
  if (device == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGet: NULL device");
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetName(char* name, int len, CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDeviceGetName")) return r;
  if (CUresult r = RequireDevice(dev, "cuDeviceGetName")) return r;
  if (name == nullptr || len <= 0) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetName: NULL name or len %d", len);
  }
  std::snprintf(name, static_cast<size_t>(len), "%s", kDeviceName);
  return CUDA_SUCCESS;
}

int DeviceAttribute(CUdevice_attribute attribute) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return kMaxThreadsPerBlock;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return kMaxBlockDim[0];
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return kMaxBlockDim[1];
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return kMaxBlockDim[2];
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return kMaxGridDim[0];
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return kMaxGridDim[1];
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return kMaxGridDim[2];
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return kSharedBytesPerBlock;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return kSharedBytesPerBlock;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 2 * kSharedBytesPerBlock;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return kMultiprocessors;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return kMaxThreadsPerMultiprocessor;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 2;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 50 * 1024 * 1024;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    default: return 0;
  }
}

CUresult fake_cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDeviceGetAttribute")) return r;
  if (CUresult r = RequireDevice(dev, "cuDeviceGetAttribute")) return r;
  if (value == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetAttribute: NULL");
  *value = DeviceAttribute(attribute);
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDeviceTotalMem")) return r;
  if (CUresult r = RequireDevice(dev, "cuDeviceTotalMem")) return r;
  if (bytes == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceTotalMem: NULL");
  *bytes = S().capacity;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Contexts
// ---------------------------------------------------------------------------

CUresult fake_cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDevicePrimaryCtxRetain")) return r;
  if (CUresult r = RequireDevice(dev, "cuDevicePrimaryCtxRetain")) return r;
  if (context == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDevicePrimaryCtxRetain: NULL");
  ++S().primary_retains;
  *context = reinterpret_cast<CUcontext>(&S().primary);
  return CUDA_SUCCESS;
}

CUresult fake_cuDevicePrimaryCtxRelease(CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDevicePrimaryCtxRelease")) return r;
  if (CUresult r = RequireDevice(dev, "cuDevicePrimaryCtxRelease")) return r;
  if (S().primary_retains <= 0) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "cuDevicePrimaryCtxRelease without a retain");
  }
  --S().primary_retains;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxGetCurrent(CUcontext* context) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuCtxGetCurrent")) return r;
  if (context == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuCtxGetCurrent: NULL");
  *context = current_context;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxSetCurrent(CUcontext context) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuCtxSetCurrent")) return r;
  if (context != nullptr && context != reinterpret_cast<CUcontext>(&S().primary)) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "cuCtxSetCurrent: unknown context %p",
                  static_cast<void*>(context));
  }
  current_context = context;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxSynchronize() {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuCtxSynchronize")) return r;
  WaitWhileHeld(lock);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

CUresult fake_cuMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemGetInfo")) return r;
  if (free_bytes == nullptr || total_bytes == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemGetInfo: NULL");
  }
  *total_bytes = S().capacity;
  *free_bytes = S().capacity - std::min<uint64_t>(S().capacity, S().device_bytes);
  return CUDA_SUCCESS;
}

CUresult fake_cuMemAlloc(CUdeviceptr* ptr, size_t bytes) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemAlloc")) return r;
  if (ptr == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc: NULL dptr");
  if (bytes == 0) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes");
  State& s = S();
  if (bytes > s.capacity - std::min<uint64_t>(s.capacity, s.device_bytes)) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  void* memory = nullptr;
  size_t rounded = (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
  if (posix_memalign(&memory, kDeviceAlignment, rounded) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(memory, kFreshMemoryPattern, rounded);
  s.device_allocations[reinterpret_cast<uintptr_t>(memory)] = bytes;
  s.device_bytes += bytes;
  *ptr = reinterpret_cast<CUdeviceptr>(memory);
  return CUDA_SUCCESS;
}

CUresult fake_cuMemFree(CUdeviceptr ptr) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemFree")) return r;
  State& s = S();
  auto it = s.device_allocations.find(static_cast<uintptr_t>(ptr));
  if (it == s.device_allocations.end()) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemFree(0x%llx): not a live allocation",
                  static_cast<unsigned long long>(ptr));
  }
  s.device_bytes -= it->second;
  std::free(reinterpret_cast<void*>(it->first));
  s.device_allocations.erase(it);
  return CUDA_SUCCESS;
}

CUresult fake_cuMemHostAlloc(void** ptr, size_t bytes, unsigned int flags) {
  (void)flags;
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemHostAlloc")) return r;
  if (ptr == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemHostAlloc: NULL pp");
  if (bytes == 0) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemHostAlloc of 0 bytes");
  void* memory = nullptr;
  if (posix_memalign(&memory, 4096, bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(memory, kFreshMemoryPattern, bytes);
  S().pinned_allocations[reinterpret_cast<uintptr_t>(memory)] = bytes;
  S().pinned_bytes += bytes;
  *ptr = memory;
  return CUDA_SUCCESS;
}

CUresult fake_cuMemFreeHost(void* ptr) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemFreeHost")) return r;
  State& s = S();
  auto it = s.pinned_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.pinned_allocations.end()) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemFreeHost(%p): not a live pinned allocation",
                  ptr);
  }
  s.pinned_bytes -= it->second;
  std::free(ptr);
  s.pinned_allocations.erase(it);
  return CUDA_SUCCESS;
}

CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemcpyHtoDAsync")) return r;
  if (CUresult r = CheckStream(stream, "cuMemcpyHtoDAsync")) return r;
  if (CUresult r = CheckDeviceRange(dst, bytes, "cuMemcpyHtoDAsync")) return r;
  if (bytes > 0 && src == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemcpyHtoDAsync: NULL src");
  if (bytes > 0) std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  ++S().stats.memcpy_htod;
  return CUDA_SUCCESS;
}

CUresult fake_cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemcpyDtoHAsync")) return r;
  if (CUresult r = CheckStream(stream, "cuMemcpyDtoHAsync")) return r;
  if (CUresult r = CheckDeviceRange(src, bytes, "cuMemcpyDtoHAsync")) return r;
  if (bytes > 0 && dst == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemcpyDtoHAsync: NULL dst");
  if (bytes > 0) std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  ++S().stats.memcpy_dtoh;
  return CUDA_SUCCESS;
}

CUresult fake_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemsetD8Async")) return r;
  if (CUresult r = CheckStream(stream, "cuMemsetD8Async")) return r;
  if (CUresult r = CheckDeviceRange(dst, bytes, "cuMemsetD8Async")) return r;
  if (bytes > 0) std::memset(reinterpret_cast<void*>(dst), value, bytes);
  ++S().stats.memsets;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Modules and functions
// ---------------------------------------------------------------------------

// Collects the names after every ".entry"; a name ends at '(' or whitespace.
std::vector<std::string> PtxEntryNames(const char* text, size_t length) {
  std::vector<std::string> names;
  static constexpr char kKeyword[] = ".entry";
  const std::string_view ptx(text, length);
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  for (size_t at = ptx.find(kKeyword); at != std::string_view::npos;
       at = ptx.find(kKeyword, at)) {
    size_t p = at + sizeof(kKeyword) - 1;
    at = p;
    if (p >= ptx.size() || !is_space(ptx[p])) continue;  // e.g. ".entryfoo"
    while (p < ptx.size() && is_space(ptx[p])) ++p;
    size_t begin = p;
    while (p < ptx.size() && ptx[p] != '(' && !is_space(ptx[p])) ++p;
    if (p > begin) names.emplace_back(ptx.substr(begin, p - begin));
  }
  return names;
}

template <typename T>
T ReadAt(const unsigned char* base, uint64_t offset) {
  T value;
  std::memcpy(&value, base + offset, sizeof(T));
  return value;
}

// Compares byte by byte, stopping at the first difference, so a short
// NUL-terminated PTX string is never read past its end.
bool StartsWith(const unsigned char* image, const unsigned char* magic, size_t length) {
  for (size_t i = 0; i < length; ++i) {
    if (image[i] != magic[i]) return false;
  }
  return true;
}

bool IsElf(const unsigned char* image) {
  static constexpr unsigned char kElfMagic[] = {0x7F, 'E', 'L', 'F'};
  return StartsWith(image, kElfMagic, sizeof(kElfMagic));
}

bool IsFatbin(const unsigned char* image) {
  static constexpr unsigned char kFatbinMagic[] = {0x50, 0xED, 0x55, 0xBA};  // 0xBA55ED50
  return StartsWith(image, kFatbinMagic, sizeof(kFatbinMagic));
}

// Kernel entries of a cubin: FUNC symbols marked STO_CUDA_ENTRY (0x10).
// The image is trusted to be a well-formed 64-bit little-endian ELF.
std::vector<std::string> CubinEntryNames(const unsigned char* elf) {
  std::vector<std::string> names;
  if (!IsElf(elf) || elf[4] != 2 /* ELFCLASS64 */ || elf[5] != 1 /* little endian */) {
    return names;
  }
  const uint64_t section_offset = ReadAt<uint64_t>(elf, 0x28);
  const uint16_t section_size = ReadAt<uint16_t>(elf, 0x3A);
  const uint16_t section_count = ReadAt<uint16_t>(elf, 0x3C);
  auto section = [&](uint32_t i) { return section_offset + uint64_t{i} * section_size; };
  for (uint32_t i = 0; i < section_count; ++i) {
    if (ReadAt<uint32_t>(elf, section(i) + 0x04) != 2 /* SHT_SYMTAB */) continue;
    const uint64_t symbols = ReadAt<uint64_t>(elf, section(i) + 0x18);
    const uint64_t symbols_size = ReadAt<uint64_t>(elf, section(i) + 0x20);
    const uint32_t strings_index = ReadAt<uint32_t>(elf, section(i) + 0x28);
    const uint64_t entry_size = ReadAt<uint64_t>(elf, section(i) + 0x38);
    const uint64_t strings = ReadAt<uint64_t>(elf, section(strings_index) + 0x18);
    if (entry_size == 0) continue;
    for (uint64_t at = symbols; at + entry_size <= symbols + symbols_size; at += entry_size) {
      const uint32_t name = ReadAt<uint32_t>(elf, at);
      const uint8_t info = elf[at + 4];
      const uint8_t other = elf[at + 5];
      if ((info & 0xF) == 2 /* STT_FUNC */ && (other & 0x10) != 0) {
        names.emplace_back(reinterpret_cast<const char*>(elf + strings + name));
      }
    }
  }
  return names;
}

// A fatbin holds cubins and PTX; collect the entries of every uncompressed one.
std::vector<std::string> FatbinEntryNames(const unsigned char* fatbin) {
  std::vector<std::string> names;
  const uint16_t header_size = ReadAt<uint16_t>(fatbin, 6);
  const uint64_t fat_size = ReadAt<uint64_t>(fatbin, 8);
  for (uint64_t at = header_size; at + 16 <= header_size + fat_size;) {
    const uint16_t kind = ReadAt<uint16_t>(fatbin, at);
    const uint32_t entry_header = ReadAt<uint32_t>(fatbin, at + 4);
    const uint64_t payload_size = ReadAt<uint64_t>(fatbin, at + 8);
    if (entry_header == 0) break;
    const unsigned char* payload = fatbin + at + entry_header;
    std::vector<std::string> found;
    if (kind == 2 && IsElf(payload)) found = CubinEntryNames(payload);
    if (kind == 1) {
      found = PtxEntryNames(reinterpret_cast<const char*>(payload),
                            static_cast<size_t>(payload_size));
    }
    names.insert(names.end(), found.begin(), found.end());
    at += entry_header + payload_size;
  }
  return names;
}

// The kernel entries of a module image: PTX text, a cubin or a fatbin.
std::vector<std::string> ModuleEntryNames(const void* image) {
  const auto* bytes = static_cast<const unsigned char*>(image);
  if (IsElf(bytes)) return CubinEntryNames(bytes);
  if (IsFatbin(bytes)) return FatbinEntryNames(bytes);
  const char* text = static_cast<const char*>(image);
  return PtxEntryNames(text, std::strlen(text));
}

void WriteJitErrorLog(unsigned int count, const CUjit_option* options, void** values,
                      const char* message) {
  if (options == nullptr || values == nullptr) return;
  char* buffer = nullptr;
  size_t capacity = 0;
  int size_index = -1;
  for (unsigned int i = 0; i < count; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER) buffer = static_cast<char*>(values[i]);
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
      capacity = static_cast<size_t>(reinterpret_cast<uintptr_t>(values[i]));
      size_index = static_cast<int>(i);
    }
  }
  if (buffer == nullptr || capacity == 0) return;
  size_t written = std::min(capacity - 1, std::strlen(message));
  std::memcpy(buffer, message, written);
  buffer[written] = '\0';
  // Like the real driver, report the bytes used through the size option.
  values[size_index] = reinterpret_cast<void*>(static_cast<uintptr_t>(written + 1));
}

CUresult fake_cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int count,
                                 CUjit_option* options, void** values) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuModuleLoadDataEx")) return r;
  if (module == nullptr || image == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadDataEx: NULL module or image");
  }
  if (count > 0 && (options == nullptr || values == nullptr)) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadDataEx: %u options but NULL arrays",
                  count);
  }
  std::vector<std::string> names = ModuleEntryNames(image);
  if (names.empty()) {
    WriteJitErrorLog(count, options, values, "fake ptxas: no .entry found");
    return CUDA_ERROR_INVALID_PTX;
  }
  auto* m = new FakeModule{std::move(names)};
  S().modules.insert(m);
  ++S().stats.module_loads;
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

CUresult fake_cuModuleUnload(CUmodule module) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuModuleUnload")) return r;
  State& s = S();
  auto* m = reinterpret_cast<FakeModule*>(module);
  if (s.modules.erase(m) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuModuleUnload: unknown module %p",
                  static_cast<void*>(module));
  }
  for (auto it = s.functions.begin(); it != s.functions.end();) {
    it = it->second->module == m ? s.functions.erase(it) : std::next(it);
  }
  delete m;
  return CUDA_SUCCESS;
}

CUresult fake_cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuModuleGetFunction")) return r;
  auto* m = reinterpret_cast<FakeModule*>(module);
  if (S().modules.count(m) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuModuleGetFunction: unknown module %p",
                  static_cast<void*>(module));
  }
  if (function == nullptr || name == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuModuleGetFunction: NULL function or name");
  }
  if (std::find(m->entries.begin(), m->entries.end(), name) == m->entries.end()) {
    return CUDA_ERROR_NOT_FOUND;
  }
  auto f = std::make_unique<FakeFunction>();
  f->module = m;
  f->name = name;
  FakeFunction* raw = f.get();
  S().functions.emplace(raw, std::move(f));
  *function = reinterpret_cast<CUfunction>(raw);
  return CUDA_SUCCESS;
}

CUresult fake_cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction function) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuFuncGetAttribute")) return r;
  FakeFunction* f = FindFunction(function);
  if (f == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuFuncGetAttribute: unknown function");
  if (value == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuFuncGetAttribute: NULL");
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = kMaxThreadsPerBlock; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *value = f->max_dynamic_shared_bytes;
      break;
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}

CUresult fake_cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuFuncSetAttribute")) return r;
  FakeFunction* f = FindFunction(function);
  if (f == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuFuncSetAttribute: unknown function");
  if (attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (value < 0 || value > kSharedBytesPerBlock) return CUDA_ERROR_INVALID_VALUE;
    f->max_dynamic_shared_bytes = value;
  }
  return CUDA_SUCCESS;
}

int MaxActiveBlocksPerMultiprocessor(int block_size, size_t dynamic_shared_bytes) {
  if (dynamic_shared_bytes > static_cast<size_t>(kSharedBytesPerBlock)) return 0;
  return kMaxThreadsPerMultiprocessor / block_size;
}

CUresult fake_cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction function,
                                                          int block_size, size_t shared_bytes) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuOccupancyMaxActiveBlocksPerMultiprocessor")) return r;
  if (FindFunction(function) == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuOccupancyMaxActiveBlocksPerMultiprocessor: "
                  "unknown function");
  }
  if (blocks == nullptr || block_size <= 0) {
    return Misuse(CUDA_ERROR_INVALID_VALUE,
                  "cuOccupancyMaxActiveBlocksPerMultiprocessor: NULL or block size %d",
                  block_size);
  }
  *blocks = MaxActiveBlocksPerMultiprocessor(block_size, shared_bytes);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Kernels run on the host
// ---------------------------------------------------------------------------

// Reads kernel arguments either from kernelParams (one pointer per argument)
// or from an `extra` CU_LAUNCH_PARAM_BUFFER_POINTER block (naturally aligned).
class KernelArgs {
 public:
  KernelArgs(void** params, void** extra) : params_(params) {
    if (params_ == nullptr && extra != nullptr) {
      for (void** e = extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
        if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer_ = static_cast<const char*>(e[1]);
        if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
          buffer_size_ = *static_cast<const size_t*>(e[1]);
        }
      }
    }
  }

  bool present() const { return params_ != nullptr || buffer_ != nullptr; }

  // Reads argument `index` of type T, given the types of those before it
  // (`offset_sizes` are their sizes, for the packed-buffer layout).
  template <typename T>
  bool Read(size_t index, std::initializer_list<size_t> previous_sizes, T* out) const {
    if (params_ != nullptr) {
      if (params_[index] == nullptr) return false;
      std::memcpy(out, params_[index], sizeof(T));
      return true;
    }
    size_t offset = 0;
    for (size_t size : previous_sizes) offset = (offset + size - 1) / size * size + size;
    offset = (offset + sizeof(T) - 1) / sizeof(T) * sizeof(T);
    if (buffer_ == nullptr || offset + sizeof(T) > buffer_size_) return false;
    std::memcpy(out, buffer_ + offset, sizeof(T));
    return true;
  }

 private:
  void** params_ = nullptr;
  const char* buffer_ = nullptr;
  size_t buffer_size_ = 0;
};

// Threads in the launch; element i runs when i < min(threads, n).
uint64_t ElementsToRun(uint64_t threads, uint64_t n) { return std::min(threads, n); }

template <typename T>
T* DevicePointer(CUdeviceptr p) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(p));
}

CUresult CheckKernelRange(const char* kernel, const char* arg, CUdeviceptr ptr, uint64_t bytes) {
  if (!DeviceRangeValid(ptr, bytes)) {
    return Misuse(CUDA_ERROR_ILLEGAL_ADDRESS,
                  "%s: argument %s [0x%llx, +%llu bytes) is outside every live allocation",
                  kernel, arg, static_cast<unsigned long long>(ptr),
                  static_cast<unsigned long long>(bytes));
  }
  return CUDA_SUCCESS;
}

CUresult BadArgs(const char* kernel) {
  return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: kernel arguments missing", kernel);
}

// (const u32* a, const u32* b, u32* out, const u32* params): out[i] = a[i] + b[i], i < n
CUresult RunAddU32(const char* name, const KernelArgs& args, uint64_t threads) {
  CUdeviceptr a, b, out, params;
  if (!args.Read(0, {}, &a) || !args.Read(1, {8}, &b) || !args.Read(2, {8, 8}, &out) ||
      !args.Read(3, {8, 8, 8}, &params)) {
    return BadArgs(name);
  }
  if (CUresult r = CheckKernelRange(name, "params", params, 4)) return r;
  uint64_t n = ElementsToRun(threads, *DevicePointer<uint32_t>(params));
  if (CUresult r = CheckKernelRange(name, "a", a, n * 4)) return r;
  if (CUresult r = CheckKernelRange(name, "b", b, n * 4)) return r;
  if (CUresult r = CheckKernelRange(name, "out", out, n * 4)) return r;
  const uint32_t* pa = DevicePointer<uint32_t>(a);
  const uint32_t* pb = DevicePointer<uint32_t>(b);
  uint32_t* pout = DevicePointer<uint32_t>(out);
  for (uint64_t i = 0; i < n; ++i) pout[i] = pa[i] + pb[i];
  return CUDA_SUCCESS;
}

// (u32* data, const u32* params): data[i] += 1, i < n
CUresult RunIncU32(const char* name, const KernelArgs& args, uint64_t threads) {
  CUdeviceptr data, params;
  if (!args.Read(0, {}, &data) || !args.Read(1, {8}, &params)) return BadArgs(name);
  if (CUresult r = CheckKernelRange(name, "params", params, 4)) return r;
  uint64_t n = ElementsToRun(threads, *DevicePointer<uint32_t>(params));
  if (CUresult r = CheckKernelRange(name, "data", data, n * 4)) return r;
  uint32_t* p = DevicePointer<uint32_t>(data);
  for (uint64_t i = 0; i < n; ++i) p[i] += 1;
  return CUDA_SUCCESS;
}

// (float a, const float* x, float* y, unsigned long long n): y[i] = a * x[i] + y[i]
CUresult RunSaxpyF32(const char* name, const KernelArgs& args, uint64_t threads) {
  float a;
  CUdeviceptr x, y;
  unsigned long long count;
  if (!args.Read(0, {}, &a) || !args.Read(1, {4}, &x) || !args.Read(2, {4, 8}, &y) ||
      !args.Read(3, {4, 8, 8}, &count)) {
    return BadArgs(name);
  }
  uint64_t n = ElementsToRun(threads, count);
  if (CUresult r = CheckKernelRange(name, "x", x, n * 4)) return r;
  if (CUresult r = CheckKernelRange(name, "y", y, n * 4)) return r;
  const float* px = DevicePointer<float>(x);
  float* py = DevicePointer<float>(y);
  for (uint64_t i = 0; i < n; ++i) py[i] = a * px[i] + py[i];
  return CUDA_SUCCESS;
}

// (u64 a, const void* b, u32 c, const u32* d): records a, b, c and d[0].
CUresult RunProbeParams(const char* name, const KernelArgs& args) {
  uint64_t a;
  CUdeviceptr b, d;
  uint32_t c;
  if (!args.Read(0, {}, &a) || !args.Read(1, {8}, &b) || !args.Read(2, {8, 8}, &c) ||
      !args.Read(3, {8, 8, 4}, &d)) {
    return BadArgs(name);
  }
  if (CUresult r = CheckKernelRange(name, "d", d, 4)) return r;
  fake_cuda_stats& st = S().stats;
  st.probe_a = a;
  st.probe_b = b;
  st.probe_c = c;
  st.probe_d0 = *DevicePointer<uint32_t>(d);
  ++st.probe_launches;
  return CUDA_SUCCESS;
}

CUresult RunKernel(const std::string& name, const KernelArgs& args, uint64_t threads) {
  if (name == "vyre_test_add_u32" || name == "vyre_selftest_add_u32") {
    return RunAddU32(name.c_str(), args, threads);
  }
  if (name == "vyre_test_inc_u32") return RunIncU32(name.c_str(), args, threads);
  if (name == "vyre_test_saxpy_f32") return RunSaxpyF32(name.c_str(), args, threads);
  if (name == "vyre_test_probe_params") return RunProbeParams(name.c_str(), args);
  return CUDA_SUCCESS;  // other kernels do nothing
}

struct LaunchShape {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
};

CUresult CheckLaunchShape(const FakeFunction& f, const LaunchShape& shape) {
  for (int d = 0; d < 3; ++d) {
    if (shape.grid[d] == 0 || shape.block[d] == 0) return CUDA_ERROR_INVALID_VALUE;
    if (shape.grid[d] > static_cast<unsigned>(kMaxGridDim[d])) return CUDA_ERROR_INVALID_VALUE;
    if (shape.block[d] > static_cast<unsigned>(kMaxBlockDim[d])) return CUDA_ERROR_INVALID_VALUE;
  }
  uint64_t threads = uint64_t{shape.block[0]} * shape.block[1] * shape.block[2];
  if (threads > static_cast<uint64_t>(kMaxThreadsPerBlock)) return CUDA_ERROR_INVALID_VALUE;
  if (shape.shared_bytes > static_cast<unsigned>(f.max_dynamic_shared_bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult Launch(const char* fn, CUfunction function, const LaunchShape& shape, CUstream stream,
                void** params, void** extra, bool cooperative) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  if (CUresult r = CheckStream(stream, fn)) return r;
  FakeFunction* f = FindFunction(function);
  if (f == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "%s: unknown function", fn);
  if (CUresult r = CheckLaunchShape(*f, shape)) {
    return Misuse(r, "%s(%s): grid %ux%ux%u block %ux%ux%u shared %u exceeds device limits", fn,
                  f->name.c_str(), shape.grid[0], shape.grid[1], shape.grid[2], shape.block[0],
                  shape.block[1], shape.block[2], shape.shared_bytes);
  }
  uint64_t block_threads = uint64_t{shape.block[0]} * shape.block[1] * shape.block[2];
  uint64_t blocks = uint64_t{shape.grid[0]} * shape.grid[1] * shape.grid[2];
  if (cooperative) {
    uint64_t resident = uint64_t(MaxActiveBlocksPerMultiprocessor(int(block_threads),
                                                                  shape.shared_bytes)) *
                        kMultiprocessors;
    if (blocks > resident) return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  }
  KernelArgs args(params, extra);
  if (!args.present()) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: no kernel parameters", fn);
  fake_cuda_stats& st = S().stats;
  ++st.kernel_launches;
  if (cooperative) ++st.cooperative_launches;
  std::copy(shape.grid, shape.grid + 3, st.last_grid);
  std::copy(shape.block, shape.block + 3, st.last_block);
  st.last_shared_bytes = shape.shared_bytes;
  std::snprintf(st.last_kernel, sizeof(st.last_kernel), "%s", f->name.c_str());
  return RunKernel(f->name, args, blocks * block_threads);
}

CUresult fake_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared, CUstream stream,
                             void** params, void** extra) {
  return Launch("cuLaunchKernel", f, LaunchShape{{gx, gy, gz}, {bx, by, bz}, shared}, stream,
                params, extra, false);
}

CUresult fake_cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                        CUstream stream, void** params) {
  return Launch("cuLaunchCooperativeKernel", f,
                LaunchShape{{gx, gy, gz}, {bx, by, bz}, shared}, stream, params, nullptr, true);
}

// ---------------------------------------------------------------------------
// Streams and events
// ---------------------------------------------------------------------------

CUresult fake_cuStreamCreate(CUstream* stream, unsigned int flags) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamCreate")) return r;
  if (stream == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuStreamCreate: NULL");
  auto* s = new FakeStream{flags};
  S().streams.insert(s);
  *stream = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamDestroy(CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamDestroy")) return r;
  auto* s = reinterpret_cast<FakeStream*>(stream);
  if (S().streams.erase(s) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy: unknown stream %p",
                  static_cast<void*>(stream));
  }
  delete s;
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamSynchronize(CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamSynchronize")) return r;
  if (CUresult r = CheckStream(stream, "cuStreamSynchronize")) return r;
  WaitWhileHeld(lock);
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamQuery(CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamQuery")) return r;
  if (CUresult r = CheckStream(stream, "cuStreamQuery")) return r;
  return S().hold ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult fake_cuEventCreate(CUevent* event, unsigned int flags) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventCreate")) return r;
  if (event == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuEventCreate: NULL");
  auto* e = new FakeEvent{};
  e->flags = flags;
  S().events.insert(e);
  *event = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}

CUresult fake_cuEventDestroy(CUevent event) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventDestroy")) return r;
  auto* e = reinterpret_cast<FakeEvent*>(event);
  if (S().events.erase(e) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventDestroy: unknown event %p",
                  static_cast<void*>(event));
  }
  delete e;
  return CUDA_SUCCESS;
}

CUresult fake_cuEventRecord(CUevent event, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventRecord")) return r;
  if (CUresult r = CheckStream(stream, "cuEventRecord")) return r;
  FakeEvent* e = FindEvent(event);
  if (e == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventRecord: unknown event");
  e->recorded = true;
  e->time = std::chrono::steady_clock::now();
  return CUDA_SUCCESS;
}

CUresult fake_cuEventSynchronize(CUevent event) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventSynchronize")) return r;
  if (FindEvent(event) == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventSynchronize: unknown event");
  }
  WaitWhileHeld(lock);
  return CUDA_SUCCESS;
}

CUresult fake_cuEventQuery(CUevent event) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventQuery")) return r;
  if (FindEvent(event) == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventQuery: unknown event");
  }
  return S().hold ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult fake_cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventElapsedTime")) return r;
  FakeEvent* s = FindEvent(start);
  FakeEvent* e = FindEvent(end);
  if (s == nullptr || e == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime: unknown event");
  }
  if (ms == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuEventElapsedTime: NULL");
  if ((s->flags | e->flags) & CU_EVENT_DISABLE_TIMING) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE,
                  "cuEventElapsedTime on an event created with CU_EVENT_DISABLE_TIMING");
  }
  if (!s->recorded || !e->recorded) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime on an unrecorded event");
  }
  if (S().hold) return CUDA_ERROR_NOT_READY;
  *ms = std::chrono::duration<float, std::milli>(e->time - s->time).count();
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Entry-point lookup
// ---------------------------------------------------------------------------

struct ProcEntry {
  const char* name;
  void* function;
};

#define FAKE_PROC(name) {#name, reinterpret_cast<void*>(&fake_##name)}
const ProcEntry kProcs[] = {
    {"cuInit", reinterpret_cast<void*>(&FakeInit)},
    FAKE_PROC(cuDriverGetVersion),
    FAKE_PROC(cuGetErrorName),
    FAKE_PROC(cuGetErrorString),
    FAKE_PROC(cuDeviceGetCount),
    FAKE_PROC(cuDeviceGet),
    FAKE_PROC(cuDeviceGetName),
    FAKE_PROC(cuDeviceGetAttribute),
    FAKE_PROC(cuDeviceTotalMem),
    FAKE_PROC(cuDevicePrimaryCtxRetain),
    FAKE_PROC(cuDevicePrimaryCtxRelease),
    FAKE_PROC(cuCtxGetCurrent),
    FAKE_PROC(cuCtxSetCurrent),
    FAKE_PROC(cuCtxSynchronize),
    FAKE_PROC(cuMemGetInfo),
    FAKE_PROC(cuMemAlloc),
    FAKE_PROC(cuMemFree),
    FAKE_PROC(cuMemHostAlloc),
    FAKE_PROC(cuMemFreeHost),
    FAKE_PROC(cuMemcpyHtoDAsync),
    FAKE_PROC(cuMemcpyDtoHAsync),
    FAKE_PROC(cuMemsetD8Async),
    FAKE_PROC(cuModuleLoadDataEx),
    FAKE_PROC(cuModuleUnload),
    FAKE_PROC(cuModuleGetFunction),
    FAKE_PROC(cuFuncGetAttribute),
    FAKE_PROC(cuFuncSetAttribute),
    FAKE_PROC(cuOccupancyMaxActiveBlocksPerMultiprocessor),
    FAKE_PROC(cuLaunchKernel),
    FAKE_PROC(cuLaunchCooperativeKernel),
    FAKE_PROC(cuStreamCreate),
    FAKE_PROC(cuStreamDestroy),
    FAKE_PROC(cuStreamSynchronize),
    FAKE_PROC(cuStreamQuery),
    FAKE_PROC(cuEventCreate),
    FAKE_PROC(cuEventDestroy),
    FAKE_PROC(cuEventRecord),
    FAKE_PROC(cuEventSynchronize),
    FAKE_PROC(cuEventQuery),
    FAKE_PROC(cuEventElapsedTime),
};
#undef FAKE_PROC

}  // namespace

// ---------------------------------------------------------------------------
// Exports
// ---------------------------------------------------------------------------

FAKE_EXPORT CUresult cuInit(unsigned int flags) { return FakeInit(flags); }

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                         cuuint64_t flags,
                                         CUdriverProcAddressQueryResult* symbolStatus) {
  (void)cudaVersion;
  (void)flags;
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (const ProcEntry& entry : kProcs) {
    if (std::strcmp(entry.name, symbol) == 0) {
      *pfn = entry.function;
      if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  }
  *pfn = nullptr;
  if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

FAKE_EXPORT void fake_cuda_get_stats(fake_cuda_stats* out) {
  if (out == nullptr) return;
  Lock lock(S().mu);
  State& s = S();
  fake_cuda_stats st = s.stats;
  st.device_allocations_live = s.device_allocations.size();
  st.device_bytes_live = s.device_bytes;
  st.pinned_allocations_live = s.pinned_allocations.size();
  st.pinned_bytes_live = s.pinned_bytes;
  st.modules_live = s.modules.size();
  st.streams_live = s.streams.size();
  st.events_live = s.events.size();
  st.primary_context_retains = s.primary_retains;
  *out = st;
}

FAKE_EXPORT void fake_cuda_set_hold(int hold) {
  {
    Lock lock(S().mu);
    S().hold = hold != 0;
  }
  S().hold_changed.notify_all();
}
