// Device faults: a sticky CUDA error (illegal address, launch failure,
// hardware error) leaves the device's primary context refusing all further
// work. The library records the fault against the primary context, answers
// every later work call on it with VYRE_STATUS_DEVICE_FAULT (through
// ScopedContext), and resets the primary context (cuDevicePrimaryCtxReset)
// once the last vyre context of the device has released its retain, so a
// new context works in the same process.
//
// The table also counts the vyre contexts alive on each device: retains and
// releases of primary contexts go through RetainPrimaryContext and
// ReleasePrimaryContext, serialised with the reset, so a reset never runs
// while a vyre context of the device holds (or is taking) a retain.
#ifndef VYRE_DRIVER_DEVICE_FAULTS_H_
#define VYRE_DRIVER_DEVICE_FAULTS_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace vyre::driver {

// True for the CUresults that leave the context unusable ("any further CUDA
// work will return the same error", cuda.h).
bool IsStickyResult(CUresult result);

namespace internal {
// Devices whose primary context is currently recorded faulted. Read with one
// relaxed load on every work call; non-zero sends it to the table.
extern std::atomic<uint32_t> g_faulted_devices;
}  // namespace internal

// The no-fault fast path: one relaxed atomic load.
inline bool AnyDeviceFaulted() {
  return internal::g_faulted_devices.load(std::memory_order_relaxed) != 0;
}

// A recorded fault: the sticky CUresult first seen and the device ordinal.
struct DeviceFault {
  CUresult cause = CUDA_SUCCESS;
  int ordinal = -1;
};

// Records a sticky `result` against the primary context current on this
// thread, if it is one a vyre context holds. Returns the device ordinal it
// was recorded for, or -1 when the current context is not one of ours.
int RecordFaultOnCurrentContext(CUresult result);

// Whether `context` (a primary context we hold) is recorded faulted; fills
// *fault when it is. The slow path behind AnyDeviceFaulted().
bool FindFault(CUcontext context, DeviceFault* fault);

// "<what>: the device faulted earlier (<NAME>: <description>) and CUDA accepts
// no more work on this context. Fix: destroy every vyre context on device N
// ..." with status VYRE_STATUS_DEVICE_FAULT and the fault's CUresult.
absl::Status FaultedContextError(const char* what, const DeviceFault& fault);

// The Fix sentence (without "Fix: " and the final period) for a fault on
// device `ordinal` (-1: unknown).
std::string DeviceFaultFix(int ordinal);

// Retains `device`'s primary context for a new vyre context and counts it.
// Refuses (DEVICE_FAULT) while the primary context is recorded faulted and
// other vyre contexts of the device still live; resets a faulted primary
// context none of ours holds any more (a reset that failed earlier, or a
// sticky error from a retain: a fault another CUDA user caused) and retries
// the retain once. Every failure leaves no retain behind.
absl::StatusOr<CUcontext> RetainPrimaryContext(CUdevice device, int ordinal, const char* what);

// What the table holds for `device`: the fault recorded (CUDA_SUCCESS when
// none, or once the reset cleared it) and the vyre contexts holding it.
struct DeviceState {
  CUresult fault = CUDA_SUCCESS;
  int live = 0;
  int ordinal = -1;
};
DeviceState QueryDevice(CUdevice device);

// Releases one retain taken by RetainPrimaryContext. When it was the last
// vyre context of a faulted device, resets the primary context and clears the
// fault; a failed reset is logged and retried by the next create.
void ReleasePrimaryContext(CUdevice device);

}  // namespace vyre::driver

#endif  // VYRE_DRIVER_DEVICE_FAULTS_H_
