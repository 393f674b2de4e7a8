#include "runtime/transfer/buffer.h"

#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"

#include "base/checked_math.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "runtime/transfer/host_memory.h"
#include "runtime/transfer/memory.h"

namespace vyre {
namespace {

constexpr uint64_t kRangeAlignment = 16;

// The two range structs differ only in the constness of the host pointer.
const void* HostPointerOf(const vyre_upload_range& r) { return r.src; }
const void* HostPointerOf(const vyre_download_range& r) { return r.dst; }

}  // namespace

absl::StatusOr<std::shared_ptr<Buffer>> Buffer::Allocate(std::shared_ptr<Context> context,
                                                         uint64_t bytes) {
  driver::ScopedContext bind(context->cu());
  VYRE_RETURN_IF_ERROR(bind.status("vyre_buffer_alloc"));
  auto address = AllocateDeviceBytes(bytes, "vyre_buffer_alloc", &context->telemetry());
  if (!address.ok() && PublicCode(address.status()) == VYRE_STATUS_OUT_OF_MEMORY) {
    // Memory the pools keep cached is the first to give back under pressure.
    context->Trim();
    address = AllocateDeviceBytes(bytes, "vyre_buffer_alloc", &context->telemetry());
  }
  if (!address.ok()) return address.status();
  context->telemetry().live_buffers.Add();
  return std::shared_ptr<Buffer>(
      new Buffer(std::move(context), static_cast<CUdeviceptr>(*address), bytes, false));
}

absl::StatusOr<std::shared_ptr<Buffer>> Buffer::Wrap(std::shared_ptr<Context> context,
                                                     CUdeviceptr device, uint64_t bytes,
                                                     const char* what) {
  driver::ScopedContext bind(context->cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  const uint32_t ordinal = context->device().ordinal;
  // What the driver knows of the pointer. A pointer it does not know is no
  // error for cuPointerGetAttributes: its memory type reads 0.
  unsigned int type = 0;
  CUcontext owner = nullptr;
  int owner_ordinal = -1;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUpointer_attribute attributes[] = {
      CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
      CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* values[] = {&type, &owner, &owner_ordinal, &start, &size};
  static_assert(sizeof(attributes) / sizeof(attributes[0]) == sizeof(values) / sizeof(values[0]));
  const CUresult queried = driver::Api().cuPointerGetAttributes(
      sizeof(values) / sizeof(values[0]), attributes, values, device);
  // Built only on the error paths; a lambda, since absl::StrFormat takes
  // only literal formats.
  auto fix_alloc = [ordinal] {
    return absl::StrFormat(
        "pass a pointer from cudaMalloc, cuMemAlloc or another CUDA allocator (CuPy, PyTorch, "
        "Numba) on device %u, while that memory is allocated",
        ordinal);
  };
  if (queried == CUDA_ERROR_INVALID_VALUE || (queried == CUDA_SUCCESS && type == 0)) {
    return MakeError(
        VYRE_STATUS_INVALID_ARGUMENT,
        absl::StrFormat("%s: device_pointer 0x%x is not memory the CUDA driver knows (freed, "
                        "plain host memory, or a wrong address). Fix: %s.",
                        what, device, fix_alloc()),
        queried == CUDA_SUCCESS ? 0 : static_cast<int32_t>(queried));
  }
  if (queried != CUDA_SUCCESS) return driver::CuError(queried, what, "cuPointerGetAttributes");
  if (type == CU_MEMORYTYPE_HOST) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: device_pointer 0x%x is page-locked host memory, not device memory. Fix: "
                  "wrap device memory; pass host data as a HOST binding, copy it with "
                  "vyre_buffer_upload, or register it with vyre_host_register.",
                  what, device);
  }
  if (type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: device_pointer 0x%x is memory of CUDA memory type %u, not device or "
                  "managed memory. Fix: %s.",
                  what, device, type, fix_alloc());
  }
  if (owner_ordinal != static_cast<int>(ordinal)) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: device_pointer 0x%x is memory of device %d, but the context is on device "
                  "%u. Fix: wrap it in a context created for device %d, or allocate the memory "
                  "on device %u.",
                  what, device, owner_ordinal, ordinal, owner_ordinal, ordinal);
  }
  if (owner != nullptr && owner != context->cu()) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: device_pointer 0x%x belongs to a CUDA context other than device %u's "
                  "primary context, which vyre-cuda (and the CUDA runtime) use, so kernels "
                  "here cannot reach it. Fix: allocate it in the primary context (cudaMalloc, "
                  "CuPy, PyTorch and Numba do; with the driver API, make the context of "
                  "cuDevicePrimaryCtxRetain current first).",
                  what, device, ordinal);
  }
  const uint64_t offset = device >= start ? device - start : ~uint64_t{0};
  if (size == 0 || !RangeInside(offset, bytes, size)) {
    const uint64_t left = offset <= size ? size - offset : 0;
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: [device_pointer 0x%x, +%u bytes) ends past its allocation: the "
                  "allocation at 0x%x holds %u bytes, of which %u are left from device_pointer, "
                  "and %u bytes were asked. Fix: pass bytes of at most %u, or wrap a pointer "
                  "and size inside one allocation.",
                  what, device, bytes, start, size, left, bytes, left);
  }
  context->telemetry().live_buffers.Add();
  return std::shared_ptr<Buffer>(new Buffer(std::move(context), device, bytes, true));
}

