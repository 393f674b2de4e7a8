// Caching pools for the per-dispatch transient device memory and pinned host
// staging, plus the event pool. Blocks come in power-of-two size classes so a
// steady workload reuses the same blocks and allocates nothing; each pool is
// capped, and a failed allocation trims the cache and retries once.
#ifndef VYRE_RUNTIME_TRANSFER_DEVICE_POOLS_H_
#define VYRE_RUNTIME_TRANSFER_DEVICE_POOLS_H_

#include <cuda.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "driver/guards.h"
#include "runtime/context/telemetry.h"

namespace vyre {

class BlockPool;

// A block borrowed from a pool; returns itself on destruction.
class PoolBlock {
 public:
  PoolBlock() = default;
  PoolBlock(BlockPool* pool, uint64_t address, uint64_t capacity)
      : pool_(pool), address_(address), capacity_(capacity) {}
  ~PoolBlock() { reset(); }
  PoolBlock(PoolBlock&& other) noexcept { *this = std::move(other); }
  PoolBlock& operator=(PoolBlock&& other) noexcept;
  PoolBlock(const PoolBlock&) = delete;
  PoolBlock& operator=(const PoolBlock&) = delete;

  void reset();
  explicit operator bool() const { return pool_ != nullptr; }
  uint64_t address() const { return address_; }
  CUdeviceptr device() const { return static_cast<CUdeviceptr>(address_); }
  unsigned char* host() const { return reinterpret_cast<unsigned char*>(address_); }
  uint64_t capacity() const { return capacity_; }

 private:
  BlockPool* pool_ = nullptr;
  uint64_t address_ = 0;
  uint64_t capacity_ = 0;
};

enum class PoolKind { kDevice, kPinned };

class BlockPool {
 public:
  BlockPool(PoolKind kind, CUcontext context, uint64_t cache_limit, Telemetry* telemetry);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A block of at least `bytes` (> 0). `what` names the caller for messages.
  absl::StatusOr<PoolBlock> Acquire(uint64_t bytes, const char* what);
  // Frees every cached block.
  void Trim();

 private:
  friend class PoolBlock;
  void Release(uint64_t address, uint64_t capacity);
  absl::StatusOr<uint64_t> AllocateRaw(uint64_t bytes, const char* what);
  void FreeRaw(uint64_t address, uint64_t bytes);
  void TrimLocked();

  const PoolKind kind_;
  const CUcontext context_;
  const uint64_t cache_limit_;
  Telemetry* const telemetry_;
  // std::mutex, not absl::Mutex: see the note in base/handle_registry.h.
  std::mutex mu_;
  // Size class (power of two) -> cached block addresses.
  absl::flat_hash_map<uint64_t, std::vector<uint64_t>> free_;
  uint64_t cached_bytes_ = 0;
};

// Reusable events. Timing events cost a little more to record, so they are
// kept apart from the completion events every async dispatch uses.
class EventPool {
 public:
  explicit EventPool(CUcontext context) : context_(context) {}
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  absl::StatusOr<CUevent> Acquire(bool timing, const char* what);
  void Release(CUevent event, bool timing);

 private:
  const CUcontext context_;
  std::mutex mu_;
  std::vector<CUevent> plain_;
  std::vector<CUevent> timing_;
};

// An event borrowed from an EventPool.
class PooledEvent {
 public:
  PooledEvent() = default;
  ~PooledEvent() { reset(); }
  PooledEvent(const PooledEvent&) = delete;
  PooledEvent& operator=(const PooledEvent&) = delete;
  absl::Status Acquire(EventPool* pool, bool timing, const char* what);
  void reset();
  CUevent get() const { return event_; }
  explicit operator bool() const { return event_ != nullptr; }

 private:
  EventPool* pool_ = nullptr;
  CUevent event_ = nullptr;
  bool timing_ = false;
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_TRANSFER_DEVICE_POOLS_H_
