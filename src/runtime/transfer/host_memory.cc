#include "runtime/transfer/host_memory.h"

#include <cuda.h>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/release_report.h"
#include "driver/guards.h"
#include "runtime/transfer/memory.h"

namespace vyre {

absl::StatusOr<std::shared_ptr<HostRegion>> HostRegion::Allocate(std::shared_ptr<Context> context,
                                                                 uint64_t bytes,
                                                                 const char* what) {
  driver::ScopedContext bind(context->cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  auto address = AllocatePinnedBytes(bytes, what, &context->telemetry());
  if (!address.ok() && PublicCode(address.status()) == VYRE_STATUS_OUT_OF_MEMORY) {
    context->Trim();
    address = AllocatePinnedBytes(bytes, what, &context->telemetry());
  }
  if (!address.ok()) return address.status();
  return std::shared_ptr<HostRegion>(
      new HostRegion(std::move(context), Kind::kAllocated, static_cast<uintptr_t>(*address), bytes));
}

absl::StatusOr<std::shared_ptr<HostRegion>> HostRegion::Register(std::shared_ptr<Context> context,
                                                                 void* pointer, uint64_t bytes,
                                                                 const char* what) {
  driver::ScopedContext bind(context->cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  CUresult r = driver::Api().cuMemHostRegister(pointer, bytes, CU_MEMHOSTREGISTER_PORTABLE);
  if (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
    return driver::CuError(r, what, "cuMemHostRegister",
                           "the range overlaps memory that another library (or cudaHostRegister) "
                           "already page-locked; pass memory that is not registered elsewhere, "
                           "or use vyre_host_alloc");
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    return MakeError(VYRE_STATUS_OUT_OF_MEMORY,
                     absl::StrCat(what, ": cuMemHostRegister could not page-lock ", bytes,
                                  " bytes. Fix: register less memory, unregister what you no "
                                  "longer need, or raise the locked-memory limit (ulimit -l)."),
                     static_cast<int32_t>(r));
  }
  if (r != CUDA_SUCCESS) {
    return driver::CuError(r, what, "cuMemHostRegister",
                           "pass the address and length of memory this process owns and can "
                           "read and write");
  }
  return std::shared_ptr<HostRegion>(new HostRegion(
      std::move(context), Kind::kRegistered, reinterpret_cast<uintptr_t>(pointer), bytes));
}

HostRegion::~HostRegion() {
  driver::ScopedContext bind(context_->cu(), driver::ScopedContext::Purpose::kRelease);
  if (kind_ == Kind::kAllocated) {
    FreePinnedBytes(begin_, bytes_, &context_->telemetry());
  } else {
    // Once more after a failure: memory left page-locked stays so for the
    // process's life, and registering it again would then be refused.
    CUresult r = driver::Api().cuMemHostUnregister(reinterpret_cast<void*>(begin_));
    if (r != CUDA_SUCCESS) r = driver::Api().cuMemHostUnregister(reinterpret_cast<void*>(begin_));
    if (r != CUDA_SUCCESS) driver::LogReleaseFailure("cuMemHostUnregister", r);
  }
}

namespace {

const char* KindVerb(HostRegion::Kind kind) {
  return kind == HostRegion::Kind::kAllocated ? "vyre_host_alloc" : "vyre_host_register";
}

}  // namespace

bool HostRegions::OverlapsLocked(uintptr_t begin, uint64_t bytes) const {
  auto after = regions_.lower_bound(begin);
  if (after != regions_.end() && after->first - begin < bytes) return true;
  if (after == regions_.begin()) return false;
  const HostRegion& before = *std::prev(after)->second;
  return begin - before.begin() < before.bytes();
}

absl::StatusOr<void*> HostRegions::Allocate(std::shared_ptr<Context> context, uint64_t bytes,
                                            const char* what) {
  if (bytes == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: bytes is 0. Fix: allocate at least one byte.", what);
  }
  Context& ctx = *context;
  VYRE_ASSIGN_OR_RETURN(std::shared_ptr<HostRegion> region,
                        HostRegion::Allocate(std::move(context), bytes, what));
  const uintptr_t begin = region->begin();
  VYRE_RETURN_IF_ERROR(ctx.Adopt(*this, begin, what));
  std::lock_guard lock(mu_);
  // Fresh pinned memory cannot overlap a live region: the driver handed it out.
  regions_[begin] = std::move(region);
  count_.store(regions_.size(), std::memory_order_release);
  return reinterpret_cast<void*>(begin);
}

absl::Status HostRegions::Register(std::shared_ptr<Context> context, void* pointer,
                                   uint64_t bytes, const char* what) {
  if (pointer == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: pointer is NULL. Fix: pass the start of memory this process owns.", what);
  }
  if (bytes == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: bytes is 0. Fix: register at least one byte.", what);
  }
  const uintptr_t begin = reinterpret_cast<uintptr_t>(pointer);
  if (begin + bytes < begin) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: [%p, +%u bytes) wraps around the address space. Fix: pass the real "
                  "length of the memory.",
                  what, pointer, bytes);
  }
  Context& ctx = *context;
  // Held across the driver call, so two overlapping registrations cannot
  // both pass the check (registration is rare; lookups wait briefly).
  std::lock_guard lock(mu_);
  if (OverlapsLocked(begin, bytes)) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: [%p, +%u bytes) overlaps memory already registered or allocated with "
                  "vyre_host_alloc. Fix: register each range once; unregister it before "
                  "registering an overlapping one.",
                  what, pointer, bytes);
  }
  VYRE_ASSIGN_OR_RETURN(std::shared_ptr<HostRegion> region,
                        HostRegion::Register(std::move(context), pointer, bytes, what));
  VYRE_RETURN_IF_ERROR(ctx.Adopt(*this, begin, what));
  regions_[begin] = std::move(region);
  count_.store(regions_.size(), std::memory_order_release);
  return absl::OkStatus();
}

