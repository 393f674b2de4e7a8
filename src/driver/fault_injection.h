// Test-only fault injection: wraps every entry of the loaded driver table so
// a test can make the n-th call of one entry fail with a chosen CUresult and
// check that the engine reports it, leaks nothing and stays usable.
#ifndef VYRE_DRIVER_FAULT_INJECTION_H_
#define VYRE_DRIVER_FAULT_INJECTION_H_

#include <cuda.h>

#include <cstdint>

#include "driver/driver_api.h"

namespace vyre::driver::testing {

// Wraps every entry (idempotent). Call after the driver is loaded, while no
// other thread is inside the library.
void InstallFaultInjection();
// The n-th call (1-based, counted from now) of `entry`, and the `count` - 1
// calls after it, return `code` without reaching the driver (CUDA_SUCCESS:
// the call is skipped, e.g. a launch that never runs). One fault is armed at
// a time.
void FailNthCall(Entry entry, uint64_t n, CUresult code, uint64_t count = 1);
void ClearFaults();
// Calls of `entry` since InstallFaultInjection().
uint64_t CallCount(Entry entry);

}  // namespace vyre::driver::testing

#endif  // VYRE_DRIVER_FAULT_INJECTION_H_
