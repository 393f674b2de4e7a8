// Programs.
#include "api/api_call.h"
#include "api/register_handle.h"
#include "base/struct_size.h"
#include "driver/release_report.h"
#include "runtime/program/program.h"

extern "C" {

VYRE_API vyre_status vyre_program_create(vyre_context context, const vyre_program_desc* desc,
                                         vyre_program* out) {
  const char* what = "vyre_program_create";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    vyre_program_desc d;
    VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_program_desc", desc, &d));
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Program> program, vyre::Program::Create(ctx, d));
    VYRE_ASSIGN_OR_RETURN(out->bits,
                          vyre::Register(vyre::Programs(), std::move(program), ctx.get(), what));
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_program_destroy(vyre_program program) {
  const char* what = "vyre_program_destroy";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    vyre::driver::ReleaseReport report;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Program> p,
                          vyre::Programs().Remove(program.bits, what));
    vyre::driver::ReleaseReport::NoteContext(p->context().cu());
    p->context().Disown(vyre::Programs(), program.bits);
    // Keep the context alive past the program, which may hold its last reference.
    std::shared_ptr<vyre::Context> ctx = p->context_ref();
    p.reset();
    return report.Result(what, "the program is destroyed");
  });
}

}  // extern "C"
