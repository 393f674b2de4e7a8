// Host-to-device copies into device memory the library owns (e-graph image
// columns), by the path buffer uploads take: pinned memory the library knows
// (vyre_host_alloc) straight by DMA, small copies through one pinned pool
// block, large pageable ones through the context's staging ring (pieces
// copied by the workers while the DMA engine moves the piece before).
#ifndef VYRE_RUNTIME_TRANSFER_HOST_UPLOAD_H_
#define VYRE_RUNTIME_TRANSFER_HOST_UPLOAD_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "runtime/context/context.h"
#include "runtime/transfer/device_pools.h"
#include "runtime/transfer/host_memory.h"

namespace vyre {

// The context must be current for the object's life. Every copy is
// enqueued on the context's stream; the caller's memory may be read until
// the stream reaches them, so the caller synchronises the stream before it
// returns to its own caller (Wait, or a synchronisation of its own).
class HostUploads {
 public:
  explicit HostUploads(Context& ctx) : ctx_(ctx) {}
  HostUploads(const HostUploads&) = delete;
  HostUploads& operator=(const HostUploads&) = delete;

  // Enqueues dst[0, bytes) = src[0, bytes).
  absl::Status Add(CUdeviceptr dst, const void* src, uint64_t bytes, const char* what);
  // Synchronises the stream; the staging blocks and pinned regions are
  // released with the object.
  absl::Status Wait(const char* what);

 private:
  Context& ctx_;
  std::vector<PoolBlock> staging_;
  std::vector<std::shared_ptr<HostRegion>> pinned_;
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_TRANSFER_HOST_UPLOAD_H_
