#include "runtime/transfer/staging_ring.h"

#include <algorithm>
#include <thread>

#include "base/status.h"
#include "driver/cu_error.h"

namespace vyre {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = kKiB * 1024;
constexpr uint64_t kChunkGranule = 64 * kKiB;
// Defaults from the staging sweep of bench/host_transfer_bench.cc (H100,
// PCIe 5, 64 MiB per buffer, helpers that watch for copies): 8 MiB x 4
// chunks gave the fastest host dispatch in three sweeps (5.07-5.23 ms,
// 1.36-1.42x the pinned floor; 16 MiB chunks 5.36-5.53 ms, 4 MiB
// 5.65-6.57). With helpers that slept between copies, 16 MiB had been best
// (fewer handoffs); 1 or 2 threads are 2-5x slower.
constexpr uint64_t kDefaultChunkBytes = 8 * kMiB;
constexpr uint64_t kMaxChunkBytes = 256 * kMiB;
constexpr uint32_t kDefaultChunkCount = 4;
constexpr uint32_t kMaxChunkCount = 64;
// Timed per piece on the H100 host, the host copy was what held a 64 MiB
// transfer back, not the DMA (which waited 2-5 us per piece): 8 threads
// filled an 8 MiB chunk in 200-240 us (35-40 GB/s) against the link's 54.
// With 12 threads (and streaming stores) uploads of 64 MiB took 1.57-1.60 ms
// against 1.74-1.98, downloads 1.33-1.38 against 1.37-1.84, and the host
// dispatch 4.57-5.47 ms against 5.48-6.90, in six interleaved rounds; 16
// threads were no faster than 12.
constexpr uint32_t kDefaultThreads = 12;
constexpr uint32_t kMaxThreads = 64;
constexpr uint64_t kMaxRingBytes = uint64_t{4} << 30;
// Pieces never shrink below this: each costs a handoff to the copy threads,
// a DMA enqueue, an event and, once the ring wraps, a wait. Measured on the
// H100, a 1 MiB-per-buffer host dispatch took 140 us with one 1 MiB piece
// per buffer, 120 us with two of 512 KiB (the second's copy overlaps the
// first's DMA) and 150-169 us with four of 256 KiB. (With copy threads that
// slept between copies, 256 KiB pieces had cost 4.6x the pinned floor.)
constexpr uint64_t kMinPieceBytes = 512 * kKiB;
// Uploads of pieces up to this size fill their chunks with streaming stores
// (CopyWorkers::CopyForDevice). Measured on the H100 host, host dispatch of
// 1 MiB per buffer 161-168 -> 126-135 us, of 16 MiB (4 MiB pieces) 1.48 ->
// 1.28 ms, uploads of 64 MiB (8 MiB pieces, 12 threads) 1.69-1.72 ms (p90
// 2.0) -> 1.57-1.60 (p90 1.6); but with 16 MiB pieces (64 MiB per buffer)
// 5.5-5.8 -> 6.2-6.8 ms, where that host's large last-level cache kept the
// chunks for the DMA.
constexpr uint64_t kMaxStreamedPieceBytes = 8 * kMiB;

}  // namespace

absl::StatusOr<StagingConfig> ResolveStagingConfig(const vyre_context_desc& desc,
                                                   const char* what) {
  StagingConfig config;
  config.chunk_bytes = desc.staging_chunk_bytes ? desc.staging_chunk_bytes : kDefaultChunkBytes;
  if (config.chunk_bytes % kChunkGranule != 0 || config.chunk_bytes > kMaxChunkBytes) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: staging_chunk_bytes is %u. Fix: use a multiple of 64 KiB from 64 KiB to "
                  "256 MiB, or 0 for the default (8 MiB).",
                  what, desc.staging_chunk_bytes);
  }
  config.chunk_count = desc.staging_chunk_count ? desc.staging_chunk_count : kDefaultChunkCount;
  if (config.chunk_count < 2 || config.chunk_count > kMaxChunkCount) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: staging_chunk_count is %u. Fix: use 2 to 64 chunks, or 0 for the "
                  "default (4).",
                  what, desc.staging_chunk_count);
  }
  if (config.chunk_bytes * config.chunk_count > kMaxRingBytes) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: %u staging chunks of %u bytes would pin %u bytes, over the limit of "
                  "4 GiB. Fix: use fewer or smaller chunks.",
                  what, config.chunk_count, config.chunk_bytes,
                  config.chunk_bytes * config.chunk_count);
  }
  if (desc.staging_threads > kMaxThreads) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: staging_threads is %u. Fix: use 1 to 64 threads, or 0 for the default "
                  "(up to 12).",
                  what, desc.staging_threads);
  }
  if (desc.staging_threads != 0) {
    config.threads = desc.staging_threads;
  } else {
    const unsigned hardware = std::thread::hardware_concurrency();
    config.threads = std::max(1u, std::min(kDefaultThreads, hardware));
  }
  return config;
}

