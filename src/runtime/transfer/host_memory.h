// Page-locked host memory the library knows about: allocated with
// vyre_host_alloc or registered with vyre_host_register. Host bindings,
// uploads and downloads inside such a region are copied by DMA straight
// from or into it, with no staging copy.
//
// A region belongs to the context it was made with (destroying the context
// releases it) and is found by address in one process-wide table. Work that
// copies from or into a region holds a reference to it, so freeing it while
// a pending dispatch uses it defers the release, as for buffers.
#ifndef VYRE_RUNTIME_TRANSFER_HOST_MEMORY_H_
#define VYRE_RUNTIME_TRANSFER_HOST_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "base/handle_registry.h"
#include "runtime/context/context.h"

namespace vyre {

class HostRegion {
 public:
  enum class Kind { kAllocated, kRegistered };

  // The context is made current here.
  static absl::StatusOr<std::shared_ptr<HostRegion>> Allocate(std::shared_ptr<Context> context,
                                                              uint64_t bytes, const char* what);
  static absl::StatusOr<std::shared_ptr<HostRegion>> Register(std::shared_ptr<Context> context,
                                                              void* pointer, uint64_t bytes,
                                                              const char* what);
  ~HostRegion();  // frees or unregisters, with the context bound
  HostRegion(const HostRegion&) = delete;
  HostRegion& operator=(const HostRegion&) = delete;

  Kind kind() const { return kind_; }
  uintptr_t begin() const { return begin_; }
  uint64_t bytes() const { return bytes_; }
  Context& context() const { return *context_; }

 private:
  HostRegion(std::shared_ptr<Context> context, Kind kind, uintptr_t begin, uint64_t bytes)
      : context_(std::move(context)), kind_(kind), begin_(begin), bytes_(bytes) {}

  std::shared_ptr<Context> context_;  // first: outlives the memory
  Kind kind_;
  uintptr_t begin_;
  uint64_t bytes_;
};

// The regions are owned by their contexts like handles: a closing context
// hands each back here (OwnedHandleTable), named by its start address.
class HostRegions final : public OwnedHandleTable {
 public:
  // Makes and records a region; fails if it would overlap a known one.
  absl::StatusOr<void*> Allocate(std::shared_ptr<Context> context, uint64_t bytes,
                                 const char* what);
  absl::Status Register(std::shared_ptr<Context> context, void* pointer, uint64_t bytes,
                        const char* what);
  // vyre_host_free / vyre_host_unregister: `pointer` must be a region's start
  // and of the kind named.
  absl::Status Release(void* pointer, HostRegion::Kind kind, const char* what);
  ReleaseRank release_rank() const override { return ReleaseRank::kMemory; }
  // When the owning context is destroyed: `begin` is the region's start.
  void ReleaseOwned(uint64_t begin) override;

  // The region holding all of [pointer, pointer + bytes), or null. Costs one
  // atomic load while no region exists.
  std::shared_ptr<HostRegion> Find(const void* pointer, uint64_t bytes) const;

 private:
  bool OverlapsLocked(uintptr_t begin, uint64_t bytes) const;

  mutable std::mutex mu_;
  std::map<uintptr_t, std::shared_ptr<HostRegion>> regions_;  // by start address
  std::atomic<size_t> count_{0};
};

HostRegions& HostMemory();

}  // namespace vyre

#endif  // VYRE_RUNTIME_TRANSFER_HOST_MEMORY_H_