std::shared_ptr<Buffer> Buffer::Import(std::shared_ptr<Context> context, CUdeviceptr device,
                                       uint64_t bytes, std::shared_ptr<const void> mapping) {
  context->telemetry().live_buffers.Add();
  std::shared_ptr<Buffer> buffer(new Buffer(std::move(context), device, bytes, true));
  buffer->mapping_ = std::move(mapping);
  return buffer;
}

Buffer::~Buffer() {
  if (!borrowed_) {
    driver::ScopedContext bind(context_->cu(), driver::ScopedContext::Purpose::kRelease);
    FreeDeviceBytes(device_, bytes_, &context_->telemetry());
  }
  context_->telemetry().live_buffers.Sub(1);
}

template <typename Range>
absl::Status Buffer::CheckRanges(const Range* ranges, size_t count, const char* what,
                                 uint64_t* total) const {
  if (count > 0 && ranges == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: ranges is NULL but range_count is %u. Fix: pass an array of range_count "
                  "ranges, or range_count 0.",
                  what, count);
  }
  uint64_t sum = 0;
  for (size_t i = 0; i < count; ++i) {
    const Range& r = ranges[i];
    if (r.bytes > 0 && HostPointerOf(r) == nullptr) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: range %u has %u bytes but a NULL host pointer. Fix: pass host memory "
                    "of at least that many bytes.",
                    what, i, r.bytes);
    }
    if (!RangeInside(r.offset, r.bytes, bytes_)) {
      return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                    "%s: range %u [offset %u, +%u bytes) ends past the buffer's %u bytes. Fix: "
                    "keep offset + bytes within the size passed to vyre_buffer_alloc.",
                    what, i, r.offset, r.bytes, bytes_);
    }
    auto aligned = CheckedAlignUp(r.bytes, kRangeAlignment);
    auto next = aligned ? CheckedAdd(sum, *aligned) : std::nullopt;
    if (!next) {
      return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                    "%s: the ranges' total size overflows 64 bits. Fix: pass fewer or smaller "
                    "ranges.",
                    what);
    }
    sum = *next;
  }
  *total = sum;
  return absl::OkStatus();
}

