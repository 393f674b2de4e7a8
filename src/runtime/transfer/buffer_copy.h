// Copies between two resident buffers of any contexts (vyre_buffer_copy):
// device to device on one device, peer to peer between devices that can
// access each other, staged through pinned host memory between devices that
// cannot. One copy from its checks to its completion: on the stack for the
// synchronous call, behind a pending handle for the asynchronous one.
#ifndef VYRE_RUNTIME_TRANSFER_BUFFER_COPY_H_
#define VYRE_RUNTIME_TRANSFER_BUFFER_COPY_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "runtime/dispatch/pending_work.h"
#include "runtime/transfer/buffer.h"
#include "runtime/transfer/device_pools.h"
#include "vyre_cuda.h"

namespace vyre {

// Bytes per piece of a staged copy: the pinned blocks (two, alternating)
// come from the source context's pinned pool, so a steady stream of staged
// copies allocates nothing.
constexpr uint64_t kStagedCopyPiece = uint64_t{8} << 20;

// A checked request: both buffers looked up, the ranges inside them.
struct CopyRequest {
  std::shared_ptr<Buffer> src;
  std::shared_ptr<Buffer> dst;
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  uint64_t bytes = 0;
  uint32_t flags = 0;
};

// Checks flags, both ranges and their overlap (the refusals of
// vyre_buffer_copy, with their Fix).
absl::Status CheckCopyRequest(const CopyRequest& request, const char* what);

class PendingCopy final : public PendingWork {
 public:
  PendingCopy(CopyRequest request, bool synchronous);
  ~PendingCopy() override;

  // Enqueues the copy, ordered after both contexts' earlier work and before
  // their later work.
  absl::Status Enqueue(const char* what);
  // The destination's context: its stream runs (or ends) the copy.
  std::shared_ptr<Context> context_ref() const override { return request_.dst->context_ref(); }

 private:
  absl::Status PollInFlight(const char* what) override;
  absl::Status WaitInFlight(uint64_t timeout_ns, const char* what, bool* settled) override;
  absl::Status AbandonInFlight(const char* what) override;
  void ReleaseResources() override;

  absl::Status EnqueueLocked(const char* what);
  // One copy on the destination's stream (device to device, or peer).
  absl::Status EnqueueDirect(bool peer, const char* what);
  // Through pinned host memory, piece by piece.
  absl::Status EnqueueStaged(const char* what);
  // True when the source's stream has no work left,
  // so the copy need not wait for it.
  absl::StatusOr<bool> SourceIdle(const char* what);
  // Records `event` (of `recorder`'s context, acquired here) on recorder's
  // stream and makes `waiter`'s stream wait for it.
  absl::Status Order(Context& recorder, PooledEvent& event, Context& waiter, const char* what);

  CopyRequest request_;  // first: the buffers (and contexts) outlive the rest
  // Events of the cross-context ordering and the staged pieces, each from
  // the pool of the context whose stream records it.
  PooledEvent src_ready_;
  PooledEvent piece_read_[2], piece_written_[2];
  PoolBlock pieces_[2];
  // The source's stream may still run work that uses pieces_ (a failed
  // staged enqueue): drained too on release.
  bool src_work_pending_ = false;
  // done_ was recorded after the copy already (as the source's ordering mark).
  bool done_recorded_ = false;
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_TRANSFER_BUFFER_COPY_H_
