// The fake driver's state and the checks every entry point makes: the
// device's environment, misuse reports, cuInit and the current context,
// device ranges, handle lookups and the hold.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "state.h"

namespace fake_driver {

Mode CurrentMode() {
  const char* mode = std::getenv("FAKE_CUDA_MODE");
  if (mode == nullptr || std::strcmp(mode, "") == 0 || std::strcmp(mode, "ok") == 0) {
    return Mode::kOk;
  }
  if (std::strcmp(mode, "no_device") == 0) return Mode::kNoDevice;
  if (std::strcmp(mode, "old") == 0) return Mode::kOld;
  if (std::strcmp(mode, "stub") == 0) return Mode::kStub;
  std::fprintf(stderr, "fake cuda: unknown FAKE_CUDA_MODE '%s', using 'ok'\n", mode);
  return Mode::kOk;
}

// FAKE_CUDA_INIT_RESULT, FAKE_CUDA_VERSION_RESULT, FAKE_CUDA_COUNT_RESULT:
// the CUresult cuInit, cuDriverGetVersion or cuDeviceGetCount returns
// instead of succeeding (unset or 0: they work).
CUresult EnvResult(const char* variable) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return CUDA_SUCCESS;
  return static_cast<CUresult>(std::strtol(text, nullptr, 0));
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

State& S() {
  static State* state = new State();  // never destroyed: engine teardown may run late
  return *state;
}

// Reports a call the real driver would reject and the engine should never make.
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
CUresult RequireContext(const char* fn, bool enqueue) {
  CUresult init = RequireInit(fn);
  if (init != CUDA_SUCCESS) return init;
  if (current_context == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "%s with no current context on this thread", fn);
  }
  const int device = DeviceOfContext(current_context);
  if (device < 0 || S().primary_retains[device] <= 0) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "%s with a current context that is not retained",
                  fn);
  }
  // After a fault the context refuses all work until it is reset. A latent
  // fault shows at the first call that is not an enqueue.
  State& s = S();
  if (s.latent != CUDA_SUCCESS && !enqueue) {
    s.sticky = s.latent;
    s.latent = CUDA_SUCCESS;
  }
  return s.sticky;
}

CUresult RequireDevice(CUdevice dev, const char* fn) {
  if (dev < 0 || dev >= S().device_count) {
    return Misuse(CUDA_ERROR_INVALID_DEVICE, "%s on device %d", fn, dev);
  }
  return CUDA_SUCCESS;
}

CUcontext PrimaryOf(int device) { return reinterpret_cast<CUcontext>(&S().primaries[device]); }

int DeviceOfContext(CUcontext context) {
  for (int d = 0; d < S().device_count; ++d) {
    if (context == PrimaryOf(d)) return d;
  }
  return -1;
}

int CurrentDevice() {
  const int device = DeviceOfContext(current_context);
  return device < 0 ? 0 : device;
}

int DeviceOfPointer(CUdeviceptr ptr) {
  const auto& allocs = S().device_allocations;
  auto it = allocs.upper_bound(static_cast<uintptr_t>(ptr));
  if (it == allocs.begin()) return -1;
  --it;
  if (ptr - it->first >= std::max<size_t>(it->second, 1)) return -1;
  auto device = S().allocation_devices.find(it->first);
  return device == S().allocation_devices.end() ? -1 : device->second;
}

bool DeviceMayAccess(int device, int owner) {
  return device == owner || S().peer_enabled.count({device, owner}) > 0;
}

CUresult CheckStreamDevice(CUstream stream, const char* fn) {
  auto* s = reinterpret_cast<FakeStream*>(stream);
  if (S().streams.count(s) == 0 || s->device == CurrentDevice()) return CUDA_SUCCESS;
  return Misuse(CUDA_ERROR_INVALID_HANDLE,
                "%s: the stream belongs to device %d's context, but device %d's is current", fn,
                s->device, CurrentDevice());
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

}  // namespace fake_driver
