#include "runtime/transfer/buffer_copy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/checked_math.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/guards.h"
#include "runtime/context/peer_access.h"

namespace vyre {
namespace {

constexpr uint32_t kKnownFlags = VYRE_BUFFER_COPY_FLAG_STAGED;

constexpr PendingWork::Words kCopyWords = {
    "copy", "enqueued", "vyre_buffer_copy_async",
    "wait on a pending copy once, then release it with vyre_pending_release."};

absl::Status CheckRange(const char* what, const char* side, uint64_t offset, uint64_t bytes,
                        uint64_t size) {
  if (RangeInside(offset, bytes, size)) return absl::OkStatus();
  return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                "%s: the %s range [%s_offset %u, +%u bytes) ends past the %s buffer's %u bytes "
                "(or overflows 64 bits). Fix: keep %s_offset + bytes within the %s buffer's "
                "size (vyre_buffer_info_get reports it).",
                what, side, side, offset, bytes, side, size, side, side);
}

}  // namespace

absl::Status CheckCopyRequest(const CopyRequest& r, const char* what) {
  if ((r.flags & ~kKnownFlags) != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: flags 0x%x hold unknown bits. Fix: pass 0 or VYRE_BUFFER_COPY_FLAG_STAGED.",
                  what, r.flags);
  }
  VYRE_RETURN_IF_ERROR(CheckRange(what, "src", r.src_offset, r.bytes, r.src->bytes()));
  VYRE_RETURN_IF_ERROR(CheckRange(what, "dst", r.dst_offset, r.bytes, r.dst->bytes()));
  // Contexts of one device share its primary context and address space; two
  // devices' memory never aliases.
  if (r.bytes == 0 || r.src->context().cu() != r.dst->context().cu()) return absl::OkStatus();
  const uint64_t from = r.src->device() + r.src_offset;
  const uint64_t to = r.dst->device() + r.dst_offset;
  if (from >= to + r.bytes || to >= from + r.bytes) return absl::OkStatus();
  if (r.src == r.dst) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the source [%u, +%u) and destination [%u, +%u) overlap in one buffer, "
                  "and device copies give no order between the bytes. Fix: copy through a "
                  "second buffer, or between disjoint ranges.",
                  what, r.src_offset, r.bytes, r.dst_offset, r.bytes);
  }
  return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                "%s: the source (device address 0x%x) and destination (0x%x) ranges of %u bytes "
                "overlap in device memory: the two buffers wrap the same memory, and device "
                "copies give no order between the bytes. Fix: copy through a buffer of its own "
                "memory, or between disjoint ranges.",
                what, from, to, r.bytes);
}

PendingCopy::PendingCopy(CopyRequest request, bool synchronous)
    : PendingWork(synchronous, kCopyWords), request_(std::move(request)) {
  AttachTo(&request_.dst->context());
}

PendingCopy::~PendingCopy() { DetachFromContext(); }

void PendingCopy::ReleaseResources() {
  DrainStream();
  if (src_work_pending_) {
    Context& src = request_.src->context();
    driver::ScopedContext bind(src.cu(), driver::ScopedContext::Purpose::kRelease);
    CUresult r = driver::Api().cuStreamSynchronize(src.stream());
    if (r != CUDA_SUCCESS) driver::LogReleaseFailure("cuStreamSynchronize", r);
    src_work_pending_ = false;
  }
  for (int k = 0; k < 2; ++k) {
    pieces_[k].reset();
    piece_read_[k].reset();
    piece_written_[k].reset();
  }
  src_ready_.reset();
  done_.reset();
  done_recorded_ = false;
}

absl::Status PendingCopy::Enqueue(const char* what) {
  auto lock = Lock();
  started_ns_ = absl::GetCurrentTimeNanos();
  absl::Status status = EnqueueLocked(what);
  if (!status.ok()) {
    ReleaseResources();
    return status;
  }
  state_ = State::kInFlight;
  timing_.enqueue_ns = static_cast<uint64_t>(absl::GetCurrentTimeNanos() - started_ns_);
  return absl::OkStatus();
}

