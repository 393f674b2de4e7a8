// Resident buffers.
#include "api/api_call.h"
#include "api/register_handle.h"
#include "base/struct_size.h"
#include "driver/release_report.h"
#include "runtime/transfer/buffer.h"

using vyre::Errorf;

extern "C" {

VYRE_API vyre_status vyre_buffer_alloc(vyre_context context, uint64_t bytes, vyre_buffer* out) {
  const char* what = "vyre_buffer_alloc";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    if (bytes == 0) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: bytes is 0. Fix: allocate at least one byte.", what);
    }
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Buffer> buffer,
                          vyre::Buffer::Allocate(ctx, bytes));
    VYRE_ASSIGN_OR_RETURN(out->bits,
                          vyre::Register(vyre::Buffers(), std::move(buffer), ctx.get(), what));
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_buffer_wrap(vyre_context context, const vyre_buffer_wrap_desc* desc,
                                      vyre_buffer* out) {
  const char* what = "vyre_buffer_wrap";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    vyre_buffer_wrap_desc d;
    VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_buffer_wrap_desc", desc, &d));
    if (d.flags != 0) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: flags is 0x%x; no flag is defined. Fix: pass flags 0 "
                    "(VYRE_BUFFER_WRAP_DESC_INIT sets it).",
                    what, d.flags);
    }
    if (d.device_pointer == 0) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: device_pointer is 0. Fix: pass the CUdeviceptr of device memory that "
                    "other CUDA code allocated (for example a CuPy array's data.ptr or a "
                    "PyTorch tensor's data_ptr()).",
                    what);
    }
    if (d.bytes == 0) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: bytes is 0. Fix: wrap at least one byte.", what);
    }
    VYRE_ASSIGN_OR_RETURN(
        std::shared_ptr<vyre::Buffer> buffer,
        vyre::Buffer::Wrap(ctx, static_cast<CUdeviceptr>(d.device_pointer), d.bytes, what));
    VYRE_ASSIGN_OR_RETURN(out->bits,
                          vyre::Register(vyre::Buffers(), std::move(buffer), ctx.get(), what));
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_buffer_free(vyre_buffer buffer) {
  const char* what = "vyre_buffer_free";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    vyre::driver::ReleaseReport report;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Buffer> b, vyre::Buffers().Remove(buffer.bits, what));
    vyre::driver::ReleaseReport::NoteContext(b->context().cu());
    b->context().Disown(vyre::Buffers(), buffer.bits);
    b->MarkFreed();
    // The memory goes when the last reference does: now, or when the pending
    // dispatch that still uses it completes.
    b.reset();
    return report.Result(what, "the buffer is freed");
  });
}

VYRE_API vyre_status vyre_buffer_upload(vyre_buffer buffer, uint64_t offset, const void* src,
                                        uint64_t bytes) {
  const char* what = "vyre_buffer_upload";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Buffer> b, vyre::Buffers().Lookup(buffer.bits, what));
    vyre_upload_range range{offset, bytes, src};
    return b->Upload(&range, 1, what);
  });
}

VYRE_API vyre_status vyre_buffer_download(vyre_buffer buffer, uint64_t offset, void* dst,
                                          uint64_t bytes) {
  const char* what = "vyre_buffer_download";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Buffer> b, vyre::Buffers().Lookup(buffer.bits, what));
    vyre_download_range range{offset, bytes, dst};
    return b->Download(&range, 1, what);
  });
}

VYRE_API vyre_status vyre_buffer_upload_ranges(vyre_buffer buffer, const vyre_upload_range* ranges,
                                               size_t range_count) {
  const char* what = "vyre_buffer_upload_ranges";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Buffer> b, vyre::Buffers().Lookup(buffer.bits, what));
    return b->Upload(ranges, range_count, what);
  });
}

VYRE_API vyre_status vyre_buffer_download_ranges(vyre_buffer buffer,
                                                 const vyre_download_range* ranges,
                                                 size_t range_count) {
  const char* what = "vyre_buffer_download_ranges";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Buffer> b, vyre::Buffers().Lookup(buffer.bits, what));
    return b->Download(ranges, range_count, what);
  });
}

VYRE_API vyre_status vyre_buffer_info_get(vyre_buffer buffer, vyre_buffer_info* out) {
  const char* what = "vyre_buffer_info_get";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Buffer> b, vyre::Buffers().Lookup(buffer.bits, what));
    vyre_buffer_info info{};
    info.bytes = b->bytes();
    info.device_pointer = static_cast<uint64_t>(b->device());
    info.context.bits = b->context().handle();
    info.flags = (b->borrowed() ? static_cast<uint32_t>(VYRE_BUFFER_INFO_FLAG_BORROWED) : 0u) |
                 (b->imported() ? static_cast<uint32_t>(VYRE_BUFFER_INFO_FLAG_IMPORTED) : 0u);
    return vyre::WriteOutStruct(what, "vyre_buffer_info", out, info);
  });
}

}  // extern "C"
