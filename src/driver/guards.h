// RAII owners for CUDA driver resources. Each resource has exactly one owner;
// destructors never throw and never abort: a failed release is logged, since
// there is no caller left to report it to.
#ifndef VYRE_DRIVER_GUARDS_H_
#define VYRE_DRIVER_GUARDS_H_

#include <cuda.h>

#include <cstdint>
#include <utility>

#include "base/log.h"
#include "driver/cu_error.h"
#include "driver/device_faults.h"
#include "driver/driver_api.h"

namespace vyre::driver {

void LogReleaseFailure(const char* call, CUresult result);

// Makes `context` current on this thread for a scope and restores the
// previous one, so callers that use CUDA themselves on the same thread keep
// their own current context. Work on a context whose device faulted is
// refused before any driver call: status() is then VYRE_STATUS_DEVICE_FAULT
// with the Fix (release paths are never refused).
class ScopedContext {
 public:
  // Release paths (destructors) must not leak because one driver call failed
  // transiently, and have no caller to report to: they retry the binding once
  // and proceed even when the previous context could not be read.
  enum class Purpose { kWork, kRelease };

  explicit ScopedContext(CUcontext context, Purpose purpose = Purpose::kWork) {
    const bool release = purpose == Purpose::kRelease;
    // One relaxed load while no device is faulted.
    if (!release && AnyDeviceFaulted() && FindFault(context, &fault_)) return;
    bool unknown_previous = false;
    CUresult r = Api().cuCtxGetCurrent(&previous_);
    if (r != CUDA_SUCCESS) {
      previous_ = nullptr;
      if (!release) {
        Fail(r, "cuCtxGetCurrent");
        return;
      }
      // The previous context is unknown: bind ours and leave it bound, since
      // restoring a guess could unbind an enclosing scope's context.
      unknown_previous = true;
    }
    if (previous_ == context && !unknown_previous) return;
    r = Api().cuCtxSetCurrent(context);
    if (r != CUDA_SUCCESS && release) r = Api().cuCtxSetCurrent(context);
    if (r != CUDA_SUCCESS) {
      Fail(r, "cuCtxSetCurrent");
      return;
    }
    changed_ = !unknown_previous;
  }
  ~ScopedContext() {
    if (changed_) Api().cuCtxSetCurrent(previous_);
  }
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

  // Whether the context could be made current; paths that go on to call the
  // driver return this error. Release paths proceed regardless.
  absl::Status status(const char* what) const {
    if (fault_.cause != CUDA_SUCCESS) return FaultedContextError(what, fault_);
    if (result_ == CUDA_SUCCESS) return absl::OkStatus();
    return CuError(result_, what, call_);
  }

 private:
  void Fail(CUresult r, const char* call) {
    result_ = r;
    call_ = call;
  }

  CUcontext previous_ = nullptr;
  bool changed_ = false;
  CUresult result_ = CUDA_SUCCESS;
  const char* call_ = "";
  DeviceFault fault_;  // set when the context is recorded faulted
};

// A unique owner of one handle-like resource released by `Release(handle)`.
template <typename Handle, CUresult (*Release)(Handle), const char* Name>
class UniqueResource {
 public:
  UniqueResource() = default;
  explicit UniqueResource(Handle h) : handle_(h) {}
  ~UniqueResource() { reset(); }
  UniqueResource(UniqueResource&& other) noexcept : handle_(std::exchange(other.handle_, Handle{})) {}
  UniqueResource& operator=(UniqueResource&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, Handle{});
    }
    return *this;
  }
  UniqueResource(const UniqueResource&) = delete;
  UniqueResource& operator=(const UniqueResource&) = delete;

  Handle get() const { return handle_; }
  explicit operator bool() const { return handle_ != Handle{}; }
  Handle* out() {
    reset();
    return &handle_;
  }
  void reset() {
    if (handle_ != Handle{}) {
      CUresult r = Release(handle_);
      if (r != CUDA_SUCCESS) LogReleaseFailure(Name, r);
      handle_ = Handle{};
    }
  }

 private:
  Handle handle_{};
};

CUresult ReleaseStream(CUstream s);
CUresult ReleaseEvent(CUevent e);
CUresult ReleaseModule(CUmodule m);
CUresult ReleaseDeviceMemory(CUdeviceptr p);
CUresult ReleasePinnedMemory(void* p);

inline constexpr char kStreamName[] = "cuStreamDestroy";
inline constexpr char kEventName[] = "cuEventDestroy";
inline constexpr char kModuleName[] = "cuModuleUnload";
inline constexpr char kDeviceMemoryName[] = "cuMemFree";
inline constexpr char kPinnedMemoryName[] = "cuMemFreeHost";

using StreamGuard = UniqueResource<CUstream, ReleaseStream, kStreamName>;
using EventGuard = UniqueResource<CUevent, ReleaseEvent, kEventName>;
using ModuleGuard = UniqueResource<CUmodule, ReleaseModule, kModuleName>;
using DeviceMemoryGuard = UniqueResource<CUdeviceptr, ReleaseDeviceMemory, kDeviceMemoryName>;
using PinnedMemoryGuard = UniqueResource<void*, ReleasePinnedMemory, kPinnedMemoryName>;

// Holds a retained primary context; releases it when the last owner goes.
// The retain must come from RetainPrimaryContext (device_faults.h): the
// release goes through ReleasePrimaryContext, which resets the primary
// context after a device fault once no vyre context holds it.
class PrimaryContextGuard {
 public:
  PrimaryContextGuard() = default;
  // Takes ownership of one retain of `device`'s primary context.
  void Adopt(CUdevice device, CUcontext context) {
    device_ = device;
    context_ = context;
  }
  ~PrimaryContextGuard();
  PrimaryContextGuard(const PrimaryContextGuard&) = delete;
  PrimaryContextGuard& operator=(const PrimaryContextGuard&) = delete;
  CUcontext get() const { return context_; }
  CUdevice device() const { return device_; }

 private:
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
};

}  // namespace vyre::driver

#endif  // VYRE_DRIVER_GUARDS_H_
