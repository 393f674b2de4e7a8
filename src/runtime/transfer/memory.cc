#include "runtime/transfer/memory.h"

#include <cuda.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/guards.h"

namespace vyre {

absl::StatusOr<uint64_t> AllocateDeviceBytes(uint64_t bytes, const char* what, Telemetry* t) {
  CUdeviceptr ptr = 0;
  CUresult r = driver::Api().cuMemAlloc(&ptr, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    size_t free_bytes = 0, total_bytes = 0;
    if (driver::Api().cuMemGetInfo(&free_bytes, &total_bytes) != CUDA_SUCCESS) {
      free_bytes = total_bytes = 0;
    }
    return MakeError(
        VYRE_STATUS_OUT_OF_MEMORY,
        absl::StrFormat("%s: cuMemAlloc returned CUDA_ERROR_OUT_OF_MEMORY (the device is out "
                        "of memory) for %u bytes, with %u of %u bytes available. Fix: free "
                        "buffers you no longer need, call vyre_context_trim, or split the work "
                        "into smaller pieces.",
                        what, bytes, free_bytes, total_bytes),
        static_cast<int32_t>(r));
  }
  if (r != CUDA_SUCCESS) {
    return driver::CuError(r, absl::StrFormat("%s: allocating %u device bytes", what, bytes),
                           "cuMemAlloc");
  }
  t->device_bytes_live.Add(bytes);
  return static_cast<uint64_t>(ptr);
}

void FreeDeviceBytes(uint64_t address, uint64_t bytes, Telemetry* t) {
  driver::DeviceMemoryGuard release(static_cast<CUdeviceptr>(address));
  t->device_bytes_live.Sub(bytes);
}

// cuMemHostAlloc sub-allocates small requests from pinned pools (512-byte
// aligned on driver 580), but vyre_host_alloc promises 4 KiB: ask for a
// page and a word more, hand out the first page boundary at least a word
// past the driver's address, and keep that address in the word before it,
// for the free.
constexpr uint64_t kPinnedAlignment = 4096;
constexpr uint64_t kPinnedSlack = kPinnedAlignment + sizeof(uint64_t);

absl::StatusOr<uint64_t> AllocatePinnedBytes(uint64_t bytes, const char* what, Telemetry* t) {
  if (bytes > UINT64_MAX - kPinnedSlack) {
    return MakeError(VYRE_STATUS_LIMIT_EXCEEDED,
                     absl::StrFormat("%s: %u pinned host bytes do not fit in the address space. "
                                     "Fix: allocate fewer bytes.",
                                     what, bytes));
  }
  void* ptr = nullptr;
  CUresult r = driver::Api().cuMemHostAlloc(&ptr, bytes + kPinnedSlack, CU_MEMHOSTALLOC_PORTABLE);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    return MakeError(
        VYRE_STATUS_OUT_OF_MEMORY,
        absl::StrFormat("%s: cuMemHostAlloc returned CUDA_ERROR_OUT_OF_MEMORY (pinned host "
                        "memory is exhausted) for %u bytes. Fix: "
                        "reduce the host bytes per dispatch, call vyre_context_trim, or raise "
                        "the locked-memory limit (ulimit -l).",
                        what, bytes),
        static_cast<int32_t>(r));
  }
  if (r != CUDA_SUCCESS) {
    return driver::CuError(r, absl::StrFormat("%s: allocating %u pinned host bytes", what, bytes),
                           "cuMemHostAlloc");
  }
  t->pinned_bytes_live.Add(bytes);
  const uint64_t base = reinterpret_cast<uint64_t>(ptr);
  const uint64_t aligned = (base + sizeof(uint64_t) + kPinnedAlignment - 1) & ~(kPinnedAlignment - 1);
  std::memcpy(reinterpret_cast<void*>(aligned - sizeof(uint64_t)), &base, sizeof(base));
  return aligned;
}

void FreePinnedBytes(uint64_t address, uint64_t bytes, Telemetry* t) {
  uint64_t base = 0;
  std::memcpy(&base, reinterpret_cast<const void*>(address - sizeof(uint64_t)), sizeof(base));
  driver::PinnedMemoryGuard release(reinterpret_cast<void*>(base));
  t->pinned_bytes_live.Sub(bytes);
}

absl::StatusOr<OwnedBytes> OwnedBytes::Allocate(Kind kind, CUcontext context, Telemetry* t,
                                                uint64_t bytes, const char* what) {
  absl::StatusOr<uint64_t> address = kind == Kind::kDevice ? AllocateDeviceBytes(bytes, what, t)
                                                           : AllocatePinnedBytes(bytes, what, t);
  if (!address.ok()) return address.status();
  OwnedBytes owned;
  owned.kind_ = kind;
  owned.context_ = context;
  owned.telemetry_ = t;
  owned.address_ = *address;
  owned.bytes_ = bytes;
  return owned;
}

OwnedBytes& OwnedBytes::operator=(OwnedBytes&& other) noexcept {
  if (this != &other) {
    reset();
    kind_ = other.kind_;
    context_ = other.context_;
    telemetry_ = other.telemetry_;
    address_ = std::exchange(other.address_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void OwnedBytes::reset() {
  if (address_ == 0) return;
  driver::ScopedContext bind(context_, driver::ScopedContext::Purpose::kRelease);
  if (kind_ == Kind::kDevice) {
    FreeDeviceBytes(address_, bytes_, telemetry_);
  } else {
    FreePinnedBytes(address_, bytes_, telemetry_);
  }
  address_ = 0;
  bytes_ = 0;
}

}  // namespace vyre