uint64_t StagingPieceBytes(uint64_t bytes, uint64_t chunk_bytes) {
  // A quarter of the transfer, so that the host copy of one piece overlaps
  // the DMA of another.
  uint64_t piece = (bytes / 4 + kChunkGranule - 1) / kChunkGranule * kChunkGranule;
  piece = std::max(piece, kMinPieceBytes);
  return std::min(piece, chunk_bytes);
}

StagingRing::StagingRing(CUcontext context, const StagingConfig& config, Telemetry* telemetry)
    : context_(context),
      config_(config),
      telemetry_(telemetry),
      chunks_(config.chunk_count),
      workers_(config.threads) {}

StagingRing::~StagingRing() {
  driver::ScopedContext bind(context_, driver::ScopedContext::Purpose::kRelease);
  std::lock_guard lock(mu_);
  TrimLocked();
}

void StagingRing::Trim() {
  std::lock_guard lock(mu_);
  TrimLocked();
}

void StagingRing::TrimLocked() {
  for (Chunk& chunk : chunks_) {
    if (chunk.busy) {
      // Freeing pinned memory a DMA still reads would be a use after free.
      CUresult r = driver::Api().cuEventSynchronize(chunk.done.get());
      if (r != CUDA_SUCCESS) driver::LogReleaseFailure("cuEventSynchronize", r);
      chunk.busy = false;
    }
    chunk.pinned.reset();
    chunk.done.reset();
  }
  active_ = 0;
  next_ = 0;
}

absl::Status StagingRing::WaitChunk(Chunk& chunk, const char* what) {
  if (!chunk.busy) return absl::OkStatus();
  telemetry_->sync_points.Add();
  VYRE_CU(what, cuEventSynchronize, chunk.done.get());
  chunk.busy = false;
  return absl::OkStatus();
}

absl::StatusOr<size_t> StagingRing::EnsureChunks(const char* what) {
  // Chunks are allocated in order and freed together, so the allocated ones
  // are always a prefix. One that cannot be had (pinned memory is short)
  // ends the prefix: the ring works on as many chunks as it has.
  while (active_ < chunks_.size()) {
    Chunk& chunk = chunks_[active_];
    absl::StatusOr<OwnedBytes> pinned = OwnedBytes::Allocate(
        OwnedBytes::Kind::kPinned, context_, telemetry_, config_.chunk_bytes, what);
    if (!pinned.ok()) {
      if (PublicCode(pinned.status()) != VYRE_STATUS_OUT_OF_MEMORY) return pinned.status();
      break;
    }
    CUevent event = nullptr;
    VYRE_CU(what, cuEventCreate, &event, CU_EVENT_DISABLE_TIMING);
    chunk.done = driver::EventGuard(event);
    chunk.pinned = *std::move(pinned);
    ++active_;
  }
  if (next_ >= active_) next_ = 0;
  return active_;
}

absl::StatusOr<StagingRing::Chunk*> StagingRing::NextChunk(const char* what) {
  Chunk& chunk = chunks_[next_];
  next_ = (next_ + 1) % active_;
  VYRE_RETURN_IF_ERROR(WaitChunk(chunk, what));
  return &chunk;
}

absl::Status StagingRing::MarkEnqueued(Chunk& chunk, CUstream stream, const char* what) {
  VYRE_CU(what, cuEventRecord, chunk.done.get(), stream);
  chunk.busy = true;
  return absl::OkStatus();
}

void StagingRing::Drain(CUstream stream) {
  CUresult r = driver::Api().cuStreamSynchronize(stream);
  if (r != CUDA_SUCCESS) {
    driver::LogReleaseFailure("cuStreamSynchronize", r);
    return;
  }
  for (Chunk& chunk : chunks_) chunk.busy = false;
}

absl::Status StagingRing::EnqueueToDevice(Chunk& chunk, CUdeviceptr dst, uint64_t bytes,
                                          CUstream stream, const char* what) {
  VYRE_CU(what, cuMemcpyHtoDAsync, dst, chunk.pinned.host(), bytes, stream);
  telemetry_->h2d_operations.Add();
  telemetry_->h2d_bytes.Add(bytes);
  absl::Status marked = MarkEnqueued(chunk, stream, what);
  if (!marked.ok()) Drain(stream);
  return marked;
}