absl::Status HostRegions::Release(void* pointer, HostRegion::Kind kind, const char* what) {
  std::shared_ptr<HostRegion> region;
  {
    std::lock_guard lock(mu_);
    auto it = regions_.find(reinterpret_cast<uintptr_t>(pointer));
    if (it == regions_.end() || it->second->kind() != kind) {
      const bool other_kind = it != regions_.end();
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: %p is not the start of memory from %s%s. Fix: pass the exact address "
                    "%s returned or registered, once.",
                    what, pointer, KindVerb(kind),
                    other_kind ? " (it was made by the other call of the pair)"
                               : " (never made, already released, or its context destroyed)",
                    KindVerb(kind));
    }
    if (kind == HostRegion::Kind::kRegistered && it->second.use_count() > 1) {
      // The caller owns this memory and may free it as soon as we return,
      // so unregistering cannot be deferred the way freeing can.
      return Errorf(VYRE_STATUS_INVALID_STATE,
                    "%s: a pending dispatch still copies from or into %p. Fix: wait on it "
                    "(vyre_pending_wait) before unregistering the memory.",
                    what, pointer);
    }
    region = std::move(it->second);
    regions_.erase(it);
    count_.store(regions_.size(), std::memory_order_release);
  }
  driver::ReleaseReport::NoteContext(region->context().cu());
  region->context().Disown(*this, region->begin());
  // Freed here, or by the last pending dispatch that still uses it.
  region.reset();
  return absl::OkStatus();
}

void HostRegions::ReleaseOwned(uint64_t begin) {
  std::shared_ptr<HostRegion> region;
  std::lock_guard lock(mu_);
  auto it = regions_.find(begin);
  if (it == regions_.end()) return;
  region = std::move(it->second);
  regions_.erase(it);
  count_.store(regions_.size(), std::memory_order_release);
  // `region` is released after the lock (declared before it).
}

std::shared_ptr<HostRegion> HostRegions::Find(const void* pointer, uint64_t bytes) const {
  if (count_.load(std::memory_order_acquire) == 0) return nullptr;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(pointer);
  std::lock_guard lock(mu_);
  auto it = regions_.upper_bound(begin);
  if (it == regions_.begin()) return nullptr;
  --it;
  const HostRegion& region = *it->second;
  const uint64_t offset = begin - region.begin();
  if (offset >= region.bytes() || bytes > region.bytes() - offset) return nullptr;
  return it->second;
}

HostRegions& HostMemory() {
  static auto* regions = new HostRegions();
  return *regions;
}

}  // namespace vyre
