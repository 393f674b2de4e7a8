// Access from a test to the fake CUDA driver instance the engine loaded
// (the library named by VYRE_CUDA_DRIVER_LIBRARY): counters and the hold
// switch declared in fake_cuda_control.h.
#ifndef VYRE_TESTS_SUPPORT_FAKE_CUDA_CLIENT_H_
#define VYRE_TESTS_SUPPORT_FAKE_CUDA_CLIENT_H_

#include "fake_cuda_control.h"

namespace vyre_test {

class FakeCuda {
 public:
  // True when VYRE_CUDA_DRIVER_LIBRARY names a library exporting the
  // fake's controls.
  static bool Available();
  // The fake's counters; all zero when it is not available.
  static fake_cuda_stats Stats();
  // While held, device work never completes: queries say NOT_READY and
  // synchronisations block until released (at most 5 s).
  static void SetHold(bool hold);
  // The next kernel launch faults with `cu_result` and the device turns
  // sticky until cuDevicePrimaryCtxReset (fake_cuda_control.h); 0 disarms.
  // `latent`: the fault shows only at the first call that is not an enqueue
  // (a synchronisation, query, allocation, ...). False when the loaded fake
  // has no fault control.
  static bool InjectFault(int cu_result, bool latent = false);
};

// Releases the hold when it goes out of scope, so a failing test never leaves
// the fake blocking later tests.
class ScopedHold {
 public:
  ScopedHold() { FakeCuda::SetHold(true); }
  ~ScopedHold() { FakeCuda::SetHold(false); }
  ScopedHold(const ScopedHold&) = delete;
  ScopedHold& operator=(const ScopedHold&) = delete;
};

}  // namespace vyre_test

#endif  // VYRE_TESTS_SUPPORT_FAKE_CUDA_CLIENT_H_