absl::Status StagingRing::ToDevice(CUdeviceptr dst, const void* src, uint64_t bytes,
                                   CUstream stream, const char* what) {
  std::lock_guard lock(mu_);
  const auto* from = static_cast<const unsigned char*>(src);
  VYRE_ASSIGN_OR_RETURN(size_t chunks, EnsureChunks(what));
  if (chunks == 0) {
    // No pinned memory to be had: the driver's own pageable path still works.
    VYRE_CU(what, cuMemcpyHtoDAsync, dst, from, bytes, stream);
    telemetry_->h2d_operations.Add();
    telemetry_->h2d_bytes.Add(bytes);
    return absl::OkStatus();
  }
  const uint64_t piece = StagingPieceBytes(bytes, config_.chunk_bytes);
  const bool streaming = piece <= kMaxStreamedPieceBytes;
  // The piece just filled is enqueued while the copy threads fill the next
  // chunk, so that the driver calls overlap the copy (with one chunk, which
  // the next piece refills, it is enqueued first).
  Chunk* filled = nullptr;
  uint64_t filled_offset = 0, filled_bytes = 0;
  for (uint64_t offset = 0; offset < bytes;) {
    const uint64_t n = std::min(piece, bytes - offset);
    if (filled != nullptr && chunks == 1) {
      VYRE_RETURN_IF_ERROR(
          EnqueueToDevice(*filled, dst + filled_offset, filled_bytes, stream, what));
      filled = nullptr;
    }
    VYRE_ASSIGN_OR_RETURN(Chunk * chunk, NextChunk(what));
    workers_.StartCopy(chunk->pinned.host(), from + offset, n, streaming);
    absl::Status enqueued = absl::OkStatus();
    if (filled != nullptr) {
      enqueued = EnqueueToDevice(*filled, dst + filled_offset, filled_bytes, stream, what);
    }
    workers_.FinishCopy();  // before any return: the threads write into the chunk
    VYRE_RETURN_IF_ERROR(enqueued);
    filled = chunk;
    filled_offset = offset;
    filled_bytes = n;
    offset += n;
  }
  if (filled == nullptr) return absl::OkStatus();
  return EnqueueToDevice(*filled, dst + filled_offset, filled_bytes, stream, what);
}

absl::Status StagingRing::ToHost(void* dst, CUdeviceptr src, uint64_t bytes, CUstream stream,
                                 const char* what) {
  std::lock_guard lock(mu_);
  auto* to = static_cast<unsigned char*>(dst);
  VYRE_ASSIGN_OR_RETURN(size_t chunks, EnsureChunks(what));
  if (chunks == 0) {
    VYRE_CU(what, cuMemcpyDtoHAsync, to, src, bytes, stream);
    telemetry_->d2h_operations.Add();
    telemetry_->d2h_bytes.Add(bytes);
    telemetry_->sync_points.Add();
    VYRE_CU(what, cuStreamSynchronize, stream);
    return absl::OkStatus();
  }
  const uint64_t piece = StagingPieceBytes(bytes, config_.chunk_bytes);
  const uint64_t pieces = (bytes + piece - 1) / piece;
  // Piece p goes through chunk (first + p) % chunks. At most `chunks` pieces
  // are enqueued and not yet copied out, so the ring's next chunk is never
  // one of them.
  const size_t first = next_;
  uint64_t enqueued = 0;
  for (uint64_t copied = 0; copied < pieces; ++copied) {
    while (enqueued < pieces && enqueued - copied < chunks) {
      const uint64_t offset = enqueued * piece;
      const uint64_t n = std::min(piece, bytes - offset);
      VYRE_ASSIGN_OR_RETURN(Chunk * chunk, NextChunk(what));
      VYRE_CU(what, cuMemcpyDtoHAsync, chunk->pinned.host(), src + offset, n, stream);
      telemetry_->d2h_operations.Add();
      telemetry_->d2h_bytes.Add(n);
      absl::Status marked = MarkEnqueued(*chunk, stream, what);
      if (!marked.ok()) {
        Drain(stream);
        return marked;
      }
      ++enqueued;
    }
    Chunk* next = &chunks_[(first + copied) % chunks];
    VYRE_RETURN_IF_ERROR(WaitChunk(*next, what));
    const uint64_t offset = copied * piece;
    workers_.Copy(to + offset, next->pinned.host(), std::min(piece, bytes - offset));
  }
  return absl::OkStatus();
}

}  // namespace vyre