absl::Status PendingCopy::EnqueueLocked(const char* what) {
  if (request_.bytes == 0) return absl::OkStatus();  // nothing to copy or order
  Context& src = request_.src->context();
  Context& dst = request_.dst->context();
  // Bound for the whole enqueue: the scopes below that bind it again cost
  // one cuCtxGetCurrent each, and only the source's switch and restore.
  driver::ScopedContext bind(dst.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  if (src.cu() == dst.cu()) {
    VYRE_RETURN_IF_ERROR(EnqueueDirect(/*peer=*/false, what));
  } else {
    bool peer = false;
    if ((request_.flags & VYRE_BUFFER_COPY_FLAG_STAGED) == 0) {
      // The copy runs on the destination's stream, reading the source's
      // memory: that direction decides. The other is enabled too where the
      // devices allow it, as copies back will want it.
      VYRE_ASSIGN_OR_RETURN(peer, PeerLinks::Enable(dst, src, what));
      if (peer) VYRE_RETURN_IF_ERROR(PeerLinks::Enable(src, dst, what).status());
    }
    VYRE_RETURN_IF_ERROR(peer ? EnqueueDirect(/*peer=*/true, what) : EnqueueStaged(what));
  }
  if (!synchronous_ && !done_recorded_) {
    VYRE_RETURN_IF_ERROR(done_.Acquire(&dst.events(), /*timing=*/false, what));
    VYRE_CU(what, cuEventRecord, done_.get(), dst.stream());
  }
  return absl::OkStatus();
}

absl::Status PendingCopy::Order(Context& recorder, PooledEvent& event, Context& waiter,
                                const char* what) {
  {
    driver::ScopedContext bind(recorder.cu());
    VYRE_RETURN_IF_ERROR(bind.status(what));
    if (!event) VYRE_RETURN_IF_ERROR(event.Acquire(&recorder.events(), /*timing=*/false, what));
    VYRE_CU(absl::StrCat(what, ": marking the end of a context's earlier work"), cuEventRecord,
            event.get(), recorder.stream());
  }
  driver::ScopedContext bind(waiter.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  VYRE_CU(absl::StrCat(what, ": ordering the other context's stream after it"),
          cuStreamWaitEvent, waiter.stream(), event.get(), 0);
  return absl::OkStatus();
}

absl::StatusOr<bool> PendingCopy::SourceIdle(const char* what) {
  // One query costs less than an event record and a wait (on an H200, an
  // asynchronous 4 KiB peer copy's enqueue cost 3.4 us over the raw call with
  // both), and a caller copying in a loop leaves the source idle between
  // copies; a busy source pays the query on top.
  Context& src = request_.src->context();
  driver::ScopedContext bind(src.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  const CUresult r = driver::Api().cuStreamQuery(src.stream());
  if (r == CUDA_SUCCESS) return true;
  if (r == CUDA_ERROR_NOT_READY) return false;
  return driver::CuError(r, absl::StrCat(what, ": asking whether the source context is idle"),
                         "cuStreamQuery");
}

absl::Status PendingCopy::EnqueueDirect(bool peer, const char* what) {
  Context& src = request_.src->context();
  Context& dst = request_.dst->context();
  const bool cross = &src != &dst;
  // The destination's stream already runs after its own earlier work; with
  // two contexts it also waits for the source's.
  if (cross) {
    VYRE_ASSIGN_OR_RETURN(bool idle, SourceIdle(what));
    if (!idle) VYRE_RETURN_IF_ERROR(Order(src, src_ready_, dst, what));
  }
  {
    driver::ScopedContext bind(dst.cu());
    VYRE_RETURN_IF_ERROR(bind.status(what));
    const CUdeviceptr to = request_.dst->device() + request_.dst_offset;
    const CUdeviceptr from = request_.src->device() + request_.src_offset;
    if (peer) {
      VYRE_CU(what, cuMemcpyPeerAsync, to, dst.cu(), from, src.cu(), request_.bytes,
              dst.stream());
    } else {
      VYRE_CU(what, cuMemcpyDtoDAsync, to, from, request_.bytes, dst.stream());
    }
    device_work_pending_ = true;
  }
  // The source's later work (a write to the range read) waits for the copy.
  // An asynchronous copy's completion event serves as that mark too: one
  // record fewer on the hot path. A synchronous copy has completed before
  // the call returns, so the source's later work follows it anyway.
  if (cross && !synchronous_) {
    VYRE_RETURN_IF_ERROR(Order(dst, done_, src, what));
    done_recorded_ = true;
  }
  return absl::OkStatus();
}

absl::Status PendingCopy::EnqueueStaged(const char* what) {
  Context& src = request_.src->context();
  Context& dst = request_.dst->context();
  const uint64_t bytes = request_.bytes;
  const uint64_t piece = std::min(bytes, kStagedCopyPiece);
  const uint64_t count = (bytes + piece - 1) / piece;
  {
    driver::ScopedContext bind(src.cu());
    VYRE_RETURN_IF_ERROR(bind.status(what));
    for (uint64_t k = 0; k < std::min<uint64_t>(count, 2); ++k) {
      VYRE_ASSIGN_OR_RETURN(pieces_[k], src.pinned_pool().Acquire(piece, what));
    }
  }
  const CUdeviceptr from = request_.src->device() + request_.src_offset;
  const CUdeviceptr to = request_.dst->device() + request_.dst_offset;
  // Piece i goes down on the source's stream into block i % 2, then up on
  // the destination's, which waits for it; the source's stream reuses a
  // block only after its previous upload (events, never the host). The
  // first upload waits for the first download, which follows the source's
  // earlier work, so the copy follows both contexts' earlier work.
  for (uint64_t i = 0; i < count; ++i) {
    const int k = static_cast<int>(i % 2);
    const uint64_t offset = i * piece;
    const uint64_t length = std::min(piece, bytes - offset);
    {
      driver::ScopedContext bind(src.cu());
      VYRE_RETURN_IF_ERROR(bind.status(what));
      if (i >= 2) {
        VYRE_CU(absl::StrCat(what, ": waiting for a staging block's upload"), cuStreamWaitEvent,
                src.stream(), piece_written_[k].get(), 0);
      }
      VYRE_CU(what, cuMemcpyDtoHAsync, pieces_[k].host(), from + offset, length, src.stream());
      src_work_pending_ = true;
      src.telemetry().d2h_operations.Add();
      src.telemetry().d2h_bytes.Add(length);
      if (!piece_read_[k]) {
        VYRE_RETURN_IF_ERROR(piece_read_[k].Acquire(&src.events(), /*timing=*/false, what));
      }
      VYRE_CU(what, cuEventRecord, piece_read_[k].get(), src.stream());
    }
    driver::ScopedContext bind(dst.cu());
    VYRE_RETURN_IF_ERROR(bind.status(what));
    VYRE_CU(absl::StrCat(what, ": waiting for a staged piece's download"), cuStreamWaitEvent,
            dst.stream(), piece_read_[k].get(), 0);
    VYRE_CU(what, cuMemcpyHtoDAsync, to + offset, pieces_[k].host(), length, dst.stream());
    device_work_pending_ = true;
    dst.telemetry().h2d_operations.Add();
    dst.telemetry().h2d_bytes.Add(length);
    if (!piece_written_[k]) {
      VYRE_RETURN_IF_ERROR(piece_written_[k].Acquire(&dst.events(), /*timing=*/false, what));
    }
    VYRE_CU(what, cuEventRecord, piece_written_[k].get(), dst.stream());
  }
  // The source's later work waits for the last upload, so it follows the
  // whole copy (a synchronous copy has completed before the call returns).
  if (synchronous_) return absl::OkStatus();
  driver::ScopedContext bind(src.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  VYRE_CU(absl::StrCat(what, ": ordering the source context's stream after the copy"),
          cuStreamWaitEvent, src.stream(), piece_written_[(count - 1) % 2].get(), 0);
  return absl::OkStatus();
}

absl::Status PendingCopy::PollInFlight(const char* what) {
  if (!device_work_pending_) return absl::OkStatus();
  driver::ScopedContext bind(request_.dst->context().cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  return PollEvent(done_.get(), what, "the buffer copy");
}

absl::Status PendingCopy::WaitInFlight(uint64_t timeout_ns, const char* what, bool* settled) {
  Context& dst = request_.dst->context();
  const int64_t wait_start = absl::GetCurrentTimeNanos();
  absl::Status status;
  if (device_work_pending_) {
    *settled = false;
    driver::ScopedContext bind(dst.cu());
    VYRE_RETURN_IF_ERROR(bind.status(what));
    dst.telemetry().sync_points.Add();
    if (synchronous_) {
      // Every piece of the copy ends on the destination's stream.
      CUresult r = driver::Api().cuStreamSynchronize(dst.stream());
      if (r != CUDA_SUCCESS) status = driver::CuError(r, what, "cuStreamSynchronize");
    } else {
      status = AwaitEvent(done_.get(), timeout_ns, what, "the buffer copy");
      if (PublicCode(status) == VYRE_STATUS_TIMEOUT) return status;
    }
    *settled = true;
    if (status.ok()) {
      // The source's part (the staged downloads) came before the end.
      device_work_pending_ = false;
      src_work_pending_ = false;
    }
  }
  const int64_t end = absl::GetCurrentTimeNanos();
  timing_.struct_size = sizeof(timing_);
  timing_.wait_ns = static_cast<uint64_t>(end - wait_start);
  timing_.wall_ns = static_cast<uint64_t>(end - started_ns_);
  return status;
}

absl::Status PendingCopy::AbandonInFlight(const char* what) {
  // Never waited on: what the copy met would go with the handle.
  absl::Status status = AwaitAbandoned("the buffer copy", what);
  if (status.ok() && !device_work_pending_) src_work_pending_ = false;
  return status;
}

}  // namespace vyre
