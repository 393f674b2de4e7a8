// Programs.
#include "api/api_call.h"
#include "base/struct_size.h"
#include "driver/release_report.h"
#include "runtime/program/program.h"
#include "runtime/registries.h"

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
    VYRE_ASSIGN_OR_RETURN(uint64_t bits, vyre::Programs().Insert(program));
    program->set_handle(bits);
    absl::Status adopted = ctx->Adopt(vyre::HandleType::kProgram, bits, what);
    if (!adopted.ok()) {
      vyre::Programs().Remove(bits, what).IgnoreError();
      return adopted;
    }
    out->bits = bits;
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
    p->context().Disown(vyre::HandleType::kProgram, program.bits);
    // Keep the context alive past the program, which may hold its last reference.
    std::shared_ptr<vyre::Context> ctx = p->context_ref();
    p.reset();
    return report.Result(what, "the program is destroyed");
  });
}

}  // extern "C"
