// RAII owners for CUDA driver resources. Each resource has exactly one owner;
// destructors never throw and never abort: a failed release is logged, and
// reported by the destroy, free or release call that runs it
// (release_report.h).
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

// A release call that failed: logged (INFO after a device fault, else
// WARNING) and noted in this thread's ReleaseReport (release_report.h), so
// the destroy, free or release that runs it returns the error.
void LogReleaseFailure(const char* call, CUresult result);
// ScopedContext's failures to read or restore the caller's context.
void LogUnknownPrevious(CUresult result, CUcontext ours);
void LogRestoreFailure(CUresult result, CUcontext previous, CUcontext ours);

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

  explicit ScopedContext(CUcontext context, Purpose purpose = Purpose::kWork)
      : context_(context) {
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
      LogUnknownPrevious(r, context);
    }
    if (previous_ == context && !unknown_previous) return;
    r = Api().cuCtxSetCurrent(context);
    if (r != CUDA_SUCCESS && release) r = Api().cuCtxSetCurrent(context);
    if (r != CUDA_SUCCESS) {
      Fail(r, "cuCtxSetCurrent");
      // A release goes on regardless (its calls may then fail or leak), and
      // the release call reports it (release_report.h).
      if (release) LogReleaseFailure("cuCtxSetCurrent", r);
      return;
    }
    changed_ = !unknown_previous;
  }
  // Restores the caller's context; a failure (retried once) is logged, since
  // the caller's own CUDA calls on this thread would use the wrong context.
  ~ScopedContext() {
    if (!changed_) return;
    CUresult r = Api().cuCtxSetCurrent(previous_);
    if (r != CUDA_SUCCESS) r = Api().cuCtxSetCurrent(previous_);
    if (r != CUDA_SUCCESS) LogRestoreFailure(r, previous_, context_);
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

  CUcontext context_ = nullptr;
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
CUresult ReleaseIpcMapping(CUdeviceptr p);

inline constexpr char kStreamName[] = "cuStreamDestroy";
inline constexpr char kEventName[] = "cuEventDestroy";
inline constexpr char kModuleName[] = "cuModuleUnload";
inline constexpr char kDeviceMemoryName[] = "cuMemFree";
inline constexpr char kPinnedMemoryName[] = "cuMemFreeHost";
inline constexpr char kIpcMappingName[] = "cuIpcCloseMemHandle";

using StreamGuard = UniqueResource<CUstream, ReleaseStream, kStreamName>;
using EventGuard = UniqueResource<CUevent, ReleaseEvent, kEventName>;
using ModuleGuard = UniqueResource<CUmodule, ReleaseModule, kModuleName>;
using DeviceMemoryGuard = UniqueResource<CUdeviceptr, ReleaseDeviceMemory, kDeviceMemoryName>;
using PinnedMemoryGuard = UniqueResource<void*, ReleasePinnedMemory, kPinnedMemoryName>;
// Memory another process exported, mapped by cuIpcOpenMemHandle.
using IpcMappingGuard = UniqueResource<CUdeviceptr, ReleaseIpcMapping, kIpcMappingName>;

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
