// Copies between buffers of any contexts and devices.
#include <memory>
#include <string>

#include "api/api_call.h"
#include "api/register_handle.h"
#include "base/struct_size.h"
#include "runtime/transfer/buffer_copy.h"

namespace vyre {
namespace {

// Looks up both buffers and checks the request. A refused handle's message
// names its field ("vyre_buffer_copy: src: the buffer handle ..."), since two buffers are
// passed.
absl::Status ReadCopyRequest(const char* what, const char* src_what, const char* dst_what,
                             const vyre_buffer_copy_desc* desc, CopyRequest* out) {
  vyre_buffer_copy_desc d;
  VYRE_RETURN_IF_ERROR(ReadDescriptor(what, "vyre_buffer_copy_desc", desc, &d));
  VYRE_ASSIGN_OR_RETURN(out->src, Buffers().Lookup(d.src.bits, src_what));
  VYRE_ASSIGN_OR_RETURN(out->dst, Buffers().Lookup(d.dst.bits, dst_what));
  out->src_offset = d.src_offset;
  out->dst_offset = d.dst_offset;
  out->bytes = d.bytes;
  out->flags = d.flags;
  return CheckCopyRequest(*out, what);
}

}  // namespace
}  // namespace vyre

extern "C" {

VYRE_API vyre_status vyre_buffer_copy(const vyre_buffer_copy_desc* desc) {
  const char* what = "vyre_buffer_copy";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    vyre::CopyRequest request;
    VYRE_RETURN_IF_ERROR(vyre::ReadCopyRequest(what, "vyre_buffer_copy: src",
                                                "vyre_buffer_copy: dst", desc, &request));
    // The synchronous path lives on the stack: no handle.
    vyre::PendingCopy copy(std::move(request), /*synchronous=*/true);
    VYRE_RETURN_IF_ERROR(copy.Enqueue(what));
    return copy.Wait(VYRE_WAIT_FOREVER, what);
  });
}

VYRE_API vyre_status vyre_buffer_copy_async(const vyre_buffer_copy_desc* desc,
                                            vyre_pending* out) {
  const char* what = "vyre_buffer_copy_async";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    vyre::CopyRequest request;
    VYRE_RETURN_IF_ERROR(vyre::ReadCopyRequest(what, "vyre_buffer_copy_async: src",
                                                "vyre_buffer_copy_async: dst", desc, &request));
    vyre::Context* owner = &request.dst->context();
    auto copy = std::make_shared<vyre::PendingCopy>(std::move(request), /*synchronous=*/false);
    VYRE_RETURN_IF_ERROR(copy->Enqueue(what));
    VYRE_ASSIGN_OR_RETURN(out->bits, vyre::Register(vyre::Pendings(), std::move(copy), owner, what));
    return absl::OkStatus();
  });
}

}  // extern "C"
