// The only places device and pinned memory are allocated and freed, so the
// live-byte telemetry is exact and OOM messages are uniform.
#ifndef VYRE_RUNTIME_MEMORY_H_
#define VYRE_RUNTIME_MEMORY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/telemetry.h"

namespace vyre {

// The caller has made the owning context current.
absl::StatusOr<uint64_t> AllocateDeviceBytes(uint64_t bytes, const char* what, Telemetry* t);
void FreeDeviceBytes(uint64_t address, uint64_t bytes, Telemetry* t);
absl::StatusOr<uint64_t> AllocatePinnedBytes(uint64_t bytes, const char* what, Telemetry* t);
void FreePinnedBytes(uint64_t address, uint64_t bytes, Telemetry* t);

}  // namespace vyre

#endif  // VYRE_RUNTIME_MEMORY_H_
