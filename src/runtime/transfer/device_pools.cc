#include "runtime/transfer/device_pools.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "base/checked_math.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "runtime/transfer/memory.h"

namespace vyre {

PoolBlock& PoolBlock::operator=(PoolBlock&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = std::exchange(other.pool_, nullptr);
    address_ = std::exchange(other.address_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void PoolBlock::reset() {
  if (pool_ != nullptr) {
    pool_->Release(address_, capacity_);
    pool_ = nullptr;
  }
}

BlockPool::BlockPool(PoolKind kind, CUcontext context, uint64_t cache_limit,
                     Telemetry* telemetry)
    : kind_(kind), context_(context), cache_limit_(cache_limit), telemetry_(telemetry) {}

BlockPool::~BlockPool() {
  std::lock_guard lock(mu_);
  TrimLocked();
}

absl::StatusOr<uint64_t> BlockPool::AllocateRaw(uint64_t bytes, const char* what) {
  driver::ScopedContext bind(context_);
  VYRE_RETURN_IF_ERROR(bind.status(what));
  if (kind_ == PoolKind::kDevice) return AllocateDeviceBytes(bytes, what, telemetry_);
  return AllocatePinnedBytes(bytes, what, telemetry_);
}

void BlockPool::FreeRaw(uint64_t address, uint64_t bytes) {
  driver::ScopedContext bind(context_, driver::ScopedContext::Purpose::kRelease);
  if (kind_ == PoolKind::kDevice) {
    FreeDeviceBytes(address, bytes, telemetry_);
  } else {
    FreePinnedBytes(address, bytes, telemetry_);
  }
}

namespace {

// Size classes: powers of two up to 1 MiB, then quarter steps between powers
// of two (1.25, 1.5, 1.75 x 2^k), so a large block wastes at most 25%.
std::optional<uint64_t> SizeClass(uint64_t bytes) {
  constexpr uint64_t kFine = uint64_t{1} << 20;
  if (bytes <= kFine) return NextPowerOfTwo(bytes < 256 ? 256 : bytes);
  uint64_t step = (uint64_t{1} << (63 - __builtin_clzll(bytes))) / 4;
  return CheckedAlignUp(bytes, step);
}

}  // namespace

absl::StatusOr<PoolBlock> BlockPool::Acquire(uint64_t bytes, const char* what) {
  auto size_class = SizeClass(bytes);
  if (!size_class) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: %u bytes of staging cannot be represented. Fix: split the work into "
                  "smaller dispatches.",
                  what, bytes);
  }
  Counter& hits = kind_ == PoolKind::kDevice ? telemetry_->transient_pool_hits
                                             : telemetry_->pinned_pool_hits;
  Counter& misses = kind_ == PoolKind::kDevice ? telemetry_->transient_pool_misses
                                               : telemetry_->pinned_pool_misses;
  Counter& cached = kind_ == PoolKind::kDevice ? telemetry_->transient_pool_cached_bytes
                                               : telemetry_->pinned_pool_cached_bytes;
  {
    std::lock_guard lock(mu_);
    auto it = free_.find(*size_class);
    if (it != free_.end() && !it->second.empty()) {
      uint64_t address = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= *size_class;
      cached.Sub(*size_class);
      hits.Add();
      return PoolBlock(this, address, *size_class);
    }
  }
  misses.Add();
  auto address = AllocateRaw(*size_class, what);
  if (!address.ok() && PublicCode(address.status()) == VYRE_STATUS_OUT_OF_MEMORY) {
    Trim();  // cached blocks of other classes may be what stands in the way
    address = AllocateRaw(*size_class, what);
  }
  if (!address.ok()) return address.status();
  return PoolBlock(this, *address, *size_class);
}

void BlockPool::Release(uint64_t address, uint64_t capacity) {
  {
    std::lock_guard lock(mu_);
    // The block just used is the likeliest to be wanted next: make room for
    // it by freeing cached blocks rather than dropping it, the largest
    // first. They make room with the fewest frees, and a small block costs
    // as much to allocate again as a large one (a pinned one about a
    // millisecond): freed in the map's order, the few small blocks a
    // rebuild or an append takes every time went whenever a large staging
    // block came back, and the next call paid for them again.
    if (capacity <= cache_limit_ && cached_bytes_ + capacity > cache_limit_) {
      std::vector<uint64_t> classes;
      for (const auto& [size_class, list] : free_) {
        if (!list.empty()) classes.push_back(size_class);
      }
      std::sort(classes.begin(), classes.end(), std::greater<uint64_t>());
      for (uint64_t size_class : classes) {
        std::vector<uint64_t>& list = free_[size_class];
        while (!list.empty() && cached_bytes_ + capacity > cache_limit_) {
          FreeRaw(list.back(), size_class);
          list.pop_back();
          cached_bytes_ -= size_class;
          (kind_ == PoolKind::kDevice ? telemetry_->transient_pool_cached_bytes
                                      : telemetry_->pinned_pool_cached_bytes)
              .Sub(size_class);
        }
        if (cached_bytes_ + capacity <= cache_limit_) break;
      }
    }
    if (cached_bytes_ + capacity <= cache_limit_) {
      free_[capacity].push_back(address);
      cached_bytes_ += capacity;
      (kind_ == PoolKind::kDevice ? telemetry_->transient_pool_cached_bytes
                                  : telemetry_->pinned_pool_cached_bytes)
          .Add(capacity);
      return;
    }
  }
  FreeRaw(address, capacity);
}

void BlockPool::Trim() {
  std::lock_guard lock(mu_);
  TrimLocked();
}

void BlockPool::TrimLocked() {
  for (auto& [capacity, addresses] : free_) {
    for (uint64_t address : addresses) FreeRaw(address, capacity);
  }
  (kind_ == PoolKind::kDevice ? telemetry_->transient_pool_cached_bytes
                              : telemetry_->pinned_pool_cached_bytes)
      .Sub(cached_bytes_);
  free_.clear();
  cached_bytes_ = 0;
}

EventPool::~EventPool() {
  driver::ScopedContext bind(context_, driver::ScopedContext::Purpose::kRelease);
  std::lock_guard lock(mu_);
  for (CUevent e : plain_) driver::EventGuard release(e);
  for (CUevent e : timing_) driver::EventGuard release(e);
}

absl::StatusOr<CUevent> EventPool::Acquire(bool timing, const char* what) {
  {
    std::lock_guard lock(mu_);
    std::vector<CUevent>& list = timing ? timing_ : plain_;
    if (!list.empty()) {
      CUevent e = list.back();
      list.pop_back();
      return e;
    }
  }
  CUevent event = nullptr;
  VYRE_CU(absl::StrCat(what, ": creating a CUDA event"), cuEventCreate, &event,
          timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING);
  return event;
}

void EventPool::Release(CUevent event, bool timing) {
  std::lock_guard lock(mu_);
  (timing ? timing_ : plain_).push_back(event);
}

absl::Status PooledEvent::Acquire(EventPool* pool, bool timing, const char* what) {
  reset();
  VYRE_ASSIGN_OR_RETURN(event_, pool->Acquire(timing, what));
  pool_ = pool;
  timing_ = timing;
  return absl::OkStatus();
}

void PooledEvent::reset() {
  if (event_ != nullptr) {
    pool_->Release(event_, timing_);
    event_ = nullptr;
    pool_ = nullptr;
  }
}

}  // namespace vyre
