// A vyre context: one device's primary CUDA context plus everything the
// library keeps per device (stream, pools, module cache, counters) and the
// handles it owns, so destroying it releases them all.
#ifndef VYRE_RUNTIME_CONTEXT_CONTEXT_H_
#define VYRE_RUNTIME_CONTEXT_CONTEXT_H_

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "base/handle_registry.h"
#include "driver/guards.h"
#include "runtime/transfer/device_pools.h"
#include "runtime/program/module_cache.h"
#include "runtime/transfer/staging_ring.h"
#include "runtime/context/telemetry.h"
#include "runtime/context/peer_access.h"
#include "vyre_cuda.h"

namespace vyre {

// vyre_device_info as the first release had it (before peer_access_mask):
// older callers' structs are at least this large.
inline constexpr size_t kDeviceInfoV1 = offsetof(vyre_device_info, peer_access_mask);

// Fills `info` for a device ordinal; the driver must be loaded. `what` (the
// API call) starts the messages.
absl::Status QueryDeviceInfo(const char* what, uint32_t ordinal, vyre_device_info* info);
// Loads the driver and checks that `ordinal` names a device.
absl::Status CheckDeviceOrdinal(const char* what, uint32_t ordinal);

class Context {
 public:
  static absl::StatusOr<std::shared_ptr<Context>> Create(const vyre_context_desc& desc);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  CUcontext cu() const { return primary_.get(); }
  CUdevice cu_device() const { return primary_.device(); }
  CUstream stream() const { return stream_.get(); }
  const vyre_device_info& device() const { return info_; }
  Telemetry& telemetry() { return telemetry_; }
  BlockPool& device_pool() { return *device_pool_; }
  BlockPool& pinned_pool() { return *pinned_pool_; }
  EventPool& events() { return *events_; }
  ModuleCache& modules() { return *modules_; }
  // Moves large pageable host data through pinned chunks (see staging_ring.h).
  StagingRing& staging() { return *staging_; }
  // 256 zero bytes on the device: the parameter block of dispatches that pass
  // no parameter words, so kernels reading params[0] read 0, not garbage.
  CUdeviceptr zero_params() const { return zero_params_; }

  uint64_t handle() const { return handle_; }
  void set_handle(uint64_t bits) { handle_ = bits; }
  // The peer contexts asked about for copies from this one (peer_access.h).
  PeerLinks& peers() { return peers_; }

  // Records that the context owns handle `bits` of `table`. Fails with
  // STALE_HANDLE when the context is being destroyed, so no object outlives
  // its context's handle.
  absl::Status Adopt(OwnedHandleTable& table, uint64_t bits, const char* what);
  void Disown(OwnedHandleTable& table, uint64_t bits);
  // Marks the context destroyed and hands every handle it owned back to its
  // table, in the tables' release order (ReleaseRank).
  void Close();

  // Recording a graph captures on a stream of its own, never on the work
  // stream, so other threads' dispatches are not swept into the graph. One
  // recording at a time per context: hold capture_mutex() around the capture
  // and CaptureStream() (created on first use; the context must be current).
  std::mutex& capture_mutex() { return capture_mu_; }
  absl::StatusOr<CUstream> CaptureStream(const char* what);
  // A capture the driver would not end leaves its stream unusable: set it
  // aside (released with the context) so the next recording makes another.
  void RetireCaptureStream();

  // Orders the work stream against a stream of other CUDA code in the
  // process (vyre_context_wait_stream / _signal_stream): an event recorded on
  // one and waited for by the other, without blocking the host. `other` is a
  // CUstream of this device (CU_STREAM_LEGACY and CU_STREAM_PER_THREAD too).
  absl::Status WaitForStream(CUstream other, const char* what);
  absl::Status SignalStream(CUstream other, const char* what);

  void Trim();
  vyre_telemetry Snapshot() const;

  // False once Close has begun: pending work is no longer kept for reuse.
  bool open() const;

 private:
  Context() = default;

  driver::PrimaryContextGuard primary_;  // first member: released last
  vyre_device_info info_{};
  Telemetry telemetry_;
  driver::StreamGuard stream_;
  std::unique_ptr<BlockPool> device_pool_;
  std::unique_ptr<BlockPool> pinned_pool_;
  std::unique_ptr<EventPool> events_;
  std::unique_ptr<ModuleCache> modules_;
  std::unique_ptr<StagingRing> staging_;
  CUdeviceptr zero_params_ = 0;
  uint64_t handle_ = 0;
  PeerLinks peers_;

  std::mutex capture_mu_;
  driver::StreamGuard capture_stream_;  // guarded by capture_mu_
  std::vector<driver::StreamGuard> retired_capture_streams_;  // guarded by capture_mu_

  // One event for WaitForStream and SignalStream, created on first use and
  // reused (released by Trim): recording and waiting happen under the mutex,
  // so a wait always sees its own record.
  absl::Status OrderStreams(CUstream first, CUstream then, const char* what,
                            const char* first_name);
  std::mutex interop_mu_;
  driver::EventGuard interop_event_;  // guarded by interop_mu_

  mutable std::mutex mu_;  // guards the members below
  bool closed_ = false;
  absl::flat_hash_set<std::pair<OwnedHandleTable*, uint64_t>> owned_;
};

// The process-wide table of context handles.
HandleRegistry<Context>& Contexts();

}  // namespace vyre

#endif  // VYRE_RUNTIME_CONTEXT_CONTEXT_H_
