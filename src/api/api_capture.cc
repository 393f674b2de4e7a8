// Captures of caller work into graphs (vyre_capture_*).
#include "api/api_call.h"
#include "api/register_handle.h"
#include "base/struct_size.h"
#include "graph/user_capture.h"

extern "C" {

VYRE_API vyre_status vyre_capture_begin(vyre_context context, const vyre_capture_desc* desc,
                                        uint64_t* out_cu_stream) {
  const char* what = "vyre_capture_begin";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out_cu_stream, "out_cu_stream"));
    *out_cu_stream = 0;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    // NULL: the defaults.
    vyre_capture_desc d = VYRE_CAPTURE_DESC_INIT;
    if (desc != nullptr) {
      VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_capture_desc", desc, &d));
    }
    VYRE_ASSIGN_OR_RETURN(*out_cu_stream, vyre::BeginUserCapture(std::move(ctx), d, what));
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_capture_dispatch(vyre_program program, const vyre_dispatch_desc* desc) {
  const char* what = "vyre_capture_dispatch";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Program> p,
                          vyre::Programs().Lookup(program.bits, what));
    vyre_dispatch_desc d;
    VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_dispatch_desc", desc, &d));
    return vyre::CaptureDispatch(std::move(p), d, what);
  });
}

VYRE_API vyre_status vyre_capture_end(vyre_context context, vyre_graph* out) {
  const char* what = "vyre_capture_end";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Graph> graph, vyre::EndUserCapture(ctx, what));
    vyre::Context* owner = &graph->context();
    VYRE_ASSIGN_OR_RETURN(out->bits,
                          vyre::Register(vyre::Graphs(), std::move(graph), owner, what));
    return absl::OkStatus();
  });
}

}  // extern "C"
