// Buffers shared between processes: export as a vyre_ipc_handle, import in
// another process.
#include <memory>

#include "api/api_call.h"
#include "api/register_handle.h"
#include "runtime/transfer/buffer_ipc.h"

using vyre::Errorf;

extern "C" {

VYRE_API vyre_status vyre_buffer_export_ipc(vyre_buffer buffer, vyre_ipc_handle* out) {
  const char* what = "vyre_buffer_export_ipc";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Buffer> b, vyre::Buffers().Lookup(buffer.bits, what));
    return vyre::ExportIpc(*b, out, what);
  });
}

VYRE_API vyre_status vyre_buffer_import_ipc(vyre_context context, const vyre_ipc_handle* handle,
                                            vyre_buffer* out) {
  const char* what = "vyre_buffer_import_ipc";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    if (handle == nullptr) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: handle is NULL. Fix: pass the vyre_ipc_handle that "
                    "vyre_buffer_export_ipc wrote in the exporting process.",
                    what);
    }
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Buffer> buffer,
                          vyre::ImportIpc(ctx, *handle, what));
    VYRE_ASSIGN_OR_RETURN(out->bits,
                          vyre::Register(vyre::Buffers(), std::move(buffer), ctx.get(), what));
    return absl::OkStatus();
  });
}

}  // extern "C"