absl::Status Buffer::Upload(const vyre_upload_range* ranges, size_t count, const char* what) {
  uint64_t total = 0;
  VYRE_RETURN_IF_ERROR(CheckRanges(ranges, count, what, &total));
  if (total == 0) return absl::OkStatus();
  Context& ctx = *context_;
  Telemetry& t = ctx.telemetry();
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  PoolBlock staging;
  if (total <= kStagedCopyLimit) {
    VYRE_ASSIGN_OR_RETURN(staging, ctx.pinned_pool().Acquire(total, what));
  }
  absl::InlinedVector<std::shared_ptr<HostRegion>, 2> pinned;
  uint64_t cursor = 0;
  absl::Status status;
  for (size_t i = 0; i < count && status.ok(); ++i) {
    const vyre_upload_range& r = ranges[i];
    if (r.bytes == 0) continue;
    const void* source = r.src;
    if (staging) {
      std::memcpy(staging.host() + cursor, r.src, r.bytes);
      source = staging.host() + cursor;
      cursor += *CheckedAlignUp(r.bytes, kRangeAlignment);
    } else if (std::shared_ptr<HostRegion> region = HostMemory().Find(r.src, r.bytes)) {
      // Pinned memory the library knows: copied in place, and kept alive
      // until the synchronisation below.
      pinned.push_back(std::move(region));
    } else {
      status = ctx.staging().ToDevice(device_ + r.offset, r.src, r.bytes, ctx.stream(), what);
      continue;
    }
    CUresult result = driver::Api().cuMemcpyHtoDAsync(device_ + r.offset, source, r.bytes,
                                                      ctx.stream());
    if (result != CUDA_SUCCESS) {
      status = driver::CuError(result, what, "cuMemcpyHtoDAsync");
      break;
    }
    t.h2d_operations.Add();
    t.h2d_bytes.Add(r.bytes);
  }
  // Synchronise even after a failed enqueue: the staging block must not be
  // reused while an earlier copy may still read it.
  CUresult sync = driver::Api().cuStreamSynchronize(ctx.stream());
  t.sync_points.Add();
  VYRE_RETURN_IF_ERROR(status);
  if (sync != CUDA_SUCCESS) return driver::CuError(sync, what, "cuStreamSynchronize");
  return absl::OkStatus();
}

absl::Status Buffer::Download(const vyre_download_range* ranges, size_t count,
                              const char* what) {
  uint64_t total = 0;
  VYRE_RETURN_IF_ERROR(CheckRanges(ranges, count, what, &total));
  if (total == 0) return absl::OkStatus();
  Context& ctx = *context_;
  Telemetry& t = ctx.telemetry();
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  PoolBlock staging;
  if (total <= kStagedCopyLimit) {
    VYRE_ASSIGN_OR_RETURN(staging, ctx.pinned_pool().Acquire(total, what));
  }
  absl::InlinedVector<std::shared_ptr<HostRegion>, 2> pinned;
  uint64_t cursor = 0;
  absl::Status status;
  for (size_t i = 0; i < count && status.ok(); ++i) {
    const vyre_download_range& r = ranges[i];
    if (r.bytes == 0) continue;
    if (!staging) {
      std::shared_ptr<HostRegion> region = HostMemory().Find(r.dst, r.bytes);
      if (!region) {
        // Pageable: through the staging ring, which waits for its own pieces.
        status = ctx.staging().ToHost(r.dst, device_ + r.offset, r.bytes, ctx.stream(), what);
        continue;
      }
      pinned.push_back(std::move(region));
    }
    void* target = staging ? static_cast<void*>(staging.host() + cursor) : r.dst;
    if (staging) cursor += *CheckedAlignUp(r.bytes, kRangeAlignment);
    CUresult result =
        driver::Api().cuMemcpyDtoHAsync(target, device_ + r.offset, r.bytes, ctx.stream());
    if (result != CUDA_SUCCESS) {
      status = driver::CuError(result, what, "cuMemcpyDtoHAsync");
      break;
    }
    t.d2h_operations.Add();
    t.d2h_bytes.Add(r.bytes);
  }
  CUresult sync = driver::Api().cuStreamSynchronize(ctx.stream());
  t.sync_points.Add();
  VYRE_RETURN_IF_ERROR(status);
  if (sync != CUDA_SUCCESS) return driver::CuError(sync, what, "cuStreamSynchronize");
  if (staging) {
    cursor = 0;
    for (size_t i = 0; i < count; ++i) {
      const vyre_download_range& r = ranges[i];
      if (r.bytes == 0) continue;
      std::memcpy(r.dst, staging.host() + cursor, r.bytes);
      cursor += *CheckedAlignUp(r.bytes, kRangeAlignment);
    }
  }
  return absl::OkStatus();
}

HandleRegistry<Buffer>& Buffers() {
  // A buffer its closing context removes is freed as vyre_buffer_free would.
  static auto* registry = new HandleRegistry<Buffer>(HandleType::kBuffer, ReleaseRank::kMemory,
                                                     [](Buffer& b) { b.MarkFreed(); });
  return *registry;
}

}  // namespace vyre
