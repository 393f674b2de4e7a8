// Moves large pageable host data at PCIe speed. The driver copies pageable
// memory through its own small staging buffers at a fraction of the link's
// bandwidth; instead the data is cut into pieces that cycle through a ring
// of pinned chunks: while the DMA engine moves piece i, the copy workers
// fill piece i+1 (uploads) or empty piece i-1 (downloads).
//
// Ordering: every DMA is enqueued on the caller's stream, so an upload's
// pieces land before any later work on that stream (the kernel) and a
// download's pieces are read after any earlier work. Each chunk records an
// event after its DMA; a chunk is refilled only once that event completed,
// which is what lets the ring be reused across calls without a stream
// synchronisation.
#ifndef VYRE_RUNTIME_TRANSFER_STAGING_RING_H_
#define VYRE_RUNTIME_TRANSFER_STAGING_RING_H_

#include <cuda.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "driver/guards.h"
#include "runtime/transfer/copy_workers.h"
#include "runtime/transfer/memory.h"
#include "runtime/context/telemetry.h"
#include "vyre_cuda.h"

namespace vyre {

struct StagingConfig {
  uint64_t chunk_bytes = 0;
  uint32_t chunk_count = 0;
  uint32_t threads = 0;
};

// The descriptor's staging fields with defaults filled in, or an
// INVALID_ARGUMENT error naming the field.
absl::StatusOr<StagingConfig> ResolveStagingConfig(const vyre_context_desc& desc,
                                                   const char* what);

// How a transfer of `bytes` is cut: pieces small enough that the copy and
// the DMA overlap, large enough that per-piece costs stay small. Exposed
// for tests.
uint64_t StagingPieceBytes(uint64_t bytes, uint64_t chunk_bytes);

class StagingRing {
 public:
  StagingRing(CUcontext context, const StagingConfig& config, Telemetry* telemetry);
  // Waits for the chunks' last copies and frees them (binds the context).
  ~StagingRing();
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  // The context must be current. Enqueues dst[0, bytes) = src[0, bytes) on
  // `stream`; returns once every source byte has been copied into a chunk,
  // so the caller may reuse `src` at once.
  absl::Status ToDevice(CUdeviceptr dst, const void* src, uint64_t bytes, CUstream stream,
                        const char* what);
  // The context must be current. dst[0, bytes) = src[0, bytes), read after
  // the work already enqueued on `stream`; returns once `dst` holds it all.
  absl::Status ToHost(void* dst, CUdeviceptr src, uint64_t bytes, CUstream stream,
                      const char* what);

  // Frees the chunks once their copies are done (vyre_context_trim).
  void Trim();

  const StagingConfig& config() const { return config_; }

 private:
  struct Chunk {
    OwnedBytes pinned;
    driver::EventGuard done;  // recorded after the chunk's last DMA
    bool busy = false;        // `done` was recorded and not yet waited on
  };

  // Allocates the chunks not yet allocated; returns how many the ring has
  // (0: no pinned memory could be had, and callers copy without it).
  absl::StatusOr<size_t> EnsureChunks(const char* what);
  // The ring's next chunk, once its last DMA is done.
  absl::StatusOr<Chunk*> NextChunk(const char* what);
  absl::Status WaitChunk(Chunk& chunk, const char* what);
  absl::Status MarkEnqueued(Chunk& chunk, CUstream stream, const char* what);
  // The chunk's DMA to dst[0, bytes), then its event.
  absl::Status EnqueueToDevice(Chunk& chunk, CUdeviceptr dst, uint64_t bytes, CUstream stream,
                               const char* what);
  // After a failure part-way: the stream may still use chunks whose events
  // were not recorded, so wait for it before anyone refills them.
  void Drain(CUstream stream);
  void TrimLocked();

  const CUcontext context_;
  const StagingConfig config_;
  Telemetry* const telemetry_;
  std::mutex mu_;  // one transfer at a time: the ring and workers are shared
  std::vector<Chunk> chunks_;  // sized once: chunk addresses never move
  size_t active_ = 0;         // chunks_[0, active_) are allocated
  size_t next_ = 0;
  CopyWorkers workers_;
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_TRANSFER_STAGING_RING_H_
