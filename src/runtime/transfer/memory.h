// The only places device and pinned memory are allocated and freed, so the
// live-byte telemetry is exact and OOM messages are uniform.
#ifndef VYRE_RUNTIME_TRANSFER_MEMORY_H_
#define VYRE_RUNTIME_TRANSFER_MEMORY_H_

#include <cuda.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/context/telemetry.h"

namespace vyre {

// The caller has made the owning context current.
absl::StatusOr<uint64_t> AllocateDeviceBytes(uint64_t bytes, const char* what, Telemetry* t);
void FreeDeviceBytes(uint64_t address, uint64_t bytes, Telemetry* t);
// Page-locked host bytes starting on a 4 KiB boundary (whatever the
// driver's pools hand out); free them with FreePinnedBytes only.
absl::StatusOr<uint64_t> AllocatePinnedBytes(uint64_t bytes, const char* what, Telemetry* t);
void FreePinnedBytes(uint64_t address, uint64_t bytes, Telemetry* t);

// Device or pinned bytes with exactly one owner (a graph's or a sequence's
// dedicated memory), freed on destruction with the owning context bound.
class OwnedBytes {
 public:
  enum class Kind { kDevice, kPinned };
  OwnedBytes() = default;
  // The context must be current. `bytes` > 0.
  static absl::StatusOr<OwnedBytes> Allocate(Kind kind, CUcontext context, Telemetry* t,
                                             uint64_t bytes, const char* what);
  ~OwnedBytes() { reset(); }
  OwnedBytes(OwnedBytes&& other) noexcept { *this = std::move(other); }
  OwnedBytes& operator=(OwnedBytes&& other) noexcept;
  OwnedBytes(const OwnedBytes&) = delete;
  OwnedBytes& operator=(const OwnedBytes&) = delete;

  void reset();
  explicit operator bool() const { return address_ != 0; }
  uint64_t bytes() const { return bytes_; }
  CUdeviceptr device() const { return static_cast<CUdeviceptr>(address_); }
  unsigned char* host() const { return reinterpret_cast<unsigned char*>(address_); }

 private:
  Kind kind_ = Kind::kDevice;
  CUcontext context_ = nullptr;
  Telemetry* telemetry_ = nullptr;
  uint64_t address_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_TRANSFER_MEMORY_H_
