// Resident device buffers: caller-owned device memory that dispatches bind by
// range and that uploads and downloads move data into and out of.
#ifndef VYRE_RUNTIME_TRANSFER_BUFFER_H_
#define VYRE_RUNTIME_TRANSFER_BUFFER_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "base/handle_registry.h"
#include "runtime/context/context.h"
#include "vyre_cuda.h"

namespace vyre {

class Buffer {
 public:
  static absl::StatusOr<std::shared_ptr<Buffer>> Allocate(std::shared_ptr<Context> context,
                                                          uint64_t bytes);
  // A buffer over [device, device + bytes) of memory other CUDA code owns
  // (vyre_buffer_wrap), after asking the driver what the pointer is: device
  // (or managed) memory of the context's device and primary context, the
  // range inside one allocation. Its memory is never freed by the library.
  static absl::StatusOr<std::shared_ptr<Buffer>> Wrap(std::shared_ptr<Context> context,
                                                      CUdeviceptr device, uint64_t bytes,
                                                      const char* what);
  // A buffer over [device, device + bytes) of memory another process exported
  // (vyre_buffer_import_ipc): borrowed, and `mapping` (which closes the
  // mapping when the last buffer over it goes) is held until then.
  static std::shared_ptr<Buffer> Import(std::shared_ptr<Context> context, CUdeviceptr device,
                                        uint64_t bytes, std::shared_ptr<const void> mapping);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Context& context() const { return *context_; }
  const std::shared_ptr<Context>& context_ref() const { return context_; }
  CUdeviceptr device() const { return device_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t handle() const { return handle_; }
  void set_handle(uint64_t bits) { handle_ = bits; }
  // The memory belongs to other CUDA code (vyre_buffer_wrap).
  bool borrowed() const { return borrowed_; }
  // The memory is another process's, mapped by vyre_buffer_import_ipc.
  bool imported() const { return mapping_ != nullptr; }
  // What vyre_buffer_export_ipc attached to this buffer (buffer_ipc.cc: the
  // sign importers check that it is still allocated), released with the
  // buffer's memory. Read and set under buffer_ipc.cc's lock only.
  const std::shared_ptr<const void>& export_ticket() const { return export_ticket_; }
  void set_export_ticket(std::shared_ptr<const void> ticket) { export_ticket_ = std::move(ticket); }

  // The handle was freed (or its context destroyed). Graphs and sequences that
  // still hold the memory refuse to run with it from then on.
  void MarkFreed() { freed_.store(true, std::memory_order_relaxed); }
  bool freed() const { return freed_.load(std::memory_order_relaxed); }

  absl::Status Upload(const vyre_upload_range* ranges, size_t count, const char* what);
  absl::Status Download(const vyre_download_range* ranges, size_t count, const char* what);

 private:
  Buffer(std::shared_ptr<Context> context, CUdeviceptr device, uint64_t bytes, bool borrowed)
      : context_(std::move(context)), device_(device), bytes_(bytes), borrowed_(borrowed) {}
  template <typename Range>
  absl::Status CheckRanges(const Range* ranges, size_t count, const char* what,
                           uint64_t* total) const;

  std::shared_ptr<Context> context_;  // first: outlives the memory below
  CUdeviceptr device_;
  uint64_t bytes_;
  bool borrowed_;  // never freed here: the memory is the caller's
  // An import's IPC mapping (ipc_mapping.h), shared by every buffer over it.
  std::shared_ptr<const void> mapping_;
  std::shared_ptr<const void> export_ticket_;
  uint64_t handle_ = 0;
  std::atomic<bool> freed_{false};
};

// Copies at or under this many bytes go through pinned staging (one memcpy
// and one DMA); larger ones let the driver copy from pageable memory, which
// on the H100 machine beat a single-threaded staging memcpy at 1 MiB.
constexpr uint64_t kStagedCopyLimit = uint64_t{256} << 10;

// The process-wide table of buffer handles.
HandleRegistry<Buffer>& Buffers();

}  // namespace vyre

#endif  // VYRE_RUNTIME_TRANSFER_BUFFER_H_
