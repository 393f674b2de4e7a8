#include "runtime/transfer/host_upload.h"

#include <cstring>

#include "base/status.h"
#include "driver/cu_error.h"
#include "runtime/transfer/buffer.h"

namespace vyre {

absl::Status HostUploads::Add(CUdeviceptr dst, const void* src, uint64_t bytes,
                              const char* what) {
  if (bytes == 0) return absl::OkStatus();
  Telemetry& t = ctx_.telemetry();
  const void* source = src;
  if (std::shared_ptr<HostRegion> region = HostMemory().Find(src, bytes)) {
    pinned_.push_back(std::move(region));  // kept alive until the stream passed the copy
  } else if (bytes <= kStagedCopyLimit) {
    VYRE_ASSIGN_OR_RETURN(PoolBlock block, ctx_.pinned_pool().Acquire(bytes, what));
    std::memcpy(block.host(), src, bytes);
    source = block.host();
    staging_.push_back(std::move(block));
  } else {
    return ctx_.staging().ToDevice(dst, src, bytes, ctx_.stream(), what);
  }
  VYRE_CU(what, cuMemcpyHtoDAsync, dst, source, bytes, ctx_.stream());
  t.h2d_operations.Add();
  t.h2d_bytes.Add(bytes);
  return absl::OkStatus();
}

absl::Status HostUploads::Wait(const char* what) {
  ctx_.telemetry().sync_points.Add();
  VYRE_CU(what, cuStreamSynchronize, ctx_.stream());
  return absl::OkStatus();
}

}  // namespace vyre
