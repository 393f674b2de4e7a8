// What a pending handle names: enqueued device work that someone waits on
// once. Dispatches, graph replays and e-graph rebuilds are all pending work:
// this base holds what they share (the state machine, its lock, the events
// and timing, the wait/poll/abandon rules and their messages), so the
// vyre_pending_* calls treat them alike and each kind writes only its own
// enqueue and finish.
#ifndef VYRE_RUNTIME_DISPATCH_PENDING_WORK_H_
#define VYRE_RUNTIME_DISPATCH_PENDING_WORK_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/handle_registry.h"
#include "runtime/transfer/device_pools.h"
#include "vyre_cuda.h"

namespace vyre {

class Context;

class PendingWork {
 public:
  // The words one kind of work uses in its messages.
  struct Words {
    const char* noun;           // "dispatch": "this dispatch was already waited on"
    const char* start_verb;     // "enqueued": "the dispatch was never enqueued"
    const char* async_call;     // the call whose handles may be waited on
    const char* wait_once_fix;  // the Fix of a second wait
  };

  virtual ~PendingWork() = default;
  PendingWork(const PendingWork&) = delete;
  PendingWork& operator=(const PendingWork&) = delete;

  // OK when complete (or not in flight), NOT_READY otherwise.
  absl::Status Poll(const char* what);
  // Waits up to timeout_ns, then finishes the work (host read-back). A second
  // wait is INVALID_STATE; TIMEOUT leaves it waitable.
  absl::Status Wait(uint64_t timeout_ns, const char* what);
  absl::StatusOr<vyre_timing> Timing(const char* what);
  // Releases the work's resources without the host read-back (release of a
  // handle). Work never waited on is waited for first: its failure (a device
  // fault, or any error its device work met) is returned, since nobody else
  // will see it. Work already waited on, or whose wait failed, returns OK.
  absl::Status Abandon(const char* what);
  virtual std::shared_ptr<Context> context_ref() const = 0;
  // Called after release with the last reference: offer it for reuse.
  virtual void Recycle(std::shared_ptr<PendingWork> self) { (void)self; }

  uint64_t handle() const { return handle_; }
  void set_handle(uint64_t bits) { handle_ = bits; }

 protected:
  enum class State { kIdle, kInFlight, kWaited };

  // `synchronous`: one caller runs the work on its stack from enqueue to
  // wait, so no lock is taken. `words` must outlive the object.
  PendingWork(bool synchronous, const Words& words) : synchronous_(synchronous), words_(words) {}

  std::unique_lock<std::mutex> Lock() {
    return synchronous_ ? std::unique_lock<std::mutex>() : std::unique_lock<std::mutex>(mu_);
  }

  // Readies the object for new work on `context` (null: work of no context,
  // a CPU e-graph rebuild). An asynchronous one counts as a live pending
  // until Detach.
  void AttachTo(Context* context);
  // Drops every resource (under the lock) and the live-pending count.
  void DetachFromContext();

  // The hooks of one kind of work, called with the lock held while the work
  // is in flight.
  virtual absl::Status PollInFlight(const char* what) = 0;
  // Waits for the work and finishes it; clears *settled to leave it in
  // flight and waitable (a TIMEOUT, or a context that would not bind).
  virtual absl::Status WaitInFlight(uint64_t timeout_ns, const char* what, bool* settled) = 0;
  // The work is released without a wait: wait for it so its failure is seen.
  virtual absl::Status AbandonInFlight(const char* what) = 0;
  // Drops every resource, draining the stream first if device work may still
  // run. Never fails: used on error and destruction paths too.
  virtual void ReleaseResources() = 0;

  // Helpers for the hooks.
  // Synchronises the context's stream if device work may still run.
  void DrainStream();
  // The abandon of work that signals done_: waits for it; `work` names it.
  absl::Status AwaitAbandoned(absl::string_view work, const char* what);
  // timing_.device_ns from start_ and end_, when both were recorded.
  void ReadDeviceTime();

  Context* context_ = nullptr;  // held alive by the work's owner
  const bool synchronous_;
  State state_ = State::kIdle;
  bool device_work_pending_ = false;
  bool host_timing_ = false;
  PooledEvent done_, start_, end_;
  vyre_timing timing_{};
  int64_t started_ns_ = 0;

 private:
  const Words& words_;
  // Guards the state of asynchronous work, which any thread may poll or wait
  // on (std::mutex: on the async dispatch path).
  std::mutex mu_;
  uint64_t handle_ = 0;
};

// The process-wide table of pending handles (dispatches, replays, rebuilds).
HandleRegistry<PendingWork>& Pendings();

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
