// What a pending handle names: enqueued device work that someone waits on
// once. Dispatches and graph replays are both pending work, so the
// vyre_pending_* calls treat them alike.
#ifndef VYRE_RUNTIME_DISPATCH_PENDING_WORK_H_
#define VYRE_RUNTIME_DISPATCH_PENDING_WORK_H_

#include <cuda.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "vyre_cuda.h"

namespace vyre {

class Context;

class PendingWork {
 public:
  virtual ~PendingWork() = default;
  // OK when complete, NOT_READY otherwise.
  virtual absl::Status Poll(const char* what) = 0;
  // Waits up to timeout_ns, then finishes the work (host read-back). A second
  // wait is INVALID_STATE; TIMEOUT leaves it waitable.
  virtual absl::Status Wait(uint64_t timeout_ns, const char* what) = 0;
  virtual absl::StatusOr<vyre_timing> Timing(const char* what) = 0;
  // Releases the work's resources without the host read-back (release of a
  // handle). Work never waited on is waited for first: its failure (a device
  // fault, or any error its device work met) is returned, since nobody else
  // will see it. Work already waited on, or whose wait failed, returns OK.
  virtual absl::Status Abandon(const char* what) = 0;
  virtual std::shared_ptr<Context> context_ref() const = 0;
  // Called after release with the last reference: offer it for reuse.
  virtual void Recycle(std::shared_ptr<PendingWork> self) { (void)self; }

  uint64_t handle() const { return handle_; }
  void set_handle(uint64_t bits) { handle_ = bits; }

 private:
  uint64_t handle_ = 0;
};

// Waits for `event` up to timeout_ns (VYRE_WAIT_FOREVER blocks in the
// driver). A bounded wait polls, spinning briefly then backing off, since the
// driver has no event wait with a timeout. `work` names the work for the
// TIMEOUT message.
absl::Status AwaitEvent(CUevent event, uint64_t timeout_ns, const char* what,
                        absl::string_view work);

// The NOT_READY answer of a poll, or the driver's error.
absl::Status PollEvent(CUevent event, const char* what, absl::string_view work);

}  // namespace vyre

#endif  // VYRE_RUNTIME_DISPATCH_PENDING_WORK_H_
