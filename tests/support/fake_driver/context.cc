// The primary context: retain, release and reset (with the device faults
// it clears), the current context and cuCtxSynchronize.
//
// Device faults: fake_cuda_inject_fault(code) makes the next kernel launch
// (live, or a kernel node of a graph launch) fault. The launch itself returns
// success (the real fault is asynchronous) and runs nothing; from then on the
// device is sticky: every call that needs the context, and
// cuDevicePrimaryCtxRetain, returns `code` (cuCtxGetCurrent/SetCurrent,
// cuDevicePrimaryCtxRelease and the device queries still work), until
// cuDevicePrimaryCtxReset clears it and destroys every allocation, module,
// stream, event and graph still live, as the real reset does. A reset while
// a retain is held is counted as misuse: the engine must only reset a
// primary context none of its contexts holds.
// fake_cuda_inject_latent_fault(code) is the same, except that the fault
// shows later, as a real one usually does: calls that only enqueue work
// (copies, memsets, launches, event records, graph launches) still succeed
// (and drop their work) until the first other call (a synchronisation, a
// query, an allocation, ...), which returns `code` and makes it sticky.
#include <cstdlib>

#include "entry_points.h"
#include "state.h"

namespace fake_driver {

// ---------------------------------------------------------------------------
// Contexts
// ---------------------------------------------------------------------------

CUresult fake_cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDevicePrimaryCtxRetain")) return r;
  if (CUresult r = RequireDevice(dev, "cuDevicePrimaryCtxRetain")) return r;
  if (context == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDevicePrimaryCtxRetain: NULL");
  if (S().sticky != CUDA_SUCCESS) return S().sticky;
  ++S().primary_retains[dev];
  *context = PrimaryOf(dev);
  return CUDA_SUCCESS;
}

CUresult fake_cuDevicePrimaryCtxRelease(CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDevicePrimaryCtxRelease")) return r;
  if (CUresult r = RequireDevice(dev, "cuDevicePrimaryCtxRelease")) return r;
  if (S().primary_retains[dev] <= 0) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "cuDevicePrimaryCtxRelease without a retain");
  }
  --S().primary_retains[dev];
  return CUDA_SUCCESS;
}

// Destroys every object of the primary context and clears a fault; the
// retain count is left alone (callers still release their retains). With
// FAKE_CUDA_DEVICES > 1 it destroys every device's objects and peer access
// (the fault tests run on one device).
CUresult fake_cuDevicePrimaryCtxReset(CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDevicePrimaryCtxReset")) return r;
  if (CUresult r = RequireDevice(dev, "cuDevicePrimaryCtxReset")) return r;
  State& s = S();
  if (s.primary_retains[dev] > 0) {
    // Legal for the driver, but it destroys what the holders still use.
    Misuse(CUDA_SUCCESS, "cuDevicePrimaryCtxReset while %lld retain(s) are held",
           static_cast<long long>(s.primary_retains[dev]));
  }
  uint64_t reclaimed = 0;
  for (auto& [base, bytes] : s.device_allocations) ReleaseDeviceMemory(base, bytes);
  reclaimed += s.device_allocations.size();
  s.ipc_imports.clear();
  s.device_allocations.clear();
  s.allocation_devices.clear();
  s.peer_enabled.clear();
  s.device_bytes = 0;
  for (auto& [base, bytes] : s.pinned_allocations) {
    std::free(reinterpret_cast<unsigned char*>(base) - kPinnedPoolOffset);
  }
  reclaimed += s.pinned_allocations.size();
  s.pinned_allocations.clear();
  s.pinned_bytes = 0;
  for (FakeModule* m : s.modules) delete m;
  reclaimed += s.modules.size();
  s.modules.clear();
  s.functions.clear();
  for (FakeStream* st : s.streams) delete st;
  reclaimed += s.streams.size();
  s.streams.clear();
  for (FakeEvent* e : s.events) delete e;
  reclaimed += s.events.size();
  s.events.clear();
  reclaimed += s.graphs.size() + s.graph_execs.size();
  s.graph_nodes.clear();
  s.graphs.clear();
  s.graph_execs.clear();
  s.deferred.clear();
  s.stats.registered_ranges_live = 0;
  s.stats.registered_bytes_live = 0;
  reclaimed += s.registered.size();
  s.registered.clear();
  s.sticky = CUDA_SUCCESS;
  s.latent = CUDA_SUCCESS;
  ++s.stats.primary_context_resets;
  s.stats.objects_reclaimed_by_reset += reclaimed;
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
  if (context != nullptr && DeviceOfContext(context) < 0) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "cuCtxSetCurrent: unknown context %p",
                  static_cast<void*>(context));
  }
  current_context = context;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxSynchronize() {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuCtxSynchronize")) return r;
  // It would wait for every stream, capturing ones included: whatever the mode.
  bool capturing = false;
  for (FakeStream* s : S().streams) {
    if (s->capture) {
      s->capture->invalidated = true;
      capturing = true;
    }
  }
  if (capturing) {
    return Misuse(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuCtxSynchronize while a stream captures");
  }
  WaitWhileHeld(lock);
  FlushDeferred();
  return CUDA_SUCCESS;
}

}  // namespace fake_driver
